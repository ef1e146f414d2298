"""Work in a child process with a deadline."""

import os
import signal
import time

from oslotest import base

from nvlink_placement import errors
from nvlink_placement.fabric import deadline


def steps_then(result):
    def work(step):
        step('first')
        step('second')
        return result(step) if callable(result) else result
    return work


class TestDeadline(base.BaseTestCase):

    def test_result(self):
        self.assertEqual(['a', 1], deadline.run(steps_then(['a', 1]), 10,
                                                'FM'))

    def test_error_message(self):
        def fail(step):
            raise errors.NvlinkError('fmConnect failed')
        exc = self.assertRaises(errors.NvlinkError, deadline.run,
                                steps_then(fail), 10, 'FM')
        self.assertEqual('fmConnect failed', str(exc))

    def test_unexpected_error(self):
        def fail(step):
            raise KeyError('x')
        exc = self.assertRaises(errors.NvlinkError, deadline.run,
                                steps_then(fail), 10, 'FM')
        self.assertEqual("unexpected KeyError: 'x'", str(exc))

    def test_crash_in_the_child(self):
        def crash(step):
            os.kill(os.getpid(), signal.SIGSEGV)
        exc = self.assertRaises(errors.NvlinkError, deadline.run,
                                steps_then(crash), 10, 'FM')
        self.assertEqual('the process talking to FM was killed by signal %d '
                         'while second' % signal.SIGSEGV, str(exc))

    def test_deadline(self):
        def hang(step):
            step('waiting for fmConnect')
            time.sleep(600)
        exc = self.assertRaises(deadline.DeadlineExceeded, deadline.run,
                                steps_then(hang), 0.2, 'FM')
        self.assertEqual('FM did not answer within 0.2 s while waiting for '
                         'fmConnect: stopped waiting (fm_deadline)', str(exc))

    def test_what_is_left_of_an_earlier_deadline(self):
        # The lock wait took 1.5 s of 2: the work gets the 0.5 s left.
        def hang(step):
            step('waiting for fmConnect')
            time.sleep(600)
        until = deadline.Deadline.start(2, time.monotonic() - 1.5)
        began = time.monotonic()
        exc = self.assertRaises(deadline.DeadlineExceeded, deadline.run,
                                steps_then(hang), 2, 'FM', until=until,
                                waited=1.5)
        self.assertLess(time.monotonic() - began, 1.5)
        self.assertEqual('FM did not answer while waiting for fmConnect in '
                         'the 0.5 s left of fm_deadline (2 s) after 1.5 s '
                         'waiting for another nvlink-partition-hook: stopped '
                         'waiting', str(exc))

    def test_nothing_left(self):
        def never(step):
            raise AssertionError('the work ran')
        for waited, after in ((2.0, ' after 2.0 s waiting for another '
                                    'nvlink-partition-hook'), (0.0, '')):
            exc = self.assertRaises(
                deadline.DeadlineExceeded, deadline.run, never, 2, 'FM',
                until=deadline.Deadline.start(2, time.monotonic() - 2),
                waited=waited)
            self.assertEqual('fm_deadline (2 s) passed%s, before FM could be '
                             'asked' % after, str(exc))
