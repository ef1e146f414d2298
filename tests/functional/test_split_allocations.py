"""Instances whose GPUs are in more than one NVLink domain of their size.

Placement accepts any allocation; an instance placed before the reshape
(or by a flavor without the NVLink keys) can hold GPUs that the topology
puts in different domains. ``check`` reports it (``split-allocation``,
exit 2) and ``reshape`` warns; the instance and its allocation stay.
"""

import json
import os

import fixtures
from oslotest import base as oslotest_base

from nvlink_placement.flavors import servers
from nvlink_placement.placement import snapshot
from nvlink_placement.plan import actions as act
from nvlink_placement.plan import desired
from nvlink_placement.plan import run
from nvlink_placement.topology import loader
from tests.functional import base
from tests.functional import cli
from tests.functional import test_day2
from tests import novalike

HOST = 'compute-01'
# Module ids on novalike.BOARD1: pairs {1,3} {2,4} {5,7} {6,8}, quads
# {1..4} {5..8}.
MODULE = {m: a.upper() for a, m in novalike.BOARD1.items()}
SPLIT_PAIR = 'a1a1a1a1-0000-4000-8000-000000000001'     # modules 1, 2
GOOD_PAIR = 'a1a1a1a1-0000-4000-8000-000000000002'      # modules 5, 7
SPLIT_QUAD = 'a1a1a1a1-0000-4000-8000-000000000003'     # modules 3, 4, 6, 8
SINGLE = 'a1a1a1a1-0000-4000-8000-000000000004'
VF1 = 'a1a1a1a1-0000-4000-8000-000000000005'
VF2 = 'a1a1a1a1-0000-4000-8000-000000000006'
VF3 = 'a1a1a1a1-0000-4000-8000-000000000008'
MIGRATION = 'a1a1a1a1-0000-4000-8000-000000000007'
H100 = ('h100',)


def gpu(module):
    return '%s_%s' % (HOST, MODULE[module])


class TestSplitAllocations(base.PlacementTestCase):

    def setUp(self):
        super().setUp()
        self.names = novalike.seed_host(self.client, HOST, novalike.BOARD1)
        for consumer, modules in ((SPLIT_PAIR, (1, 2)), (GOOD_PAIR, (5, 7)),
                                  (SPLIT_QUAD, (3, 4, 6, 8))):
            novalike.allocate(self.client, consumer, {
                self.names[gpu(m)]: {novalike.GPU_RC: 1} for m in modules})
        topology = loader.parse(test_day2.h100_topology(hosts=(HOST,)),
                                base.H100_TOPOLOGY)
        self.hosts = [desired.from_topology(h)
                      for h in topology.hosts.values()]

    def test_check_reports_each_split_instance(self):
        hosts = self.hosts
        findings = run.run(self.client, hosts, apply=False,
                           allocations=run.ALL_HOSTS).findings
        self.assertEqual(
            [(HOST, '%s, %s' % (gpu(2), gpu(1)), act.SPLIT_ALLOCATION,
              'consumer %s holds 2 GPUs that share no NVLink domain of size '
              '2 (they are in %s_nvlink-group-of-2-a, '
              '%s_nvlink-group-of-2-b): the instance keeps running without '
              'NVLink between them; resize or migrate it to repair'
              % (SPLIT_PAIR, HOST, HOST)),
             (HOST, ', '.join(sorted(gpu(m) for m in (3, 4, 6, 8))),
              act.SPLIT_ALLOCATION,
              'consumer %s holds 4 GPUs that share no NVLink domain of size '
              '4 (they are in %s_nvlink-group-of-4-a, '
              '%s_nvlink-group-of-4-b): the instance keeps running without '
              'NVLink between them; resize or migrate it to repair'
              % (SPLIT_QUAD, HOST, HOST))],
            [(f.host, f.provider, f.drift, f.detail) for f in findings])
        # The same after the reshape: the tree is in sync, the instances
        # are still split.
        run.run(self.client, hosts)
        again = run.run(self.client, hosts, apply=False,
                        allocations=run.ALL_HOSTS)
        self.assertEqual([], again.actions)
        self.assertEqual([(f.provider, f.detail) for f in findings],
                         [(f.provider, f.detail) for f in again.findings])

    def test_sizes_without_domains_of_their_own(self):
        # Three GPUs are judged by the quads: across them is split, inside
        # one is not.
        for consumer in (SPLIT_PAIR, GOOD_PAIR, SPLIT_QUAD):
            self.client.request('DELETE', '/allocations/%s' % consumer,
                                expect=(204,))
        across, inside = SPLIT_PAIR, GOOD_PAIR
        for consumer, modules in ((across, (1, 2, 5)), (inside, (6, 7, 8))):
            novalike.allocate(self.client, consumer, {
                self.names[gpu(m)]: {novalike.GPU_RC: 1} for m in modules})
        findings = run.run(self.client, self.hosts, apply=False,
                           allocations=run.ALL_HOSTS).findings
        self.assertEqual(
            [(', '.join(sorted(gpu(m) for m in (1, 2, 5))),
              'consumer %s holds 3 GPUs that share no NVLink domain of size '
              '4 (they are in %s_nvlink-group-of-4-a, '
              '%s_nvlink-group-of-4-b): the instance keeps running without '
              'NVLink between them; resize or migrate it to repair'
              % (across, HOST, HOST))],
            [(f.provider, f.detail) for f in findings])

    def test_reads_only_the_gpus_in_use(self):
        hosts = self.hosts
        self.client.requests.clear()
        run.run(self.client, hosts, apply=False, allocations=run.ALL_HOSTS)
        # 2 to plan (no trait of ours exists yet), the resource classes,
        # the free GPUs of the one GPU class, the node's allocations (no
        # consumer there: these hold GPUs only), then the allocations of
        # the 8 GPUs in use that no consumer of the node accounts for.
        self.assertEqual({'GET': 2 + 2 + 1 + 8}, dict(self.client.requests))
        run.run(self.client, hosts)
        self.client.requests.clear()
        # reshape looks only at hosts it changes: none now.
        run.run(self.client, hosts, allocations=run.CHANGED_HOSTS)
        self.assertEqual({'GET': 5}, dict(self.client.requests))

    def test_one_read_per_instance_not_per_gpu(self):
        # Instances as Nova writes them: VCPU and memory on the node, the
        # GPUs below. The node's allocations name them; one read each
        # gives all their GPUs.
        for consumer in (SPLIT_PAIR, GOOD_PAIR, SPLIT_QUAD):
            body = self.client.get('/allocations/%s' % consumer)
            allocations = {rp: a['resources']
                           for rp, a in body['allocations'].items()}
            allocations[self.names[HOST]] = {'VCPU': 4, 'MEMORY_MB': 1024}
            self.client.request('DELETE', '/allocations/%s' % consumer,
                                expect=(204,))
            novalike.allocate(self.client, consumer, allocations)
        self.client.requests.clear()
        findings = run.run(self.client, self.hosts, apply=False,
                           allocations=run.ALL_HOSTS).findings
        self.assertEqual([SPLIT_PAIR, SPLIT_QUAD],
                         [f.consumer for f in findings])
        # Planning 2, free GPUs 2, the node 1, the 3 instances 3 (was one
        # per GPU in use: 8).
        self.assertEqual({'GET': 2 + 2 + 1 + 3}, dict(self.client.requests))

    def as_nova_writes(self, consumers):
        """Reallocate ``{consumer: modules}`` with VCPU and memory."""
        for consumer in (SPLIT_PAIR, GOOD_PAIR, SPLIT_QUAD):
            self.client.request('DELETE', '/allocations/%s' % consumer,
                                expect=(204,))
        for consumer, modules in consumers.items():
            allocations = {self.names[gpu(m)]: {novalike.GPU_RC: 1}
                           for m in modules}
            allocations[self.names[HOST]] = {'VCPU': 4, 'MEMORY_MB': 1024}
            novalike.allocate(self.client, consumer, allocations)

    def split_with(self, listed):
        """Split consumers found with Nova's ``listed`` servers; requests."""
        self.client.requests.clear()
        findings = run.run(self.client, self.hosts, apply=False,
                           allocations=run.ALL_HOSTS,
                           servers=servers.by_node(listed)).findings
        return [f.consumer for f in findings], dict(self.client.requests)

    def test_nova_servers_one_read_per_multi_gpu_server(self):
        # Nova's server list names the instances and their flavors' PCI
        # devices: the 1-GPU server is not read, nor is the node.
        self.as_nova_writes({SPLIT_PAIR: (1, 2), SPLIT_QUAD: (3, 4, 6, 8),
                             SINGLE: (5,)})
        # Planning 2, free GPUs 2, the two multi-GPU servers 2.
        self.assertEqual(([SPLIT_PAIR, SPLIT_QUAD], {'GET': 2 + 2 + 2}),
                         self.split_with([
                             servers.Server(SPLIT_PAIR, HOST, 2, H100),
                             servers.Server(SPLIT_QUAD, HOST, 4, H100),
                             servers.Server(SINGLE, HOST, 1, H100),
                             servers.Server('elsewhere', 'compute-99', 2,
                                            H100)]))

    def test_nova_servers_unknown_flavor_is_read(self):
        self.as_nova_writes({SPLIT_PAIR: (1, 2), SINGLE: (5,)})
        # Planning 2, free GPUs 2, the server of unknown flavor 1, and the
        # 1-GPU server 1: no server read names what alias h100 gives.
        self.assertEqual(([SPLIT_PAIR], {'GET': 2 + 2 + 1 + 1}),
                         self.split_with([
                             servers.Server(SPLIT_PAIR, HOST, None),
                             servers.Server(SINGLE, HOST, 1, H100)]))

    def test_consumer_nova_does_not_list_is_found(self):
        # A consumer missing from the server list (a migration's, or one
        # created since the list was read) leaves GPUs in use that the
        # listed servers do not account for: that host is read from
        # Placement, and the split is still found.
        self.as_nova_writes({SPLIT_PAIR: (1, 2), SPLIT_QUAD: (3, 4, 6, 8),
                             SINGLE: (5,)})
        # Planning 2, free GPUs 2, the listed 2-GPU server 1, then the
        # node 1 and the two consumers not read yet 2.
        self.assertEqual(([SPLIT_PAIR, SPLIT_QUAD],
                          {'GET': 2 + 2 + 1 + 1 + 2}),
                         self.split_with([
                             servers.Server(SPLIT_PAIR, HOST, 2, H100),
                             servers.Server(SINGLE, HOST, 1, H100)]))

    def test_one_device_servers_of_another_alias_hide_no_gpu(self):
        # Two servers with one NIC VF each (alias vf: no GPU; VCPU and
        # memory on the node) and a MIGRATION consumer, which Nova's
        # server list does not name, holding GPUs of two pairs: 2 GPUs in
        # use, 2 one-device servers. Only 1-GPU servers account for GPUs.
        self.as_nova_writes({})
        for vf in (VF1, VF2):
            novalike.allocate(self.client, vf, {
                self.names[HOST]: {'VCPU': 2, 'MEMORY_MB': 512}})
        self.client.request(
            'PUT', '/allocations/%s' % MIGRATION, version='1.38',
            expect=(204,), body={
                'allocations': dict(
                    {self.names[gpu(m)]: {'resources': {novalike.GPU_RC: 1}}
                     for m in (1, 2)},
                    **{self.names[HOST]: {'resources': {'VCPU': 4}}}),
                'project_id': 'p1', 'user_id': 'u1',
                'consumer_generation': None, 'consumer_type': 'MIGRATION'})
        listed = [servers.Server(VF1, HOST, 1, ('vf',)),
                  servers.Server(VF2, HOST, 1, ('vf',))]
        # Planning 2, free GPUs 2, one server of alias vf (it holds no
        # GPU), then the node 1 and its two consumers not read yet 2.
        self.assertEqual(([MIGRATION], {'GET': 2 + 2 + 1 + 1 + 2}),
                         self.split_with(listed))
        # Nova's and Placement's consumers agree.
        self.assertEqual([MIGRATION], [f.consumer for f in run.run(
            self.client, self.hosts, apply=False,
            allocations=run.ALL_HOSTS).findings])
        # A 1-GPU server of a GPU alias does account for one GPU: with
        # the migration gone and a 1-GPU server in its place, nothing is
        # read past the server of each alias.
        self.client.request('DELETE', '/allocations/%s' % MIGRATION,
                            expect=(204,))
        novalike.allocate(self.client, SINGLE, {
            self.names[gpu(5)]: {novalike.GPU_RC: 1},
            self.names[HOST]: {'VCPU': 4}})
        novalike.allocate(self.client, GOOD_PAIR, {
            self.names[gpu(6)]: {novalike.GPU_RC: 1},
            self.names[HOST]: {'VCPU': 4}})
        self.assertEqual(([], {'GET': 2 + 2 + 2}), self.split_with(
            listed + [servers.Server(SINGLE, HOST, 1, H100),
                      servers.Server(GOOD_PAIR, HOST, 1, H100)]))

    def test_more_vf_servers_than_busy_gpus(self):
        # Three one-device servers of alias vf (no GPU) and a MIGRATION
        # consumer holding 2 GPUs: more one-device servers than GPUs in
        # use, none of them accounting for a GPU; the host is still read.
        self.as_nova_writes({})
        for vf in (VF1, VF2, VF3):
            novalike.allocate(self.client, vf, {
                self.names[HOST]: {'VCPU': 2, 'MEMORY_MB': 512}})
        self.client.request(
            'PUT', '/allocations/%s' % MIGRATION, version='1.38',
            expect=(204,), body={
                'allocations': dict(
                    {self.names[gpu(m)]: {'resources': {novalike.GPU_RC: 1}}
                     for m in (1, 2)},
                    **{self.names[HOST]: {'resources': {'VCPU': 4}}}),
                'project_id': 'p1', 'user_id': 'u1',
                'consumer_generation': None, 'consumer_type': 'MIGRATION'})
        listed = [servers.Server(vf, HOST, 1, ('vf',))
                  for vf in (VF1, VF2, VF3)]
        # Planning 2, free GPUs 2, one server of alias vf, then the node
        # 1 and its three consumers not read yet 3.
        self.assertEqual(([MIGRATION], {'GET': 2 + 2 + 1 + 1 + 3}),
                         self.split_with(listed))


class TestCommands(oslotest_base.BaseTestCase):
    """``check`` exits 2 on a split instance; ``reshape`` warns."""

    def test_check_and_reshape(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        document = snapshot.read_file(base.H100_SNAPSHOT)
        uuids = {rp['name']: rp['uuid']
                 for rp in document['resource_providers']}
        document['allocations'][SPLIT_PAIR] = {
            'project_id': 'p', 'user_id': 'u', 'consumer_type': 'INSTANCE',
            'allocations': {
                uuids[gpu(m)]: {'resources': {novalike.GPU_RC: 1}}
                for m in (1, 2)}}
        before = os.path.join(tmp, 'before.json')
        after = os.path.join(tmp, 'after.json')
        with open(before, 'w') as f:
            json.dump(document, f)
        result = cli.run(self, 'nvlink', 'reshape', '--topology',
                         base.H100_TOPOLOGY, '--snapshot', before,
                         '--save-snapshot', after, '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        self.assertIn('%s: %s, %s: consumer %s holds 2 GPUs that share no '
                      'NVLink domain of size 2' % (HOST, gpu(2), gpu(1),
                                                   SPLIT_PAIR),
                      result.stderr)
        self.assertEqual(document['allocations'],
                         snapshot.read_file(after)['allocations'])
        check = cli.run(self, 'nvlink', 'check', '--topology',
                        base.H100_TOPOLOGY, '--snapshot', after, '-f',
                        'json')
        self.assertEqual(2, check.code, check.stderr)
        self.assertEqual([{'host': HOST, 'action': '',
                           'provider': '%s, %s' % (gpu(2), gpu(1)),
                           'parent': '', 'drift': 'split-allocation'}],
                         [dict((k, v) for k, v in row.items()
                               if k not in ('detail', 'repair'))
                          for row in json.loads(check.stdout)])
        self.assertTrue(json.loads(check.stdout)[0]['repair'].startswith(
            'not automatic: move instance %s into one NVLink domain'
            % SPLIT_PAIR))
        # The same with --consumers placement; nova needs the live cloud.
        again = cli.run(self, 'nvlink', 'check', '--topology',
                        base.H100_TOPOLOGY, '--snapshot', after, '-f',
                        'json', '--consumers', 'placement')
        self.assertEqual((2, check.stdout), (again.code, again.stdout))
        refused = cli.run(self, 'nvlink', 'check', '--topology',
                          base.H100_TOPOLOGY, '--snapshot', after,
                          '--consumers', 'nova')
        self.assertEqual(3, refused.code, refused.stderr)
        self.assertIn('--consumers nova reads the live compute API; with '
                      '--snapshot the allocations are in the file',
                      refused.stderr)


V100_RC = 'CUSTOM_PCI_10DE_1DB5'


class TestMeshSplit(oslotest_base.BaseTestCase):
    """On a mesh any pair inside it is one domain; across meshes it is not.

    DGX-1 (``etc/examples/direct-nvlink.yaml``): the quads of modules 1-4
    and 5-8 are meshes serving sizes 2 and 4.
    """

    def test_pairs_inside_and_across_meshes(self):
        path = os.path.join(base.EXAMPLES, 'direct-nvlink.yaml')
        document = snapshot.read_file(os.path.join(
            base.EXAMPLES, 'direct-nvlink-snapshot.json'))
        uuids = {rp['name']: rp['uuid']
                 for rp in document['resource_providers']}
        across = 'b1b1b1b1-0000-4000-8000-000000000001'     # modules 1, 5
        inside = 'b1b1b1b1-0000-4000-8000-000000000002'     # modules 2, 4
        for consumer, addresses in ((across, ('06', '85')),
                                    (inside, ('07', '0B'))):
            document['allocations'][consumer] = {
                'project_id': 'p', 'user_id': 'u',
                'consumer_type': 'INSTANCE',
                'allocations': {
                    uuids['dgx1-01_0000:%s:00.0' % a]: {
                        'resources': {V100_RC: 1}}
                    for a in addresses}}
        tmp = self.useFixture(fixtures.TempDir()).path
        seeded = os.path.join(tmp, 'seeded.json')
        with open(seeded, 'w') as f:
            json.dump(document, f)
        check = cli.run(self, 'nvlink', 'check', '--topology', path,
                        '--host', 'dgx1-01', '--snapshot', seeded,
                        '-f', 'json')
        self.assertEqual(2, check.code, check.stderr)
        split = [row for row in json.loads(check.stdout)
                 if row['drift'] == 'split-allocation']
        self.assertEqual(
            [('dgx1-01_0000:06:00.0, dgx1-01_0000:85:00.0',
              'consumer %s holds 2 GPUs that share no NVLink domain of '
              'size 2 (they are in dgx1-01_nvlink-group-of-4-a, '
              'dgx1-01_nvlink-group-of-4-b): the instance keeps running '
              'without NVLink between them; resize or migrate it to repair'
              % across)],
            [(row['provider'], row['detail']) for row in split])
