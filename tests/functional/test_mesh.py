"""Direct-NVLink meshes proven on a real embedded Placement.

Hosts of ``etc/examples/direct-nvlink.yaml`` (HGX H100 4-GPU, DGX-1 V100)
next to an HGX H100 8-GPU NVSwitch host (``etc/examples/hgx-h100.yaml``),
seeded as Nova seeds them and reshaped. The generated flavors' queries,
built as Nova builds them, must return exactly the expected GPU sets:
any pair and the whole quad on a 4-GPU mesh, the pairs and quads inside
each DGX-1 quad (never a cross-quad pair), the diagonal pairs and quads on
the NVSwitch host, all with the same flavors.
"""

import itertools
import os

from nvlink_placement.flavors import generate
from nvlink_placement.flavors import inputs
from nvlink_placement.flavors import request
from nvlink_placement.flavors import verify
from nvlink_placement.placement import naming
from nvlink_placement.placement import state as state_mod
from nvlink_placement.placement import usage
from nvlink_placement.plan import desired
from nvlink_placement.plan import run
from nvlink_placement.report import capacity
from nvlink_placement.topology import loader
from nvlink_placement.topology import members
from tests.functional import base
from tests import novalike

MESH_TOPOLOGY = os.path.join(base.EXAMPLES, 'direct-nvlink.yaml')
H100X4 = 'compute-h100x4-01'
DGX1 = 'dgx1-01'
V100_RC = 'CUSTOM_PCI_10DE_1DB5'


def _hosts():
    mesh = loader.load(MESH_TOPOLOGY).hosts
    nvswitch = loader.load(base.H100_TOPOLOGY).hosts
    return {'compute-01': nvswitch['compute-01'], H100X4: mesh[H100X4],
            DGX1: mesh[DGX1]}


def _sets(addresses, size):
    return {frozenset(c) for c in itertools.combinations(addresses, size)}


class TestMeshes(base.PlacementTestCase):

    def setUp(self):
        super().setUp()
        self.hosts = _hosts()
        self.names = {}

    def seed(self, *names):
        """Seed ``names`` as Nova does (flat trees)."""
        for name in names:
            rc = V100_RC if name == DGX1 else novalike.GPU_RC
            host = self.hosts[name]
            self.names.update(novalike.seed_host(
                self.client, name, {a: g.module_id
                                    for a, g in host.gpus.items()},
                rc=rc, board=host.board))

    def offered(self, name, addresses, size):
        """The ``size``-sets of ``addresses`` with one GPU of each member."""
        classes = members.indexes(self.hosts[name])
        return {s for s in _sets(addresses, size) if members.one_of_each(
            [classes[a][size] for a in s], size)}

    def reshape(self, *names):
        wanted = [desired.from_topology(self.hosts[n]) for n in names]
        result = run.run(self.client, wanted)
        self.assertEqual([], result.failures)
        return result

    def verify(self, hosts, alias, rc, sizes):
        flavors = generate.generate(hosts, alias, sizes=sizes).flavors
        aliases = {alias: request.Alias(alias, rc)}
        providers = verify.read_providers(self.client)
        results = {}
        for flavor in flavors:
            query = request.build(
                inputs.flavor_from_dict(flavor.as_dict()), aliases)
            results[flavor.size] = verify.verify(self.client, query, hosts,
                                                 providers)
        return results

    def gpu(self, host, address):
        return self.names[self.hosts[host].gpu_provider_name(address)]

    def test_reshape_gives_a_mesh_every_size_trait(self):
        self.seed(*self.hosts)
        self.reshape(*self.hosts)
        parents = self.parents()
        group = H100X4 + '_nvlink-group-of-4-a'
        self.assertEqual(H100X4, parents[group])
        for address in self.hosts[H100X4].gpus:
            self.assertEqual(group, parents[
                self.hosts[H100X4].gpu_provider_name(address)])
        current = state_mod.read(self.client, [naming.OWNER_TRAIT],
                                 trait_prefixes=['CUSTOM_PCI_GROUP'])
        for name in (group, DGX1 + '_nvlink-group-of-4-a',
                     DGX1 + '_nvlink-group-of-4-b'):
            self.assertEqual({'CUSTOM_PCI_GROUP2', 'CUSTOM_PCI_GROUP4',
                              naming.OWNER_TRAIT},
                             set(current.by_name[name].traits))
        self.assertEqual({'CUSTOM_PCI_GROUP2', naming.OWNER_TRAIT},
                         set(current.by_name[
                             'compute-01_nvlink-group-of-2-a'].traits))
        self.assertEqual([], self.reshape(*self.hosts).actions)

    def test_mesh_and_nvswitch_hosts_take_the_same_flavors(self):
        self.seed('compute-01', H100X4)
        self.reshape('compute-01', H100X4)
        hosts = [self.hosts['compute-01'], self.hosts[H100X4]]
        results = self.verify(hosts, 'h100', novalike.GPU_RC, [1, 2, 4])
        by_module = {g.module_id: a
                     for a, g in self.hosts['compute-01'].gpus.items()}
        nvswitch = {
            2: {frozenset(by_module[m] for m in pair)
                for pair in ((1, 3), (2, 4), (5, 7), (6, 8))},
            4: {frozenset(by_module[m] for m in quad)
                for quad in ((1, 2, 3, 4), (5, 6, 7, 8))}}
        mesh = list(self.hosts[H100X4].gpus)
        expected = {
            # size: ({host: valid sets}, {host: candidates})
            1: ({'compute-01': _sets(by_module.values(), 1),
                 H100X4: _sets(mesh, 1)}, {'compute-01': 8, H100X4: 4}),
            # 4 GPUs: the pairs of one GPU of each member class, once each.
            2: ({'compute-01': nvswitch[2],
                 H100X4: self.offered(H100X4, mesh, 2)},
                {'compute-01': 4, H100X4: 4}),
            4: ({'compute-01': nvswitch[4], H100X4: {frozenset(mesh)}},
                {'compute-01': 2, H100X4: 1}),
        }
        self.assertEqual(4, len(expected[2][0][H100X4]))
        for size, (valid, candidates) in expected.items():
            result = results[size]
            self.assertEqual([], result.problems, size)
            self.assertEqual(valid, {h.host: h.valid for h in result.hosts},
                             size)
            self.assertEqual(candidates,
                             {h.host: h.candidates for h in result.hosts},
                             size)
            for host in result.hosts:
                self.assertEqual(({}, {}), (host.invalid, host.missing))
        flavor = generate.generate(hosts, 'h100', sizes=[2, 4]).flavors
        self.assertEqual(['trait_nvl2:CUSTOM_PCI_GROUP2',
                          'trait_nvl4:CUSTOM_PCI_GROUP4'],
                         [k for f in flavor for k in f.extra_specs
                          if k.startswith('trait_nvl')])

    def test_dgx1_offers_pairs_and_quads_inside_the_quads(self):
        self.seed(DGX1)
        self.reshape(DGX1)
        host = self.hosts[DGX1]
        results = self.verify([host], 'v100', V100_RC, [2, 4])
        addresses = sorted(host.gpus)
        quads = [addresses[:4], addresses[4:]]
        result = results[2].hosts[0]
        self.assertEqual(self.offered(DGX1, quads[0], 2) |
                         self.offered(DGX1, quads[1], 2), result.valid)
        self.assertEqual((8, {}, {}), (result.candidates, result.invalid,
                                       result.missing))
        self.assertNotIn(frozenset(['0000:06:00.0', '0000:85:00.0']),
                         result.valid)
        result = results[4].hosts[0]
        self.assertEqual({frozenset(q) for q in quads}, result.valid)
        self.assertEqual(2, result.candidates)
        self.assertEqual([], results[2].problems + results[4].problems)

    def test_capacity_counts_any_pairs(self):
        self.seed(H100X4)
        self.reshape(H100X4)
        mesh = list(self.hosts[H100X4].gpus)
        novalike.allocate(self.client, 'c0c0c0c0-0000-4000-8000-000000000001',
                          {self.gpu(H100X4, mesh[1]): {novalike.GPU_RC: 1}})
        roots = [self.names[H100X4]]
        current = state_mod.read(
            self.client, [naming.OWNER_TRAIT, naming.PCI_TRAIT],
            trait_prefixes=['CUSTOM_PCI_GROUP'])
        uses = usage.read(self.client, current, roots)
        by_tree = capacity.rows(capacity.hosts_from_state(current, uses,
                                                          roots))
        topology = loader.load(MESH_TOPOLOGY)
        by_topology = capacity.rows(capacity.hosts_from_state(
            current, uses, roots, topology))
        self.assertEqual(by_tree, by_topology)
        rows = {row[1]: row[2:] for row in by_tree if row[0] == H100X4}
        # (fits, free, used, reserved, broken, stranded, class): 3 free
        # GPUs hold one pair, one GPU is stranded for pairs; no quad left.
        rc = novalike.GPU_RC
        self.assertEqual({1: (3, 3, 1, 0, 0, 0, rc), 2: (1, 3, 1, 0, 1, 1, rc),
                          4: (0, 3, 1, 0, 1, 3, rc)}, rows)
        result = self.verify([self.hosts[H100X4]], 'h100', novalike.GPU_RC,
                             [2])[2].hosts[0]
        # Flavor verify sees the pairs of the 3 free GPUs that hold one
        # GPU of each member class: capacity's "fits" counts instances,
        # verify's sets count choices.
        self.assertEqual(self.offered(H100X4, [mesh[0], mesh[2], mesh[3]],
                                      2), result.valid)
        self.assertEqual(2, len(result.valid))
        self.assertEqual({}, result.missing)

    def test_free_capacity_of_a_whole_mesh(self):
        self.seed(H100X4)
        self.reshape(H100X4)
        roots = [self.names[H100X4]]
        current = state_mod.read(
            self.client, [naming.OWNER_TRAIT, naming.PCI_TRAIT],
            trait_prefixes=['CUSTOM_PCI_GROUP'])
        rows = capacity.rows(capacity.hosts_from_state(
            current, usage.read(self.client, current, roots), roots))
        self.assertEqual([(H100X4, 1, 4), (H100X4, 2, 2), (H100X4, 4, 1)],
                         [row[:3] for row in rows if row[0] == H100X4])

    def test_unreshaped_mesh_is_missing_once(self):
        # The NVSwitch host is reshaped (the traits exist), the mesh host
        # is still flat: its 2-GPU candidates never come, and verify names
        # the mesh once, not each of its 6 pairs.
        self.seed('compute-01', H100X4)
        self.reshape('compute-01')
        result = self.verify([self.hosts['compute-01'], self.hosts[H100X4]],
                             'h100', novalike.GPU_RC, [2])[2]
        mesh = self.by_host(result)[H100X4]
        self.assertEqual({frozenset(self.hosts[H100X4].gpus):
                          H100X4 + '_nvlink-group-of-4-a (any 2)'},
                         mesh.missing)
        self.assertEqual(['gpu.h100.2x on %s: free NVLink domain %s '
                          '(any 2) [%s] is never offered' % (
                              H100X4, H100X4 + '_nvlink-group-of-4-a',
                              ', '.join(sorted(self.hosts[H100X4].gpus)))],
                         result.problems)

    def by_host(self, result):
        return {h.host: h for h in result.hosts}
