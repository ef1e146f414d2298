"""Round trip: a real HTTP Placement seeded like a cloud, exported, loaded.

A gunicorn Placement is seeded the way Nova and other services write it,
at several microversions: Nova's flat PCI trees (request by request),
consumers written before consumer types existed (1.12, 1.13 POST, 1.28)
and with types (1.38), an updated consumer (generation 2), an allocation
across a node, GPUs and a Neutron bandwidth provider, aggregates on nodes,
an operator's reserved GPU and an allocated one-time-use GPU that Nova
then reserved. Each random case is exported live, loaded into the embedded
Placement (bulk, and through the API fallback) and into a second gunicorn
(bulk into its SQLite file), and exported again: the same document.
"""

import copy
import random
import uuid

import fixtures
from oslotest import base

from nvlink_placement.placement import client as pc
from nvlink_placement.placement import embedded
from nvlink_placement.placement import snapshot
from nvlink_placement.placement import snapshot_api
from nvlink_placement.placement import snapshot_capacity
from nvlink_placement.placement import snapshot_db
from tests import novalike
from tests import placement_server

RC = novalike.GPU_RC
BW = 'NET_BW_EGR_KILOBIT_PER_SEC'
SEEDS = (11, 12)


class Cloud(object):
    """Writes a random, cloud-like state through the REST API."""

    def __init__(self, client, seed):
        self.client = client
        self.rng = random.Random(seed)
        self.prefix = 'rt%d' % seed
        self.hosts = {}
        self.taken = set()      # GPUs allocated or reserved

    def uuid(self):
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def put(self, url, body, version):
        return self.client.request('PUT', url, body=body, version=version)

    def generation(self, rp):
        return self.client.get('/resource_providers/%s' % rp)['generation']

    def seed(self):
        aggregates = [self.uuid() for _ in range(2)]
        for i in range(2):
            host = '%s-cn%d' % (self.prefix, i)
            names = novalike.seed_host(self.client, host, novalike.BOARD1)
            self.hosts[host] = names
            node = names[host]
            self.put('/resource_providers/%s/aggregates' % node,
                     {'aggregates': self.rng.sample(aggregates,
                                                    self.rng.randint(1, 2)),
                      'resource_provider_generation':
                          self.generation(node)}, '1.19')
            names['bw'] = self.bandwidth(host, node)
            reserved = self.rng.choice(self.free_gpus(host))
            self.inventory(reserved, reserved=1)
        self.allocations()
        return self

    def bandwidth(self, host, node):
        """Neutron's agent and bridge providers under the node."""
        for trait in ('CUSTOM_PHYSNET_DATA', 'CUSTOM_VNIC_TYPE_NORMAL'):
            self.client.request('PUT', '/traits/%s' % trait, version='1.6',
                                expect=(201, 204))
        agent = self.uuid()
        self.client.request('POST', '/resource_providers', version='1.20',
                            body={'uuid': agent, 'parent_provider_uuid': node,
                                  'name': '%s:Open vSwitch agent' % host})
        bridge = self.uuid()
        rp = self.client.request(
            'POST', '/resource_providers', version='1.20',
            body={'uuid': bridge, 'parent_provider_uuid': agent,
                  'name': '%s:Open vSwitch agent:br-data' % host})
        generation = self.put(
            '/resource_providers/%s/inventories' % bridge,
            {'resource_provider_generation': rp['generation'],
             'inventories': {BW: {'total': 10000000, 'step_size': 1000,
                                  'allocation_ratio': 1.5}}},
            '1.20')['resource_provider_generation']
        self.put('/resource_providers/%s/traits' % bridge,
                 {'resource_provider_generation': generation,
                  'traits': ['CUSTOM_PHYSNET_DATA',
                             'CUSTOM_VNIC_TYPE_NORMAL']}, '1.6')
        return bridge

    def inventory(self, rp, **fields):
        url = '/resource_providers/%s/inventories' % rp
        body = self.client.get(url)
        inventories = body['inventories']
        for inv in inventories.values():
            inv.update(fields)
        self.taken.add(rp)
        self.put(url, {'resource_provider_generation':
                       body['resource_provider_generation'],
                       'inventories': inventories}, '1.26')

    def free_gpus(self, host):
        names = self.hosts[host]
        return [names[n] for n in sorted(names)
                if '_0000:' in n and names[n] not in self.taken]

    def instance(self, host, gpus=1, bandwidth=False):
        names = self.hosts[host]
        alloc = {names[host]: {'VCPU': self.rng.randint(1, 32),
                               'MEMORY_MB': 1024 * self.rng.randint(1, 64)}}
        for gpu in self.free_gpus(host)[:gpus]:
            alloc[gpu] = {RC: 1}
            self.taken.add(gpu)
        if bandwidth:
            alloc[names['bw']] = {BW: 1000 * self.rng.randint(1, 100)}
        return alloc

    def allocations(self):
        hosts = sorted(self.hosts)
        project, user = self.uuid().replace('-', ''), self.uuid()
        for host in hosts:
            # 1.12: before consumer generations and types.
            self.put('/allocations/%s' % self.uuid(), {
                'allocations': {rp: {'resources': res} for rp, res in
                                self.instance(host, 2, True).items()},
                'project_id': project, 'user_id': user}, '1.12')
            # 1.38: typed, by Nova.
            kind = self.rng.choice(['INSTANCE', 'MIGRATION'])
            self.put('/allocations/%s' % self.uuid(), {
                'allocations': {rp: {'resources': res} for rp, res in
                                self.instance(host).items()},
                'project_id': project, 'user_id': user,
                'consumer_generation': None, 'consumer_type': kind}, '1.38')
        # 1.13: several consumers at once; 1.28: then updated (gen 2).
        batch = {self.uuid(): {
            'allocations': {rp: {'resources': res} for rp, res in
                            self.instance(host).items()},
            'project_id': project, 'user_id': user} for host in hosts}
        self.client.request('POST', '/allocations', body=batch,
                            version='1.13', expect=(204,))
        updated = sorted(batch)[0]
        body = self.client.get('/allocations/%s' % updated, version='1.28')
        body['allocations'][self.hosts[hosts[0]][hosts[0]]] = {
            'resources': {'VCPU': 2}}
        self.put('/allocations/%s' % updated, {
            'allocations': {rp: {'resources': a['resources']}
                            for rp, a in body['allocations'].items()},
            'project_id': project, 'user_id': user,
            'consumer_generation': body['consumer_generation']}, '1.28')
        # A one-time-use GPU: allocated, then reserved by Nova.
        otu = self.free_gpus(hosts[1])[0]
        self.taken.add(otu)
        self.put('/allocations/%s' % self.uuid(), {
            'allocations': {otu: {'resources': {RC: 1}}},
            'project_id': project, 'user_id': user,
            'consumer_generation': None}, '1.28')
        self.inventory(otu, reserved=1)


class TestRoundTrip(base.BaseTestCase):
    """One test: the seeding is the expensive part, done once."""

    def test_round_trip(self):
        server = placement_server.PlacementServer().start()
        self.addCleanup(server.stop)
        client = pc.PlacementClient(server.adapter())
        cases = {}
        for seed in SEEDS:
            cloud = Cloud(client, seed).seed()
            cases[seed] = snapshot_api.export(client, sorted(cloud.hosts),
                                              workers=4)
        client.requests.clear()
        everything = snapshot_api.export(client, workers=4)
        self.check_cases(cases, everything)
        self.check_requests(dict(client.requests))
        for seed, document in cases.items():
            placement = embedded.EmbeddedPlacement(document)
            with placement as client:
                self.assertEqual(0, sum(client.requests.values()))
                self.assertEqual(document, placement.export(), seed)
                self.assertEqual(document, snapshot_api.export(client), seed)
        self.check_api_fallback(cases[SEEDS[0]])

    def check_cases(self, cases, everything):
        for seed, document in cases.items():
            snapshot.validate(document, 'seed %d' % seed)
            consumers = document['allocations'].values()
            self.assertEqual(7, len(consumers))
            self.assertEqual(5, sum('consumer_type' not in c
                                    for c in consumers))
            # Generation 1 is left out (loading gives it back).
            self.assertEqual([2], [c['consumer_generation']
                                   for c in consumers
                                   if 'consumer_generation' in c])
            self.assertTrue(any(len(c['allocations']) >= 3
                                for c in consumers))
            providers = document['resource_providers']
            self.assertEqual(2 * 11, len(providers))
            self.assertTrue(all(p.get('aggregates') for p in providers
                                if p['parent_provider_uuid'] is None))
            self.assertEqual(1, len(snapshot_capacity.strained(document)))
        self.assertEqual(sum(len(d['resource_providers'])
                             for d in cases.values()),
                         len(everything['resource_providers']))

    def check_requests(self, requests):
        # 44 providers (4 roots), 14 consumers, 22 traits in use (8, and
        # the 14 member traits of the H100 GPUs): the listing and the PCI
        # trees (3); the traits in use and one listing each (1 + 22, fewer
        # than a GET per provider); inventories (44);
        # one proof of unused capacity per class and capacity (4: the GPU
        # class, bandwidth, MEMORY_MB, DISK_GB; VCPU's capacity is above
        # its max_unit); allocations of the 30 providers not proven
        # unused (4 nodes, 4 bridges, 22 GPUs allocated or reserved);
        # aggregates of every provider (44); consumers (14).
        self.assertEqual({'GET': 3 + 23 + 44 + 4 + 30 + 44 + 14}, requests)

    def check_api_fallback(self, document):
        self.useFixture(fixtures.MockPatchObject(
            snapshot_db, 'KNOWN_REVISIONS', frozenset()))
        placement = embedded.EmbeddedPlacement(document)
        with placement as client:
            self.assertGreater(client.requests['POST'], 20)
            exported = placement.export()
        # Only consumer generations are Placement's own (1) there.
        expected = copy.deepcopy(document)
        for entry in expected['allocations'].values():
            entry.pop('consumer_generation', None)
        self.assertEqual(expected, exported)
