"""Work in a child process with a deadline."""

import os
import signal
import time

from oslotest import base

from nvlink_placement import errors
from nvlink_placement.hook import deadline


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
