"""Reshape on a real embedded Placement seeded as Nova seeds it."""

import fixtures

from nvlink_placement import errors
from nvlink_placement.plan import actions as act
from tests.functional import base
from tests.functional import writes
from tests import novalike

RC = novalike.GPU_RC


def gpu(host, address):
    return '%s_%s' % (host, address.upper())


def by_module(host, board, *modules):
    inverse = {m: a for a, m in board.items()}
    return frozenset(gpu(host, inverse[m]) for m in modules)


class TestReshapeExample(base.PlacementTestCase):

    def setUp(self):
        super().setUp()
        self.seed_example()
        # One running 1-GPU instance on compute-01, module 5 (0000:bb:00.0).
        self.consumer = '6f2c3a52-5b1e-4c4a-9f8e-0d6b2f1e7a10'
        novalike.allocate(self.client, self.consumer, {
            self.names['compute-01']: {'VCPU': 16, 'MEMORY_MB': 4096},
            self.names[gpu('compute-01', '0000:bb:00.0')]: {RC: 1}})

    def _pairs(self, body=None):
        body = body or self.candidates(
            resources_a='%s:1' % RC, resources_b='%s:1' % RC,
            required_G='CUSTOM_PCI_GROUP2', same_subtree='_G,_a,_b',
            group_policy='none', limit=1000)
        return self.gpu_sets(body)

    def test_tree_and_candidates(self):
        result = self.reshape()
        self.assertEqual([], result.failures)
        kinds = [a.action for a in result.actions]
        self.assertEqual(3, kinds.count(act.CREATE_TRAIT))
        self.assertEqual(12, kinds.count(act.CREATE_PROVIDER))
        self.assertEqual(12, kinds.count(act.SET_TRAITS))
        self.assertEqual(16, kinds.count(act.MOVE_PROVIDER))
        parents = self.parents()
        self.assertEqual('compute-01_nvlink-group-of-2-a',
                         parents[gpu('compute-01', '0000:4c:00.0')])
        self.assertEqual('compute-01_nvlink-group-of-4-a',
                         parents['compute-01_nvlink-group-of-2-a'])
        self.assertEqual('compute-01',
                         parents['compute-01_nvlink-group-of-4-b'])
        # Board 2: module 6 is 0000:9a:00.0, paired with module 8.
        self.assertEqual('compute-02_nvlink-group-of-2-d',
                         parents[gpu('compute-02', '0000:9a:00.0')])

        b1, b2 = novalike.BOARD1, novalike.BOARD2
        expected_pairs = {
            by_module('compute-01', b1, 1, 3), by_module('compute-01', b1,
                                                         2, 4),
            by_module('compute-01', b1, 6, 8),
            by_module('compute-02', b2, 1, 3), by_module('compute-02', b2,
                                                         2, 4),
            by_module('compute-02', b2, 5, 7), by_module('compute-02', b2,
                                                         6, 8)}
        # {5,7} of compute-01 holds the allocated GPU (module 5): absent.
        self.assertEqual(expected_pairs, self._pairs())

        quads = self.gpu_sets(self.candidates(
            resources_a='%s:1' % RC, resources_b='%s:1' % RC,
            resources_c='%s:1' % RC, resources_d='%s:1' % RC,
            required_G='CUSTOM_PCI_GROUP4', same_subtree='_G,_a,_b,_c,_d',
            group_policy='none', limit=1000))
        self.assertEqual({by_module('compute-01', b1, 1, 2, 3, 4),
                          by_module('compute-02', b2, 1, 2, 3, 4),
                          by_module('compute-02', b2, 5, 6, 7, 8)}, quads)

    def test_second_run_is_empty_and_allocation_kept(self):
        before = self.client.get('/allocations/%s' % self.consumer)
        self.reshape()
        self.assertEqual([], self.reshape().actions)
        after = self.client.get('/allocations/%s' % self.consumer)
        self.assertEqual(before['allocations'], after['allocations'])

    def test_dry_run_writes_nothing(self):
        with writes.nothing_written(self, self.placement):
            result = self.reshape(apply=False)
        self.assertEqual(43, len(result.actions))
        # Creating the custom traits is part of the plan, not of the run.
        self.assertEqual(3, len([a for a in result.actions
                                 if a.action == 'create-trait']))
        self.assertFalse(result.applied)

    def test_host_selection(self):
        result = self.reshape(hosts=['compute-02'])
        self.assertEqual({'', 'compute-02'},
                         {a.host for a in result.actions})
        self.assertEqual('compute-01',
                         self.parents()[gpu('compute-01', '0000:4c:00.0')])

    def test_nova_recreates_pci_rp_under_node(self):
        self.reshape()
        # Nova moves nothing, but a PCI RP deleted and re-created (after a
        # device_spec change) comes back under the compute node.
        name = gpu('compute-01', '0000:19:00.0')
        uuid = self.names[name]
        self.client.request('PUT', '/resource_providers/%s' % uuid,
                            body={'name': name,
                                  'parent_provider_uuid':
                                      self.names['compute-01']},
                            version='1.37')
        result = self.reshape()
        self.assertEqual([(act.MOVE_PROVIDER, name,
                           'compute-01_nvlink-group-of-2-b')],
                         [(a.action, a.provider, a.parent)
                          for a in result.actions])

    def test_group_rp_without_owner_trait_is_adopted(self):
        # A run that died between create-provider and set-traits.
        self.client.request('PUT', '/traits/CUSTOM_PCI_GROUP4',
                            version='1.6', expect=(201, 204))
        self.client.request('POST', '/resource_providers', version='1.20',
                            body={'name': 'compute-01_nvlink-group-of-4-a',
                                  'parent_provider_uuid':
                                      self.names['compute-01']})
        result = self.reshape()
        adopted = [a for a in result.actions
                   if a.provider == 'compute-01_nvlink-group-of-4-a']
        self.assertEqual([act.SET_TRAITS], [a.action for a in adopted])
        self.assertEqual([], self.reshape().actions)

    def test_stale_size_trait_is_removed(self):
        # A quad group that also says CUSTOM_PCI_GROUP2 (a pair's trait,
        # left by an older topology or a hand edit) would let a 2-GPU
        # flavor's resourceless group land on the quad: two GPUs of
        # different pairs.
        self.reshape()
        quad = self.client.get('/resource_providers?name=%s' % (
            'compute-01_nvlink-group-of-4-a'))['resource_providers'][0]
        traits = self.client.get('/resource_providers/%s/traits'
                                 % quad['uuid'], version='1.6')
        self.assertEqual(
            {'CUSTOM_PCI_GROUP4', 'CUSTOM_OWNER_NVLINK_PLACEMENT'},
            set(traits['traits']))
        self.client.request(
            'PUT', '/resource_providers/%s/traits' % quad['uuid'],
            version='1.6', body={
                'traits': traits['traits'] + ['CUSTOM_PCI_GROUP2'],
                'resource_provider_generation':
                    traits['resource_provider_generation']})
        planned = self.reshape(apply=False).actions
        self.assertEqual(
            [(act.SET_TRAITS, 'compute-01_nvlink-group-of-4-a',
              '-CUSTOM_PCI_GROUP2', (), ('CUSTOM_PCI_GROUP2',))],
            [(a.action, a.provider, a.detail, tuple(a.add_traits),
              tuple(a.remove_traits)) for a in planned])
        self.assertEqual([], self.reshape().failures)
        self.assertEqual(
            {'CUSTOM_PCI_GROUP4', 'CUSTOM_OWNER_NVLINK_PLACEMENT'},
            set(self.client.get('/resource_providers/%s/traits'
                                % quad['uuid'], version='1.6')['traits']))
        self.assertEqual([], self.reshape().actions)

    def test_obsolete_group_deleted_only_with_owner_trait(self):
        self.reshape()
        # Drop compute-01's groups: a topology with only compute-01 flat.
        path = self.write_file('flat.yaml', 'version: 1\nhosts:\n'
                               '  compute-01:\n    groups: []\n'
                               '    gpus:\n' + ''.join(
                                   '      "%s": %d\n' % (a, m)
                                   for a, m in novalike.BOARD1.items()))
        foreign = self.client.request(
            'POST', '/resource_providers', version='1.20',
            body={'name': 'compute-01_operator-rp',
                  'parent_provider_uuid': self.names['compute-01']})
        result = self.reshape(path)
        kinds = [a.action for a in result.actions]
        self.assertEqual(8, kinds.count(act.MOVE_PROVIDER))
        self.assertEqual(6, kinds.count(act.DELETE_PROVIDER))
        deleted = [a.provider for a in result.actions
                   if a.action == act.DELETE_PROVIDER]
        # Bottom-up: pairs before quads.
        self.assertEqual(['compute-01_nvlink-group-of-2-a',
                          'compute-01_nvlink-group-of-2-b',
                          'compute-01_nvlink-group-of-2-c',
                          'compute-01_nvlink-group-of-2-d',
                          'compute-01_nvlink-group-of-4-a',
                          'compute-01_nvlink-group-of-4-b'], deleted)
        parents = self.parents()
        self.assertEqual('compute-01', parents['compute-01_operator-rp'])
        self.assertNotIn('compute-01_nvlink-group-of-2-a', parents)
        self.assertEqual(foreign['uuid'], self.client.get(
            '/resource_providers/%s' % foreign['uuid'])['uuid'])

    def test_concurrent_trait_update_is_retried(self):
        self.reshape()
        # Strip the owner trait of one group, then race the trait write:
        # the first PUT is preceded by a concurrent write of another client
        # that bumps the generation, so Placement answers 409.
        name = 'compute-01_nvlink-group-of-2-a'
        uuid = self.client.get('/resource_providers?name=%s' % name)[
            'resource_providers'][0]['uuid']
        traits = self.client.get('/resource_providers/%s/traits' % uuid)
        self.client.request('PUT', '/resource_providers/%s/traits' % uuid,
                            body={'traits': ['CUSTOM_PCI_GROUP2'],
                                  'resource_provider_generation':
                                      traits['resource_provider_generation']},
                            version='1.6')
        real = self.client.request
        raced = []

        def racing_request(method, url, body=None, **kw):
            if (method == 'PUT' and url.endswith('/traits') and not raced):
                raced.append(url)
                current = real('GET', url)
                real('PUT', url, version='1.6', body={
                    'traits': current['traits'],
                    'resource_provider_generation':
                        current['resource_provider_generation']})
            return real(method, url, body=body, **kw)

        self.client.request = racing_request
        result = self.reshape()
        self.assertEqual([(act.SET_TRAITS, name)],
                         [(a.action, a.provider) for a in result.actions])
        self.assertEqual([], result.failures)
        self.assertEqual(1, len(raced))
        self.client.request = real
        self.assertEqual(
            ['CUSTOM_OWNER_NVLINK_PLACEMENT', 'CUSTOM_PCI_GROUP2'],
            sorted(self.client.get('/resource_providers/%s/traits'
                                   % uuid)['traits']))


class TestBadInputWritesNothing(base.PlacementTestCase):
    """Every invalid plan is refused before the first write."""

    def setUp(self):
        super().setUp()
        self.seed_example()

    def assertRefused(self, path, fragment):
        with writes.nothing_written(self, self.placement):
            exc = self.assertRaises(errors.PlanError, self.reshape, path)
        self.assertIn(fragment, str(exc))

    def topology(self, extra_hosts='', board1=None):
        board1 = board1 or novalike.BOARD1
        text = ('version: 1\nhosts:\n  compute-01:\n    board: hgx-h100-8gpu\n'
                '    gpus:\n' + ''.join('      "%s": %d\n' % (a, m)
                                        for a, m in board1.items()))
        return self.write_file('t.yaml', text + extra_hosts)

    def test_missing_compute_node(self):
        self.assertRefused(self.topology(
            '  compute-99:\n    groups: [["0000:01:00.0", "0000:02:00.0"]]\n'),
            "no compute node resource provider named 'compute-99'")

    def test_missing_pci_rp(self):
        board = dict(novalike.BOARD1)
        del board['0000:db:00.0']
        board['0000:dc:00.0'] = 8
        self.assertRefused(self.topology(board1=board),
                           "no Nova PCI resource provider named "
                           "'compute-01_0000:DC:00.0'")

    def test_pci_rp_outside_its_tree(self):
        name = gpu('compute-01', '0000:db:00.0')
        self.client.request('PUT', '/resource_providers/%s' % self.names[name],
                            body={'name': name,
                                  'parent_provider_uuid':
                                      self.names['compute-02']},
                            version='1.37')
        self.assertRefused(self.topology(), 'is outside the tree of compute '
                                            "node 'compute-01'")

    def test_group_name_taken_elsewhere(self):
        self.client.request('POST', '/resource_providers', version='1.20',
                            body={'name': 'compute-01_nvlink-group-of-2-c',
                                  'parent_provider_uuid':
                                      self.names['compute-02']})
        self.assertRefused(self.topology(),
                           "the name 'compute-01_nvlink-group-of-2-c' is "
                           "taken by resource provider")

    def test_errors_of_all_hosts_are_listed(self):
        board = dict(novalike.BOARD1)
        del board['0000:db:00.0']
        board['0000:dc:00.0'] = 8
        path = self.topology(
            '  compute-99:\n    groups: [["0000:01:00.0", "0000:02:00.0"]]\n',
            board1=board)
        with writes.nothing_written(self, self.placement):
            exc = self.assertRaises(errors.PlanError, self.reshape, path)
        self.assertEqual(2, len(exc.problems))

    def test_old_microversion_refused(self):
        # The real server answers 406 above its maximum (1.39): ask for
        # more than it has, as a 1.36 server would be asked for 1.37.
        self.useFixture(fixtures.MonkeyPatch(
            'nvlink_placement.placement.client.WRITE_VERSION', '1.99'))
        with writes.nothing_written(self, self.placement):
            exc = self.assertRaises(errors.PlacementError, self.reshape)
        self.assertEqual('embedded Placement does not speak microversion '
                         '1.99 (it speaks 1.39 at most). Nothing was '
                         'written.', str(exc))
