from oslotest import base

from nvlink_placement.discovery import topo_matrix
from nvlink_placement import errors
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
            single_domain=True, domains=[frozenset(ADDRESSES)], groups=[],
            degraded={}, notes=[]), view)

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
            '%s: no cell for GPU5-GPU6, GPU5-GPU7, GPU6-GPU7 (rows GPU5, '
            'GPU6, GPU7 missing: truncated capture?)' % matrix.source,
            str(exc))

    def test_two_gpu_bridge_nv3(self):
        matrix = _capture('topo-2gpu-bridge-nv3-degraded.txt')
        self.assertEqual(['GPU0', 'GPU1'], matrix.devices)
        self.assertEqual('NV3', matrix.link('GPU0', 'GPU1'))
        self.assertEqual({'CPU Affinity': '0-47', 'NUMA Affinity': 'N/A'},
                         matrix.attributes['GPU1'])
        view = topo_matrix.analyse(matrix, _addresses(2), False)
        # One pair is the whole host, and a lone pair gives no reference
        # count: NV3 cannot be told from a healthy 3-link bridge here.
        self.assertTrue(view.single_domain)
        self.assertEqual([], view.groups)
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
        self.assertFalse(view.single_domain)
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
        self.assertTrue(view.single_domain)
        self.assertEqual([], view.groups)
        self.assertEqual(
            ['no NVLink to %s: SYS although the GPUs share an NVLink domain '
             '(nvidia-smi topo -m)' % a[5]], view.degraded[a[2]])
        self.assertEqual([a[2], a[5]], sorted(view.degraded))

    def test_partial_mesh_makes_no_group(self):
        def link(i, j):
            return {frozenset((0, 1)): 'NV2',
                    frozenset((1, 2)): 'NV2'}.get(frozenset((i, j)), 'SYS')
        view = self._view(4, link)
        a = _addresses(4)
        self.assertEqual([], view.groups)
        self.assertEqual(['m.txt: GPUs %s, %s, %s are NVLink-connected, but '
                          'not every pair directly: no group made'
                          % tuple(a[:3])], view.notes)
        self.assertEqual([a[0], a[2]], sorted(view.degraded))

    def test_count_mismatch_with_query(self):
        matrix = topo_matrix.parse(helpers.topo_text(2, lambda i, j: 'NV4'),
                                   'm.txt')
        exc = self.assertRaises(errors.NvlinkError, topo_matrix.analyse,
                                matrix, _addresses(3), False)
        self.assertEqual('m.txt shows 2 GPUs, but `nvidia-smi -q` lists 3: '
                         'they must come from the same host and moment',
                         str(exc))


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
                         self._error('GPU 00000000:18:00.0\n'))

    def test_unknown_cell(self):
        self.assertEqual("t.txt: line 2: GPU0/GPU1: unexpected cell 'NVX'",
                         self._error('\tGPU0\tGPU1\nGPU0\t X \tNVX\n'))

    def test_diagonal_must_be_x(self):
        self.assertEqual("t.txt: line 2: GPU0/GPU0: unexpected cell 'NV4'",
                         self._error('\tGPU0\tGPU1\nGPU0\tNV4\tNV4\n'))

    def test_short_row(self):
        self.assertEqual('t.txt: line 2: row GPU0 has fewer link cells than '
                         'the 2 devices the header names',
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
                         'links, the header names 1 columns (CPU Affinity)',
                         self._error('\tGPU0\tCPU Affinity\n'
                                     'GPU0\t X \t0-7\t9\n'))
