"""forkmap: the results of a plain loop, from forked processes."""

import os

from oslotest import base

from nvlink_placement import forkmap
from nvlink_placement import heap


class TestForkmap(base.BaseTestCase):

    def test_results_in_order_from_other_processes(self):
        parent = os.getpid()
        found = forkmap.forkmap(lambda i: (i * i, os.getpid() != parent),
                                range(7), 3)
        self.assertEqual([(i * i, True) for i in range(7)], found)

    def test_failures_run_again_here(self):
        parent = os.getpid()

        def function(i):
            if i == 1 and os.getpid() != parent:
                raise ValueError('only in a forked process')
            if i == 2:
                return lambda: 'does not pickle'
            return i, os.getpid() == parent
        found = forkmap.forkmap(function, range(4), 2)
        self.assertEqual([(0, False), (1, True), (3, False)],
                         [found[0], found[1], found[3]])
        self.assertEqual('does not pickle', found[2]())

    def test_the_first_failure_is_raised(self):
        def function(i):
            raise KeyError(i)
        exc = self.assertRaises(KeyError, forkmap.forkmap, function,
                                [5, 6], 2)
        self.assertEqual(5, exc.args[0])

    def test_one_worker_or_one_item_runs_here(self):
        parent = os.getpid()
        for items, workers in (([1, 2], 1), ([1], 4), ([], 4)):
            self.assertEqual(
                [(i, parent) for i in items],
                forkmap.forkmap(lambda i: (i, os.getpid()), items, workers))
        self.assertGreaterEqual(forkmap.workers(), 1)

    def test_workers_see_the_parents_objects_frozen(self):
        # gc.freeze before the fork (nvlink_placement.heap): what the
        # parent holds is in the permanent generation of each worker, and
        # handed back to the collector here once the work is done.
        import gc
        held = [[i] for i in range(1000)]
        before = gc.get_freeze_count()
        found = forkmap.forkmap(lambda i: gc.get_freeze_count(), range(2), 2)
        self.assertTrue(all(count >= len(held) for count in found), found)
        self.assertEqual(before, gc.get_freeze_count())
        # Inside an offline command's block, the fork leaves its freeze.
        with heap.frozen():
            frozen = gc.get_freeze_count()
            forkmap.forkmap(lambda i: i, range(2), 2)
            self.assertGreaterEqual(gc.get_freeze_count(), frozen)
        self.assertEqual(before, gc.get_freeze_count())
