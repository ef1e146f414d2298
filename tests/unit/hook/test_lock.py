"""The host-local lock."""

import os
import threading
import time

import fixtures
from oslotest import base

from nvlink_placement import errors
from nvlink_placement.fabric import deadline
from nvlink_placement.hook import lock


class TestHostLock(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.dir = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                'run', 'nvlink-placement')

    def test_creates_directory_and_file(self):
        with lock.HostLock(self.dir, 1) as held:
            self.assertEqual(os.path.join(self.dir, 'hook.lock'), held.path)
            self.assertTrue(os.path.isfile(held.path))
        self.assertEqual(0o755, os.stat(self.dir).st_mode & 0o777)

    def test_excludes_another_holder_until_released(self):
        entered = threading.Event()
        order = []

        def second():
            with lock.HostLock(self.dir, 10):
                order.append('second')
            entered.set()

        with lock.HostLock(self.dir, 1):
            thread = threading.Thread(target=second)
            thread.start()
            # The second holder cannot get in while the first holds it.
            self.assertFalse(entered.wait(0.3))
            order.append('first')
        thread.join(10)
        self.assertEqual(['first', 'second'], order)

    def test_timeout(self):
        with lock.HostLock(self.dir, 1):
            exc = self.assertRaises(errors.NvlinkError,
                                    lock.HostLock(self.dir, 0.2).__enter__)
        self.assertEqual(
            'another nvlink-partition-hook has held %s for more than 0.2 s '
            '(is one stuck talking to Fabric Manager?)'
            % os.path.join(self.dir, 'hook.lock'), str(exc))
        # Released: it can be taken again at once.
        with lock.HostLock(self.dir, 0.2):
            pass

    def test_the_wait_ends_at_the_deadline(self):
        with lock.HostLock(self.dir, 1):
            began = time.monotonic()
            exc = self.assertRaises(errors.NvlinkError, lock.HostLock(
                self.dir, 30, deadline=deadline.Deadline.start(0.2)
            ).__enter__)
            self.assertLess(time.monotonic() - began, 5)
        self.assertEqual(
            'another nvlink-partition-hook held %s until fm_deadline (0.2 s) '
            'passed (is one stuck talking to Fabric Manager?)'
            % os.path.join(self.dir, 'hook.lock'), str(exc))
        # A lock_timeout below the deadline still ends the wait first.
        with lock.HostLock(self.dir, 1):
            exc = self.assertRaises(errors.NvlinkError, lock.HostLock(
                self.dir, 0.2, deadline=deadline.Deadline.start(30)
            ).__enter__)
        self.assertIn('has held %s for more than 0.2 s' % os.path.join(
            self.dir, 'hook.lock'), str(exc))

    def test_waited(self):
        def release(held):
            time.sleep(0.3)
            held.__exit__(None, None, None)
        held = lock.HostLock(self.dir, 1).__enter__()
        thread = threading.Thread(target=release, args=(held,))
        thread.start()
        with lock.HostLock(self.dir, 10) as second:
            self.assertGreater(second.waited, 0.2)
        thread.join(10)

    def test_unusable_directory(self):
        blocker = os.path.join(os.path.dirname(self.dir), 'file')
        os.makedirs(os.path.dirname(blocker))
        open(blocker, 'w').close()
        exc = self.assertRaises(errors.NvlinkError,
                                lock.HostLock(blocker, 1).__enter__)
        self.assertEqual('cannot create the lock directory %s: File exists'
                         % blocker, str(exc))

    def test_unwritable_directory(self):
        os.makedirs(self.dir, mode=0o500)
        self.addCleanup(os.chmod, self.dir, 0o700)
        if os.access(self.dir, os.W_OK):
            self.skipTest('running as root: directory modes do not apply')
        exc = self.assertRaises(errors.NvlinkError,
                                lock.HostLock(self.dir, 1).__enter__)
        self.assertEqual('cannot open the lock file %s/hook.lock: Permission '
                         'denied' % self.dir, str(exc))
