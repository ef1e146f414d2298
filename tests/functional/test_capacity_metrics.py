"""``check --prometheus-textfile``: capacity per resource class and size.

The example H100 cloud (two HGX hosts, pairs of modules {1,3} {2,4} {5,7}
{6,8}, quads {1-4} {5-8}), reshaped; the example's instance holds module
5 of compute-01; here a 2-GPU instance split across two pairs of
compute-01 (modules 1, 2) and a 1-GPU instance on module 5 of compute-02
are added. Every expected value below is counted by hand from that
picture.
"""

import json
import os

import fixtures
from oslotest import base
from prometheus_client import parser as prom_parser

from nvlink_placement.placement import nova_tree
from nvlink_placement.placement import snapshot
from tests import edge_fixture as fx
from tests.functional import base as fbase
from tests.functional import cli
from tests import novalike
from tests import promtool

RC = novalike.GPU_RC
SPLIT = 'a1a1a1a1-0000-4000-8000-00000000000a'
SINGLE = 'a1a1a1a1-0000-4000-8000-00000000000b'


def _gpu(host, board, module):
    address = next(a for a, m in board.items() if m == module)
    return '%s_%s' % (host, address.upper())


def metrics(path):
    with open(path) as f:
        text = f.read()
    return {(s.name,) + tuple(sorted(s.labels.items())): s.value
            for family in prom_parser.text_string_to_metric_families(text)
            for s in family.samples}


class TestCapacityMetrics(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        document = snapshot.read_file(fbase.H100_SNAPSHOT)
        uuids = {rp['name']: rp['uuid']
                 for rp in document['resource_providers']}
        for consumer, gpus in (
                (SPLIT, [_gpu('compute-01', novalike.BOARD1, m)
                         for m in (1, 2)]),
                (SINGLE, [_gpu('compute-02', novalike.BOARD2, 5)])):
            document['allocations'][consumer] = {
                'project_id': 'p', 'user_id': 'u',
                'consumer_type': 'INSTANCE', 'allocations': {
                    uuids[g]: {'resources': {RC: 1}} for g in gpus}}
        flat = os.path.join(self.tmp, 'flat.json')
        with open(flat, 'w') as f:
            json.dump(document, f)
        self.snapshot = os.path.join(self.tmp, 'reshaped.json')
        result = cli.run(self, 'nvlink', 'reshape', '--topology',
                         fbase.H100_TOPOLOGY, '--snapshot', flat,
                         '--save-snapshot', self.snapshot)
        self.assertEqual(0, result.code, result.stderr)
        self.prom = os.path.join(self.tmp, 'nvlink.prom')

    def check(self, *more):
        return cli.run(self, 'nvlink', 'check', '--topology',
                       fbase.H100_TOPOLOGY, '--snapshot', self.snapshot,
                       '--prometheus-textfile', self.prom, '-f', 'json',
                       *more)

    def test_capacity_per_class_and_size(self):
        result = self.check()
        self.assertEqual(2, result.code, result.stderr)    # the split one
        m = metrics(self.prom)
        capacity = {k: v for k, v in m.items() if k[0] in (
            'nvlink_placement_gpus', 'nvlink_placement_free_gpus',
            'nvlink_placement_free_domains',
            'nvlink_placement_stranded_gpus',
            'nvlink_placement_split_instances')}

        def key(name, size=None):
            labels = (('resource_class', RC),)
            if size is not None:
                labels += (('size', str(size)),)
            return ('nvlink_placement_' + name,) + labels
        self.assertEqual({
            key('gpus'): 16,
            key('free_gpus'): 12,
            # compute-01: modules 3, 4, 6, 7, 8 free: pair {6,8}, no
            # quad; compute-02: all but module 5: pairs {1,3} {2,4}
            # {6,8}, quad 1-4.
            key('free_domains', 1): 12,
            key('free_domains', 2): 4,
            key('free_domains', 4): 1,
            key('free_domains', 8): 0,
            key('stranded_gpus', 1): 0,
            key('stranded_gpus', 2): 4,     # modules 3, 4, 7; 7
            key('stranded_gpus', 4): 8,     # 3, 4, 6, 7, 8; 6, 7, 8
            key('stranded_gpus', 8): 12,
            key('split_instances', 2): 1,
            key('split_instances', 4): 0,
            key('split_instances', 8): 0,
        }, capacity)
        # 5 about the run, 10 drift kinds, 13 capacity: the same at 100
        # hosts (tests.functional.test_capacity_requests); then one per
        # host and kind with drift.
        self.assertEqual(28 + 1, len(m))
        # Capacity takes no host label: only the drifting host has one.
        self.assertEqual(
            [('nvlink_placement_host_drift', ('host', 'compute-01'),
              ('kind', 'split-allocation'))],
            [k for k in m if ('host', 'compute-01') in k or
             ('host', 'compute-02') in k])

    def test_promtool_check_metrics_passes(self):
        self.check()
        with open(self.prom) as f:
            text = f.read()
        code, output = promtool.run(self, 'check', 'metrics', stdin=text)
        self.assertEqual((0, ''), (code, output))

    def test_promtool_check_metrics_catches_a_bad_name(self):
        # The lint is real: a gauge named like a counter is refused.
        code, output = promtool.run(
            self, 'check', 'metrics', stdin='# HELP x_total Help.\n'
                                            '# TYPE x_total gauge\n'
                                            'x_total 1\n')
        self.assertEqual(3, code, output)
        self.assertIn('x_total', output)


class TestMeshesAndClasses(base.BaseTestCase):
    """``etc/examples/direct-nvlink.yaml``: three GPU models, meshes only.

    An HGX H100 4-GPU (one 4-GPU mesh; the example's instance holds one
    GPU), a DGX-1 V100 (meshes of modules 1-4 and 5-8) and a GB200 tray
    (one 4-GPU mesh), each of its own resource class.
    """

    def test_meshes_count_the_instances_they_still_hold(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        topology = os.path.join(fbase.EXAMPLES, 'direct-nvlink.yaml')
        reshaped = os.path.join(tmp, 'reshaped.json')
        prom = os.path.join(tmp, 'nvlink.prom')
        self.assertEqual(0, cli.run(
            self, 'nvlink', 'reshape', '--topology', topology, '--snapshot',
            os.path.join(fbase.EXAMPLES, 'direct-nvlink-snapshot.json'),
            '--save-snapshot', reshaped).code)
        result = cli.run(self, 'nvlink', 'check', '--topology', topology,
                         '--snapshot', reshaped, '--prometheus-textfile',
                         prom)
        self.assertEqual(0, result.code, result.stderr)
        m = metrics(prom)

        def per_size(name, rc):
            return {dict(k[1:])['size']: v for k, v in m.items()
                    if k[0] == 'nvlink_placement_' + name and
                    ('resource_class', rc) in k}
        h100, v100, gb200 = ('CUSTOM_PCI_10DE_2330', 'CUSTOM_PCI_10DE_1DB5',
                             'CUSTOM_PCI_10DE_2941')
        # H100 4-GPU: 3 free GPUs of one mesh hold one pair (one GPU
        # left over), no quad.
        self.assertEqual({'1': 3, '2': 1, '4': 0},
                         per_size('free_domains', h100))
        self.assertEqual({'1': 0, '2': 1, '4': 3},
                         per_size('stranded_gpus', h100))
        # DGX-1, all free: two pairs per quad mesh, both quads, the host.
        self.assertEqual({'1': 8, '2': 4, '4': 2, '8': 1},
                         per_size('free_domains', v100))
        self.assertEqual({'1': 4, '2': 2, '4': 1},
                         per_size('free_domains', gb200))
        self.assertEqual({h100: 4, v100: 8, gb200: 4}, {
            dict(k[1:])['resource_class']: v for k, v in m.items()
            if k[0] == 'nvlink_placement_gpus'})


class TestTwoClassesOnOneHost(base.BaseTestCase):
    """``mixed-01`` (:mod:`tests.edge_fixture`): two classes, one host.

    PCIe H100 pairs {17, 31} {4b, 65} and A100 pairs {98, b1} {ca, e3};
    an instance holds 17 (H100), another both GPUs of {98, b1} (A100).
    Each class's figures count its own GPUs only: the other class's free
    GPUs are neither free nor stranded for it. Counted by hand.
    """

    def test_each_class_counts_its_own_gpus(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        rcs = {a: rc for rc, gpus in fx.MIXED_GPUS.items() for a in gpus}
        document = snapshot.document(
            nova_tree.host_providers(fx.MIXED, rcs), {})
        uuids = novalike.names_in(document)
        for consumer, gpus in ((SPLIT, ['0000:17:00.0']),
                               (SINGLE, ['0000:98:00.0', '0000:b1:00.0'])):
            document['allocations'][consumer] = {
                'project_id': 'p', 'user_id': 'u',
                'consumer_type': 'INSTANCE', 'allocations': {
                    uuids['%s_%s' % (fx.MIXED, a.upper())]: {
                        'resources': {rcs[a]: 1}} for a in gpus}}
        flat, reshaped = (os.path.join(tmp, n)
                          for n in ('flat.json', 'reshaped.json'))
        snapshot.write_file(document, flat)
        argv = ('--topology', fx.TOPOLOGY, '--host', fx.MIXED)
        result = cli.run(self, 'nvlink', 'reshape', *argv, '--snapshot',
                         flat, '--save-snapshot', reshaped)
        self.assertEqual(0, result.code, result.stderr)
        prom = os.path.join(tmp, 'nvlink.prom')
        result = cli.run(self, 'nvlink', 'check', *argv, '--snapshot',
                         reshaped, '--prometheus-textfile', prom, '-f',
                         'json', '-c', 'drift')
        # Drift: only the member traits (this Nova has no device_spec).
        self.assertEqual(2, result.code, result.stderr)
        self.assertEqual({'member-traits'},
                         {r['drift'] for r in json.loads(result.stdout)})
        m = metrics(prom)
        found = {}
        for key, value in m.items():
            labels = dict(key[1:])
            if 'resource_class' in labels and key[0] != (
                    'nvlink_placement_split_instances'):
                found[(key[0][len('nvlink_placement_'):],
                       labels['resource_class'], labels.get('size'))] = value
        h100, a100 = fx.H100_PCIE_RC, fx.A100_RC
        self.assertEqual({
            ('gpus', h100, None): 4, ('gpus', a100, None): 4,
            # H100: 31, 4b, 65 free; pair {4b, 65} fits; 31 stranded.
            ('free_gpus', h100, None): 3,
            ('free_domains', h100, '1'): 3,
            ('free_domains', h100, '2'): 1,
            ('free_domains', h100, '8'): 0,
            ('stranded_gpus', h100, '1'): 0,
            ('stranded_gpus', h100, '2'): 1,
            ('stranded_gpus', h100, '8'): 3,
            # A100: ca, e3 free, one pair.
            ('free_gpus', a100, None): 2,
            ('free_domains', a100, '1'): 2,
            ('free_domains', a100, '2'): 1,
            ('free_domains', a100, '8'): 0,
            ('stranded_gpus', a100, '1'): 0,
            ('stranded_gpus', a100, '2'): 0,
            ('stranded_gpus', a100, '8'): 2,
        }, found)
