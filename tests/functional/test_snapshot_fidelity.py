"""What a snapshot holds comes back: every tree, every aggregate, uuids.

A cloud holds more than GPU hosts: a storage pool shared by aggregate
(DISK_GB, MISC_SHARES_VIA_AGGREGATE), CPU-only compute nodes, aggregates
on nested providers. ``snapshot --snapshot IN -o OUT`` and
``--save-snapshot`` write the whole state the input held; ``--host``
narrows it and says what was left out.
"""

import json
import os

import fixtures
from oslo_db import exception as db_exc
from oslotest import base

from nvlink_placement.placement import embedded
from nvlink_placement.placement import snapshot
from nvlink_placement.placement import snapshot_capacity as capacity
from tests.functional import base as fbase
from tests.functional import cli

POOL = 'd15cd15c-0000-4000-8000-000000000001'
CPU_NODE = 'c0c0c0c0-0000-4000-8000-000000000001'
SHARED = 'a99a0000-0000-4000-8000-000000000001'     # node 1 and the pool
NESTED = 'a99a0000-0000-4000-8000-000000000002'     # one GPU only
INSTANCE = '6f2c3a52-5b1e-4c4a-9f8e-0d6b2f1e7a10'   # in the example file
CPU_ONLY = 'b1b1b1b1-0000-4000-8000-000000000001'
CPU_DISK = 'b1b1b1b1-0000-4000-8000-000000000002'
GPU = '41781b87-395c-596e-9768-a03561f44243'
NODE = '94d2d7ee-cd1e-5ba7-b08a-d93eccd8bcaa'


def whole_cloud():
    """The H100 example plus a sharing pool, a CPU-only node, aggregates."""
    document = snapshot.read_file(fbase.H100_SNAPSHOT)
    by_uuid = {rp['uuid']: rp for rp in document['resource_providers']}
    by_uuid[NODE]['aggregates'] = [SHARED]
    by_uuid[GPU]['aggregates'] = [NESTED]
    document['resource_providers'] += [
        snapshot.provider_entry(
            POOL, 'storage-pool-1', None,
            {'DISK_GB': dict(capacity.INVENTORY_DEFAULTS, total=100000,
                             max_unit=100000)},
            ['MISC_SHARES_VIA_AGGREGATE'], [SHARED]),
        snapshot.provider_entry(
            CPU_NODE, 'cpu-01', None,
            {'VCPU': dict(capacity.INVENTORY_DEFAULTS, total=64, max_unit=64,
                          allocation_ratio=4.0),
             'MEMORY_MB': dict(capacity.INVENTORY_DEFAULTS, total=262144,
                               max_unit=262144)},
            ['COMPUTE_NODE'])]
    # The instance also has its disk on the pool; two CPU-only instances.
    document['allocations'][INSTANCE]['allocations'][POOL] = {
        'resources': {'DISK_GB': 40}}
    document['allocations'][CPU_ONLY] = snapshot.consumer_entry(
        'p', 'u', {CPU_NODE: {'VCPU': 4, 'MEMORY_MB': 8192}},
        consumer_type='INSTANCE')
    document['allocations'][CPU_DISK] = snapshot.consumer_entry(
        'p', 'u', {CPU_NODE: {'VCPU': 2}, POOL: {'DISK_GB': 20}},
        generation=3, consumer_type='INSTANCE')
    snapshot.validate(document)
    return snapshot.document(
        [snapshot.provider_entry(
            rp['uuid'], rp['name'], rp['parent_provider_uuid'],
            {rc: dict(capacity.INVENTORY_DEFAULTS, **inv)
             for rc, inv in rp['inventories'].items()},
            rp['traits'], rp.get('aggregates', ()))
         for rp in document['resource_providers']],
        document['allocations'])


class TestWholeState(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.document = whole_cloud()
        self.path = os.path.join(self.tmp, 'cloud.json')
        snapshot.write_file(self.document, self.path)

    def read(self, name):
        return snapshot.read_file(os.path.join(self.tmp, name))

    def test_snapshot_of_a_snapshot_keeps_every_tree(self):
        out = os.path.join(self.tmp, 'out.json')
        result = cli.run(self, 'nvlink', 'snapshot', '--snapshot', self.path,
                         '-o', out)
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual('', result.stdout)
        self.assertIn('%s: 20 resource providers, 3 consumers\n' % out,
                      result.stderr)
        self.assertNotIn('left out', result.stderr)
        self.assertEqual(self.document, self.read('out.json'))

    def test_save_snapshot_keeps_every_tree(self):
        out = os.path.join(self.tmp, 'after.json')
        result = cli.run(self, 'nvlink', 'reshape', '--topology',
                         fbase.H100_TOPOLOGY, '--snapshot', self.path,
                         '--save-snapshot', out)
        self.assertEqual(0, result.code, result.stderr)
        after = self.read('after.json')
        by_uuid = {rp['uuid']: rp for rp in after['resource_providers']}
        for uuid in (POOL, CPU_NODE):
            self.assertEqual(
                [rp for rp in self.document['resource_providers']
                 if rp['uuid'] == uuid][0], by_uuid[uuid])
        self.assertEqual(self.document['allocations'][CPU_ONLY],
                         after['allocations'][CPU_ONLY])
        self.assertEqual(self.document['allocations'][CPU_DISK],
                         after['allocations'][CPU_DISK])
        self.assertEqual({'DISK_GB': 40}, after['allocations'][INSTANCE][
            'allocations'][POOL]['resources'])
        # The nested aggregate survives the reshape (the GPU moved under a
        # group provider).
        self.assertEqual([NESTED], by_uuid[GPU]['aggregates'])
        self.assertNotEqual(NODE, by_uuid[GPU]['parent_provider_uuid'])

    def test_host_narrows_and_says_what_was_left_out(self):
        out = os.path.join(self.tmp, 'one.json')
        result = cli.run(self, 'nvlink', 'snapshot', '--snapshot', self.path,
                         '--host', 'compute-01', '-o', out)
        self.assertEqual(0, result.code, result.stderr)
        self.assertIn(
            '%s: left out 3 trees not named by --host: compute-02, cpu-01, '
            'storage-pool-1\n' % out, result.stderr)
        self.assertIn(
            '%s: 1 consumer keeps only its allocations inside the exported '
            'trees (also allocated on providers left out): %s\n'
            % (out, INSTANCE), result.stderr)
        narrowed = self.read('one.json')
        self.assertEqual(sorted([NODE, GPU]), sorted(
            narrowed['allocations'][INSTANCE]['allocations']))
        self.assertEqual([INSTANCE], list(narrowed['allocations']))

    def test_member_of_answers_survive_the_round_trip(self):
        out = os.path.join(self.tmp, 'out.json')
        cli.run(self, 'nvlink', 'snapshot', '--snapshot', self.path, '-o',
                out)
        for path in (self.path, out):
            with embedded.EmbeddedPlacement(
                    snapshot.read_file(path)) as client:
                listed = client.get('/resource_providers?member_of=%s'
                                    % NESTED)['resource_providers']
                self.assertEqual([GPU], [rp['uuid'] for rp in listed], path)
                shared = client.get('/resource_providers?member_of=%s'
                                    % SHARED)['resource_providers']
                self.assertEqual(sorted([NODE, POOL]),
                                 sorted(rp['uuid'] for rp in shared))


class TestNonCanonicalUuids(base.BaseTestCase):
    """Uuids spelled otherwise load as Placement would store them.

    Lower case and dashed, in plans and saved snapshots.
    """

    def test_reshape_saves_placements_form(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        document = snapshot.read_file(fbase.H100_SNAPSHOT)
        for rp in document['resource_providers']:
            rp['uuid'] = rp['uuid'].upper().replace('-', '')
            if rp['parent_provider_uuid']:
                rp['parent_provider_uuid'] = '{%s}' % rp[
                    'parent_provider_uuid']
        allocations = document['allocations'][INSTANCE]['allocations']
        document['allocations'][INSTANCE]['allocations'] = {
            'urn:uuid:' + rp: value for rp, value in allocations.items()}
        path = os.path.join(tmp, 'odd.json')
        with open(path, 'w') as f:
            json.dump(document, f)
        out = os.path.join(tmp, 'after.json')
        result = cli.run(self, 'nvlink', 'reshape', '--topology',
                         fbase.H100_TOPOLOGY, '--snapshot', path,
                         '--save-snapshot', out)
        self.assertEqual(0, result.code, result.stderr)
        after = snapshot.read_file(out)
        uuids = [rp['uuid'] for rp in after['resource_providers']]
        self.assertIn(GPU, uuids)
        self.assertIn(NODE, uuids)
        self.assertEqual(uuids, [u.lower() for u in uuids])
        self.assertEqual(sorted([GPU, NODE]), sorted(
            after['allocations'][INSTANCE]['allocations']))


class TestFailedSetUp(base.BaseTestCase):

    def test_a_failed_load_leaves_the_process_able_to_start_another(self):
        # Not validated first (a library user's mistake): the bulk insert
        # fails inside __enter__, which must undo its set-up.
        document = whole_cloud()
        document['resource_providers'][1]['name'] = document[
            'resource_providers'][0]['name']
        placement = embedded.EmbeddedPlacement(document)
        self.assertRaises(db_exc.DBDuplicateEntry, placement.__enter__)
        with embedded.EmbeddedPlacement(whole_cloud()) as client:
            self.assertEqual(20, len(client.get(
                '/resource_providers')['resource_providers']))
