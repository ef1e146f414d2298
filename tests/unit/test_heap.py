"""heap.frozen: long-lived objects out of the collector's scans."""

import gc

from oslotest import base

from nvlink_placement import heap


class TestFrozen(base.BaseTestCase):

    def test_alive_at_the_start_is_frozen_then_handed_back(self):
        self.assertEqual(0, gc.get_freeze_count())
        held = [[i] for i in range(5000)]
        with heap.frozen():
            frozen = gc.get_freeze_count()
            self.assertGreaterEqual(frozen, len(held))
            made_inside = [[i] for i in range(100)]
            self.assertEqual(frozen, gc.get_freeze_count())
        self.assertEqual(0, gc.get_freeze_count())
        self.assertEqual(100, len(made_inside))

    def test_the_outermost_block_hands_back(self):
        held = [[i] for i in range(1000)]
        with heap.frozen():
            outer = gc.get_freeze_count()
            more = [[i] for i in range(1000)]
            with heap.frozen():
                self.assertGreaterEqual(gc.get_freeze_count(),
                                        outer + len(more))
            # Still frozen: the outer block is not over.
            self.assertGreaterEqual(gc.get_freeze_count(), outer + len(more))
        self.assertEqual(0, gc.get_freeze_count())
        self.assertEqual(2000, len(held) + len(more))

    def test_handed_back_on_an_error(self):
        def fail():
            with heap.frozen():
                raise KeyError('x')
        self.assertRaises(KeyError, fail)
        self.assertEqual(0, gc.get_freeze_count())

    def test_cycles_made_inside_are_collected(self):
        class Node(object):
            pass
        with heap.frozen():
            node = Node()
            node.me = node
            del node
            self.assertGreaterEqual(gc.collect(), 1)
