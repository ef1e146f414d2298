"""capacity, tree, flatten and check --all through the CLI, on snapshots."""

import json
import os

import fixtures
from oslotest import base

from nvlink_placement.placement import snapshot
from tests.functional import base as fbase
from tests.functional import cli


# The example snapshot's GPUs (H100 SXM, PCI 10de:2330).
RC = 'CUSTOM_PCI_10DE_2330'


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
                          'reserved_gpus': 0, 'broken_domains': 1,
                          'stranded_gpus': 1, 'resource_class': RC,
                          'state': 'reshaped'},
                         rows[('compute-01', 2)])
        self.assertEqual(1, rows[('compute-01', 4)]['fits'])
        self.assertEqual(0, rows[('compute-01', 8)]['fits'])
        self.assertEqual(4, rows[('compute-02', 2)]['fits'])
        self.assertEqual({'host': 'total', 'size': 4, 'fits': 3,
                          'free_gpus': 15, 'used_gpus': 1,
                          'reserved_gpus': 0, 'broken_domains': 1,
                          'stranded_gpus': 3, 'resource_class': RC,
                          'state': 'reshaped'},
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
        # The rows and the exit status say the tree is not reshaped yet.
        self.assertEqual(2, result.code, result.stderr)
        self.assertEqual(['compute-01 1 7 7 1 0 0 0 %s not reshaped' % RC,
                          'compute-01 2 3 7 1 0 1 1 %s not reshaped' % RC,
                          'compute-01 4 1 7 1 0 1 3 %s not reshaped' % RC,
                          'compute-01 8 0 7 1 0 1 7 %s not reshaped' % RC,
                          'total 1 7 7 1 0 0 0 %s 1 host not reshaped' % RC,
                          'total 2 3 7 1 0 1 1 %s 1 host not reshaped' % RC,
                          'total 4 1 7 1 0 1 3 %s 1 host not reshaped' % RC,
                          'total 8 0 7 1 0 1 7 %s 1 host not reshaped' % RC],
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
        self.assertEqual('│   │   ├── compute-01_0000:4C:00.0 module 1 '
                         'free', lines[3])
        self.assertIn('    │   └── compute-01_0000:BB:00.0 module 5 USED',
                      lines)
        self.assertEqual(15, len(lines))
        dot = cli.run(self, 'nvlink', 'tree', '--snapshot', self.after,
                      '--dot')
        self.assertTrue(dot.stdout.startswith('digraph placement {'))
        self.assertEqual(28, dot.stdout.count(' -> '))
        self.assertEqual(1, dot.stdout.count('#ffcc80'))   # one GPU used

    def test_tree_table_shows_no_none(self):
        table = cli.run(self, 'nvlink', 'tree', '--snapshot', self.after,
                        '--host', 'compute-01', '-f', 'table')
        self.assertEqual(0, table.code, table.stderr)
        self.assertNotIn('None', table.stdout)
        rows = json.loads(cli.run(self, 'nvlink', 'tree', '--snapshot',
                                  self.after, '--host', 'compute-01', '-f',
                                  'json').stdout)
        self.assertEqual((None, None, None), (
            rows[0]['parent'], rows[0]['module'], rows[0]['status']))

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
        # The repair acts on the checked snapshot (a new file next to it).
        flatten = ('openstack nvlink flatten --host compute-02 --snapshot %s '
                   '--save-snapshot %s' % (self.after, self.after.replace(
                       '.json', '.repaired.json')))
        self.assertEqual([('compute-02', 'unexpected-group', flatten),
                          ('compute-02', 'wrong-parent', flatten)],
                         kinds)
        self.assertEqual(6 + 8, len(rows))
