from oslotest import base

from nvlink_placement.discovery import topo_matrix
from nvlink_placement import errors
from nvlink_placement.topology import boards
from tests.unit.discovery import helpers

ADDRESSES = list(helpers.BOARD2)


def _capture(name):
    path = helpers.fixture_path('nvidia-smi', name)
    return topo_matrix.parse(helpers.read_fixture('nvidia-smi', name), path)


def _addresses(n):
    return ['0000:%02x:00.0' % (0x10 + i) for i in range(n)]


class TestCaptures(base.BaseTestCase):

    def test_hgx_h100_tabs_nics(self):
        matrix = _capture('topo-hgx-h100-nv18-nics.txt')
        self.assertEqual(['GPU%d' % i for i in range(8)], matrix.gpus)
        self.assertEqual(['GPU%d' % i for i in range(8)] +
                         ['NIC%d' % i for i in range(10)], matrix.devices)
        self.assertEqual('NV18', matrix.link('GPU0', 'GPU7'))
        self.assertEqual('PIX', matrix.link('GPU3', 'NIC5'))
        self.assertEqual('SYS', matrix.link('NIC1', 'GPU0'))
        self.assertEqual({'CPU Affinity': '56-111,168-223',
                          'NUMA Affinity': '1', 'GPU NUMA ID': 'N/A'},
                         matrix.attributes['GPU4'])
        self.assertEqual({}, matrix.attributes['NIC0'])
        # Rows end at the truncation mark after NIC2.
        self.assertEqual(['GPU%d' % i for i in range(8)] +
                         ['NIC0', 'NIC1', 'NIC2'], list(matrix.lines))
        self.assertEqual(6, matrix.lines['GPU0'])
        view = topo_matrix.analyse(matrix, ADDRESSES, nvswitch_board=True)
        self.assertEqual(topo_matrix.NvlinkView(
            switched=True, domains=[frozenset(ADDRESSES)], groups=[],
            dropped=[], degraded={}, notes=[]), view)

    def test_dgx_a100_spaces_truncated(self):
        matrix = _capture('topo-dgx-a100-nv12-nics.txt')
        self.assertEqual(['GPU%d' % i for i in range(8)] +
                         ['NIC%d' % i for i in range(12)], matrix.devices)
        self.assertEqual(['GPU0', 'GPU1', 'GPU2', 'GPU3', 'GPU4'],
                         list(matrix.lines))
        self.assertEqual('NV12', matrix.link('GPU7', 'GPU4'))
        self.assertEqual('PXB', matrix.link('GPU4', 'NIC6'))
        self.assertEqual({'CPU Affinity': '16-31,144-159',
                          'NUMA Affinity': '1', 'GPU NUMA ID': 'N/A'},
                         matrix.attributes['GPU2'])
        exc = self.assertRaises(errors.NvlinkError, topo_matrix.analyse,
                                matrix, _addresses(8), False)
        self.assertEqual(
            '%s: line 11: the matrix stops after row GPU4; rows GPU5, GPU6, '
            'GPU7 are missing (truncated capture?), so 3 GPU pairs have no '
            'cell in either row' % matrix.source, str(exc))

    def test_two_gpu_bridge_nv3(self):
        matrix = _capture('topo-2gpu-bridge-nv3-degraded.txt')
        self.assertEqual(['GPU0', 'GPU1'], matrix.devices)
        self.assertEqual('NV3', matrix.link('GPU0', 'GPU1'))
        self.assertEqual({'CPU Affinity': '0-47', 'NUMA Affinity': 'N/A'},
                         matrix.attributes['GPU1'])
        view = topo_matrix.analyse(matrix, _addresses(2), False)
        # The pair is a whole-host mesh: it still makes a group (a 2-GPU
        # flavor needs a GROUP2 ancestor). A lone pair gives no reference
        # count: NV3 cannot be told from a healthy 3-link bridge here.
        self.assertFalse(view.switched)
        self.assertEqual([tuple(_addresses(2))], view.groups)
        self.assertEqual({}, view.degraded)

    def test_single_gpu_na_affinity(self):
        matrix = _capture('topo-single-gpu-na-affinity.txt')
        self.assertEqual(['GPU0'], matrix.devices)
        self.assertEqual({'CPU Affinity': '0-7', 'NUMA Affinity': 'N/A',
                          'GPU NUMA ID': 'N/A'}, matrix.attributes['GPU0'])
        view = topo_matrix.analyse(matrix, _addresses(1), False)
        self.assertEqual([], view.groups)
        self.assertEqual({}, view.degraded)


class TestAnalyse(base.BaseTestCase):

    def _view(self, n, link, nvswitch_board=False):
        matrix = topo_matrix.parse(helpers.topo_text(n, link), 'm.txt')
        return topo_matrix.analyse(matrix, _addresses(n), nvswitch_board)

    def test_bridge_pairs_become_groups(self):
        view = self._view(4, lambda i, j: 'NV4' if i // 2 == j // 2
                          else 'SYS')
        a = _addresses(4)
        self.assertFalse(view.switched)
        self.assertEqual([(a[0], a[1]), (a[2], a[3])], view.groups)
        self.assertEqual([frozenset(a[:2]), frozenset(a[2:])], view.domains)
        self.assertEqual({}, view.degraded)

    def test_weaker_bridge_is_degraded(self):
        def link(i, j):
            if {i, j} == {0, 1}:
                return 'NV3'
            return 'NV4' if i // 2 == j // 2 else 'PHB'
        view = self._view(4, link)
        a = _addresses(4)
        self.assertEqual([(a[0], a[1]), (a[2], a[3])], view.groups)
        self.assertEqual({
            a[0]: ['NVLink to %s: NV3 below the expected NV4 (nvidia-smi '
                   'topo -m)' % a[1]],
            a[1]: ['NVLink to %s: NV3 below the expected NV4 (nvidia-smi '
                   'topo -m)' % a[0]]}, view.degraded)

    def test_nvswitch_board_missing_link(self):
        def link(i, j):
            return 'SYS' if {i, j} == {2, 5} else 'NV18'
        view = self._view(8, link, nvswitch_board=True)
        a = _addresses(8)
        self.assertTrue(view.switched)
        self.assertEqual([], view.groups)
        self.assertEqual(
            ['no NVLink to %s: SYS although the GPUs share an NVLink domain '
             '(nvidia-smi topo -m)' % a[5]], view.degraded[a[2]])
        self.assertEqual([a[2], a[5]], sorted(view.degraded))

    def test_nvswitch_board_one_gpu_with_its_links_down(self):
        # Only the GPU whose own links are down is degraded: its peers
        # reach each other at NV18.
        view = self._view(8, lambda i, j: 'SYS' if 3 in (i, j) else 'NV18',
                          nvswitch_board=True)
        a = _addresses(8)
        self.assertEqual([a[3]], list(view.degraded))
        self.assertEqual(
            ['no NVLink to %s although the GPUs share an NVLink domain '
             '(nvidia-smi topo -m)' % ', '.join(
                 '%s: SYS' % x for x in a if x != a[3])],
            view.degraded[a[3]])
        self.assertEqual([], view.notes)

    def test_nvswitch_board_without_any_nvlink(self):
        # Every pair SYS: no GPU is healthy, and nothing tells the design.
        view = self._view(8, lambda i, j: 'SYS', nvswitch_board=True)
        a = _addresses(8)
        self.assertEqual(a, sorted(view.degraded))
        self.assertEqual(['no NVLink to any GPU although the board has '
                          'NVSwitches (nvidia-smi topo -m)'],
                         view.degraded[a[0]])
        self.assertEqual(['m.txt: no GPU pair shows NVLink although the '
                          'board has NVSwitches: the links or the fabric '
                          'are down, and the designed count is unknown '
                          "(give --board to judge against the board's)"],
                         view.notes)

    def test_nvswitch_board_judged_against_the_catalogue(self):
        a = _addresses(8)
        matrix = topo_matrix.parse(helpers.topo_text(8, lambda i, j: 'SYS'),
                                   'm.txt')
        view = topo_matrix.analyse(matrix, a, True,
                                   switched_links=('hgx-h100-8gpu', 18))
        self.assertEqual(a, sorted(view.degraded))
        self.assertIn('%s: SYS, expected NV18' % a[1], view.degraded[a[0]][0])
        self.assertIn('(board hgx-h100-8gpu, nvidia-smi topo -m)',
                      view.degraded[a[0]][0])
        self.assertEqual([], view.notes)
        # NV12 everywhere is healthy for an A100 board, not for an H100.
        matrix = topo_matrix.parse(helpers.topo_text(8, lambda i, j: 'NV12'),
                                   'm.txt')
        view = topo_matrix.analyse(matrix, a, True,
                                   switched_links=('hgx-h100-8gpu', 18))
        self.assertEqual(a, sorted(view.degraded))
        self.assertIn('below the expected NV18 (board hgx-h100-8gpu',
                      view.degraded[a[0]][0])
        view = topo_matrix.analyse(matrix, a, True,
                                   switched_links=('hgx-a100-8gpu', 12))
        self.assertEqual({}, view.degraded)

    def test_catalogue_counts_name_nvswitch_boards(self):
        for name in topo_matrix.SWITCHED_NVLINKS:
            self.assertIsNone(boards.get(name).links, name)

    def test_chain_keeps_one_pair_and_notes_the_other(self):
        def link(i, j):
            return {frozenset((0, 1)): 'NV2',
                    frozenset((1, 2)): 'NV2'}.get(frozenset((i, j)), 'SYS')
        view = self._view(4, link)
        a = _addresses(4)
        # Cliques {0,1} and {1,2} cross: the first is kept. Pairs without
        # NVLink are not judged without a board (a cube-mesh has them).
        self.assertEqual([(a[0], a[1])], view.groups)
        self.assertEqual([(a[1], a[2])], view.dropped)
        self.assertEqual(['m.txt: NVLinked GPUs {%s, %s} cross the meshes '
                          'kept and get no group: a resource provider tree '
                          'must nest, so instances are never placed across '
                          'them' % (a[1], a[2])], view.notes)
        self.assertEqual({}, view.degraded)

    def test_count_mismatch_with_query(self):
        matrix = topo_matrix.parse(helpers.topo_text(2, lambda i, j: 'NV4'),
                                   'm.txt')
        exc = self.assertRaises(errors.NvlinkError, topo_matrix.analyse,
                                matrix, _addresses(3), False)
        self.assertEqual('m.txt: line 1: the header shows 2 GPUs, but '
                         '`nvidia-smi -q` lists 3: they must come from the '
                         'same host and moment', str(exc))


class TestParseErrorsAndEras(base.BaseTestCase):

    def test_old_driver_mlx5_and_soc(self):
        text = ('\tGPU0\tGPU1\tmlx5_0\tCPU Affinity\n'
                'GPU0\t X \tSOC\tPHB\t0-11\n'
                'GPU1\tSOC\t X \tSOC\t12-23\n'
                'mlx5_0\tPHB\tSOC\t X \t\n')
        matrix = topo_matrix.parse(text, 'old.txt')
        self.assertEqual(['GPU0', 'GPU1', 'mlx5_0'], matrix.devices)
        self.assertEqual('SOC', matrix.link('GPU0', 'GPU1'))
        self.assertEqual({'CPU Affinity': '12-23'}, matrix.attributes['GPU1'])

    def _error(self, text):
        return str(self.assertRaises(errors.NvlinkError, topo_matrix.parse,
                                     text, 't.txt'))

    def test_no_header(self):
        self.assertEqual('t.txt: no `nvidia-smi topo -m` header (a row of '
                         'column names starting with GPU0) found',
                         self._error('GPU 00000000:18:00.0\nGPU0: H100\n'
                                     'GPU0GPU1 X\n'))

    def test_unknown_cell(self):
        self.assertEqual("t.txt: line 2: GPU0/GPU1: unexpected cell 'NVX'",
                         self._error('\tGPU0\tGPU1\nGPU0\t X \tNVX\n'))

    def test_diagonal_must_be_x(self):
        self.assertEqual("t.txt: line 2: GPU0/GPU0: unexpected cell 'NV4'",
                         self._error('\tGPU0\tGPU1\nGPU0\tNV4\tNV4\n'))

    def test_short_row(self):
        self.assertEqual('t.txt: line 2: row GPU0 has 1 link cells, but '
                         'the header (line 1) names 2 devices: GPU0 GPU1',
                         self._error('\tGPU0\tGPU1\nGPU0\t X \n'))

    def test_asymmetric(self):
        self.assertEqual('t.txt: line 3: GPU1-GPU0 is NV2, but GPU0-GPU1 is '
                         'NV4 on line 2',
                         self._error('\tGPU0\tGPU1\nGPU0\t X \tNV4\n'
                                     'GPU1\tNV2\t X \n'))

    def test_repeated_row(self):
        self.assertEqual('t.txt: line 3: row GPU0 repeats line 2',
                         self._error('\tGPU0\tGPU1\nGPU0\t X \tNV4\n'
                                     'GPU0\t X \tNV4\n'))

    def test_too_many_values(self):
        self.assertEqual('t.txt: line 2: row GPU0 has 2 values after the '
                         'links, the header (line 1) names 1 columns (CPU '
                         'Affinity)',
                         self._error('\tGPU0\tCPU Affinity\n'
                                     'GPU0\t X \t0-7\t9\n'))


# DGX-1 V100 PCI addresses in NVML order (NVIDIA/nccl#671 topology dump).
DGX1 = ['0000:%s:00.0' % b for b in ('06', '07', '0a', '0b', '85', '86',
                                     '89', '8a')]


def _dgx1_wiring(addresses=DGX1):
    board = boards.get('dgx-1-v100')
    return (board.name, {frozenset((addresses[a - 1], addresses[b - 1])): n
                         for (a, b), n in board.links.items()})


def _set_link(text, a, b, cell):
    """Change the GPU<a>-GPU<b> cell in both rows of a TAB matrix."""
    lines = text.splitlines()
    for row, column in ((a, b), (b, a)):
        index = next(i for i, line in enumerate(lines)
                     if line.startswith('GPU%d\t' % row))
        cells = lines[index].split('\t')
        cells[1 + column] = cell
        lines[index] = '\t'.join(cells)
    return '\n'.join(lines) + '\n'


class TestDirectNvlink(base.BaseTestCase):

    def _view(self, n, link, wiring=None):
        matrix = topo_matrix.parse(helpers.topo_text(n, link), 'm.txt')
        return topo_matrix.analyse(matrix, _addresses(n), False, wiring)

    def test_dgx1_run_together_header(self):
        matrix = _capture('topo-dgx1-v100-runtogether-header.txt')
        self.assertEqual(['GPU%d' % i for i in range(8)] +
                         ['mlx5_0', 'mlx5_2', 'mlx5_1', 'mlx5_3'],
                         matrix.devices)
        self.assertEqual(8, matrix.header_line)
        self.assertEqual(('NV2', 'NV1', 'SOC', 'PHB'), (
            matrix.link('GPU0', 'GPU3'), matrix.link('GPU7', 'GPU5'),
            matrix.link('GPU0', 'GPU5'), matrix.link('GPU2', 'mlx5_0')))
        self.assertEqual({'CPU Affinity': '20-39,60-79'},
                         matrix.attributes['GPU6'])
        self.assertEqual(20, matrix.lines['mlx5_3'])
        view = topo_matrix.analyse(matrix, DGX1, False)
        # The quads are meshes; the four cross-quad pairs cross them. The
        # NV1/NV2 mix is the design (every GPU has both) and the SOC
        # pairs have no NVLink by design: all eight are healthy.
        self.assertEqual([tuple(DGX1[:4]), tuple(DGX1[4:])], view.groups)
        self.assertEqual([(DGX1[i], DGX1[i + 4]) for i in range(4)],
                         view.dropped)
        self.assertEqual({}, view.degraded)
        self.assertEqual([frozenset(DGX1)], view.domains)
        self.assertEqual(2, len(view.notes))
        self.assertIn('{0000:06:00.0, 0000:85:00.0}; {0000:07:00.0, '
                      '0000:86:00.0}', view.notes[0])
        self.assertTrue(view.notes[1].endswith(
            ': NVLink counts differ between GPU pairs (NV1, NV2): judged by '
            'the counts every GPU has, so links weakened alike on every GPU '
            'look as designed; give --board for the designed wiring'))

    def test_dgx1_board_wiring_finds_what_symmetry_cannot(self):
        text = helpers.read_fixture('nvidia-smi',
                                    'topo-dgx1-v100-runtogether-header.txt')
        text = _set_link(_set_link(text, 0, 3, 'NV1'), 2, 6, 'SOC')
        matrix = topo_matrix.parse(text, 'dgx1.txt')
        # Without the board: NV1 is a designed count on every GPU, and a
        # cube-mesh has pairs without NVLink: nothing can be told.
        self.assertEqual({}, topo_matrix.analyse(matrix, DGX1,
                                                 False).degraded)
        view = topo_matrix.analyse(matrix, DGX1, False, _dgx1_wiring())
        source = 'board dgx-1-v100, nvidia-smi topo -m'
        self.assertEqual({
            DGX1[0]: ['NVLink to %s: NV1 below the expected NV2 (%s)'
                      % (DGX1[3], source)],
            DGX1[3]: ['NVLink to %s: NV1 below the expected NV2 (%s)'
                      % (DGX1[0], source)],
            DGX1[2]: ['no NVLink to %s: SOC, expected NV1 (%s)'
                      % (DGX1[6], source)],
            DGX1[6]: ['no NVLink to %s: SOC, expected NV1 (%s)'
                      % (DGX1[2], source)]}, view.degraded)

    def test_four_gpu_nv1_nv2_mix_is_healthy(self):
        # One DGX-1 V100 quad: NV1 and NV2 both on every GPU, by design.
        quad = {frozenset(p): n for p, n in (
            ((0, 1), 1), ((0, 2), 1), ((0, 3), 2), ((1, 2), 2), ((1, 3), 1),
            ((2, 3), 2))}
        view = self._view(4, lambda i, j: 'NV%d' % quad[frozenset((i, j))])
        self.assertEqual({}, view.degraded)
        self.assertEqual([tuple(_addresses(4))], view.groups)
        # Healthy, but what symmetry cannot see is said.
        self.assertEqual(1, len(view.notes))
        self.assertIn('NVLink counts differ between GPU pairs (NV1, NV2)',
                      view.notes[0])

    def test_gpu_weakened_to_every_peer_is_noted(self):
        # GPU0 at NV4 to all three peers of an NV6 mesh: every GPU has an
        # NV4, so symmetry cannot call it degraded; the note says so.
        view = self._view(4, lambda i, j: 'NV4' if 0 in (i, j) else 'NV6')
        self.assertEqual({}, view.degraded)
        self.assertEqual(1, len(view.notes))
        self.assertIn('NVLink counts differ between GPU pairs (NV4, NV6): '
                      'judged by the counts every GPU has', view.notes[0])

    def test_weak_link_in_a_uniform_mesh(self):
        view = self._view(4, lambda i, j: 'NV5' if {i, j} == {0, 1}
                          else 'NV6')
        a = _addresses(4)
        self.assertEqual({
            a[0]: ['NVLink to %s: NV5 below the expected NV6 (nvidia-smi '
                   'topo -m)' % a[1]],
            a[1]: ['NVLink to %s: NV5 below the expected NV6 (nvidia-smi '
                   'topo -m)' % a[0]]}, view.degraded)
        self.assertEqual([tuple(a)], view.groups)

    def test_lost_link_in_a_mesh_needs_the_board(self):
        def link(i, j):
            return 'SYS' if {i, j} == {2, 3} else 'NV6'
        a = _addresses(4)
        view = self._view(4, link)
        self.assertEqual([a[:3]], [list(g) for g in view.groups])
        self.assertEqual([(a[0], a[1], a[3])], view.dropped)
        self.assertEqual({}, view.degraded)
        board = boards.get('hgx-h100-4gpu')
        wiring = (board.name, {frozenset((a[x - 1], a[y - 1])): n
                               for (x, y), n in board.links.items()})
        view = self._view(4, link, wiring)
        self.assertEqual(
            ['no NVLink to %s: SYS, expected NV6 (board hgx-h100-4gpu, '
             'nvidia-smi topo -m)' % a[3]], view.degraded[a[2]])
        self.assertEqual([a[2], a[3]], sorted(view.degraded))

    def test_no_common_count_is_not_judged(self):
        counts = {frozenset((0, 1)): 'NV2', frozenset((1, 2)): 'NV1'}
        view = self._view(3, lambda i, j: counts.get(frozenset((i, j)),
                                                     'SYS'))
        self.assertEqual({}, view.degraded)
        self.assertIn('m.txt: NVLink counts differ between GPUs (NV1, NV2) '
                      'and no count is common to all of them: link health '
                      'is not judged from the matrix; give --board for the '
                      'designed wiring', view.notes)

    def test_eight_gpu_mesh_without_nvswitch_is_questioned(self):
        view = self._view(8, lambda i, j: 'NV18')
        self.assertEqual([tuple(_addresses(8))], view.groups)
        self.assertEqual(['m.txt: 8 GPUs all NVLinked to each other without '
                          'NVSwitches in sysfs: no direct NVLink board links '
                          'more than 4 GPUs all-to-all; if this is an '
                          'NVSwitch board whose switches are not visible, '
                          'its domains are Fabric Manager partitions (give '
                          'FM data or --board), not this mesh'], view.notes)

    def test_hgx_h100_4gpu_nv6(self):
        matrix = _capture('topo-hgx-h100-4gpu-nv6.txt')
        self.assertEqual(['GPU0', 'GPU1', 'GPU2', 'GPU3', 'NIC0', 'NIC1',
                          'NIC2', 'NIC3'], matrix.devices)
        self.assertEqual({'CPU Affinity': '48-95,144-191',
                          'NUMA Affinity': '1', 'GPU NUMA ID': 'N/A'},
                         matrix.attributes['GPU2'])
        addresses = ['0000:19:00.0', '0000:3b:00.0', '0000:9b:00.0',
                     '0000:bb:00.0']
        view = topo_matrix.analyse(matrix, addresses, False)
        self.assertEqual(topo_matrix.NvlinkView(
            switched=False, domains=[frozenset(addresses)],
            groups=[tuple(addresses)], dropped=[], degraded={}, notes=[]),
            view)

    def test_hgx_a100_4gpu_nv4_spaces(self):
        matrix = _capture('topo-hgx-a100-4gpu-nv4.txt')
        self.assertEqual(['GPU0', 'GPU1', 'GPU2', 'GPU3', 'mlx5_0', 'mlx5_1',
                          'mlx5_2', 'mlx5_3'], matrix.devices)
        self.assertEqual('NV4', matrix.link('GPU3', 'GPU1'))
        addresses = ['0000:01:00.0', '0000:41:00.0', '0000:81:00.0',
                     '0000:c1:00.0']
        self.assertEqual({'CPU Affinity': '112-127', 'NUMA Affinity': '7'},
                         topo_matrix.affinity(matrix, addresses)[
                             '0000:81:00.0'])
        view = topo_matrix.analyse(matrix, addresses, False)
        self.assertEqual([tuple(addresses)], view.groups)
        self.assertEqual({}, view.degraded)

    def test_space_pasted_seven_character_nic_names(self):
        nics = ['mlx5_%d' % i for i in range(12)]
        names = ['GPU0', 'GPU1'] + nics
        rows = ['\t' + '\t'.join(names + ['CPU Affinity', 'NUMA Affinity'])]
        for name in names:
            cells = [' X ' if other == name else
                     'NV4' if {name, other} == {'GPU0', 'GPU1'} else 'SYS'
                     for other in names]
            extra = ['0-7', '0'] if name.startswith('GPU') else []
            rows.append('\t'.join([name] + cells + extra))
        # Pasting turns TABs into spaces to the next 8-column stop: two
        # 7-character names end up one space apart.
        text = '\n'.join(row.expandtabs(8) for row in rows) + '\n'
        self.assertIn('mlx5_10 mlx5_11 CPU Affinity', text)
        self.assertIn('\nmlx5_10 SYS', text)
        matrix = topo_matrix.parse(text, 'pasted.txt')
        self.assertEqual(names, matrix.devices)
        self.assertEqual('SYS', matrix.link('mlx5_11', 'mlx5_10'))
        self.assertEqual({'CPU Affinity': '0-7', 'NUMA Affinity': '0'},
                         matrix.attributes['GPU1'])
        self.assertEqual(names, list(matrix.lines))

    def test_truncated_capture_leads_with_the_hint(self):
        text = helpers.topo_text(16, lambda i, j: 'NV6')
        text = '\n'.join(text.splitlines()[:4]) + '\n[... truncated]\n'
        matrix = topo_matrix.parse(text, 'dgx2.txt')
        exc = self.assertRaises(errors.NvlinkError, topo_matrix.analyse,
                                matrix, _addresses(16), True)
        self.assertEqual(
            'dgx2.txt: line 4: the matrix stops after row GPU2; rows GPU3, '
            'GPU4, ..., GPU15 are missing (truncated capture?), so 78 GPU '
            'pairs have no cell in either row', str(exc))

    def test_header_word_that_does_not_split(self):
        exc = self.assertRaises(errors.NvlinkError, topo_matrix.parse,
                                '# capture\n\tGPU0\tGPU1GPU2-x\tCPU '
                                'Affinity\n', 't.txt')
        self.assertEqual("t.txt: line 2: cannot split header word "
                         "'GPU1GPU2-x' into device names (GPU<n>, NIC<n>, "
                         "<name>_<n>)", str(exc))

    def test_header_word_of_another_nic_form_stays_whole(self):
        matrix = topo_matrix.parse('\tGPU0\tbnxt_re0\tCPU Affinity\n'
                                   'GPU0\t X \tPHB\t0-7\n'
                                   'bnxt_re0\tPHB\t X \n', 't.txt')
        self.assertEqual(['GPU0', 'bnxt_re0'], matrix.devices)
