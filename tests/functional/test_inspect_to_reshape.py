"""End to end on the host side: inspect -> topology merge -> reshape."""

import json
import os

import fixtures
from oslotest import base
import yaml

from nvlink_placement.cmd import host_inspect
from nvlink_placement.placement import snapshot
from tests.functional import base as fbase
from tests.functional import cli
from tests.unit.discovery import helpers


def tree_shape(document):
    """name -> (parent name, traits) of a snapshot, without uuids."""
    names = {rp['uuid']: rp['name'] for rp in document['resource_providers']}
    return {rp['name']: (names.get(rp.get('parent_provider_uuid')),
                         rp['traits'])
            for rp in document['resource_providers']}


class TestInspectMergeReshape(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(helpers.HostTempDir()).path

    def path(self, name):
        return os.path.join(self.tmp, name)

    def inspect_fake_host(self):
        """nvlink-host-inspect on the fake board-2 host, FM from fmpm -l."""
        sysfs = self.useFixture(helpers.FakeSysfs())
        with open(self.path('fmpm.json'), 'w') as f:
            f.write(helpers.fmpm_json(helpers.H100_TABLE))
        with open(self.path('map.json'), 'w') as f:
            json.dump({'00000000:%s' % a[5:].upper(): m
                       for a, m in helpers.BOARD2.items()}, f)
        stdout = self.useFixture(fixtures.StringStream('stdout')).stream
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', stdout))
        code = host_inspect.main([
            '--hostname', 'compute-02', '--sysfs-root', sysfs.root,
            '--mapping', self.path('map.json'),
            '--fmpm-json', self.path('fmpm.json'), '--no-nvidia-smi',
            '-o', self.path('compute-02.yaml')])
        self.assertEqual(0, code)

    def test_same_tree_as_the_hand_written_topology(self):
        self.inspect_fake_host()
        with open(fbase.H100_TOPOLOGY) as f:
            example = yaml.safe_load(f)
        with open(self.path('compute-01.yaml'), 'w') as f:
            yaml.safe_dump({'version': 1, 'hosts': {
                'compute-01': example['hosts']['compute-01']}}, f)
        merged = self.path('merged.yaml')
        result = cli.run(self, 'nvlink', 'topology', 'merge',
                         self.path('compute-01.yaml'),
                         self.path('compute-02.yaml'), '-o', merged)
        self.assertEqual(0, result.code, result.stderr)
        # The summary on standard error, as every other command says it.
        self.assertEqual(('', '%s: 2 hosts from 2 fragments\n' % merged),
                         (result.stdout, result.stderr))

        outputs = {}
        for name, topology in (('inspected', merged),
                               ('example', fbase.H100_TOPOLOGY)):
            outputs[name] = self.path(name + '.json')
            result = cli.run(self, 'nvlink', 'reshape', '--topology',
                             topology, '--snapshot', fbase.H100_SNAPSHOT,
                             '--save-snapshot', outputs[name])
            self.assertEqual(0, result.code, result.stderr)
        inspected = tree_shape(snapshot.read_file(outputs['inspected']))
        example = tree_shape(snapshot.read_file(outputs['example']))
        self.assertEqual(example, inspected)
        # Module 6: member 0 of pair {6,8}, 1 of quad 5-8, 5 of the board
        # (the example snapshot holds what Nova writes with nova-config).
        self.assertEqual(('compute-02_nvlink-group-of-2-d',
                          ['COMPUTE_MANAGED_PCI_DEVICE',
                           'CUSTOM_PCI_GROUP2_MEMBER0',
                           'CUSTOM_PCI_GROUP4_MEMBER1',
                           'CUSTOM_PCI_GROUP8_MEMBER5', 'OWNER_NOVA']),
                         inspected['compute-02_0000:9A:00.0'])

    def test_merge_conflict_writes_nothing(self):
        self.inspect_fake_host()
        with open(self.path('compute-02.yaml')) as f:
            fragment = yaml.safe_load(f)
        gpu = fragment['hosts']['compute-02']['gpus']['0000:18:00.0']
        gpu['numa_node'] = 'unknown' if gpu['numa_node'] != 'unknown' else 1
        with open(self.path('other.yaml'), 'w') as f:
            yaml.safe_dump(fragment, f)
        merged = self.path('merged.yaml')
        result = cli.run(self, 'nvlink', 'topology', 'merge',
                         self.path('compute-02.yaml'),
                         self.path('other.yaml'), '-o', merged)
        self.assertEqual(1, result.code)
        self.assertIn('%s: hosts.compute-02 differs from the one in %s'
                      % (self.path('other.yaml'),
                         self.path('compute-02.yaml')), result.stderr)
        self.assertFalse(os.path.exists(merged))
        same = cli.run(self, 'nvlink', 'topology', 'merge',
                       self.path('compute-02.yaml'),
                       self.path('compute-02.yaml'), '-o', merged)
        self.assertEqual(0, same.code, same.stderr)
