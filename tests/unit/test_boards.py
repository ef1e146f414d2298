from oslotest import base

from nvlink_placement.topology import boards
from nvlink_placement.topology import laminar


class TestLaminar(base.BaseTestCase):

    def test_compatible(self):
        self.assertTrue(laminar.compatible({1, 2}, {3, 4}))
        self.assertTrue(laminar.compatible({1, 2}, {1, 2, 3, 4}))
        self.assertFalse(laminar.compatible({1, 2}, {2, 3}))

    def test_largest_family_prefers_earlier_sets(self):
        sets = [{1, 2, 3, 4}, {5, 6, 7, 8}, {1, 2, 5, 6}, {3, 4, 7, 8},
                {1, 2}]
        self.assertEqual(([0, 1, 4], [2, 3]),
                         laminar.largest_laminar_family(sets))

    def test_largest_family_is_maximum_not_greedy(self):
        # Greedy by order would keep {1..4} and drop three sets; keeping
        # the three pairs drops only one.
        sets = [{1, 2, 3}, {3, 4}, {2, 5}, {1, 6}]
        self.assertEqual(([1, 2, 3], [0]),
                         laminar.largest_laminar_family(sets))


class TestCatalog(base.BaseTestCase):

    def test_h100_diagonal_pairs(self):
        board = boards.get('hgx-h100-8gpu')
        self.assertEqual(((1, 2, 3, 4), (5, 6, 7, 8), (1, 3), (2, 4),
                          (5, 7), (6, 8)), board.groups)
        self.assertEqual((), board.dropped)
        self.assertIs(board, boards.get('hgx-h200-8gpu'))
        self.assertIs(board, boards.get('hgx-h20-8gpu'))

    def test_b200_adjacent_pairs(self):
        board = boards.get('hgx-b300-8gpu')
        self.assertEqual('hgx-b200-8gpu', board.name)
        self.assertEqual(((1, 2, 3, 4), (5, 6, 7, 8), (1, 2), (3, 4),
                          (5, 6), (7, 8)), board.groups)

    def test_a100_single_baseboard(self):
        board = boards.get('hgx-a100-8gpu')
        self.assertEqual(tuple(range(1, 9)), board.gpus)
        self.assertEqual(((1, 2, 3, 4), (5, 6, 7, 8), (1, 2), (3, 4),
                          (5, 6), (7, 8)), board.groups)

    def test_a100_two_baseboards_drop_cross_tray(self):
        board = boards.get('hgx-a100-16gpu')
        self.assertEqual([3, 4, 5, 6], [pid for pid, _ in board.dropped])
        self.assertIn(tuple(range(1, 9)), board.groups)
        self.assertEqual(14, len(board.groups))

    def test_hgx2_drops_interleaved_eights(self):
        board = boards.get('hgx-2-16gpu')
        self.assertEqual(((3, (1, 4, 6, 7, 9, 12, 14, 15)),
                          (4, (2, 3, 5, 8, 10, 11, 13, 16))), board.dropped)
        self.assertIn((1, 4, 6, 7), board.groups)
        self.assertIn((14, 15), board.groups)
        self.assertEqual([], laminar.conflicts(board.groups))

    def test_unknown(self):
        self.assertRaises(KeyError, boards.get, 'hgx-z9000')
        self.assertIn('hgx-h800-8gpu', boards.names())
