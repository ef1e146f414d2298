"""Group providers an interrupted reshape left without the owner trait.

A run that dies between ``create-provider`` and ``set-traits`` leaves
group providers named and placed as ours but without
``CUSTOM_OWNER_NVLINK_PLACEMENT``. ``flatten`` (and ``reshape``) take them
as the tool's own: same name pattern for that compute node, in its tree,
under the compute node or another group of ours, no inventory. Anything
else is never touched. Embedded Placement: HTTP is not the point here.
"""

import json
import os

import fixtures
from oslotest import base as oslotest_base

from nvlink_placement import errors
from nvlink_placement.placement import snapshot
from nvlink_placement.plan import actions as act
from nvlink_placement.plan import desired
from nvlink_placement.plan import run
from nvlink_placement.topology import loader
from tests.functional import base
from tests.functional import cli
from tests.functional import test_day2
from tests.functional import writes
from tests import novalike

HOST = 'compute-01'
OWNER = 'CUSTOM_OWNER_NVLINK_PLACEMENT'


class AdoptionTestCase(base.PlacementTestCase):

    def setUp(self):
        super().setUp()
        self.names = novalike.seed_host(self.client, HOST, novalike.BOARD1)
        self.original = self.dump()

    def provider(self, name, parent, traits=(), inventory=None):
        """Create an RP under ``parent`` (a name); return its uuid."""
        rp = self.client.request('POST', '/resource_providers',
                                 version='1.20', body={
                                     'name': name, 'parent_provider_uuid':
                                         self.names[parent]})
        self.names[name] = rp['uuid']
        generation = rp['generation']
        if inventory:
            generation = self.client.request(
                'PUT', '/resource_providers/%s/inventories' % rp['uuid'],
                version='1.26', body={
                    'inventories': inventory,
                    'resource_provider_generation': generation,
                })['resource_provider_generation']
        if traits:
            for trait in traits:
                self.client.request('PUT', '/traits/%s' % trait,
                                    version='1.6', expect=(201, 204))
            self.client.request(
                'PUT', '/resource_providers/%s/traits' % rp['uuid'],
                version='1.6', body={'traits': list(traits),
                                     'resource_provider_generation':
                                         generation})
        return rp['uuid']

    def move(self, name, parent):
        self.client.request('PUT', '/resource_providers/%s'
                            % self.names[name], version='1.37',
                            body={'name': name, 'parent_provider_uuid':
                                  self.names[parent]})

    def flatten(self):
        return run.run(self.client, [desired.flat(HOST)])

    def group(self, suffix):
        return '%s_nvlink-group-of-%s' % (HOST, suffix)


class TestFlattenAdopts(AdoptionTestCase):

    def test_groups_without_owner_trait_nested_and_holding_gpus(self):
        # What a run killed after creating four groups and moving a GPU
        # leaves: no owner trait anywhere, 2-a inside 4-a (as created).
        self.provider(self.group('4-a'), HOST)
        self.provider(self.group('2-a'), self.group('4-a'))
        self.provider(self.group('4-b'), HOST,
                      traits=(OWNER, 'CUSTOM_PCI_GROUP4'))
        self.provider(self.group('2-c'), self.group('4-b'))
        self.move('%s_0000:4C:00.0' % HOST, self.group('2-a'))
        result = self.flatten()
        self.assertEqual([], result.failures)
        self.assertEqual(
            [(act.MOVE_PROVIDER, '%s_0000:4C:00.0' % HOST),
             (act.DELETE_PROVIDER, self.group('2-a')),
             (act.DELETE_PROVIDER, self.group('2-c')),
             (act.DELETE_PROVIDER, self.group('4-a')),
             (act.DELETE_PROVIDER, self.group('4-b'))],
            [(a.action, a.provider) for a in result.actions])
        self.assertEqual(self.original, self.dump())

    def test_never_touches_what_is_not_ours(self):
        other = '%s-other' % HOST
        self.names.update(novalike.seed_host(self.client, other, {}))
        foreign = self.provider('%s_sriov-agent' % HOST, HOST)
        # Named like a group, but: holding inventory; under a provider of
        # someone else; named after another host; in another host's tree.
        self.provider(self.group('2-x'), HOST,
                      inventory={'VCPU': {'total': 1}})
        self.provider(self.group('2-y'), '%s_sriov-agent' % HOST)
        self.provider('%s_nvlink-group-of-2-a' % other, HOST)
        self.provider(self.group('2-z'), other)
        with writes.nothing_written(self, self.placement):
            result = self.flatten()
        self.assertEqual([], result.actions)
        self.assertIn(foreign, self.dump())

    def test_refuses_when_a_group_of_ours_holds_something_else(self):
        self.provider(self.group('4-a'), HOST)
        self.provider('%s_sriov-agent' % HOST, self.group('4-a'))
        with writes.nothing_written(self, self.placement):
            exc = self.assertRaises(errors.PlanError, self.flatten)
        self.assertIn("cannot delete '%s': it holds '%s_sriov-agent', which "
                      "this tool does not manage" % (self.group('4-a'), HOST),
                      str(exc))


class TestReshapeAdopts(AdoptionTestCase):

    def test_adopts_wanted_and_removes_unwanted_leftovers(self):
        topology = test_day2.h100_topology(hosts=(HOST,))
        self.apply_doc(topology)
        clean = self.parents()
        self.flatten()
        self.assertEqual(self.original, self.dump())
        self.provider(self.group('4-a'), HOST)
        self.provider(self.group('2-a'), self.group('4-a'))
        self.provider(self.group('2-q'), self.group('4-a'))
        result = self.apply_doc(topology)
        self.assertEqual([], result.failures)
        self.assertIn((act.DELETE_PROVIDER, self.group('2-q')),
                      [(a.action, a.provider) for a in result.actions])
        self.assertNotIn(act.CREATE_PROVIDER, [
            a.action for a in result.actions
            if a.provider in (self.group('4-a'), self.group('2-a'))])
        self.assertEqual(clean, self.parents())
        self.assertEqual([], self.apply_doc(topology).actions)

    def test_group_name_holding_inventory_is_refused(self):
        self.provider(self.group('4-a'), HOST,
                      inventory={'VCPU': {'total': 1}})
        with writes.nothing_written(self, self.placement):
            exc = self.assertRaises(errors.PlanError, self.apply_doc,
                                    test_day2.h100_topology(hosts=(HOST,)))
        self.assertIn("the name '%s' is taken by resource provider %s, which "
                      "holds inventory" % (self.group('4-a'),
                                           self.names[self.group('4-a')]),
                      str(exc))

    def apply_doc(self, doc):
        topology = loader.parse(doc, base.H100_TOPOLOGY)
        return run.run(self.client, [desired.from_topology(h)
                                     for h in topology.hosts.values()])


class TestFlattenAllCommand(oslotest_base.BaseTestCase):

    def test_finds_a_tree_with_only_unowned_groups(self):
        """``flatten --all`` on a snapshot of an interrupted reshape."""
        tmp = self.useFixture(fixtures.TempDir()).path
        document = snapshot.read_file(base.H100_SNAPSHOT)
        node = [rp for rp in document['resource_providers']
                if rp['name'] == 'compute-02'][0]
        quad = dict(uuid='4a4a4a4a-0000-4000-8000-000000000001',
                    name='compute-02_nvlink-group-of-4-a',
                    parent_provider_uuid=node['uuid'])
        pair = dict(uuid='4a4a4a4a-0000-4000-8000-000000000002',
                    name='compute-02_nvlink-group-of-2-a',
                    parent_provider_uuid=quad['uuid'])
        before = os.path.join(tmp, 'before.json')
        after = os.path.join(tmp, 'after.json')
        with open(before, 'w') as f:
            json.dump(dict(document, resource_providers=document[
                'resource_providers'] + [quad, pair]), f)
        result = cli.run(self, 'nvlink', 'flatten', '--all', '--snapshot',
                         before, '--save-snapshot', after, '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(
            [('compute-02', 'delete-provider', pair['name']),
             ('compute-02', 'delete-provider', quad['name'])],
            [(r['host'], r['action'], r['provider'])
             for r in json.loads(result.stdout)])
        saved = snapshot.read_file(after)
        self.assertEqual(
            sorted((rp['uuid'], rp['name'], rp.get('parent_provider_uuid'),
                    tuple(sorted(rp.get('traits', ()))))
                   for rp in document['resource_providers']),
            sorted((rp['uuid'], rp['name'], rp.get('parent_provider_uuid'),
                    tuple(sorted(rp.get('traits', ()))))
                   for rp in saved['resource_providers']))
        self.assertEqual(document['allocations'], saved['allocations'])
