"""Every drift ``check`` reports names its repair, and that repair works.

For each drift kind: make it on a snapshot, run ``check``, run the command
its ``repair`` column names (on the snapshot), and ``check`` again: exit 0.
Drift no command repairs says "not automatic" and what to do; the test
does that by hand and checks again. Also ``reshape``'s warnings about what
it leaves, host-name suggestions and ``--prometheus-textfile``.
"""

import json
import os
import shlex
import shutil

import fixtures
from oslotest import base
from prometheus_client import parser as prom_parser
import yaml

from nvlink_placement.plan import repair
from tests.functional import base as fbase
from tests.functional import cli
from tests.functional import writes

OWNER = 'CUSTOM_OWNER_NVLINK_PLACEMENT'
CONSUMER = 'c0ffee00-0000-4000-8000-000000000002'


class CheckTestCase(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        shutil.copytree(os.path.join(fbase.EXAMPLES, 'mappings'),
                        os.path.join(self.tmp, 'mappings'))
        with open(fbase.H100_TOPOLOGY) as f:
            self.doc = yaml.safe_load(f)
        self.topology = self.write_topology(self.doc)
        self.count = 0

    def path(self, name):
        return os.path.join(self.tmp, name)

    def write_topology(self, doc, name='topology.yaml'):
        with open(self.path(name), 'w') as f:
            yaml.safe_dump(doc, f)
        return self.path(name)

    def nvlink(self, *argv):
        return cli.run(self, 'nvlink', *argv)

    def reshaped(self, topology=None):
        """The example snapshot reshaped with ``topology``: its path."""
        out = self.path('reshaped.json')
        result = self.nvlink('reshape', '--topology',
                             topology or self.topology, '--snapshot',
                             fbase.H100_SNAPSHOT, '--save-snapshot', out)
        self.assertEqual(0, result.code, result.stderr)
        return out

    def check(self, snapshot_path, *more, topology=None):
        result = self.nvlink('check', '--topology', topology or self.topology,
                             '--snapshot', snapshot_path, '-f', 'json',
                             *more)
        rows = json.loads(result.stdout) if result.stdout.strip() else []
        # Every command acts on the checked snapshot, never the live cloud;
        # the tests below compare the rest of it.
        tail = ' ' + shlex.join([
            '--snapshot', os.path.abspath(snapshot_path), '--save-snapshot',
            repair.repaired_path(os.path.abspath(snapshot_path))])
        for row in rows:
            if tail in row['repair']:
                row['repair'] = row['repair'].replace(tail, '')
            else:
                self.assertTrue(row['repair'].startswith(repair.MANUAL) and
                                'openstack nvlink' not in row['repair'],
                                row['repair'])
        return result, rows

    def run_repair(self, command, snapshot_path):
        """Run a repair command on ``snapshot_path``; the new snapshot."""
        argv = shlex.split(command)
        self.assertEqual(['openstack', 'nvlink'], argv[:2], command)
        self.count += 1
        out = self.path('repaired-%d.json' % self.count)
        result = cli.run(self, *argv[1:], '--snapshot', snapshot_path,
                         '--save-snapshot', out)
        self.assertEqual(0, result.code, result.stderr)
        return out

    def repair_all(self, snapshot_path, *more, topology=None):
        """check: exit 2; run each named repair; check: exit 0."""
        result, rows = self.check(snapshot_path, *more, topology=topology)
        self.assertEqual(2, result.code, result.stderr)
        commands = list(dict.fromkeys(r['repair'] for r in rows))
        for command in commands:
            snapshot_path = self.run_repair(command, snapshot_path)
        again, left = self.check(snapshot_path, *more, topology=topology)
        self.assertEqual(0, again.code, left)
        self.assertIn('in sync', again.stderr)
        return rows

    def edit_snapshot(self, source, edit):
        with open(source) as f:
            document = json.load(f)
        edit(document)
        self.count += 1
        out = self.path('edited-%d.json' % self.count)
        with open(out, 'w') as f:
            json.dump(document, f)
        return out


def _provider(document, name):
    return next(p for p in document['resource_providers']
                if p['name'] == name)


class TestRepairActsOnTheSnapshot(CheckTestCase):

    def test_pasted_command_writes_next_to_the_snapshot(self):
        flat = self.path('prod.json')
        shutil.copy(fbase.H100_SNAPSHOT, flat)
        result = self.nvlink('check', '--topology', self.topology,
                             '--snapshot', flat, '-f', 'value', '-c',
                             'repair')
        self.assertEqual(2, result.code, result.stderr)
        command = result.stdout.splitlines()[0]
        self.assertIn(shlex.join(['--snapshot', flat, '--save-snapshot',
                                  self.path('prod.repaired.json')]), command)
        argv = shlex.split(command)
        self.assertEqual(0, cli.run(self, *argv[1:]).code)
        with open(fbase.H100_SNAPSHOT, 'rb') as f, open(flat, 'rb') as g:
            self.assertEqual(f.read(), g.read())
        self.assertTrue(os.path.exists(self.path('prod.repaired.json')))


class TestMissingGroupCount(CheckTestCase):

    def test_a_missing_group_counts_once(self):
        # A flat H100 host misses 6 group providers: 12 rows (create, set
        # traits), 6 in the metric.
        prom = self.path('nvlink.prom')
        result, rows = self.check(fbase.H100_SNAPSHOT, '--host', 'compute-01',
                                  '--prometheus-textfile', prom)
        self.assertEqual(2, result.code, result.stderr)
        self.assertEqual(12, sum(r['drift'] == 'missing-group'
                                 for r in rows))
        m = _metrics(prom)
        self.assertEqual(6, m[('nvlink_placement_drift',
                               ('kind', 'missing-group'))])
        self.assertEqual(6, m[('nvlink_placement_host_drift',
                               ('host', 'compute-01'),
                               ('kind', 'missing-group'))])
        self.assertEqual(8, m[('nvlink_placement_drift',
                               ('kind', 'wrong-parent'))])


class TestRepairEveryDrift(CheckTestCase):

    def test_flat_cloud_missing_group_trait_wrong_parent(self):
        rows = self.repair_all(fbase.H100_SNAPSHOT)
        topo = shlex.quote(self.topology)
        self.assertEqual(
            {('', 'missing-trait',
              'openstack nvlink reshape --topology %s' % topo),
             ('compute-01', 'missing-group',
              'openstack nvlink reshape --topology %s --host compute-01'
              % topo),
             ('compute-01', 'wrong-parent',
              'openstack nvlink reshape --topology %s --host compute-01'
              % topo),
             ('compute-02', 'missing-group',
              'openstack nvlink reshape --topology %s --host compute-02'
              % topo),
             ('compute-02', 'wrong-parent',
              'openstack nvlink reshape --topology %s --host compute-02'
              % topo)},
            {(r['host'], r['drift'], r['repair']) for r in rows})

    def test_host_dropped_from_topology_needs_flatten(self):
        # The case: reshape, drop compute-02, check --all.
        after = self.reshaped()
        one = dict(self.doc, hosts={'compute-01': self.doc['hosts'][
            'compute-01']})
        topology = self.write_topology(one, 'one.yaml')
        rows = self.repair_all(after, '--all', topology=topology)
        self.assertEqual({('compute-02', 'unexpected-group',
                           'openstack nvlink flatten --host compute-02'),
                          ('compute-02', 'wrong-parent',
                           'openstack nvlink flatten --host compute-02')},
                         {(r['host'], r['drift'], r['repair'])
                          for r in rows})
        self.assertEqual(6 + 8, len(rows))
        # Without --all the dropped host is not looked at.
        result, rows = self.check(after, topology=topology)
        self.assertEqual(0, result.code, rows)

    def test_all_with_host_keeps_the_other_topology_hosts(self):
        # --host limits what is checked; "outside" still means outside the
        # whole topology: compute-02 is in it, reshaped, and in sync.
        after = self.reshaped()
        result, rows = self.check(after, '--all', '--host', 'compute-01')
        self.assertEqual((0, []), (result.code, rows), result.stderr)

    def test_missing_trait_on_a_group(self):
        group = 'compute-01_nvlink-group-of-2-a'

        def drop(document):
            _provider(document, group)['traits'].remove('CUSTOM_PCI_GROUP2')
        broken = self.edit_snapshot(self.reshaped(), drop)
        rows = self.repair_all(broken)
        self.assertEqual([('set-traits', group, '+CUSTOM_PCI_GROUP2',
                           'missing-trait')],
                         [(r['action'], r['provider'], r['detail'],
                           r['drift']) for r in rows])

    def test_gpu_recreated_under_the_compute_node(self):
        gpu = 'compute-02_0000:3A:00.0'

        def recreate(document):
            root = _provider(document, 'compute-02')
            _provider(document, gpu)['parent_provider_uuid'] = root['uuid']
        rows = self.repair_all(self.edit_snapshot(self.reshaped(), recreate))
        self.assertEqual([('compute-02', gpu, 'wrong-parent',
                           'openstack nvlink reshape --topology %s --host '
                           'compute-02' % shlex.quote(self.topology))],
                         [(r['host'], r['provider'], r['drift'], r['repair'])
                          for r in rows])

    def test_unexpected_group_of_a_topology_host(self):
        def extra(document):
            root = _provider(document, 'compute-01')
            document['resource_providers'].append({
                'name': 'compute-01_nvlink-group-of-2-z',
                'uuid': '5a5a5a5a-0000-4000-8000-00000000000a',
                'parent_provider_uuid': root['uuid'],
                'inventories': {}, 'traits': ['CUSTOM_PCI_GROUP2', OWNER]})
        rows = self.repair_all(self.edit_snapshot(self.reshaped(), extra))
        self.assertEqual([('delete-provider', 'unexpected-group')],
                         [(r['action'], r['drift']) for r in rows])

    def test_missing_then_stale_reservation(self):
        after = self.reshaped()
        gpus = self.doc['hosts']['compute-01']['gpus']
        sick = dict(self.doc)
        sick['hosts'] = dict(self.doc['hosts'], **{'compute-01': dict(
            self.doc['hosts']['compute-01'], gpus=dict(gpus, **{
                '0000:19:00.0': {'module_id': gpus['0000:19:00.0'],
                                 'health': {'status': 'unhealthy',
                                            'reasons': ['XID 79']}}}))})
        sick_topology = self.write_topology(sick, 'sick.yaml')
        result, rows = self.check(after, topology=sick_topology)
        topo = shlex.quote(sick_topology)
        self.assertEqual(
            [('', 'create-trait', 'missing-trait',
              'openstack nvlink reshape --topology %s' % topo),
             ('compute-01', 'set-reserved', 'missing-reservation',
              'openstack nvlink reshape --topology %s --host compute-01'
              % topo)],
            [(r['host'], r['action'], r['drift'], r['repair'])
             for r in rows])
        reserved = self.run_repair(rows[1]['repair'], after)
        again, rows = self.check(reserved, topology=sick_topology)
        self.assertEqual(0, again.code, rows)
        # The GPU is healthy again: the reservation is stale.
        result, rows = self.check(reserved)
        self.assertEqual(['stale-reservation'], [r['drift'] for r in rows])
        self.repair_all(reserved)

    def test_no_health_is_repeated_in_the_repair(self):
        result, rows = self.check(fbase.H100_SNAPSHOT, '--no-health',
                                  '--host', 'compute-02')
        self.assertEqual(2, result.code)
        self.assertEqual({'openstack nvlink reshape --topology %s --host '
                          'compute-02 --no-health'
                          % shlex.quote(self.topology)},
                         {r['repair'] for r in rows})

    def test_unknown_gpu_is_listed_by_hand(self):
        # Host inspection missed module 8 of compute-01: the topology lists
        # seven GPUs, Nova reports eight.
        gpus = dict(self.doc['hosts']['compute-01']['gpus'])
        del gpus['0000:db:00.0']
        seven = dict(self.doc, hosts=dict(self.doc['hosts'], **{
            'compute-01': dict(self.doc['hosts']['compute-01'], gpus=gpus)}))
        self.write_topology(seven)
        name = 'compute-01_0000:DB:00.0'
        after = self.path('seven.json')
        dry = self.nvlink('reshape', '--topology', self.topology,
                          '--snapshot', fbase.H100_SNAPSHOT,
                          '--save-snapshot', after)
        self.assertEqual(0, dry.code, dry.stderr)
        # reshape (and its dry run) says it leaves the GPU flat.
        self.assertIn('compute-01: Nova PCI provider %s (0000:db:00.0) is '
                      'not in the topology: it stays flat, in no NVLink '
                      'group' % name, dry.stderr)
        result, rows = self.check(after)
        self.assertEqual(2, result.code)
        reshape = ('openstack nvlink reshape --topology %s --host compute-01'
                   % shlex.quote(self.topology))
        self.assertEqual(
            [('compute-01', '', name, 'unknown-gpu',
              'not automatic: list 0000:db:00.0 under hosts.compute-01 in '
              '%s (in an NVLink group, or excluded), then: %s'
              % (self.topology, reshape))],
            [(r['host'], r['action'], r['provider'], r['drift'],
              r['repair']) for r in rows if r['drift'] != 'member-traits'])
        # Seven GPUs make a 7-GPU whole host: the member traits Nova writes
        # for eight differ (the repair is Nova's device_spec).
        self.assertEqual(
            {'compute-01'}, {r['host'] for r in rows
                             if r['drift'] == 'member-traits'})
        # What the repair says, done: list the GPU, run the command.
        self.write_topology(self.doc)
        unknown = [r for r in rows if r['drift'] == 'unknown-gpu']
        fixed = self.run_repair(unknown[0]['repair'].split('then: ')[1],
                                after)
        result, rows = self.check(fixed)
        self.assertEqual(0, result.code, rows)

    def test_excluded_gpu_with_a_nova_provider_is_drift(self):
        # Module 8 of compute-01 serves MIG now: the topology excludes it,
        # but nova-compute still has a device_spec entry matching it.
        gpus = dict(self.doc['hosts']['compute-01']['gpus'])
        gpus['0000:db:00.0'] = {'module_id': 8, 'excluded': 'MIG enabled'}
        self.write_topology(dict(self.doc, hosts=dict(self.doc['hosts'], **{
            'compute-01': dict(self.doc['hosts']['compute-01'],
                               gpus=gpus)})))
        after = self.reshaped()
        result, rows = self.check(after)
        self.assertEqual(2, result.code, result.stderr)
        excluded = [r for r in rows if r['drift'] == 'excluded-gpu']
        command = ('openstack nvlink nova-config --topology %s --host '
                   'compute-01 --alias ALIAS --ini' % self.topology)
        self.assertEqual(
            [('compute-01', '', 'compute-01_0000:DB:00.0',
              'not automatic: nova-compute on compute-01 passes the excluded '
              'GPU 0000:db:00.0 through: set its [pci] device_spec as %s '
              'prints (no entry matches an excluded GPU), restart '
              'nova-compute (Nova then deletes the provider; not while an '
              'instance holds it), then check again' % command)],
            [(r['host'], r['action'], r['provider'], r['repair'])
             for r in excluded])
        # Done by hand: Nova restarted without a matching entry deletes
        # the provider (and Nova rewrites the others' member traits).
        with open(after) as f:
            doc = json.load(f)
        doc['resource_providers'] = [
            rp for rp in doc['resource_providers']
            if rp['name'] != 'compute-01_0000:DB:00.0']
        fixed = self.path('fixed.json')
        with open(fixed, 'w') as f:
            json.dump(doc, f)
        result, rows = self.check(fixed)
        self.assertEqual([], [r for r in rows
                              if r['drift'] == 'excluded-gpu'])

    def test_split_allocation_is_not_automatic(self):
        after = self.reshaped()
        names = ('compute-02_0000:3A:00.0', 'compute-02_0000:2A:00.0')

        def split(document):
            root = _provider(document, 'compute-02')
            gpu = _provider(document, names[0])
            rc = next(iter(gpu['inventories']))
            document['allocations'][CONSUMER] = {
                'allocations': dict(
                    {_provider(document, n)['uuid']: {'resources': {rc: 1}}
                     for n in names},
                    **{root['uuid']: {'resources': {'VCPU': 8}}}),
                'consumer_type': 'INSTANCE',
                'project_id': '8a7f3c1e2d4b4f6a9c0e1b2d3f4a5b6c',
                'user_id': '3e1d5c7b9a0f4e2d8c6b4a2f0e9d7c5b'}
        broken = self.edit_snapshot(after, split)
        result, rows = self.check(broken)
        self.assertEqual(2, result.code, result.stderr)
        self.assertEqual(
            [('compute-02', ', '.join(sorted(names)), 'split-allocation',
              'not automatic: move instance %s into one NVLink domain: '
              'openstack server migrate %s (or resize it to a flavor of '
              'this tool); no Placement write can, its allocation stays '
              'where it is' % (CONSUMER, CONSUMER))],
            [(r['host'], r['provider'], r['drift'], r['repair'])
             for r in rows])

        def migrated(document):
            # What a migration leaves: the GPUs of one pair (modules 1, 3).
            allocations = document['allocations'][CONSUMER]['allocations']
            rc = next(iter(allocations[_provider(document,
                                                 names[1])['uuid']][
                'resources']))
            del allocations[_provider(document, names[1])['uuid']]
            allocations[_provider(document, 'compute-02_0000:5D:00.0')[
                'uuid']] = {'resources': {rc: 1}}
        result, rows = self.check(self.edit_snapshot(broken, migrated))
        self.assertEqual(0, result.code, rows)


class TestHostNames(CheckTestCase):

    def test_did_you_mean(self):
        hosts = self.doc['hosts']
        renamed = dict(self.doc, hosts={
            'compute-01.example.com': hosts['compute-01'],
            'COMPUTE-02': hosts['compute-02']})
        topology = self.write_topology(renamed, 'fqdn.yaml')
        for argv in (('reshape', '--dry-run'), ('check',)):
            with writes.nothing_written(self):
                result = self.nvlink(argv[0], '--topology', topology,
                                     '--snapshot', fbase.H100_SNAPSHOT,
                                     *argv[1:])
            self.assertEqual(1, result.code, result.stderr)
            self.assertIn("compute-01.example.com: no compute node resource "
                          "provider named 'compute-01.example.com' in "
                          "Placement (did you mean 'compute-01'?)",
                          result.stderr)
            self.assertIn("(did you mean 'compute-02'?)", result.stderr)
        tree = self.nvlink('tree', '--snapshot', fbase.H100_SNAPSHOT,
                           '--host', 'compute01')
        self.assertEqual(1, tree.code)
        self.assertIn("no compute node resource provider named 'compute01' "
                      "(did you mean 'compute-01' or 'compute-02'?)",
                      tree.stderr)


def _metrics(path):
    with open(path) as f:
        text = f.read()
    samples = {}
    for family in prom_parser.text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name,) + tuple(sorted(sample.labels.items()))
            samples[key] = sample.value
    return samples


class TestPrometheusTextfile(CheckTestCase):

    def test_drift_then_in_sync_then_error(self):
        prom = self.path('nvlink.prom')
        one = dict(self.doc, hosts={'compute-01': self.doc['hosts'][
            'compute-01']})
        topology = self.write_topology(one, 'one.yaml')
        after = self.reshaped()
        result, rows = self.check(after, '--all', '--prometheus-textfile',
                                  prom, topology=topology)
        self.assertEqual(2, result.code, result.stderr)
        m = _metrics(prom)
        self.assertEqual(1, m[('nvlink_placement_check_success',)])
        self.assertEqual(2, m[('nvlink_placement_hosts_checked',)])
        self.assertEqual(1, m[('nvlink_placement_hosts_in_sync',)])
        self.assertEqual(0, m[('nvlink_placement_hosts_not_in_topology',)])
        self.assertEqual(8, m[('nvlink_placement_drift',
                               ('kind', 'wrong-parent'))])
        self.assertEqual(6, m[('nvlink_placement_drift',
                               ('kind', 'unexpected-group'))])
        self.assertEqual(0, m[('nvlink_placement_drift',
                               ('kind', 'split-allocation'))])
        self.assertEqual(6, m[('nvlink_placement_host_drift',
                               ('host', 'compute-02'),
                               ('kind', 'unexpected-group'))])
        self.assertNotIn(('nvlink_placement_host_drift',
                          ('host', 'compute-01'), ('kind', 'wrong-parent')),
                         m)
        first = m[('nvlink_placement_check_last_success_timestamp_seconds',)]
        self.assertGreater(m[('nvlink_placement_check_duration_seconds',)],
                           0)

        flat = self.run_repair('openstack nvlink flatten --host compute-02',
                               after)
        result, rows = self.check(flat, '--all', '--prometheus-textfile',
                                  prom, topology=topology)
        self.assertEqual(0, result.code, rows)
        m = _metrics(prom)
        self.assertEqual(1, m[('nvlink_placement_hosts_checked',)])
        self.assertEqual(1, m[('nvlink_placement_hosts_in_sync',)])
        self.assertEqual(1, m[('nvlink_placement_hosts_not_in_topology',)])
        self.assertEqual({0}, {v for k, v in m.items()
                               if k[0] == 'nvlink_placement_drift'})
        self.assertFalse([k for k in m
                          if k[0] == 'nvlink_placement_host_drift'])
        second = m[('nvlink_placement_check_last_success_timestamp_seconds',)]
        self.assertGreaterEqual(second, first)

        # An error (a host Placement does not know): success 0, the last
        # success kept from the earlier file, nothing about hosts or drift.
        bad = self.write_topology(dict(self.doc, hosts={
            'compute-09': self.doc['hosts']['compute-01']}), 'bad.yaml')
        result, rows = self.check(flat, '--prometheus-textfile', prom,
                                  topology=bad)
        self.assertEqual(1, result.code)
        m = _metrics(prom)
        self.assertEqual(0, m[('nvlink_placement_check_success',)])
        self.assertEqual(second, m[
            ('nvlink_placement_check_last_success_timestamp_seconds',)])
        self.assertNotIn(('nvlink_placement_hosts_checked',), m)
        self.assertEqual([], [n for n in os.listdir(self.tmp)
                              if n.endswith('.tmp')])

    def test_error_without_earlier_file(self):
        prom = self.path('new.prom')
        result, rows = self.check(self.path('missing.json'),
                                  '--prometheus-textfile', prom)
        self.assertEqual(1, result.code)
        m = _metrics(prom)
        self.assertEqual(0, m[('nvlink_placement_check_success',)])
        self.assertNotIn(
            ('nvlink_placement_check_last_success_timestamp_seconds',), m)

    def test_unwritable_path_is_an_error(self):
        prom = self.path('no-such-dir/nvlink.prom')
        result, rows = self.check(fbase.H100_SNAPSHOT,
                                  '--prometheus-textfile', prom)
        self.assertEqual(1, result.code)
        self.assertIn('cannot write %s' % prom, result.stderr)
        self.assertNotIn('Traceback', result.stderr)
