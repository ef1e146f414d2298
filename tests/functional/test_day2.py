"""Day-2: drift kinds, flatten, health reservations (embedded Placement)."""

import os

import yaml

from nvlink_placement.plan import actions as act
from nvlink_placement.plan import desired
from nvlink_placement.plan import run
from nvlink_placement.topology import loader
from tests.functional import base
from tests import novalike

RC = novalike.GPU_RC
MARKER = 'CUSTOM_NVLINK_RESERVED_0000_19_00_0'


def h100_topology(health=None, hosts=('compute-01', 'compute-02')):
    """The example topology as a dict, with GPU health where given."""
    with open(base.H100_TOPOLOGY) as f:
        doc = yaml.safe_load(f)
    doc['hosts'] = {h: doc['hosts'][h] for h in hosts}
    for address, status in (health or {}).items():
        module = doc['hosts']['compute-01']['gpus'][address]
        doc['hosts']['compute-01']['gpus'][address] = {
            'module_id': module,
            'health': {'status': status, 'reasons': ['test']}}
    if 'compute-02' in doc['hosts']:
        doc['hosts']['compute-02']['gpus_file'] = os.path.join(
            base.EXAMPLES, 'mappings', 'compute-02.json')
    return doc


class Day2TestCase(base.PlacementTestCase):

    def setUp(self):
        super().setUp()
        self.seed_example()
        self.consumer = 'a1b2c3d4-0000-4000-8000-000000000001'
        novalike.allocate(self.client, self.consumer, {
            self.names['compute-01']: {'VCPU': 8},
            self.names['compute-01_0000:CB:00.0']: {RC: 1}})

    def apply(self, doc, apply=True):
        path = self.write_file('t.yaml', yaml.safe_dump(doc))
        topology = loader.load(path, [base.EXAMPLES])
        return run.run(self.client, [desired.from_topology(h)
                                     for h in topology.hosts.values()],
                       apply=apply)

    def flatten(self, *hosts, apply=True):
        return run.run(self.client, [desired.flat(h) for h in hosts],
                       apply=apply)

    def inventory(self, name):
        uuid = self.names[name]
        return self.client.get('/resource_providers/%s/inventories'
                               % uuid)['inventories'][RC]

    def set_reserved(self, name, reserved):
        uuid = self.names[name]
        body = self.client.get('/resource_providers/%s/inventories' % uuid)
        body['inventories'][RC]['reserved'] = reserved
        self.client.request('PUT', '/resource_providers/%s/inventories'
                            % uuid, version='1.26', body={
                                'inventories': body['inventories'],
                                'resource_provider_generation':
                                    body['resource_provider_generation']})

    def traits_of(self, name):
        uuid = self.client.get('/resource_providers?name=%s' % name)[
            'resource_providers'][0]['uuid']
        return set(self.client.get('/resource_providers/%s/traits'
                                   % uuid)['traits'])


class TestFlatten(Day2TestCase):

    def test_flatten_restores_novas_tree(self):
        original = self.dump()
        self.apply(h100_topology())
        self.assertNotEqual(original, self.dump())
        result = self.flatten('compute-01', 'compute-02')
        kinds = [a.action for a in result.actions]
        self.assertEqual(16, kinds.count(act.MOVE_PROVIDER))
        self.assertEqual(12, kinds.count(act.DELETE_PROVIDER))
        self.assertEqual([], result.failures)
        # Same RPs, uuids, parents, traits, inventories and allocations.
        self.assertEqual(original, self.dump())
        self.assertEqual([], self.flatten('compute-01').actions)

    def test_flatten_one_host_leaves_the_other(self):
        self.apply(h100_topology())
        self.flatten('compute-02')
        parents = self.parents()
        self.assertEqual('compute-02', parents['compute-02_0000:18:00.0'])
        self.assertEqual('compute-01_nvlink-group-of-2-b',
                         parents['compute-01_0000:19:00.0'])

    def test_flatten_releases_tool_reservation_only(self):
        original = self.dump()
        self.apply(h100_topology(health={'0000:19:00.0': 'unhealthy'}))
        self.assertEqual(1, self.inventory('compute-01_0000:19:00.0')[
            'reserved'])
        self.flatten('compute-01', 'compute-02')
        self.assertEqual(original, self.dump())


class TestDrift(Day2TestCase):

    def test_kinds(self):
        self.apply(h100_topology())
        # wrong-parent: Nova re-created a PCI RP under the compute node.
        name = 'compute-01_0000:19:00.0'
        self.client.request('PUT', '/resource_providers/%s'
                            % self.names[name], version='1.37',
                            body={'name': name, 'parent_provider_uuid':
                                  self.names['compute-01']})
        # missing-trait: someone stripped a group's size trait.
        group = 'compute-02_nvlink-group-of-2-a'
        uuid = self.client.get('/resource_providers?name=%s' % group)[
            'resource_providers'][0]['uuid']
        traits = self.client.get('/resource_providers/%s/traits' % uuid)
        self.client.request('PUT', '/resource_providers/%s/traits' % uuid,
                            version='1.6', body={
                                'traits': ['CUSTOM_OWNER_NVLINK_PLACEMENT'],
                                'resource_provider_generation':
                                    traits['resource_provider_generation']})
        result = self.apply(h100_topology(), apply=False)
        self.assertEqual(
            [(act.MOVE_PROVIDER, name, act.WRONG_PARENT),
             (act.SET_TRAITS, group, act.MISSING_TRAIT)],
            sorted((a.action, a.provider, a.drift) for a in result.actions))
        self.assertEqual([], result.findings)

    def test_unexpected_group_and_missing_group(self):
        self.apply(h100_topology())
        # compute-01 as a B200 board: pairs differ, quads stay.
        doc = h100_topology()
        doc['hosts']['compute-01']['board'] = 'hgx-b200-8gpu'
        result = self.apply(doc, apply=False)
        kinds = {(a.action, a.drift) for a in result.actions}
        self.assertEqual({(act.MOVE_PROVIDER, act.WRONG_PARENT)}, kinds)
        # Names are kept (a..d by lowest module), members change: only
        # GPUs move. Renaming the board's pairs away drops groups:
        doc['hosts']['compute-01'].pop('board')
        doc['hosts']['compute-01']['gpus'] = {
            a: m for a, m in novalike.BOARD1.items()}
        doc['hosts']['compute-01']['groups'] = [
            ['0000:4c:00.0', '0000:5d:00.0']]
        result = self.apply(doc, apply=False)
        deleted = sorted(a.provider for a in result.actions
                         if a.drift == act.UNEXPECTED_GROUP)
        self.assertEqual(5, len(deleted))
        self.assertNotIn('compute-01_nvlink-group-of-2-a', deleted)

    def test_unknown_gpu_and_unknown_host(self):
        self.apply(h100_topology(hosts=('compute-01',)))
        novalike.seed_host(self.client, 'compute-01-extra', [])
        extra = self.client.get('/resource_providers?name=compute-01')[
            'resource_providers'][0]['uuid']
        rp = self.client.request('POST', '/resource_providers',
                                 version='1.20', body={
                                     'name': 'compute-01_0000:E1:00.0',
                                     'parent_provider_uuid': extra})
        self.client.request('PUT', '/resource_providers/%s/traits'
                            % rp['uuid'], version='1.6', body={
                                'traits': ['COMPUTE_MANAGED_PCI_DEVICE'],
                                'resource_provider_generation': 0})
        topology = loader.load(self.write_file(
            't.yaml', yaml.safe_dump(h100_topology(hosts=('compute-01',)))))
        wanted = [desired.from_topology(h) for h in topology.hosts.values()]

        def unknown(state, names):
            return [desired.flat(n, known=False) for n in
                    run.hosts_with_gpus(state) if n not in names]
        result = run.run(self.client, wanted, apply=False,
                         more_hosts=unknown)
        findings = sorted((a.host, a.provider, a.drift)
                          for a in result.findings)
        self.assertIn(('compute-01', 'compute-01_0000:E1:00.0',
                       act.UNKNOWN_GPU), findings)
        # A host the topology does not describe has no unknown GPUs: with
        # no groups of the tool it is not drift, with some flatten repairs
        # it.
        self.assertEqual(1, len(findings))
        self.assertEqual([], result.actions)


class TestHealth(Day2TestCase):

    def test_unhealthy_reserved_then_released(self):
        gpu = 'compute-01_0000:19:00.0'
        result = self.apply(h100_topology(health={'0000:19:00.0':
                                                  'unhealthy'}))
        reserved = [a for a in result.actions
                    if a.action == act.SET_RESERVED]
        self.assertEqual([(gpu, act.MISSING_RESERVATION)],
                         [(a.provider, a.drift) for a in reserved])
        self.assertEqual(1, self.inventory(gpu)['reserved'])
        self.assertIn(MARKER, self.traits_of(
            'compute-01_nvlink-group-of-2-b'))
        # The pair {2,4} is no longer a candidate.
        pairs = self.gpu_sets(self.candidates(
            resources_a='%s:1' % RC, resources_b='%s:1' % RC,
            required_G='CUSTOM_PCI_GROUP2', same_subtree='_G,_a,_b',
            group_policy='none', in_tree_a=self.names['compute-01'],
            in_tree_b=self.names['compute-01']))
        self.assertEqual(2, len(pairs))   # {1,3} {5,7}; {6,8} holds used
        self.assertEqual([], self.apply(h100_topology(
            health={'0000:19:00.0': 'unhealthy'})).actions)

        # Nova's periodic update rewrites the PCI RP's traits: no effect.
        uuid = self.names[gpu]
        traits = self.client.get('/resource_providers/%s/traits' % uuid)
        self.client.request('PUT', '/resource_providers/%s/traits' % uuid,
                            version='1.6', body={
                                'traits': novalike.PCI_TRAITS,
                                'resource_provider_generation':
                                    traits['resource_provider_generation']})
        back = self.apply(h100_topology(health={'0000:19:00.0': 'ok'}))
        self.assertEqual([(act.SET_RESERVED, gpu, act.STALE_RESERVATION)],
                         [(a.action, a.provider, a.drift)
                          for a in back.actions])
        self.assertEqual(0, self.inventory(gpu)['reserved'])
        self.assertNotIn(MARKER, self.traits_of(
            'compute-01_nvlink-group-of-2-b'))

    def test_operator_reservation_is_never_released(self):
        gpu = 'compute-01_0000:3B:00.0'
        self.set_reserved(gpu, 1)
        result = self.apply(h100_topology(health={'0000:3b:00.0':
                                                  'unhealthy'}))
        self.assertEqual([], [a for a in result.actions
                              if a.action == act.SET_RESERVED])
        result = self.apply(h100_topology(health={'0000:3b:00.0': 'ok'}))
        self.assertEqual([], result.actions)
        self.assertEqual(1, self.inventory(gpu)['reserved'])

    def test_no_health_skips_reservations(self):
        doc = h100_topology(health={'0000:19:00.0': 'unhealthy'})
        topology = loader.load(self.write_file('t.yaml', yaml.safe_dump(doc)),
                               [base.EXAMPLES])
        result = run.run(self.client, [
            desired.from_topology(h, health=False)
            for h in topology.hosts.values()])
        self.assertNotIn(act.SET_RESERVED,
                         [a.action for a in result.actions])
        self.assertEqual(0, self.inventory('compute-01_0000:19:00.0')[
            'reserved'])

    def test_no_health_keeps_earlier_reservations(self):
        gpu = 'compute-01_0000:19:00.0'
        self.apply(h100_topology(health={'0000:19:00.0': 'unhealthy'}))
        self.assertEqual(1, self.inventory(gpu)['reserved'])
        # The GPU is healthy again, but --no-health releases nothing.
        doc = h100_topology(health={'0000:19:00.0': 'ok'})
        topology = loader.load(self.write_file('t.yaml', yaml.safe_dump(doc)),
                               [base.EXAMPLES])
        result = run.run(self.client, [
            desired.from_topology(h, health=False)
            for h in topology.hosts.values()])
        self.assertEqual([], result.actions)
        self.assertEqual(1, self.inventory(gpu)['reserved'])
        self.assertIn(MARKER, self.traits_of(
            'compute-01_nvlink-group-of-2-b'))
