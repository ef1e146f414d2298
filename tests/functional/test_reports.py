"""capacity, tree, flatten and check --all through the CLI, on snapshots."""

import json
import os

import fixtures
from oslotest import base

from nvlink_placement.placement import snapshot
from tests.functional import base as fbase
from tests.functional import cli


class TestReports(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.after = os.path.join(self.tmp, 'after.json')
        result = cli.run(self, 'nvlink', 'reshape', '--topology',
                         fbase.H100_TOPOLOGY, '--snapshot',
                         fbase.H100_SNAPSHOT, '--save-snapshot', self.after)
        self.assertEqual(0, result.code, result.stderr)

    def test_capacity_from_tree_and_from_topology(self):
        by_tree = cli.run(self, 'nvlink', 'capacity', '--snapshot',
                          self.after, '-f', 'json')
        self.assertEqual(0, by_tree.code, by_tree.stderr)
        rows = {(r['host'], r['size']): r for r in json.loads(by_tree.stdout)}
        # compute-01 runs a 1-GPU instance on module 5 (pair {5,7}).
        self.assertEqual({'host': 'compute-01', 'size': 2, 'fits': 3,
                          'free_gpus': 7, 'used_gpus': 1,
                          'reserved_gpus': 0, 'broken_domains': 1},
                         rows[('compute-01', 2)])
        self.assertEqual(1, rows[('compute-01', 4)]['fits'])
        self.assertEqual(0, rows[('compute-01', 8)]['fits'])
        self.assertEqual(4, rows[('compute-02', 2)]['fits'])
        self.assertEqual({'host': 'total', 'size': 4, 'fits': 3,
                          'free_gpus': 15, 'used_gpus': 1,
                          'reserved_gpus': 0, 'broken_domains': 1},
                         rows[('total', 4)])
        by_topology = cli.run(self, 'nvlink', 'capacity', '--snapshot',
                              self.after, '--topology', fbase.H100_TOPOLOGY,
                              '-f', 'json')
        self.assertEqual(json.loads(by_tree.stdout),
                         json.loads(by_topology.stdout))

    def test_capacity_of_flat_tree_with_topology(self):
        # Before reshape, the topology still says which domains are free.
        result = cli.run(self, 'nvlink', 'capacity', '--snapshot',
                         fbase.H100_SNAPSHOT, '--topology',
                         fbase.H100_TOPOLOGY, '--host', 'compute-01',
                         '-f', 'value')
        self.assertEqual(['compute-01 1 7 7 1 0 0',
                          'compute-01 2 3 7 1 0 1',
                          'compute-01 4 1 7 1 0 1',
                          'compute-01 8 0 7 1 0 1',
                          'total 1 7 7 1 0 0',
                          'total 2 3 7 1 0 1',
                          'total 4 1 7 1 0 1',
                          'total 8 0 7 1 0 1'],
                         result.stdout.splitlines())

    def test_tree_text_and_dot(self):
        text = cli.run(self, 'nvlink', 'tree', '--snapshot', self.after,
                       '--topology', fbase.H100_TOPOLOGY, '--host',
                       'compute-01')
        self.assertEqual(0, text.code, text.stderr)
        lines = text.stdout.splitlines()
        self.assertEqual('compute-01', lines[0])
        self.assertEqual('├── compute-01_nvlink-group-of-4-a '
                         '[CUSTOM_PCI_GROUP4]', lines[1])
        self.assertEqual('│   │   ├── compute-01_0000:4C:00.0 '
                         '[CUSTOM_PCI_GROUP2_MEMBER0, '
                         'CUSTOM_PCI_GROUP4_MEMBER0, '
                         'CUSTOM_PCI_GROUP8_MEMBER0] module 1 free', lines[3])
        self.assertIn('    │   └── compute-01_0000:BB:00.0 '
                      '[CUSTOM_PCI_GROUP2_MEMBER0, CUSTOM_PCI_GROUP4_MEMBER0, '
                      'CUSTOM_PCI_GROUP8_MEMBER4] module 5 USED', lines)
        self.assertEqual(15, len(lines))
        dot = cli.run(self, 'nvlink', 'tree', '--snapshot', self.after,
                      '--dot')
        self.assertTrue(dot.stdout.startswith('digraph placement {'))
        self.assertEqual(28, dot.stdout.count(' -> '))
        self.assertEqual(1, dot.stdout.count('#ffcc80'))   # one GPU used

    def test_flatten_cli_and_check_all(self):
        flat = os.path.join(self.tmp, 'flat.json')
        need = cli.run(self, 'nvlink', 'flatten', '--snapshot', self.after)
        self.assertEqual(3, need.code)     # a usage error
        self.assertIn('--all', need.stderr)
        result = cli.run(self, 'nvlink', 'flatten', '--all', '--snapshot',
                         self.after, '--save-snapshot', flat, '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(28, len(json.loads(result.stdout)))
        original = snapshot.read_file(fbase.H100_SNAPSHOT)
        restored = snapshot.read_file(flat)
        self.assertEqual(original, restored)

        one = os.path.join(self.tmp, 'one.yaml')
        with open(fbase.H100_TOPOLOGY) as f:
            text = f.read()
        with open(one, 'w') as f:
            f.write(text.split('  compute-02:')[0])
        check = cli.run(self, 'nvlink', 'check', '--topology', one,
                        '--snapshot', self.after, '--all', '-f', 'json')
        self.assertEqual(2, check.code, check.stderr)
        rows = json.loads(check.stdout)
        kinds = sorted({(r['host'], r['drift'], r['repair']) for r in rows})
        # The dropped host's groups: flatten repairs them (its GPUs, flat
        # again after it, are not drift: the topology does not list them).
        self.assertEqual([('compute-02', 'unexpected-group',
                           'openstack nvlink flatten --host compute-02'),
                          ('compute-02', 'wrong-parent',
                           'openstack nvlink flatten --host compute-02')],
                         kinds)
        self.assertEqual(6 + 8, len(rows))
