"""Flavors proven on a real embedded Placement, seeded as Nova seeds it.

Two HGX H100 hosts (the example topology) and one HGX B200 host
(``etc/examples/hgx-b200.yaml``), reshaped; then the generated flavors'
queries, built as Nova builds them, must return exactly the NVLink
domains: diagonal pairs on H100, adjacent pairs on B200.
"""

import json
import os
import shutil
import tempfile

import fixtures
from oslotest import base as oslo_base

from nvlink_placement.flavors import generate
from nvlink_placement.flavors import inputs
from nvlink_placement.flavors import release
from nvlink_placement.flavors import request
from nvlink_placement.flavors import verify
from nvlink_placement import forkmap
from nvlink_placement.placement import embedded
from nvlink_placement.placement import naming
from nvlink_placement.placement import snapshot
from nvlink_placement.placement import state as state_mod
from nvlink_placement.placement import usage
from nvlink_placement.plan import desired
from nvlink_placement.plan import run
from nvlink_placement.report import capacity
from nvlink_placement.topology import loader
from tests.functional import base
from tests.functional import cli
from tests import novalike

# A Nova 34 nova-compute marks its compute node OWNER_NOVA, which Nova 34's
# query requires (nova_tests/test_compute_writes.py proves both); the trees
# here are seeded that way whatever release novalike mirrors.
B200_TOPOLOGY = os.path.join(base.EXAMPLES, 'hgx-b200.yaml')
B200_HOST = 'compute-b200-01'
B200_RC = 'CUSTOM_PCI_10DE_2901'
H100_RC = novalike.GPU_RC
H100_BOARDS = {'compute-01': novalike.BOARD1, 'compute-02': novalike.BOARD2}
H100_DOMAINS = {2: [(1, 3), (2, 4), (5, 7), (6, 8)],
                4: [(1, 2, 3, 4), (5, 6, 7, 8)],
                8: [tuple(range(1, 9))]}
B200_DOMAINS = {2: [(1, 2), (3, 4), (5, 6), (7, 8)],
                4: [(1, 2, 3, 4), (5, 6, 7, 8)],
                8: [tuple(range(1, 9))]}


def b200_board():
    """Address -> module id of the example B200 host."""
    host = loader.load(B200_TOPOLOGY).hosts[B200_HOST]
    return {a: gpu.module_id for a, gpu in host.gpus.items()}


def seed_all(client):
    """Seed the three hosts as Nova does and reshape them; RP name -> uuid."""
    names = {}
    for host, board in H100_BOARDS.items():
        names.update(novalike.seed_host(client, host, board))
    names.update(novalike.seed_host(client, B200_HOST, b200_board(),
                                    rc=B200_RC, board='hgx-b200-8gpu'))
    for path in (base.H100_TOPOLOGY, B200_TOPOLOGY):
        topology = loader.load(path)
        result = run.run(client, [desired.from_topology(h)
                                  for h in topology.hosts.values()])
        assert not result.failures, result.failures
    return names


def address_sets(board, size, domains, taken=()):
    """Free domains of ``size`` as frozensets of addresses."""
    inverse = {m: a for a, m in board.items()}
    if size == 1:
        groups = [(m,) for m in sorted(inverse)]
    else:
        groups = domains[size]
    return {frozenset(inverse[m] for m in group) for group in groups
            if not set(group) & set(taken)}


class _FlavorCase(base.PlacementTestCase):

    def verify(self, path, alias, rc, flavors, nova=None):
        """FlavorResult per flavor name, verified on ``self.client``."""
        hosts = list(loader.load(path).hosts.values())
        aliases = {alias: request.Alias(alias, rc)}
        providers = verify.read_providers(self.client)
        return {f['name']: verify.verify(
            self.client, request.build(inputs.flavor_from_dict(f), aliases,
                                       nova=nova),
            hosts, providers) for f in flavors}

    def generated(self, path, alias, sizes=(1, 2, 4, 8)):
        hosts = list(loader.load(path).hosts.values())
        return [f.as_dict() for f in
                generate.generate(hosts, alias, sizes=list(sizes)).flavors]

    def by_host(self, result):
        return {h.host: h for h in result.hosts}


class TestReshapedFlavors(_FlavorCase):

    def setUp(self):
        super().setUp()
        self.names = seed_all(self.client)

    def test_h100_sets_are_exactly_the_domains(self):
        results = self.verify(base.H100_TOPOLOGY, 'h100', H100_RC,
                              self.generated(base.H100_TOPOLOGY, 'h100'))
        # Member traits: one candidate per domain (4 pairs, 2 quads, the
        # board), nothing cut at limit=1000.
        candidates = {1: 8, 2: 4, 4: 2, 8: 1}
        for size in (1, 2, 4, 8):
            result = results['gpu.h100.%dx' % size]
            self.assertEqual([], result.problems)
            self.assertEqual(['compute-01', 'compute-02'],
                             [h.host for h in result.hosts])
            for host in result.hosts:
                expected = address_sets(H100_BOARDS[host.host], size,
                                        H100_DOMAINS)
                self.assertEqual(expected, host.valid, (size, host.host))
                self.assertEqual({}, host.invalid)
                self.assertEqual({}, host.missing)
                self.assertEqual(candidates[size], host.candidates)
        self.assertEqual([], results['gpu.h100.8x'].warnings)
        self.assertEqual({0}, {h.duplicates for r in results.values()
                               for h in r.hosts})

    def test_listings_shared_by_flavors_give_the_same_verdicts(self):
        # flavor verify shares one listings dict between its flavors: the
        # free GPUs, the owner listing and the idle GPUs are asked once,
        # the verdicts are those of flavors verified one by one.
        hosts = list(loader.load(base.H100_TOPOLOGY).hosts.values())
        aliases = {'h100': request.Alias('h100', H100_RC)}
        queries = [request.build(inputs.flavor_from_dict(f), aliases)
                   for f in self.generated(base.H100_TOPOLOGY, 'h100')]
        providers = verify.read_providers(self.client)

        def run_all(listings):
            before = self.client.requests['GET']
            results = [verify.verify(self.client, q, hosts, providers,
                                     listings=listings) for q in queries]
            return ([(r.rows(), r.problems, r.warnings) for r in results],
                    self.client.requests['GET'] - before)
        alone, sent_alone = run_all(None)
        shared, sent_shared = run_all({})
        self.assertEqual(alone, shared)
        before = self.client.requests['GET']
        state_mod.free_gpus(self.client)
        idle = self.client.requests['GET'] - before
        self.assertGreater(idle, 1)   # the classes, each custom class
        # Shared: the free GPUs, the owners and the idle GPUs are listed
        # once for the four flavors, not once each.
        self.assertEqual(sent_alone - (2 + idle) * 3, sent_shared)
        # Prefetched, then verified in forked processes (as flavor verify
        # does offline): the same verdicts, nothing shared asked again.
        listings = {}
        verify.prefetch(self.client, queries, listings)
        self.assertEqual(3, len(listings))
        forked = forkmap.forkmap(
            lambda q: verify.verify(self.client, q, hosts, providers,
                                    listings=listings), queries, 2)
        self.assertEqual(alone, [(r.rows(), r.problems, r.warnings)
                                 for r in forked])

    def test_b200_sets_are_the_adjacent_pairs(self):
        results = self.verify(B200_TOPOLOGY, 'b200', B200_RC,
                              self.generated(B200_TOPOLOGY, 'b200'))
        board = b200_board()
        for size, candidates in ((1, 8), (2, 4), (4, 2), (8, 1)):
            result = results['gpu.b200.%dx' % size]
            self.assertEqual([], result.problems)
            host, = result.hosts
            self.assertEqual(B200_HOST, host.host)
            self.assertEqual(address_sets(board, size, B200_DOMAINS),
                             host.valid)
            self.assertEqual(({}, {}, candidates),
                             (host.invalid, host.missing, host.candidates))
        pairs = results['gpu.b200.2x'].hosts[0].valid
        inverse = {m: a for a, m in board.items()}
        self.assertIn(frozenset([inverse[1], inverse[2]]), pairs)
        self.assertNotIn(frozenset([inverse[1], inverse[3]]), pairs)

    def test_allocated_gpus_remove_their_domains(self):
        def gpu(host, board, module):
            inverse = {m: a for a, m in board.items()}
            return self.names[host + '_' + inverse[module].upper()]

        b200 = b200_board()
        novalike.allocate(self.client, 'a0a0a0a0-0000-4000-8000-000000000001',
                          {gpu('compute-01', novalike.BOARD1, 5): {
                              H100_RC: 1}})
        novalike.allocate(self.client, 'a0a0a0a0-0000-4000-8000-000000000002',
                          {gpu('compute-02', novalike.BOARD2, m): {H100_RC: 1}
                           for m in (2, 4)})
        novalike.allocate(self.client, 'a0a0a0a0-0000-4000-8000-000000000003',
                          {gpu(B200_HOST, b200, 1): {B200_RC: 1}})
        taken = {'compute-01': (5,), 'compute-02': (2, 4)}
        results = self.verify(base.H100_TOPOLOGY, 'h100', H100_RC,
                              self.generated(base.H100_TOPOLOGY, 'h100'))
        candidates = {1: {'compute-01': 7, 'compute-02': 6},
                      2: {'compute-01': 3, 'compute-02': 3},
                      4: {'compute-01': 1, 'compute-02': 1},
                      8: {'compute-01': 0, 'compute-02': 0}}
        for size in (1, 2, 4, 8):
            result = results['gpu.h100.%dx' % size]
            self.assertTrue(result.ok, result.problems)
            for host in result.hosts:
                self.assertEqual(
                    address_sets(H100_BOARDS[host.host], size, H100_DOMAINS,
                                 taken[host.host]), host.valid)
                self.assertEqual(candidates[size][host.host],
                                 host.candidates)
        b200_results = self.verify(
            B200_TOPOLOGY, 'b200', B200_RC,
            self.generated(B200_TOPOLOGY, 'b200', sizes=(2, 4)))
        self.assertEqual(
            [(3, 3), (1, 1)],
            [(len(r.hosts[0].valid), r.hosts[0].candidates)
             for r in b200_results.values()])

    def test_capacity_fits_equal_verified_sets(self):
        """capacity's ``fits`` = the valid sets flavor verify finds."""
        def gpu(host, board, module):
            inverse = {m: a for a, m in board.items()}
            return self.names[host + '_' + inverse[module].upper()]

        novalike.allocate(self.client, 'b0b0b0b0-0000-4000-8000-000000000001',
                          {gpu('compute-01', novalike.BOARD1, 5): {
                              H100_RC: 1}})
        novalike.allocate(self.client, 'b0b0b0b0-0000-4000-8000-000000000002',
                          {gpu('compute-02', novalike.BOARD2, m): {H100_RC: 1}
                           for m in (1, 6)})
        results = self.verify(base.H100_TOPOLOGY, 'h100', H100_RC,
                              self.generated(base.H100_TOPOLOGY, 'h100'))
        current = state_mod.read(
            self.client, [naming.OWNER_TRAIT, naming.PCI_TRAIT],
            trait_prefixes=['CUSTOM_PCI_GROUP'])
        roots = [current.by_name[h].uuid for h in ('compute-01',
                                                   'compute-02')]
        rows = capacity.rows(capacity.hosts_from_state(
            current, usage.read(self.client, current, roots), roots))
        fits = {(row[0], row[1]): row[2] for row in rows}
        compared = 0
        for size in (1, 2, 4, 8):
            for host in results['gpu.h100.%dx' % size].hosts:
                self.assertEqual(len(host.valid), fits[(host.host, size)],
                                 (host.host, size))
                compared += 1
        self.assertEqual(8, compared)
        self.assertEqual((2, 0), (fits[('compute-01', 2)] - 1,
                                  fits[('compute-02', 4)]))

    def test_tree_of_a_nova_compute_older_than_34(self):
        # Nova 33's nova-compute writes no OWNER_NOVA on its compute node.
        # Nova 34's scheduler requires it once every nova-compute is at
        # service version 73: such a tree gets no candidate at all.
        for host in H100_BOARDS:
            body = self.client.get('/resource_providers/%s/traits'
                                   % self.names[host])
            self.client.request(
                'PUT', '/resource_providers/%s/traits' % self.names[host],
                body={'resource_provider_generation':
                      body['resource_provider_generation'],
                      'traits': [t for t in body['traits']
                                 if t != 'OWNER_NOVA']}, version='1.6')
        flavors = self.generated(base.H100_TOPOLOGY, 'h100', sizes=(1, 2))
        result = self.verify(base.H100_TOPOLOGY, 'h100', H100_RC,
                             flavors)['gpu.h100.2x']
        self.assertEqual([('compute-01', 0, 0, 0, 4),
                          ('compute-02', 0, 0, 0, 4)],
                         [r[1:6] for r in result.rows()])
        self.assertEqual(10, len(result.problems))
        self.assertEqual(
            'gpu.h100.2x on compute-02: provider(s) compute-02 lack '
            'OWNER_NOVA, which Nova 34 requires once every nova-compute runs '
            'service version 73 (modelled: Nova 34 query, owner filter on '
            '(default Nova 34)); a Nova 34 nova-compute writes it. No '
            'candidate can come from there: a tree written by an older '
            'nova-compute, or a cloud mid-upgrade (give --nova-release or '
            '--owner-filter off to model it)', result.problems[-1])
        for nova in (release.choose(33), release.choose(34, release.OFF)):
            older = self.verify(base.H100_TOPOLOGY, 'h100', H100_RC,
                                flavors, nova=nova)
            self.assertEqual(
                [[('compute-01', 8, 8, 0, 0), ('compute-02', 8, 8, 0, 0)],
                 [('compute-01', 4, 4, 0, 0), ('compute-02', 4, 4, 0, 0)]],
                [[r[1:6] for r in older[f['name']].rows()]
                 for f in flavors])

    def test_same_subtree_without_resourceless_group_is_caught(self):
        wrong = {'name': 'wrong.2x', 'vcpus': 32, 'ram': 262144, 'disk': 100,
                 'extra_specs': {
                     'pci_passthrough:alias': 'h100:2:_h100',
                     'placement:same_subtree': '_h100-0,_h100-1',
                     'placement:group_policy': 'none'}}
        result = self.verify(base.H100_TOPOLOGY, 'h100', H100_RC,
                             [wrong])['wrong.2x']
        self.assertFalse(result.ok)
        self.assertEqual([('compute-01', 0, 0, 0, 4),
                          ('compute-02', 0, 0, 0, 4)],
                         [r[1:6] for r in result.rows()])
        self.assertEqual(
            'wrong.2x on compute-01: free NVLink domain '
            'compute-01_nvlink-group-of-2-a [0000:4c:00.0, 0000:5d:00.0] is '
            'never offered', result.problems[0])

    def test_subtree_naming_a_missing_group_is_refused(self):
        wrong = {'name': 'wrong.2x', 'vcpus': 32, 'ram': 262144, 'disk': 100,
                 'extra_specs': {
                     'pci_passthrough:alias': 'h100:2:_h100',
                     'placement:same_subtree': '_h100-0,_h100-1,_nvl2',
                     'placement:group_policy': 'none'}}
        result = self.verify(base.H100_TOPOLOGY, 'h100', H100_RC,
                             [wrong])['wrong.2x']
        self.assertFalse(result.ok)
        self.assertEqual(1, len(result.problems))
        self.assertIn('wrong.2x: Placement refused the query: GET '
                      '/allocation_candidates', result.problems[0])
        self.assertIn('HTTP 400', result.problems[0])


class TestSizeWithoutDomain(_FlavorCase):
    """A size no domain serves, on a reshaped tree, says so."""

    def test_three_gpus_on_domains_of_two_four_and_eight(self):
        seed_all(self.client)
        flavor = {'name': 'gpu.h100.3x', 'vcpus': 48, 'ram': 393216,
                  'disk': 100, 'extra_specs': {
                      'pci_passthrough:alias': 'h100:3:_h100',
                      'trait_nvl3:CUSTOM_PCI_GROUP3': 'required',
                      'placement:same_subtree': '_h100-0,_h100-1,_h100-2,'
                                                '_nvl3',
                      'placement:group_policy': 'none'}}
        result = self.verify(base.H100_TOPOLOGY, 'h100', H100_RC,
                             [flavor])['gpu.h100.3x']
        self.assertFalse(result.ok)
        self.assertIn('No such trait(s): CUSTOM_PCI_GROUP3',
                      result.problems[0])
        self.assertIn('(no NVLink domain of the topology serves 3 GPUs, so '
                      'no group trait names that size; the domains serve '
                      '2, 4 GPUs: give the flavor one of those sizes)',
                      result.problems[0])
        self.assertNotIn('not reshaped', result.problems[0])


class TestFlatTree(_FlavorCase):
    """The same flavors before reshape: Nova's flat tree."""

    def setUp(self):
        super().setUp()
        self.seed_example()

    def test_plain_alias_gets_cross_domain_pairs(self):
        plain = {'name': 'plain.2x', 'vcpus': 32, 'ram': 262144, 'disk': 100,
                 'extra_specs': {'pci_passthrough:alias': 'h100:2'}}
        result = self.verify(base.H100_TOPOLOGY, 'h100', H100_RC,
                             [plain])['plain.2x']
        self.assertFalse(result.ok)
        # 8 * 7 ordered pairs, 28 sets: the 4 domains and 24 crossing.
        self.assertEqual([('compute-01', 56, 4, 24, 0),
                          ('compute-02', 56, 4, 24, 0)],
                         [r[1:6] for r in result.rows()])

    def test_named_flavor_needs_the_group_trait(self):
        result = self.verify(
            base.H100_TOPOLOGY, 'h100', H100_RC,
            self.generated(base.H100_TOPOLOGY, 'h100', sizes=[2]))[
                'gpu.h100.2x']
        self.assertFalse(result.ok)
        self.assertIn('No such trait(s): CUSTOM_PCI_GROUP2',
                      result.problems[0])
        self.assertIn('the tree is not reshaped; run "openstack nvlink '
                      'reshape"', result.problems[0])

    def test_unknown_resource_class(self):
        result = self.verify(
            base.H100_TOPOLOGY, 'h100', 'CUSTOM_PCI_10DE_2331',
            self.generated(base.H100_TOPOLOGY, 'h100', sizes=[1]))[
                'gpu.h100.1x']
        self.assertEqual([('compute-01', 0, 0, 0, 0),
                          ('compute-02', 0, 0, 0, 0)],
                         [r[1:6] for r in result.rows()])
        self.assertEqual(1, len(result.problems))
        self.assertIn('No such resource class CUSTOM_PCI_10DE_2331',
                      result.problems[0])
        self.assertIn('(no GPU of class CUSTOM_PCI_10DE_2331 is reported',
                      result.problems[0])


class TestCli(oslo_base.BaseTestCase):
    """``openstack nvlink flavor ...`` in process, on a saved snapshot."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tmp = tempfile.mkdtemp()
        cls.snapshot = os.path.join(cls.tmp, 'reshaped.json')
        with embedded.EmbeddedPlacement() as client:
            seed_all(client)
            snapshot.write_file(client.placement.export(), cls.snapshot)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)
        super().tearDownClass()

    def setUp(self):
        super().setUp()

    def openstack(self, *argv):
        """Run the CLI; returns (exit code, stdout, stderr)."""
        result = cli.run(self, *argv)
        return result.code, result.stdout, result.stderr

    def write(self, name, text):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def test_generate_then_verify_on_snapshot(self):
        code, out, err = self.openstack(
            'nvlink', 'flavor', 'generate', '--topology', B200_TOPOLOGY,
            '--alias', 'b200', '--sizes', '1,2,4', '-f', 'json')
        self.assertEqual((0, ''), (code, err))
        flavors = self.write('flavors.json', out)
        code, out, err = self.openstack(
            'nvlink', 'flavor', 'verify', '--snapshot', self.snapshot,
            '--topology', B200_TOPOLOGY, '--flavors', flavors, '-f', 'json',
            '-c', 'flavor', '-c', 'host', '-c', 'candidates', '-c',
            'valid_sets', '-c', 'invalid_sets', '-c', 'missing_sets')
        # Offline too, the query shape it modelled is said.
        self.assertEqual((0, 'flavor verify: Nova 34 query, owner filter on '
                             '(default Nova 34)\n'),
                         (code, err.splitlines(True)[0]))
        self.assertIn('gpu.b200.4x: 2 candidates, 2 distinct GPU sets, 0 '
                      'duplicates; reached 1 of 1 hosts with a free domain',
                      err)
        self.assertEqual([
            {'flavor': 'gpu.b200.%dx' % size, 'host': B200_HOST,
             'candidates': candidates, 'valid_sets': valid,
             'invalid_sets': 0, 'missing_sets': 0}
            for size, candidates, valid in ((1, 8, 8), (2, 4, 4),
                                            (4, 2, 2))], json.loads(out))

    def test_flavor_name_selects_from_the_file(self):
        code, out, err = self.openstack(
            'nvlink', 'flavor', 'generate', '--topology', base.H100_TOPOLOGY,
            '--alias', 'h100', '--sizes', '1,2', '-f', 'json')
        flavors = self.write('flavors.json', out)
        verify = ('nvlink', 'flavor', 'verify', '--snapshot',
                  base.H100_SNAPSHOT, '--topology', base.H100_TOPOLOGY,
                  '--flavors', flavors, '--resource-class', H100_RC)
        code, out, err = self.openstack(*verify + (
            '--flavor', 'gpu.h100.1x', '-f', 'value', '-c', 'flavor'))
        self.assertEqual(0, code, err)
        self.assertEqual(['gpu.h100.1x'] * 2, out.splitlines())
        code, out, err = self.openstack(*verify + ('--flavor', 'gpu.x'))
        self.assertEqual(1, code)
        self.assertIn('no flavor gpu.x in %s (it has: gpu.h100.1x, '
                      'gpu.h100.2x)' % flavors, err)
        self.assertNotIn('credentials', err)

    def test_rows_say_the_tree_is_not_reshaped(self):
        code, out, err = self.openstack(
            'nvlink', 'flavor', 'generate', '--topology', base.H100_TOPOLOGY,
            '--alias', 'h100', '--sizes', '1,2', '-f', 'json')
        flavors = self.write('flavors.json', out)
        code, out, err = self.openstack(
            'nvlink', 'flavor', 'verify', '--snapshot', base.H100_SNAPSHOT,
            '--topology', base.H100_TOPOLOGY, '--flavors', flavors,
            '--resource-class', H100_RC, '-f', 'value', '-c', 'flavor',
            '-c', 'host', '-c', 'status')
        self.assertEqual(1, code, err)
        self.assertEqual(['gpu.h100.1x compute-01 ok',
                          'gpu.h100.1x compute-02 ok',
                          'gpu.h100.2x compute-01 not reshaped',
                          'gpu.h100.2x compute-02 not reshaped'],
                         out.splitlines())

    def test_example_snapshot_with_the_nova_34_query(self):
        reshaped = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                'reshaped.json')
        code, out, err = self.openstack(
            'nvlink', 'reshape', '--topology', base.H100_TOPOLOGY,
            '--snapshot', base.H100_SNAPSHOT, '--save-snapshot', reshaped)
        self.assertEqual(0, code, err)
        code, out, err = self.openstack(
            'nvlink', 'flavor', 'generate', '--topology', base.H100_TOPOLOGY,
            '--alias', 'h100', '--sizes', '1,2', '-f', 'json')
        flavors = self.write('flavors.json', out)
        verify = ('nvlink', 'flavor', 'verify', '--snapshot', reshaped,
                  '--topology', base.H100_TOPOLOGY, '--flavors', flavors,
                  '--resource-class', H100_RC, '-f', 'value', '-c', 'host',
                  '-c', 'candidates', '-c', 'valid_sets')
        code, out, err = self.openstack(*verify)
        self.assertEqual((0, 'flavor verify: Nova 34 query, owner filter on '
                             '(default Nova 34)\n'
                             'gpu.h100.1x: 15 candidates, 15 distinct GPU '
                             'sets, 0 duplicates; reached 2 of 2 hosts with a '
                             'free domain\n'
                             'gpu.h100.2x: 7 candidates, 7 distinct GPU sets, '
                             '0 duplicates; reached 2 of 2 hosts with a free '
                             'domain\n'), (code, err))
        # One GPU of compute-01 (module 5: pair -c, quad -b) is in use:
        # one candidate per free pair.
        self.assertEqual('compute-01 7 7\ncompute-02 8 8\n'
                         'compute-01 3 3\ncompute-02 4 4\n', out)
        # The same tree as a nova-compute older than Nova 34 writes it.
        document = snapshot.read_file(reshaped)
        for provider in document['resource_providers']:
            if provider['parent_provider_uuid'] is None:
                provider['traits'].remove('OWNER_NOVA')
        older = os.path.join(os.path.dirname(reshaped), 'older.json')
        snapshot.write_file(document, older)
        verify = list(verify)
        verify[verify.index(reshaped)] = older
        code, out, err = self.openstack(*verify)
        self.assertEqual(1, code)
        self.assertEqual('compute-01 0 0\ncompute-02 0 0\n' * 2, out)
        self.assertIn('gpu.h100.2x on compute-01: provider(s) compute-01 '
                      'lack OWNER_NOVA', err)
        code, out, err = self.openstack(*verify + ['--nova-release', '33'])
        self.assertEqual((0, 'flavor verify: Nova 33 query, owner filter off '
                             '(--nova-release 33)\n'),
                         (code, err.splitlines(True)[0]))
        self.assertEqual('compute-01 7 7\ncompute-02 8 8\n'
                         'compute-01 3 3\ncompute-02 4 4\n', out)

    def test_verify_fails_on_a_wrong_flavor(self):
        flavors = self.write('wrong.yaml', (
            '- name: wrong.2x\n  vcpus: 32\n  ram: 262144\n  disk: 100\n'
            '  extra_specs:\n'
            '    "pci_passthrough:alias": "h100:2:_h100"\n'
            '    "placement:same_subtree": "_h100-0,_h100-1"\n'
            '    "placement:group_policy": none\n'))
        code, out, err = self.openstack(
            'nvlink', 'flavor', 'verify', '--snapshot', self.snapshot,
            '--topology', base.H100_TOPOLOGY, '--flavors', flavors,
            '--resource-class', H100_RC, '-f', 'value', '-c', 'host',
            '-c', 'candidates', '-c', 'missing_sets')
        self.assertEqual(1, code)
        self.assertEqual('compute-01 0 4\ncompute-02 0 4\n', out)
        self.assertIn('wrong.2x on compute-02: free NVLink domain '
                      'compute-02_nvlink-group-of-2-d', err)

    def _no_match(self, *argv):
        """Run ``flavor verify`` with ``argv``: (code, rows, stderr)."""
        code, out, err = self.openstack(
            'nvlink', 'flavor', 'verify', *argv + (
                '-f', 'value', '-c', 'flavor', '-c', 'host', '-c',
                'candidates', '-c', 'status'))
        return code, out.splitlines(), err

    def h100_flavors(self):
        code, out, err = self.openstack(
            'nvlink', 'flavor', 'generate', '--topology', base.H100_TOPOLOGY,
            '--alias', 'h100', '--sizes', '1,2', '-f', 'json')
        self.assertEqual(0, code, err)
        return self.write('flavors.json', out)

    def test_wrong_resource_class_proves_nothing(self):
        # The hosts have free GPUs of the topology; VGPU matches none.
        code, rows, err = self._no_match(
            '--snapshot', self.snapshot, '--topology', base.H100_TOPOLOGY,
            '--flavors', self.h100_flavors(), '--resource-class', 'VGPU')
        self.assertEqual(1, code, err)
        self.assertEqual(['gpu.h100.1x compute-01 0 no-match',
                          'gpu.h100.1x compute-02 0 no-match',
                          'gpu.h100.2x compute-01 0 no-match',
                          'gpu.h100.2x compute-02 0 no-match'], rows)
        self.assertIn('gpu.h100.2x on compute-02: no match, nothing proven: '
                      'the query matches none of the 8 free GPUs of '
                      'compute-02: none has a free unit of resource class '
                      'VGPU, which alias h100 asks for', err)
        self.assertNotIn('Traceback', err)

    def test_flavors_of_another_gpu_model_prove_nothing(self):
        # B200 flavors (class CUSTOM_PCI_10DE_2901, which the cloud has)
        # against the H100 hosts: their free GPUs are of another class.
        code, out, err = self.openstack(
            'nvlink', 'flavor', 'generate', '--topology', B200_TOPOLOGY,
            '--alias', 'b200', '--sizes', '2', '-f', 'json')
        flavors = self.write('b200.json', out)
        code, rows, err = self._no_match(
            '--snapshot', self.snapshot, '--topology', base.H100_TOPOLOGY,
            '--flavors', flavors, '--resource-class', B200_RC, '--host',
            'compute-01', '--host', 'compute-02')
        self.assertEqual(1, code, err)
        self.assertEqual(['gpu.b200.2x compute-01 0 no-match',
                          'gpu.b200.2x compute-02 0 no-match'], rows)
        self.assertIn('none has a free unit of resource class %s, which '
                      'alias b200 asks for' % B200_RC, err)

    def test_alias_of_a_class_placement_lacks_proves_nothing(self):
        # [pci] alias a100 names an A100 (10de:20b5): no such class here.
        aliases = self.write('aliases.json', json.dumps([{
            'name': 'a100', 'vendor_id': '10de', 'product_id': '20b5'}]))
        flavors = self.write('a100.yaml', (
            '- name: gpu.a100.1x\n  vcpus: 16\n  ram: 131072\n'
            '  disk: 100\n  extra_specs:\n'
            '    "pci_passthrough:alias": "a100:1"\n'))
        code, rows, err = self._no_match(
            '--snapshot', self.snapshot, '--topology', base.H100_TOPOLOGY,
            '--flavors', flavors, '--alias-config', aliases)
        self.assertEqual(1, code, err)
        self.assertEqual(['gpu.a100.1x compute-01 0 no-match',
                          'gpu.a100.1x compute-02 0 no-match'], rows)
        self.assertIn('No such resource class CUSTOM_PCI_10DE_20B5', err)

    def test_snapshot_of_other_hosts_proves_nothing(self):
        # The example snapshot holds compute-01 and compute-02 only.
        code, out, err = self.openstack(
            'nvlink', 'flavor', 'generate', '--topology', B200_TOPOLOGY,
            '--alias', 'b200', '--sizes', '1', '-f', 'json')
        flavors = self.write('b200.json', out)
        code, rows, err = self._no_match(
            '--snapshot', base.H100_SNAPSHOT, '--topology', B200_TOPOLOGY,
            '--flavors', flavors, '--resource-class', H100_RC, '--host',
            B200_HOST)
        self.assertEqual(1, code, err)
        self.assertEqual(['gpu.b200.1x %s 0 no-match' % B200_HOST], rows)
        self.assertIn('gpu.b200.1x on %s: no match, nothing proven: no '
                      'compute node resource provider named %s in Placement'
                      % (B200_HOST, B200_HOST), err)

    def test_a_busy_host_is_not_a_no_match(self):
        # Every GPU of compute-02 in use: nothing to offer, nothing to
        # prove wrong there; compute-01 still proves its domains.
        document = snapshot.read_file(self.snapshot)
        gpus = [p for p in document['resource_providers'] if (
            p['name'].startswith('compute-02_') and
            H100_RC in p.get('inventories', {}))]
        self.assertEqual(8, len(gpus))
        document.setdefault('allocations', {})['c0ffee00-0000-4000-8000-'
                                               '000000000001'] = {
            'allocations': {g['uuid']: {'resources': {H100_RC: 1}}
                            for g in gpus},
            'project_id': 'p', 'user_id': 'u'}
        busy = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'busy.json')
        snapshot.write_file(document, busy)
        code, rows, err = self._no_match(
            '--snapshot', busy, '--topology', base.H100_TOPOLOGY,
            '--flavors', self.h100_flavors(), '--resource-class', H100_RC)
        self.assertEqual(0, code, err)
        self.assertEqual(['gpu.h100.1x compute-01 8 ok',
                          'gpu.h100.1x compute-02 0 ok',
                          'gpu.h100.2x compute-01 4 ok',
                          'gpu.h100.2x compute-02 0 ok'], rows)

    def test_verify_needs_a_resource_class(self):
        flavors = self.write('f.json', '[]')
        code, out, err = self.openstack(
            'nvlink', 'flavor', 'verify', '--snapshot', self.snapshot,
            '--topology', base.H100_TOPOLOGY, '--flavors', flavors)
        self.assertEqual((1, ''), (code, out))
        self.assertIn('no flavors in %s: give --flavors FILE or --flavor '
                      'NAME' % flavors, err)
        self.assertNotIn('Traceback', err)

    def test_print_commands(self):
        code, out, err = self.openstack(
            'nvlink', 'flavor', 'generate', '--topology', base.H100_TOPOLOGY,
            '--alias', 'h100', '--sizes', '2', '--print-commands')
        self.assertEqual(0, code)
        self.assertEqual(
            'openstack flavor create --vcpus 32 --ram 262144 --disk 100 '
            'gpu.h100.2x\n'
            'openstack --os-compute-api-version 2.86 flavor set \\\n'
            '  --property pci_passthrough:alias=h100:2:_h100 \\\n'
            '  --property trait_nvl2:CUSTOM_PCI_GROUP2=required \\\n'
            '  --property trait_h100-0:CUSTOM_PCI_GROUP2_MEMBER0=required '
            '\\\n'
            '  --property trait_h100-1:CUSTOM_PCI_GROUP2_MEMBER1=required '
            '\\\n'
            '  --property placement:same_subtree=_h100-0,_h100-1,_nvl2 \\\n'
            '  --property placement:group_policy=none \\\n'
            '  gpu.h100.2x\n', out)

    def test_nova_config_ini(self):
        code, out, err = self.openstack(
            'nvlink', 'nova-config', '--topology', B200_TOPOLOGY,
            '--alias', 'b200', '--ini')
        self.assertEqual(0, code)
        for line in (
                'device_spec = {"vendor_id": "10de", "product_id": "2901"}',
                'alias = {"name": "b200", '
                '"vendor_id": "10de", "product_id": "2901"}',
                'pci_in_placement = True',
                'allow_pci_traits_in_flavor = True',
                'device_spec = {"vendor_id": "10de", "product_id": "2901", '
                '"address": "0000:3d:00.0", "traits": '
                '"CUSTOM_PCI_GROUP2_MEMBER0,CUSTOM_PCI_GROUP4_MEMBER0,'
                'CUSTOM_PCI_GROUP8_MEMBER0"}',
                '#   hw:numa_nodes=1  (every 4-GPU domain sits on one NUMA '
                'node; the vCPUs and memory must fit that node)',
                '#   hw:pci_numa_affinity_policy=preferred  (prefer '
                'GPU-local CPUs but never refuse a domain that spans '
                'nodes)'):
            self.assertIn(line + '\n', out)
        code, out, err = self.openstack(
            'nvlink', 'nova-config', '--topology', B200_TOPOLOGY,
            '--alias', 'b200', '-f', 'json', '--sizes', '2')
        self.assertEqual(0, code)
        # The 8 per-GPU entries of the host come first.
        self.assertEqual({'service': 'nova-compute', 'section': 'pci',
                          'option': 'report_in_placement', 'value': 'True',
                          'reason': 'one resource provider per GPU (cannot '
                                    'be turned off again)'},
                         json.loads(out)[8 + 1])
        self.assertEqual(8 * ['nova-compute (compute-b200-01)'],
                         [r['service'] for r in json.loads(out)[:8]])
        self.assertNotIn('optimize_for_wide_provider_trees', out)
        code, out, err = self.openstack(
            'nvlink', 'nova-config', '--topology', B200_TOPOLOGY,
            '--alias', 'b200', '--dialect', 'upstream', '--ini')
        self.assertEqual(0, code, err)
        self.assertIn('optimize_for_wide_provider_trees = True\n', out)
        self.assertNotIn('"address"', out)
        self.assertNotIn('allow_pci_traits_in_flavor', out)


class TestPciIdForms(oslo_base.BaseTestCase):
    """``0x10de`` (sysfs), ``10DE`` and ``10de`` are one id everywhere."""

    def topology(self, *forms):
        with open(B200_TOPOLOGY) as f:
            text = f.read()
        lines = text.splitlines(True)
        done = 0
        for i, line in enumerate(lines):
            if 'vendor_id: "10de"' in line:
                vendor, device = forms[done % len(forms)]
                lines[i] = line.replace('"10de"', '"%s"' % vendor).replace(
                    '"2901"', '"%s"' % device)
                done += 1
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'mixed.yaml')
        with open(path, 'w') as f:
            f.write(''.join(lines))
        return path

    def test_every_form_gives_novas_class_and_alias(self):
        path = self.topology(('0x10de', '0x2901'), ('10DE', '2901'),
                             ('10de', '0X2901'))
        out = os.path.join(os.path.dirname(path), 's.json')
        result = cli.run(self, 'nvlink', 'snapshot', '--from-topology', path,
                         '-o', out)
        self.assertEqual(0, result.code, result.stderr)
        with open(out) as f:
            classes = {rc for rp in json.load(f)['resource_providers']
                       for rc in rp['inventories']}
        self.assertEqual({'CUSTOM_PCI_10DE_2901', 'VCPU', 'MEMORY_MB',
                          'DISK_GB'}, classes)
        result = cli.run(self, 'nvlink', 'nova-config', '--topology', path,
                         '--alias', 'b200', '--ini')
        self.assertEqual(0, result.code, result.stderr)
        self.assertIn('alias = {"name": "b200", "vendor_id": "10de", '
                      '"product_id": "2901"}\n', result.stdout)

    def test_not_an_id_names_the_key(self):
        path = self.topology(('0x10dex', '2901'))
        result = cli.run(self, 'nvlink', 'topology', 'validate',
                         '--topology', path)
        self.assertEqual(1, result.code)
        self.assertIn('%s: hosts.compute-b200-01.gpus["0000:17:00.0"].'
                      "vendor_id: '0x10dex' is not a PCI id (4 hex digits, "
                      'e.g. 10de or 0x10de)\n' % path, result.stderr)
