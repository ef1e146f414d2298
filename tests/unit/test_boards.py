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


class TestCliques(base.BaseTestCase):

    def test_cube_mesh_keeps_the_quads(self):
        quads = [(1, 2, 3, 4), (5, 6, 7, 8)]
        edges = [(a, b) for q in quads for i, a in enumerate(q)
                 for b in q[i + 1:]] + [(1, 5), (2, 6), (3, 7), (4, 8)]
        nodes = list(range(1, 9))
        self.assertEqual(quads + [(1, 5), (2, 6), (3, 7), (4, 8)],
                         sorted(laminar.cliques(nodes, edges),
                                key=lambda c: (-len(c), c)))
        self.assertEqual((quads, [(1, 5), (2, 6), (3, 7), (4, 8)]),
                         laminar.mesh_family(nodes, edges))

    def test_isolated_nodes_and_pairs(self):
        self.assertEqual(([('a', 'b'), ('c', 'd')], []),
                         laminar.mesh_family(['a', 'b', 'c', 'd', 'e'],
                                             [('a', 'b'), ('d', 'c')]))

    def test_chain_keeps_the_earliest_pair(self):
        self.assertEqual(([(0, 1)], [(1, 2)]),
                         laminar.mesh_family([0, 1, 2], [(1, 2), (0, 1)]))


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

    def test_nvswitch_boards_have_no_wiring(self):
        self.assertIsNone(boards.get('hgx-h100-8gpu').links)
        self.assertEqual((), boards.get('hgx-b200-8gpu').meshes)

    def test_four_gpu_direct_boards_are_one_mesh(self):
        for name, links in (('hgx-h100-4gpu', 6), ('hgx-h200-4gpu', 6),
                            ('hgx-a100-4gpu', 4), ('gb200-tray-4gpu', 18)):
            board = boards.get(name)
            self.assertEqual(((1, 2, 3, 4),), board.groups, name)
            self.assertEqual(board.groups, board.meshes, name)
            self.assertEqual({links}, set(board.links.values()), name)
            self.assertEqual(6, len(board.links), name)

    def test_dgx1_cube_mesh(self):
        v100, p100 = boards.get('dgx-1-v100'), boards.get('dgx-1-p100')
        for board in (v100, p100):
            self.assertEqual(((1, 2, 3, 4), (5, 6, 7, 8)), board.meshes)
            self.assertEqual(((None, (1, 5)), (None, (2, 6)), (None, (3, 7)),
                              (None, (4, 8))), board.dropped)
        self.assertEqual(set(v100.links), set(p100.links))
        self.assertEqual({1}, set(p100.links.values()))
        # V100: six NVLinks on every GPU, NV1 and NV2 on every GPU.
        for gpu in range(1, 9):
            mine = [n for pair, n in v100.links.items() if gpu in pair]
            self.assertEqual((6, {1, 2}), (sum(mine), set(mine)), gpu)
        self.assertEqual((2, 1), (v100.links[(1, 4)], v100.links[(3, 7)]))

    def test_unknown(self):
        self.assertRaises(KeyError, boards.get, 'hgx-z9000')
        self.assertIn('hgx-h800-8gpu', boards.names())
