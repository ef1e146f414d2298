"""End to end: ``nvlink-host-inspect`` on the fake board-2 HGX H100 host."""

import io
import json
import os
import subprocess
import sys
import textwrap
import types

import fixtures
from oslotest import base
import yaml

from nvlink_placement.cmd import host_inspect
from nvlink_placement.osc import host as osc_host
from tests.unit.discovery import helpers

OK = {'status': 'ok', 'reasons': []}
GROUPS = [
    ['0000:18:00.0', '0000:2a:00.0', '0000:3a:00.0', '0000:5d:00.0'],
    ['0000:18:00.0', '0000:2a:00.0'],                    # modules 2, 4
    ['0000:3a:00.0', '0000:5d:00.0'],                    # modules 1, 3
    ['0000:9a:00.0', '0000:ab:00.0', '0000:ba:00.0', '0000:db:00.0'],
    ['0000:9a:00.0', '0000:ab:00.0'],                    # modules 6, 8
    ['0000:ba:00.0', '0000:db:00.0'],                    # modules 5, 7
]


def _gpu(address, index, **changes):
    entry = {'module_id': helpers.BOARD2[address], 'vendor_id': '10de',
             'device_id': '2330', 'resource_class': 'CUSTOM_PCI_10DE_2330',
             'numa_node': 0 if index < 4 else 1,
             'iommu_group': str(30 + index), 'driver': 'vfio-pci',
             'health': OK}
    entry.update(changes)
    return entry


def _clean_gpus():
    return {a: _gpu(a, i) for i, a in enumerate(helpers.BOARD2)}


class HostInspectTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(helpers.HostTempDir()).path

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as handle:
            handle.write(text)
        return path

    def mapping(self):
        return self.write('map.json', json.dumps(
            {'00000000:%s' % a[5:].upper(): str(m)
             for a, m in helpers.BOARD2.items()}))

    def run_main(self, *argv, **host_options):
        host = self.useFixture(helpers.FakeSysfs(**host_options))
        stdout = self.useFixture(fixtures.StringStream('stdout')).stream
        stderr = self.useFixture(fixtures.StringStream('stderr')).stream
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', stdout))
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', stderr))
        code = host_inspect.main(['--hostname', 'compute-01',
                                  '--sysfs-root', host.root] + list(argv))
        stdout.seek(0)
        stderr.seek(0)
        return code, stdout.read(), stderr.read()

    def inspect(self, *argv, **host_options):
        code, out, err = self.run_main(*argv, **host_options)
        self.assertEqual((0, ''), (code, err))
        document = yaml.safe_load(out)
        self.assertEqual(['version', 'hosts'], list(document))
        self.assertEqual(['compute-01'], list(document['hosts']))
        return document['hosts']['compute-01']

    def error(self, *argv, **host_options):
        code, out, err = self.run_main(*argv, **host_options)
        self.assertEqual((1, ''), (code, out))
        self.assertTrue(err.startswith('nvlink-host-inspect: error: '), err)
        self.assertNotIn('Traceback', err)
        return err[len('nvlink-host-inspect: error: '):].rstrip('\n')


class TestFabricManagerSources(HostInspectTest):

    def test_fmpm_json_and_mapping(self):
        fmpm = self.write('fmpm.json', helpers.fmpm_json(helpers.H100_TABLE))
        host = self.inspect('--mapping', self.mapping(), '--fmpm-json', fmpm,
                            '--no-nvidia-smi')
        self.assertEqual({
            'gpus': _clean_gpus(),
            'groups': [{'members': g, 'source': 'fm'} for g in GROUPS],
            'nvswitches': ['0000:05:00.0', '0000:06:00.0'],
        }, host)

    def test_fake_library_with_nvidia_smi_captures(self):
        library = helpers.build_fake_nvfm(self)
        query = self.write('q.txt', helpers.h100_query_all_gpus())
        topo = helpers.fixture_path('nvidia-smi',
                                    'topo-hgx-h100-nv18-nics.txt')
        host = self.inspect('--fm-library', library, '--nvidia-smi-q', query,
                            '--topo-matrix', topo)
        self.assertEqual([{'members': g, 'source': 'fm'} for g in GROUPS],
                         host['groups'])
        self.assertEqual(_clean_gpus(), host['gpus'])
        self.assertNotIn('notes', host)

    def test_fake_library_b200_table_disagrees_with_board(self):
        library = helpers.build_fake_nvfm(self)
        self.useFixture(fixtures.EnvironmentVariable('FAKE_NVFM_TABLE',
                                                     'b200'))
        message = self.error('--fm-library', library, '--mapping',
                             self.mapping(), '--board', 'hgx-h100-8gpu',
                             '--no-nvidia-smi')
        self.assertEqual(
            'Fabric Manager at 127.0.0.1:6666 and board hgx-h100-8gpu '
            'disagree on the NVLink domains (by module id): only FM has '
            '{1,2} {3,4} {5,6} {7,8}; only the board has {1,3} {2,4} {5,7} '
            '{6,8}', message)

    def test_fm_and_board_agree(self):
        fmpm = self.write('fmpm.json', helpers.fmpm_json(helpers.H100_TABLE))
        host = self.inspect('--mapping', self.mapping(), '--fmpm-json', fmpm,
                            '--board', 'hgx-h200-8gpu', '--no-nvidia-smi')
        self.assertEqual('hgx-h200-8gpu', host['board'])
        self.assertEqual([{'members': g, 'source': 'fm'} for g in GROUPS],
                         host['groups'])

    def test_fm_failure_is_named(self):
        library = helpers.build_fake_nvfm(self)
        self.useFixture(fixtures.EnvironmentVariable('FAKE_NVFM_FAIL',
                                                     'fmConnect:-3'))
        message = self.error('--fm-library', library, '--fm-socket',
                             '/run/fm.sock', '--no-nvidia-smi')
        self.assertEqual(
            'Fabric Manager at unix:/run/fm.sock: fmConnect failed: '
            'FM_ST_NOT_SUPPORTED (-3): Fabric Manager is not in shared '
            'NVSwitch mode (FABRIC_MODE=1)', message)

    def test_fm_asked_by_default_when_libnvfm_loads(self):
        library = helpers.build_fake_nvfm(self)
        self.useFixture(fixtures.MonkeyPatch(
            'nvlink_placement.fabric.client.LIBRARY_NAMES',
            (library,)))
        host = self.inspect('--mapping', self.mapping(), '--no-nvidia-smi')
        self.assertEqual([{'members': g, 'source': 'fm'} for g in GROUPS],
                         host['groups'])
        self.useFixture(fixtures.EnvironmentVariable('FAKE_NVFM_FAIL',
                                                     'fmConnect:-9'))
        message = self.error('--mapping', self.mapping(), '--no-nvidia-smi')
        self.assertEqual(
            'Fabric Manager at 127.0.0.1:6666: fmConnect failed: '
            'FM_ST_CONNECTION_NOT_VALID (-9): Fabric Manager could not be '
            'reached (is nvidia-fabricmanager running and listening there?) '
            '(libnvfm is installed, so Fabric Manager was asked; pass '
            '--no-fm to skip it)', message)

    def test_no_libnvfm_means_no_fm(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nvlink_placement.fabric.client.LIBRARY_NAMES',
            (os.path.join(self.tmp, 'libnvfm.so.1'),)))
        host = self.inspect('--mapping', self.mapping(), '--no-nvidia-smi')
        self.assertNotIn('groups', host)
        self.assertEqual(1, len(host['notes']))
        self.assertTrue(host['notes'][0].startswith(
            'all GPUs share one NVLink fabric (NVSwitches present)'))

    def test_topology_matrix_pairing_differently_from_fm(self):
        fmpm = self.write('fmpm.json', helpers.fmpm_json(helpers.H100_TABLE))
        query = self.write('q.txt', helpers.h100_query_all_gpus())
        # Bridge pairs GPU0-GPU2, GPU1-GPU3, ... (NVML index = -q order).
        pairs = ({0, 2}, {1, 3}, {4, 6}, {5, 7})
        topo = self.write('topo.txt', helpers.topo_text(
            8, lambda i, j: 'NV4' if {i, j} in pairs else 'SYS'))
        # Without NVSwitches NVLink cliques are domains, so they must hold
        # FM's groups.
        message = self.error('--fmpm-json', fmpm, '--nvidia-smi-q', query,
                             '--topo-matrix', topo, nvswitches=False)
        self.assertEqual(
            '%s and %s disagree: FM partition 1 groups 0000:18:00.0, '
            '0000:2a:00.0, 0000:3a:00.0, 0000:5d:00.0, but the matrix has no '
            'NVLink between {0000:18:00.0, 0000:3a:00.0} and {0000:2a:00.0, '
            '0000:5d:00.0}' % (fmpm, topo), message)

    def test_crossing_partitions_noted(self):
        table = [(0, range(1, 9)), (1, range(1, 5)), (2, range(3, 7)),
                 (3, range(5, 9))]
        fmpm = self.write('fmpm.json', helpers.fmpm_json(table))
        host = self.inspect('--mapping', self.mapping(), '--fmpm-json', fmpm,
                            '--no-nvidia-smi')
        self.assertEqual([{'members': GROUPS[0], 'source': 'fm'},
                          {'members': GROUPS[3], 'source': 'fm'}],
                         host['groups'])
        self.assertEqual(['FM partitions 2 cross others and were left out'],
                         host['notes'])

    def test_board_disagrees_with_bridge_matrix(self):
        query = self.write('q.txt', helpers.h100_query_all_gpus())
        pairs = ({0, 1}, {2, 3}, {4, 5}, {6, 7})
        topo = self.write('topo.txt', helpers.topo_text(
            8, lambda i, j: 'NV4' if {i, j} in pairs else 'SYS'))
        message = self.error('--board', 'hgx-h100-8gpu', '--nvidia-smi-q',
                             query, '--topo-matrix', topo, '--no-fm',
                             nvswitches=False)
        self.assertEqual(
            '--board hgx-h100-8gpu and %s disagree: board group {1,2,3,4} '
            'groups 0000:18:00.0, 0000:2a:00.0, 0000:3a:00.0, 0000:5d:00.0, '
            'but the matrix has no NVLink between {0000:18:00.0, '
            '0000:2a:00.0} and {0000:3a:00.0, 0000:5d:00.0}' % topo, message)

    def test_bridge_pairs_from_matrix(self):
        query = self.write('q.txt', helpers.h100_query_all_gpus())
        pairs = ({0, 1}, {2, 3}, {4, 5}, {6, 7})
        topo = self.write('topo.txt', helpers.topo_text(
            8, lambda i, j: 'NV4' if {i, j} in pairs else 'SYS'))
        host = self.inspect('--nvidia-smi-q', query, '--topo-matrix', topo,
                            '--no-fm', nvswitches=False)
        addresses = list(helpers.BOARD2)
        self.assertEqual([{'members': addresses[i:i + 2],
                           'source': 'topo-matrix', 'mesh': True}
                          for i in (0, 2, 4, 6)], host['groups'])


class TestQuirkyHost(HostInspectTest):

    def test_health_exclusion_and_notes(self):
        fmpm = self.write('fmpm.json', helpers.fmpm_json(helpers.H100_TABLE))
        host = self.inspect('--mapping', self.mapping(), '--fmpm-json', fmpm,
                            '--no-nvidia-smi', quirks=True)
        gpus = _clean_gpus()
        gpus['0000:2a:00.0']['health'] = {'status': 'degraded', 'reasons': [
            'PCIe link below its maximum: x8, maximum x16; 16 GT/s, maximum '
            '32 GT/s (GPUs may down-train when idle)']}
        gpus['0000:5d:00.0']['numa_node'] = 'unknown'
        gpus['0000:9a:00.0']['health'] = {'status': 'unhealthy', 'reasons': [
            'config space reads all ones: the GPU fell off the bus']}
        gpus['0000:ab:00.0']['health'] = {'status': 'unhealthy', 'reasons': [
            '1 fatal AER errors (aer_dev_fatal)']}
        gpus['0000:db:00.0']['excluded'] = ('vGPU in use (mdev parent, 1 '
                                            'mdev instance)')
        self.assertEqual(gpus, host['gpus'])
        # Groups keep their members: the topology loader leaves the
        # excluded GPU out and keeps names and sizes nominal. Unhealthy
        # GPUs stay grouped.
        self.assertEqual([{'members': g, 'source': 'fm'} for g in GROUPS],
                         host['groups'])
        self.assertEqual(['0000:db:00.0 will be left out of its NVLink '
                          'groups: vGPU in use (mdev parent, 1 mdev '
                          'instance)'], host['notes'])


class TestTopologyContract(HostInspectTest):
    """Fragments against the core's loader and its example topology.

    ``etc/examples/hgx-h100.yaml`` describes compute-02 by hand: board 2
    (our fake host) with ``--board hgx-h100-8gpu`` and its mapping file.
    """

    def _load(self, *argv, **host_options):
        from nvlink_placement.topology import loader
        code, out, err = self.run_main(*argv, **host_options)
        self.assertEqual((0, ''), (code, err))
        document = yaml.safe_load(out)
        document['hosts']['compute-02'] = document['hosts'].pop('compute-01')
        return loader.parse(document, 'fragment.yaml').hosts['compute-02']

    def _example(self):
        from nvlink_placement.topology import loader
        root = os.path.dirname(helpers.TESTS)
        return loader.load(os.path.join(
            root, 'etc', 'examples', 'hgx-h100.yaml')).hosts['compute-02']

    def test_board_fragment_gives_the_example_tree(self):
        mapping = os.path.join(os.path.dirname(helpers.TESTS), 'etc',
                               'examples', 'mappings', 'compute-02.json')
        host = self._load('--mapping', mapping, '--board', 'hgx-h100-8gpu',
                          '--no-nvidia-smi', '--no-fm')
        self.assertEqual(self._example().groups, host.groups)

    def test_fm_fragment_gives_the_example_domains(self):
        fmpm = self.write('fmpm.json', helpers.fmpm_json(helpers.H100_TABLE))
        host = self._load('--mapping', self.mapping(), '--fmpm-json', fmpm,
                          '--no-nvidia-smi')

        def domains(groups):
            return {(g.members, g.size, g.trait) for g in groups}
        self.assertEqual(domains(self._example().groups),
                         domains(host.groups))

    def test_fragment_loads_with_the_topology_loader(self):
        """Excluded GPUs leave their groups in the loader."""
        fmpm = self.write('fmpm.json', helpers.fmpm_json(helpers.H100_TABLE))
        host = self._load('--mapping', self.mapping(), '--fmpm-json', fmpm,
                          '--board', 'hgx-h100-8gpu', '--no-nvidia-smi',
                          quirks=True)
        # The excluded 0000:db:00.0 leaves its quad (nominal size 4) and
        # its pair (one GPU left: no group).
        self.assertEqual({tuple(GROUPS[0]): 4, tuple(GROUPS[1]): 2,
                          tuple(GROUPS[2]): 2, tuple(GROUPS[4]): 2,
                          ('0000:9a:00.0', '0000:ab:00.0', '0000:ba:00.0'): 4},
                         {g.members: g.size for g in host.groups})


# HGX A100 4-GPU host of tests/fixtures/nvidia-smi/*a100-4gpu*: address ->
# NUMA node as the NV4 matrix fixture gives it.
A100_4 = {'0000:01:00.0': 3, '0000:41:00.0': 1, '0000:81:00.0': 7,
          '0000:c1:00.0': 5}
# DGX-1 V100 in NVML order (NVIDIA/nccl#671); NUMA node per CPU socket.
DGX1 = {'0000:%s:00.0' % b: int(i >= 4) for i, b in enumerate(
    ('06', '07', '0a', '0b', '85', '86', '89', '8a'))}
LOST = 'GPU is lost. Reboot the system to recover this GPU'


class TestDirectNvlinkHosts(HostInspectTest):

    def _load(self, document):
        from nvlink_placement.topology import loader
        return loader.parse({'version': 1, 'hosts': {
            'compute-01': document}}, 'fragment.yaml').hosts['compute-01']

    def test_dgx1_quads_are_meshes(self):
        query = self.write('q.txt', helpers.query_text(list(DGX1)))
        topo = helpers.fixture_path('nvidia-smi',
                                    'topo-dgx1-v100-runtogether-header.txt')
        host = self.inspect('--nvidia-smi-q', query, '--topo-matrix', topo,
                            '--no-fm', nvswitches=False, gpus=DGX1,
                            device='0x1db5', driver='nvidia')
        quads = [list(DGX1)[:4], list(DGX1)[4:]]
        self.assertEqual([{'members': q, 'source': 'topo-matrix',
                           'mesh': True} for q in quads], host['groups'])
        self.assertEqual({'ok'}, {g['health']['status']
                                  for g in host['gpus'].values()})
        self.assertEqual(2, len(host['notes']))
        self.assertTrue(host['notes'][0].startswith(
            '%s: NVLinked GPUs {0000:06:00.0, 0000:85:00.0}; ' % topo))
        self.assertTrue(host['notes'][1].startswith(
            '%s: NVLink counts differ between GPU pairs (NV1, NV2)' % topo))
        groups = self._load(host).groups
        self.assertEqual([('compute-01_nvlink-group-of-4-a', tuple(quads[0]),
                           ('CUSTOM_PCI_GROUP2', 'CUSTOM_PCI_GROUP4')),
                          ('compute-01_nvlink-group-of-4-b', tuple(quads[1]),
                           ('CUSTOM_PCI_GROUP2', 'CUSTOM_PCI_GROUP4'))],
                         [(g.name, g.members, g.traits) for g in groups])

    def test_board_without_module_ids_in_an_old_query(self):
        # DGX-1 era drivers print no Module ID in nvidia-smi -q.
        query = self.write('q.txt', helpers.query_text(list(DGX1)))
        message = self.error('--board', 'dgx-1-v100', '--nvidia-smi-q',
                             query, '--no-fm', nvswitches=False, gpus=DGX1,
                             device='0x1db5', driver='nvidia')
        self.assertEqual(
            '--board dgx-1-v100 needs the module id of every GPU, missing '
            'for %s (%s gives none for them: drivers before the HGX era '
            'print no Module ID; give --mapping)'
            % (', '.join(DGX1), query), message)

    def test_output_file_says_notes_and_unhealthy_gpus(self):
        query = helpers.fixture_path('nvidia-smi',
                                     'q-hgx-a100-4gpu-lost-gpu.txt')
        topo = helpers.fixture_path('nvidia-smi', 'topo-hgx-a100-4gpu-nv4.txt')
        out = self.write('fragment.yaml', '')
        code, stdout, stderr = self.run_main(
            '--nvidia-smi-q', query, '--topo-matrix', topo, '--no-fm',
            '-o', out, nvswitches=False, gpus=A100_4, device='0x20b2',
            driver='nvidia')
        self.assertEqual((0, ''), (code, stdout))
        self.assertEqual(
            '%s: compute-01: GPU 0000:c1:00.0 unhealthy: nvidia-smi cannot '
            'open it: %s\n'
            '%s: compute-01: note: %s reports GPU 0000:c1:00.0 lost: %s\n'
            % (out, LOST, out, query, LOST), stderr)
        with open(out) as f:
            self.assertIn('unhealthy', f.read())

    def test_dgx1_board_judges_the_wiring(self):
        mapping = self.write('map.json', json.dumps(
            {a: i + 1 for i, a in enumerate(DGX1)}))
        query = self.write('q.txt', helpers.query_text(list(DGX1)))
        text = helpers.read_fixture('nvidia-smi',
                                    'topo-dgx1-v100-runtogether-header.txt')
        topo = self.write('topo.txt', text.replace(
            'GPU1\tNV1\t X \tNV2', 'GPU1\tNV1\t X \tNV1').replace(
            'GPU2\tNV1\tNV2', 'GPU2\tNV1\tNV1'))
        host = self.inspect('--mapping', mapping, '--board', 'dgx-1-v100',
                            '--nvidia-smi-q', query, '--topo-matrix', topo,
                            '--no-fm', nvswitches=False, gpus=DGX1,
                            device='0x1db5', driver='nvidia')
        self.assertEqual('dgx-1-v100', host['board'])
        self.assertNotIn('groups', host)
        degraded = {a: g['health']['reasons']
                    for a, g in host['gpus'].items()
                    if g['health']['status'] != 'ok'}
        reason = ('NVLink to %s: NV1 below the expected NV2 (board '
                  'dgx-1-v100, nvidia-smi topo -m)')
        self.assertEqual({'0000:07:00.0': [reason % '0000:0a:00.0'],
                          '0000:0a:00.0': [reason % '0000:07:00.0']},
                         degraded)
        self.assertEqual(
            [g.members for g in self._load(host).groups],
            [tuple(list(DGX1)[:4]), tuple(list(DGX1)[4:])])

    def test_a100_4gpu_whole_host_mesh(self):
        host = self.inspect_a100_mesh(
            self.write('q.txt', helpers.query_text(list(A100_4))))
        self.assertNotIn('notes', host)
        group, = self._load(host).groups
        self.assertEqual(('compute-01_nvlink-group-of-4-a', None,
                          ('CUSTOM_PCI_GROUP2', 'CUSTOM_PCI_GROUP4')),
                         (group.name, group.parent, group.traits))

    def test_affinity_disagreeing_with_sysfs(self):
        query = self.write('q.txt', helpers.query_text(list(A100_4)))
        topo = helpers.fixture_path('nvidia-smi', 'topo-hgx-a100-4gpu-nv4.txt')
        host = self.inspect(
            '--nvidia-smi-q', query, '--topo-matrix', topo, '--no-fm',
            nvswitches=False, gpus=dict(A100_4, **{'0000:41:00.0': 0}),
            device='0x20b2', driver='nvidia',
            local_cpus={'0000:01:00.0': '48-63',
                        '0000:81:00.0': '96-111,112-127'})
        self.assertEqual([
            '0000:41:00.0: %s gives NUMA Affinity 1, sysfs numa_node 0 (the '
            'fragment keeps sysfs)' % topo,
            '0000:81:00.0: %s gives CPU Affinity 112-127, sysfs local_cpulist'
            ' 96-127' % topo], host['notes'])
        self.assertEqual(0, host['gpus']['0000:41:00.0']['numa_node'])

    def inspect_a100_mesh(self, query):
        """Inspect the HGX A100 4-GPU host; its one group is the mesh."""
        topo = helpers.fixture_path('nvidia-smi', 'topo-hgx-a100-4gpu-nv4.txt')
        host = self.inspect('--nvidia-smi-q', query, '--topo-matrix', topo,
                            '--no-fm', nvswitches=False, gpus=A100_4,
                            device='0x20b2', driver='nvidia')
        self.assertEqual([{'members': list(A100_4), 'source': 'topo-matrix',
                           'mesh': True}], host['groups'])
        return host

    def assert_lost_gpu_reserved_in_its_quad(self, host):
        """reshape would reserve 0000:c1:00.0 inside group-of-4-a."""
        from nvlink_placement.plan import desired
        wanted = desired.from_topology(self._load(host))
        self.assertEqual(
            {'compute-01_0000:C1:00.0'},
            {n for n, gpu in wanted.gpus.items() if gpu.reserve})
        self.assertEqual('compute-01_nvlink-group-of-4-a',
                         wanted.gpus['compute-01_0000:C1:00.0'].parent)

    def test_lost_gpu_in_the_matrix_stays_in_its_mesh(self):
        # NVML counts a GPU it cannot open: a matrix with a column for it
        # is read in PCI order, the mesh keeps it and reshape reserves it.
        host = self.inspect_a100_mesh(helpers.fixture_path(
            'nvidia-smi', 'q-hgx-a100-4gpu-lost-gpu.txt'))
        self.assertEqual('unhealthy',
                         host['gpus']['0000:c1:00.0']['health']['status'])
        self.assert_lost_gpu_reserved_in_its_quad(host)

    def test_lost_gpu_missing_from_the_matrix_is_named(self):
        query = helpers.fixture_path('nvidia-smi',
                                     'q-hgx-a100-4gpu-lost-gpu.txt')
        lines = open(helpers.fixture_path(
            'nvidia-smi', 'topo-hgx-a100-4gpu-nv4.txt')).read().splitlines()
        kept = []
        for line in lines:
            if line.startswith(('GPU3', 'mlx5_3')):
                continue
            if line.lstrip().startswith('GPU0') or line.startswith(
                    ('GPU', 'mlx5')):
                cells = line.split()
                # Drop the GPU3 and mlx5_3 columns (header: no row name).
                header = line.lstrip().startswith('GPU0')
                drop = (3, 7) if header else (4, 8)
                line = '\t'.join(
                    c for i, c in enumerate(cells) if i not in drop)
            kept.append(line)
        topo = self.write('topo.txt', '\n'.join(kept) + '\n')
        host = self.inspect('--nvidia-smi-q', query, '--topo-matrix', topo,
                            '--no-fm', nvswitches=False, gpus=A100_4,
                            device='0x20b2', driver='nvidia')
        self.assertEqual([{'members': list(A100_4)[:3],
                           'source': 'topo-matrix', 'mesh': True}],
                         host['groups'])
        self.assertIn(
            '%s has no column for lost GPU 0000:c1:00.0, so its NVLink '
            'peers are unknown: the meshes found leave it out and reshape '
            "cannot reserve it; give --board (and module ids) to place it "
            "by the board's wiring, or reserve it by hand" % topo,
            host['notes'])

    def test_lost_gpu_is_unhealthy_and_reserved(self):
        query = helpers.fixture_path('nvidia-smi',
                                     'q-hgx-a100-4gpu-lost-gpu.txt')
        mapping = self.write('map.json', json.dumps(
            {a: i + 1 for i, a in enumerate(A100_4)}))
        host = self.inspect('--mapping', mapping, '--board', 'hgx-a100-4gpu',
                            '--nvidia-smi-q', query, '--no-fm',
                            nvswitches=False, gpus=A100_4, device='0x20b2',
                            driver='nvidia')
        self.assertEqual({'status': 'unhealthy', 'reasons': [
            'nvidia-smi cannot open it: ' + LOST]},
            host['gpus']['0000:c1:00.0']['health'])
        self.assertEqual(['%s reports GPU 0000:c1:00.0 lost: %s'
                          % (query, LOST)], host['notes'])
        self.assert_lost_gpu_reserved_in_its_quad(host)

    def test_gpu_missing_from_query_is_named(self):
        query = self.write('q.txt', helpers.query_text(list(A100_4)[:3],
                                                       attached=4))
        host = self.inspect('--nvidia-smi-q', query, '--no-fm',
                            nvswitches=False, gpus=A100_4, device='0x20b2',
                            driver='nvidia')
        self.assertEqual({'status': 'degraded', 'reasons': [
            'bound to the nvidia driver, but %s does not describe it (4 GPUs '
            'attached, 3 described)' % query]},
            host['gpus']['0000:c1:00.0']['health'])
        self.assertEqual([
            '0000:c1:00.0 is bound to the nvidia driver but missing from %s'
            % query, '%s says 4 GPUs are attached, but describes 3' % query],
            host['notes'])


class TestOtherSources(HostInspectTest):

    def test_board_only(self):
        host = self.inspect('--mapping', self.mapping(), '--board',
                            'hgx-h100-8gpu', '--no-nvidia-smi', '--no-fm')
        self.assertEqual({'board': 'hgx-h100-8gpu', 'gpus': _clean_gpus(),
                          'nvswitches': ['0000:05:00.0', '0000:06:00.0']},
                         host)

    def test_board_needs_module_ids(self):
        message = self.error('--board', 'hgx-h100-8gpu', '--no-nvidia-smi',
                             '--no-fm')
        self.assertEqual(
            '--board hgx-h100-8gpu needs the module id of every GPU, missing '
            'for %s (give --mapping or --nvidia-smi-q)'
            % ', '.join(helpers.BOARD2), message)

    def test_unknown_board(self):
        message = self.error('--board', 'hgx-z9', '--no-nvidia-smi',
                             '--no-fm')
        self.assertTrue(message.startswith("unknown board 'hgx-z9'; built-in "
                                           "boards: dgx-1-p100, dgx-1-v100, "
                                           "dgx-2-16gpu, "), message)

    def test_nothing_but_sysfs(self):
        host = self.inspect('--no-nvidia-smi', '--no-fm')
        gpus = _clean_gpus()
        for entry in gpus.values():
            del entry['module_id']
        self.assertEqual({'gpus': gpus,
                          'nvswitches': ['0000:05:00.0', '0000:06:00.0'],
                          'notes': [
                              'all GPUs share one NVLink fabric (NVSwitches '
                              'present); its domains come from Fabric '
                              'Manager partitions (libnvfm, --fm-address, '
                              '--fmpm-json) or --board (hgx-2-16gpu, '
                              'hgx-a100-16gpu, hgx-a100-8gpu, hgx-b200-8gpu,'
                              ' hgx-h100-8gpu), and neither was used']},
                         host)

    def test_no_gpu_names_sysfs_root(self):
        # A sysfs without GPUs (not the compute host): say where to look.
        root = os.path.join(self.tmp, 'sys')
        os.makedirs(os.path.join(root, 'bus', 'pci', 'devices'))
        stderr = self.useFixture(fixtures.StringStream('stderr')).stream
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', stderr))
        code = host_inspect.main(['--hostname', 'compute-01', '--sysfs-root',
                                  root, '--no-nvidia-smi', '--no-fm'])
        stderr.seek(0)
        self.assertEqual(1, code)
        self.assertEqual(
            'nvlink-host-inspect: error: no NVIDIA GPU under %s: run it on '
            'the compute host, or point --sysfs-root at a copy of that '
            "host's sysfs\n" % os.path.join(root, 'bus', 'pci', 'devices'),
            stderr.read())

    def test_mapping_disagrees_with_nvidia_smi(self):
        query = self.write('q.txt', helpers.h100_query_all_gpus())
        mapping = self.write('map.json', '{"0000:18:00.0": 4}')
        message = self.error('--mapping', mapping, '--nvidia-smi-q', query,
                             '--no-fm')
        self.assertEqual('module id of 0000:18:00.0: %s says 4, %s says 2'
                         % (mapping, query), message)

    def test_nvidia_smi_names_gpu_sysfs_lacks(self):
        query = self.write('q.txt', helpers.read_fixture(
            'nvidia-smi', 'q-a100-sxm4-x4-driver555.txt'))
        message = self.error('--nvidia-smi-q', query, '--no-fm')
        self.assertEqual(
            '%s lists GPU 0000:68:00.0, which sysfs (%s) does not show; they '
            'must describe the same host'
            % (query, message.split('sysfs (')[1].split(')')[0]), message)

    def test_topo_matrix_needs_query(self):
        topo = helpers.fixture_path('nvidia-smi',
                                    'topo-hgx-h100-nv18-nics.txt')
        message = self.error('--topo-matrix', topo, '--no-fm')
        self.assertEqual('%s numbers GPUs by NVML index; only `nvidia-smi '
                         '-q` maps them to PCI addresses: give --nvidia-smi-q '
                         'too' % topo, message)

    def test_missing_mapping_file(self):
        message = self.error('--mapping', '/nonexistent/map.json',
                             '--no-nvidia-smi', '--no-fm')
        self.assertEqual('cannot read mapping file /nonexistent/map.json: No '
                         'such file or directory', message)

    def test_bad_capture_names_file_and_line(self):
        topo = self.write('topo.txt', '\tGPU0\tGPU1\nGPU0\t X \tNV?\n')
        query = self.write('q.txt', helpers.h100_query_all_gpus())
        message = self.error('--nvidia-smi-q', query, '--topo-matrix', topo,
                             '--no-fm')
        self.assertEqual("%s: line 2: GPU0/GPU1: unexpected cell 'NV?'"
                         % topo, message)

    def test_fmpm_json_conflicts_with_live_options(self):
        fmpm = self.write('fmpm.json', helpers.fmpm_json(helpers.H100_TABLE))
        message = self.error('--fmpm-json', fmpm, '--fm-library', '/x.so',
                             '--no-nvidia-smi')
        self.assertEqual('--fmpm-json replaces asking Fabric Manager: do not '
                         'combine it with --fm-address, --fm-socket or '
                         '--fm-library', message)
        message = self.error('--no-fm', '--fm-library', '/x.so',
                             '--no-nvidia-smi')
        self.assertEqual('--no-fm contradicts the other Fabric Manager '
                         'options', message)

    def test_default_mapping_file_is_used_when_present(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nvlink_placement.discovery.module_ids.DEFAULT_MAPPING_FILE',
            self.mapping()))
        host = self.inspect('--no-nvidia-smi', '--no-fm')
        self.assertEqual(2, host['gpus']['0000:18:00.0']['module_id'])

    def test_live_nvidia_smi_on_path(self):
        bindir = os.path.join(self.tmp, 'bin')
        os.mkdir(bindir)
        query = self.write('q.txt', helpers.h100_query_all_gpus())
        topo = helpers.fixture_path('nvidia-smi',
                                    'topo-hgx-h100-nv18-nics.txt')
        script = os.path.join(bindir, 'nvidia-smi')
        with open(script, 'w') as handle:
            handle.write('#!/bin/sh\nif [ "$1" = -q ]; then cat %s; '
                         'else cat %s; fi\n' % (query, topo))
        os.chmod(script, 0o755)
        self.useFixture(fixtures.EnvironmentVariable(
            'PATH', bindir + os.pathsep + os.environ['PATH']))
        host = self.inspect('--board', 'hgx-h100-8gpu', '--no-fm')
        self.assertEqual(_clean_gpus(), host['gpus'])
        self.assertEqual('hgx-h100-8gpu', host['board'])
        # A passthrough host: the GPUs are on vfio-pci, nvidia-smi sees none.
        with open(script, 'w') as handle:
            handle.write('#!/bin/sh\necho "No devices were found"\nexit 6\n')
        host = self.inspect('--mapping', self.mapping(), '--no-fm')
        self.assertEqual(2, host['gpus']['0000:18:00.0']['module_id'])
        self.assertEqual('`nvidia-smi -q` exited with 6 (No devices were '
                         'found) and was not used', host['notes'][0])


class TestOutput(HostInspectTest):

    def test_json_to_file(self):
        out = os.path.join(self.tmp, 'fragment.json')
        code, stdout, stderr = self.run_main(
            '--mapping', self.mapping(), '--no-nvidia-smi', '--no-fm',
            '-f', 'json', '-o', out)
        # Written to a file, the fragment's notes are said too.
        self.assertEqual((0, '', '%s: compute-01: note: all GPUs share one '
                          'NVLink fabric (NVSwitches present); its domains '
                          'come from Fabric Manager partitions (libnvfm, '
                          '--fm-address, --fmpm-json) or --board '
                          '(hgx-2-16gpu, hgx-a100-16gpu, hgx-a100-8gpu, '
                          'hgx-b200-8gpu, hgx-h100-8gpu), and neither was '
                          'used\n' % out), (code, stdout, stderr))
        with open(out) as handle:
            document = json.load(handle)
        self.assertEqual(1, document['version'])
        self.assertEqual(
            _gpu('0000:ab:00.0', 5),
            document['hosts']['compute-01']['gpus']['0000:ab:00.0'])

    def test_yaml_quotes_addresses_and_ids(self):
        code, stdout, _ = self.run_main('--no-nvidia-smi', '--no-fm')
        self.assertEqual(0, code)
        self.assertIn("\n      '0000:18:00.0':\n", stdout)
        self.assertIn("\n        device_id: '2330'\n", stdout)
        self.assertIn("\n        iommu_group: '30'\n", stdout)


class TestOscCommand(HostInspectTest):

    def test_same_options_and_output(self):
        host = self.useFixture(helpers.FakeSysfs())
        app = types.SimpleNamespace(stdout=io.StringIO(),
                                    stderr=io.StringIO())
        command = osc_host.HostInspect(app, None)
        self.assertFalse(command.auth_required)
        parser = command.get_parser('openstack nvlink host inspect')
        args = parser.parse_args(['--hostname', 'compute-01', '--sysfs-root',
                                  host.root, '--mapping', self.mapping(),
                                  '--no-nvidia-smi', '--no-fm', '-f', 'json'])
        command.take_action(args)
        document = json.loads(app.stdout.getvalue())
        self.assertEqual(_clean_gpus(), document['hosts']['compute-01']
                         ['gpus'])


class TestHostSideImports(base.BaseTestCase):
    """The host-side code imports nothing but stdlib, PyYAML and ours.

    Ours includes the hook's modules (Fabric Manager within a deadline):
    they are standard-library-only themselves (test_host_partitions).
    """

    def test_only_allowed_modules(self):
        script = textwrap.dedent("""\
            import sys
            before = set(sys.modules)
            import nvlink_placement.cmd.host_inspect
            import nvlink_placement.discovery.inspect
            ours = ('nvlink_placement.cmd.', 'nvlink_placement.discovery.',
                    'nvlink_placement.fabric')
            allowed = {'nvlink_placement', 'nvlink_placement.errors',
                       'nvlink_placement.documents',
                       'nvlink_placement.topology',
                       'nvlink_placement.topology.pci',
                       'nvlink_placement.topology.laminar',
                       'nvlink_placement.topology.boards',
                       'nvlink_placement.cmd', 'nvlink_placement.discovery'}
            # PyYAML, and the Cython runtime of its C extension.
            extra = ('yaml', '_yaml', '_cython_', 'cython_')
            print(' '.join(sorted(
                m for m in set(sys.modules) - before
                if m.split('.')[0] not in sys.stdlib_module_names
                and m not in allowed and not m.startswith(ours + extra))))
            """)
        root = os.path.dirname(helpers.TESTS)
        done = subprocess.run([sys.executable, '-c', script], cwd=root,
                              capture_output=True, text=True, check=True)
        self.assertEqual('', done.stdout.strip())
