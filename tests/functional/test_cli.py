"""The OSC commands, in process, on snapshots (no cloud)."""

import json
import os
import shutil

import fixtures
from oslotest import base

from nvlink_placement.placement import snapshot
from tests.functional import base as fbase
from tests.functional import cli
from tests.functional import writes

UUID1 = '11111111-1111-4111-8111-111111111111'
UUID9 = '99999999-9999-4999-8999-999999999999'


class TestTopologyCommands(base.BaseTestCase):

    def test_validate_ok(self):
        result = cli.run(self, 'nvlink', 'topology', 'validate',
                         fbase.H100_TOPOLOGY)
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual('%s: valid: 2 hosts, 16 GPUs, 12 groups\n'
                         % fbase.H100_TOPOLOGY, result.stdout)

    def test_validate_errors_without_traceback(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'bad.yaml')
        with open(path, 'w') as f:
            f.write('version: 1\nhosts:\n  c1:\n    board: nope\n'
                    '    gpus: {"0000:01:00.0": 1}\n')
        result = cli.run(self, 'nvlink', 'topology', 'validate', path)
        self.assertEqual(1, result.code)
        self.assertIn("%s: hosts.c1.board: unknown board 'nope'" % path,
                      result.stderr)
        self.assertNotIn('Traceback', result.stderr)

    def test_show_table(self):
        result = cli.run(self, 'nvlink', 'topology', 'show',
                         fbase.H100_TOPOLOGY, '--host', 'compute-02',
                         '-c', 'group', '-c', 'modules')
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(
            ['| compute-02_nvlink-group-of-4-a | 2, 4, 1, 3 |',
             '| compute-02_nvlink-group-of-4-b | 6, 8, 5, 7 |',
             '| compute-02_nvlink-group-of-2-a | 1, 3       |',
             '| compute-02_nvlink-group-of-2-b | 2, 4       |',
             '| compute-02_nvlink-group-of-2-c | 5, 7       |',
             '| compute-02_nvlink-group-of-2-d | 6, 8       |'],
            result.stdout.splitlines()[3:-1])

    def test_show_json(self):
        result = cli.run(self, 'nvlink', 'topology', 'show',
                         fbase.H100_TOPOLOGY, '--host', 'compute-01',
                         '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        rows = json.loads(result.stdout)
        self.assertEqual(6, len(rows))
        self.assertEqual({'host': 'compute-01',
                          'group': 'compute-01_nvlink-group-of-2-a',
                          'size': 2, 'trait': 'CUSTOM_PCI_GROUP2',
                          'members': ['0000:4c:00.0', '0000:5d:00.0'],
                          'modules': [1, 3]}, rows[2])


class TestReshapeCommands(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def test_dry_run_then_apply_then_check(self):
        with writes.nothing_written(self):
            dry = cli.run(self, 'nvlink', 'reshape', '--topology',
                          fbase.H100_TOPOLOGY, '--snapshot',
                          fbase.H100_SNAPSHOT, '--dry-run', '-f', 'json')
        self.assertEqual(0, dry.code, dry.stderr)
        rows = json.loads(dry.stdout)
        self.assertEqual(43, len(rows))
        self.assertEqual({'host': 'compute-01', 'action': 'move-provider',
                          'provider': 'compute-01_0000:4C:00.0',
                          'parent': 'compute-01_nvlink-group-of-2-a',
                          'detail': '0000:4c:00.0 module 1'},
                         [r for r in rows
                          if r['provider'] == 'compute-01_0000:4C:00.0'][0])

        after = os.path.join(self.tmp, 'after.json')
        applied = cli.run(self, 'nvlink', 'reshape', '--topology',
                          fbase.H100_TOPOLOGY, '--snapshot',
                          fbase.H100_SNAPSHOT, '--save-snapshot', after,
                          '-f', 'json')
        self.assertEqual(0, applied.code, applied.stderr)
        self.assertEqual(rows, json.loads(applied.stdout))

        saved = snapshot.read_file(after)
        original = snapshot.read_file(fbase.H100_SNAPSHOT)
        self.assertEqual(original['allocations'], saved['allocations'])
        self.assertEqual(30, len(saved['resource_providers']))
        before_uuids = {rp['uuid'] for rp in original['resource_providers']}
        self.assertTrue(before_uuids <= {rp['uuid'] for rp in
                                         saved['resource_providers']})

        check = cli.run(self, 'nvlink', 'check', '--topology',
                        fbase.H100_TOPOLOGY, '--snapshot', after)
        self.assertEqual(0, check.code, check.stderr)
        drift = cli.run(self, 'nvlink', 'check', '--topology',
                        fbase.H100_TOPOLOGY, '--snapshot',
                        fbase.H100_SNAPSHOT, '-f', 'value', '-c', 'action')
        self.assertEqual(2, drift.code, drift.stderr)
        self.assertEqual(43, len(drift.stdout.splitlines()))

    def test_unknown_host_is_an_error(self):
        result = cli.run(self, 'nvlink', 'reshape', '--topology',
                         fbase.H100_TOPOLOGY, '--host', 'compute-77',
                         '--snapshot', fbase.H100_SNAPSHOT)
        self.assertEqual(1, result.code)
        self.assertIn("no host 'compute-77' in the topology (did you mean "
                      "'compute-02' or 'compute-01'?)", result.stderr)

    def test_unknown_host_short_name_and_far_name(self):
        # Short name against the FQDN the topology (and Nova) uses: named.
        topology = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                't.yaml')
        with open(fbase.H100_TOPOLOGY) as f:
            text = f.read().replace('compute-02:', 'gpu-b.example.com:')
        with open(topology, 'w') as f:
            f.write(text)
        shutil.copytree(os.path.join(fbase.EXAMPLES, 'mappings'),
                        os.path.join(os.path.dirname(topology), 'mappings'))
        near = cli.run(self, 'nvlink', 'check', '--topology', topology,
                       '--host', 'gpu-b', '--snapshot', fbase.H100_SNAPSHOT)
        self.assertEqual(1, near.code, near.stderr)
        self.assertIn("%s: no host 'gpu-b' in the topology (did you mean "
                      "'gpu-b.example.com'?)" % topology, near.stderr)
        # Nothing close: the hosts are listed.
        far = cli.run(self, 'nvlink', 'snapshot', '--from-topology',
                      topology, '--host', 'zzz', '-o', os.devnull)
        self.assertEqual(1, far.code, far.stderr)
        self.assertIn("%s: no host 'zzz' in the topology (hosts: "
                      "'compute-01', 'gpu-b.example.com')" % topology,
                      far.stderr)
        self.assertNotIn('Traceback', far.stderr)

    def test_save_snapshot_needs_snapshot(self):
        result = cli.run(self, 'nvlink', 'reshape', '--topology',
                         fbase.H100_TOPOLOGY, '--save-snapshot', 'x.json')
        self.assertEqual(3, result.code)     # a usage error
        self.assertIn('--save-snapshot needs --snapshot', result.stderr)

    def test_bad_snapshot(self):
        path = os.path.join(self.tmp, 's.json')
        with open(path, 'w') as f:
            json.dump({'format': 'nvlink-placement-snapshot', 'version': 1,
                       'resource_providers': [
                           {'uuid': UUID1, 'name': 'a',
                            'parent_provider_uuid': UUID9}]}, f)
        result = cli.run(self, 'nvlink', 'check', '--topology',
                         fbase.H100_TOPOLOGY, '--snapshot', path)
        self.assertEqual(1, result.code)
        self.assertIn("%s: resource_providers[0].parent_provider_uuid: "
                      "parent %s of 'a' is not in the snapshot"
                      % (path, UUID9), result.stderr)

    def test_plan_error_lists_problems(self):
        topo = os.path.join(self.tmp, 't.yaml')
        with open(topo, 'w') as f:
            f.write('version: 1\nhosts:\n  compute-09:\n    groups:\n'
                    '      - ["0000:01:00.0", "0000:02:00.0"]\n'
                    '      - ["0000:03:00.0", "0000:04:00.0"]\n')
        with writes.nothing_written(self):
            result = cli.run(self, 'nvlink', 'reshape', '--topology', topo,
                             '--snapshot', fbase.H100_SNAPSHOT)
        self.assertEqual(1, result.code)
        self.assertIn('the plan is invalid; nothing was written',
                      result.stderr)
        self.assertIn("no compute node resource provider named "
                      "'compute-09'", result.stderr)
