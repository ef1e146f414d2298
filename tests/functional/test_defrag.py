"""``defrag`` through the CLI on states built to catch wrong plans.

Each state is a snapshot of Nova's flat trees (HGX H100 boards) with the
servers' allocations, reshaped by ``reshape --save-snapshot``; ``defrag``
then plans on that snapshot, in an embedded, real Placement.
"""

import json
import os

import fixtures
from oslotest import base

from nvlink_placement.flavors import generate
from nvlink_placement.flavors import inputs
from nvlink_placement.flavors import request
from nvlink_placement.novaconfig import as_configured
from nvlink_placement.placement import embedded
from nvlink_placement.placement import nova_tree
from nvlink_placement.placement import snapshot
from nvlink_placement.simulate import defrag
from nvlink_placement.topology import loader
from tests.functional import cli
from tests import novalike

RC = novalike.GPU_RC
# Module ids on novalike.BOARD1: quad a = modules 1-4 (pairs {1,3},
# {2,4}), quad b = modules 5-8 (pairs {5,7}, {6,8}).
ADDRESS = {m: a for a, m in novalike.BOARD1.items()}
ONE = {'VCPU': 16, 'MEMORY_MB': 131072, 'DISK_GB': 100}
TWO = {'VCPU': 32, 'MEMORY_MB': 262144, 'DISK_GB': 100}
FOUR = {'VCPU': 64, 'MEMORY_MB': 524288, 'DISK_GB': 100}


class _State(base.BaseTestCase):
    """Hosts of one board each; servers placed by module id."""

    HOSTS = ()

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        boards = getattr(self, 'boards', {})
        self.topology_path = self.write('topology.json', {
            'version': 1, 'hosts': {
                name: {'board': boards.get(name, (novalike.H100,))[0],
                       'gpus': boards.get(name, (0, novalike.BOARD1))[1]}
                for name in self.HOSTS}})
        self.topology = loader.load(self.topology_path)
        self.flavors = self.write('flavors.json', [
            f.as_dict() for f in generate.generate(
                list(self.topology.hosts.values()), 'h100',
                sizes=[1, 2, 4]).flavors])
        self.document = as_configured.from_topology(self.topology,
                                                    resource_class=RC)
        self.names = {}

    def write(self, name, document):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as f:
            json.dump(document, f)
        return path

    def place(self, name, host, modules, resources):
        """Server ``name`` on ``host``'s GPUs ``modules``."""
        uuid = nova_tree.node_uuid('server-' + name)
        self.names[uuid] = name
        node = nova_tree.node_uuid(host)
        board = getattr(self, 'boards', {}).get(host, (0, novalike.BOARD1))
        address = {m: a for a, m in board[1].items()}
        allocations = {nova_tree.pci_uuid(node, address[m]): {RC: 1}
                       for m in modules}
        allocations[node] = dict(resources)
        self.document['allocations'][uuid] = snapshot.consumer_entry(
            'p1', 'u1', allocations)
        return uuid

    def reshaped(self):
        flat = self.write('flat.json', self.document)
        path = os.path.join(self.tmp, 'reshaped.json')
        result = cli.run(self, 'nvlink', 'reshape', '--topology',
                         self.topology_path, '--snapshot', flat,
                         '--save-snapshot', path)
        self.assertEqual(0, result.code, result.stderr)
        return path

    def defrag(self, state, *argv):
        return cli.run(self, 'nvlink', 'defrag', '--topology',
                       self.topology_path, '--flavors', self.flavors,
                       '--resource-class', RC, '--snapshot', state, *argv)

    def rows(self, result):
        return [(self.names[m['server']], m['source'], m['destination'],
                 m['frees']) for m in json.loads(result.stdout)]


class TestFourHostTrap(_State):
    """Two moves free two quads; a plan freeing one quad at a time takes 3.

    node-01 and node-02: one 1-GPU server (a, b) in quad a, quad b full
    (one 4-GPU server). node-03: quad a holds two 1-GPU servers and two
    free GPUs, quad b full. node-04: quad a holds a 2-GPU and a 1-GPU
    server and one free GPU, quad b full. node-02 has twice the vCPUs,
    RAM and disk of the others: Nova's weighers put it first. Freeing
    node-01's quad a first and sending a to node-02 (the first host
    weighed, its free GPUs outside the one quad being freed) leaves
    node-02's quad a holding a and b: a moves again, 3 moves. Both to
    node-03 at once: 2 moves.
    """

    HOSTS = ('node-01', 'node-02', 'node-03', 'node-04')

    def setUp(self):
        super().setUp()
        self.place('a', 'node-01', [1], ONE)
        self.place('b', 'node-02', [1], ONE)
        self.place('c', 'node-03', [1], ONE)
        self.place('d', 'node-03', [3], ONE)
        self.place('e', 'node-04', [1, 3], TWO)
        self.place('f', 'node-04', [2], ONE)
        for host in self.HOSTS:
            self.place('x' + host[-1], host, [5, 6, 7, 8], FOUR)
        for rp in self.document['resource_providers']:
            if rp['name'] == 'node-02':
                for inventory in rp['inventories'].values():
                    inventory['total'] *= 2
        self.state = self.reshaped()

    def test_two_moves_each_server_once(self):
        after = os.path.join(self.tmp, 'after.json')
        result = self.defrag(self.state, '--size', '4', '--count', '2',
                             '--save-snapshot', after, '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(
            [('a', 'node-01', 'node-03', 'node-01_nvlink-group-of-4-a'),
             ('b', 'node-02', 'node-03', 'node-02_nvlink-group-of-4-a')],
            self.rows(result))
        self.assertIn(
            'defrag: 0 free 4-GPU domain(s) before, 2 after 2 move(s) (the '
            'fewest: proven by exact search); freed '
            'node-01_nvlink-group-of-4-a, node-02_nvlink-group-of-4-a; '
            'offered by the 4-GPU flavor afterwards: 2 of 2', result.stderr)
        # The state after the moves, in a fresh Placement: the 4-GPU
        # flavor is offered exactly the two freed quads, and a and b hold
        # node-03's two GPUs that were free.
        four = json.load(open(self.flavors))[2]
        query = request.build(inputs.flavor_from_dict(four),
                              {'h100': request.Alias('h100', RC)})
        with embedded.EmbeddedPlacement(snapshot.read_file(after)) as client:
            names = {rp['uuid']: rp['name'] for rp in client.get(
                '/resource_providers')['resource_providers']}
            body = client.get(query.url, version='1.36')
            offered = {frozenset(names[u] for u in c['allocations']
                                 if u in names and '_0000:' in names[u])
                       for c in body['allocation_requests']}
            held = {}
            for uuid, name in self.names.items():
                if name in 'ab':
                    held[name] = sorted(names[u] for u in client.get(
                        '/allocations/%s' % uuid)['allocations'])
        quad = [ADDRESS[m].upper() for m in (1, 2, 3, 4)]
        self.assertEqual({frozenset('%s_%s' % (host, a) for a in quad)
                          for host in ('node-01', 'node-02')}, offered)
        self.assertEqual({'node-03_%s' % ADDRESS[2].upper(),
                          'node-03_%s' % ADDRESS[4].upper()},
                         {g for name in 'ab' for g in held[name]
                          if '_0000:' in g})
        self.assertTrue(all(n == 'node-03' or n.startswith('node-03_')
                            for name in 'ab' for n in held[name]), held)

    def test_heuristic_past_the_search_steps(self):
        result = self.defrag(self.state, '--size', '4', '--count', '2',
                             '--search-steps', '1', '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        self.assertIn('the plan is a heuristic one, not proven the fewest '
                      'moves: more than 1 steps of search (the exact search '
                      'stops there)', result.stderr)
        self.assertIn('2 after 2 move(s) (heuristic: not proven the '
                      'fewest)', result.stderr)
        self.assertEqual(
            [('a', 'node-01', 'node-03', 'node-01_nvlink-group-of-4-a'),
             ('b', 'node-02', 'node-03', 'node-02_nvlink-group-of-4-a')],
            self.rows(result))
        result = self.defrag(self.state, '--size', '4', '--count', '2',
                             '--search-steps', '0')
        self.assertEqual(3, result.code)
        self.assertIn('--search-steps must be at least 1', result.stderr)

    def test_heuristic_short_of_the_count(self):
        # Three quads cannot be freed; the heuristic does not prove it.
        result = self.defrag(self.state, '--size', '4', '--count', '3',
                             '--search-steps', '5', '-f', 'json')
        self.assertEqual(1, result.code, result.stderr)
        self.assertIn('only 2 free 4-GPU domain(s) found, 3 wanted: a '
                      'heuristic plan (the exact search stopped at its '
                      'bound; a larger --search-steps may find more)',
                      result.stderr)
        self.assertEqual(2, len(json.loads(result.stdout)))


class TestFlavorsOfServers(_State):
    """Servers booted from a volume, with pinned CPUs, of no flavor.

    node-01: v (booted from a volume: no DISK_GB) on module 1, p (pinned:
    PCPU, not VCPU) on module 2, w (8 vCPUs: no flavor of the file) on
    module 5. node-02: t (2 GPUs, 30 vCPUs: no flavor of the file
    either) on modules 1 and 3, x (4 GPUs) in quad b. One free quad:
    node-01's quad a (v and p to node-02's modules 2 and 4); no second
    one (w and t cannot move, x has nowhere to go).
    """

    HOSTS = ('node-01', 'node-02')

    def setUp(self):
        super().setUp()
        for rp in self.document['resource_providers']:
            if rp['parent_provider_uuid'] is None:
                rp['inventories']['PCPU'] = dict(
                    rp['inventories']['VCPU'], total=64,
                    allocation_ratio=1.0)
        self.place('v', 'node-01', [1], {'VCPU': 16, 'MEMORY_MB': 131072})
        self.place('p', 'node-01', [2], dict(ONE, VCPU=0, PCPU=16))
        self.place('w', 'node-01', [5], dict(ONE, VCPU=8))
        self.place('t', 'node-02', [1, 3], dict(TWO, VCPU=30))
        self.place('x', 'node-02', [5, 6, 7, 8], FOUR)
        for entry in self.document['allocations'].values():
            for resources in entry['allocations'].values():
                resources['resources'] = {
                    rc: n for rc, n in resources['resources'].items() if n}
        self.state = self.reshaped()

    def test_boot_from_volume_and_pinned_servers_move(self):
        result = self.defrag(self.state, '--size', '4', '--count', '1',
                             '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(
            [('v', 'node-01', 'node-02', 'node-01_nvlink-group-of-4-a'),
             ('p', 'node-01', 'node-02', 'node-01_nvlink-group-of-4-a')],
            self.rows(result))
        self.assertEqual(['gpu.h100.1x', 'gpu.h100.1x'],
                         [m['flavor'] for m in json.loads(result.stdout)])

    def test_no_flavor_is_named_as_the_cause(self):
        result = self.defrag(self.state, '--size', '4', '--count', '2',
                             '-f', 'json')
        self.assertEqual(1, result.code, result.stderr)
        w = next(u for u, n in self.names.items() if n == 'w')
        self.assertIn(
            'server %s (1 GPU(s) on node-01) holds DISK_GB=100, '
            'MEMORY_MB=131072, VCPU=8; the 1-GPU flavors of the flavors '
            'file ask for gpu.h100.1x: DISK_GB=100, MEMORY_MB=131072, '
            'VCPU=16 (with no DISK_GB when booted from a volume, PCPU for '
            'VCPU when pinned): no flavor matches, it is not moved' % w,
            result.stderr)
        self.assertIn(
            'only 1 free 4-GPU domain(s) reachable, 2 wanted: the other '
            'domains hold servers whose flavor is not in the flavors file '
            '(2 server(s): see the warnings), or servers that no other host '
            'can take', result.stderr)


class TestFreedButNotOffered(_State):
    """A quad freed on a host without the vCPUs of the 4-GPU flavor.

    node-01 (92 vCPUs): a (module 1), y (modules 5, 7). With a gone, 60
    vCPUs are free: the 4-GPU flavor (64) is not offered node-01's quad a.
    node-02: b and c in quad a, quad b full.
    """

    HOSTS = ('node-01', 'node-02')

    def setUp(self):
        super().setUp()
        for rp in self.document['resource_providers']:
            if rp['name'] == 'node-01':
                rp['inventories']['VCPU']['total'] = 23
        self.place('a', 'node-01', [1], ONE)
        self.place('y', 'node-01', [5, 7], TWO)
        self.place('b', 'node-02', [1], ONE)
        self.place('c', 'node-02', [2], ONE)
        self.place('x', 'node-02', [5, 6, 7, 8], FOUR)
        self.state = self.reshaped()

    def test_counted_as_not_offered(self):
        result = self.defrag(self.state, '--size', '4', '--count', '1',
                             '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(
            [('a', 'node-01', 'node-02', 'node-01_nvlink-group-of-4-a')],
            self.rows(result))
        self.assertIn('offered by the 4-GPU flavor afterwards: 0 of 1',
                      result.stderr)
        self.assertIn('node-01_nvlink-group-of-4-a is free but the 4-GPU '
                      'flavor is not offered it', result.stderr)


class TestNovaFlavors(_State):
    """Flavors named by the compute API's server list.

    node-01: e (1 GPU, module 1) holds DISK_GB=120 (root disk and
    ephemeral disk): no flavor of the file has those resources, Nova
    names its flavor gpu.h100.1x. node-02: h (module 1, 8 vCPUs) runs
    gpu.custom, which the file does not have. Quads b full.
    """

    HOSTS = ('node-01', 'node-02')

    def setUp(self):
        super().setUp()
        self.e = self.place('e', 'node-01', [1], dict(ONE, DISK_GB=120))
        self.h = self.place('h', 'node-02', [1], dict(ONE, VCPU=8))
        self.place('x1', 'node-01', [5, 6, 7, 8], FOUR)
        self.place('x2', 'node-02', [5, 6, 7, 8], FOUR)
        self.state = snapshot.read_file(self.reshaped())
        self.queries = [request.build(inputs.flavor_from_dict(f), {
            'h100': request.Alias('h100', RC)}) for f in json.load(
                open(self.flavors))]

    def advise(self, nova_flavors):
        with embedded.EmbeddedPlacement(self.state) as client:
            return defrag.advise(
                client, list(self.topology.hosts.values()), self.queries,
                4, 1, nova_flavors=nova_flavors)

    def test_flavor_from_nova(self):
        advice = self.advise({self.e: 'gpu.h100.1x', self.h: 'gpu.custom'})
        self.assertEqual([(self.e, 'gpu.h100.1x', 'node-01', 'node-02')],
                         [(m.server, m.flavor, m.source, m.destination)
                          for m in advice.moves])
        self.assertIn(
            'server %s (1 GPU(s) on node-02) runs flavor gpu.custom '
            '(compute API), which the flavors file does not have at all, '
            'and no flavor there asks for its DISK_GB=100, '
            'MEMORY_MB=131072, VCPU=8: it is not moved' % self.h,
            advice.notes)
        self.assertTrue(advice.reached)

    def test_without_nova_by_resources(self):
        advice = self.advise(None)
        self.assertEqual([], advice.moves)
        self.assertEqual(2, advice.unmatched)


class TestMesh(_State):
    """A DGX-1 (two 4-GPU meshes) beside an HGX H100 board.

    dgx1-01: a on module 1 (mesh {1-4}), x on modules 5-8. node-01: b
    on module 1 (quad a), y in quad b. One move frees a 4-GPU domain: a
    to node-01 (the mesh's host comes first) frees the mesh.
    """

    HOSTS = ('dgx1-01', 'node-01')
    DGX1 = {'0000:06:00.0': 1, '0000:07:00.0': 2, '0000:0a:00.0': 3,
            '0000:0b:00.0': 4, '0000:85:00.0': 5, '0000:86:00.0': 6,
            '0000:89:00.0': 7, '0000:8a:00.0': 8}

    def setUp(self):
        self.boards = {'dgx1-01': ('dgx-1-v100', self.DGX1),
                       'node-01': (novalike.H100, novalike.BOARD1)}
        super().setUp()
        self.place('a', 'dgx1-01', [1], ONE)
        self.place('x', 'dgx1-01', [5, 6, 7, 8], FOUR)
        self.place('b', 'node-01', [1], ONE)
        self.place('y', 'node-01', [5, 6, 7, 8], FOUR)
        self.state = self.reshaped()

    def test_mesh_freed(self):
        result = self.defrag(self.state, '--size', '4', '--count', '1',
                             '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        rows = self.rows(result)
        self.assertEqual([('a', 'dgx1-01', 'node-01')],
                         [r[:3] for r in rows])
        self.assertIn('1 after 1 move(s) (the fewest: proven by exact '
                      'search); freed %s; offered by the 4-GPU flavor '
                      'afterwards: 1 of 1' % rows[0][3], result.stderr)
        self.assertTrue(rows[0][3].startswith('dgx1-01_'), rows)
