"""``simulate`` and ``defrag`` through the CLI, on the embedded Placement.

Seeded runs give fixed results: the numbers below are what the seeds
give, and change only when the model (Nova's rule, the query, the tree
or the flavors) changes.
"""

import copy
import json
import os

import fixtures
from oslotest import base
import yaml

from nvlink_placement.flavors import as_configured
from nvlink_placement.flavors import generate
from nvlink_placement.flavors import request
from nvlink_placement.placement import client as pc
from nvlink_placement.placement import embedded
from nvlink_placement.placement import nova_tree
from nvlink_placement.placement import snapshot
from nvlink_placement.placement import snapshot_api
from nvlink_placement.topology import loader
from tests.functional import base as fbase
from tests.functional import cli
from tests import novalike
from tests import placement_server

RC = novalike.GPU_RC
WORKLOAD = {'version': 1, 'seed': 11, 'events': 24,
            'arrival': {'distribution': 'exponential', 'mean': 0.5},
            'lifetime': {'distribution': 'exponential', 'mean': 6},
            'flavors': [{'gpus': 1, 'weight': 3}, {'gpus': 2, 'weight': 2},
                        {'gpus': 4, 'weight': 1}]}


def h100_flavors():
    hosts = list(loader.load(fbase.H100_TOPOLOGY).hosts.values())
    return [f.as_dict() for f in generate.generate(
        hosts, 'h100', sizes=[1, 2, 4]).flavors]


class _Files(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.flavors = self.write('flavors.json', h100_flavors())

    def write(self, name, document):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as f:
            if name.endswith('.json'):
                json.dump(document, f)
            else:
                yaml.safe_dump(document, f)
        return path


class TestSimulate(_Files):

    def simulate(self, *argv):
        return cli.run(self, 'nvlink', 'simulate', '--topology',
                       fbase.H100_TOPOLOGY, '--flavors', self.flavors,
                       *argv)

    def test_layouts_side_by_side(self):
        workload = self.write('workload.yaml', WORKLOAD)
        timeline = os.path.join(self.tmp, 'timeline.json')
        picture = os.path.join(self.tmp, 'run.svg')
        result = self.simulate('--workload', workload, '--from-topology',
                               '--resource-class', RC, '--timeline',
                               timeline, '--svg', picture, '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        rows = [(r['layout'], r['flavor'], r['gpus'], r['requested'],
                 r['placed'], r['no_valid_host'], r['fragmentation_loss'],
                 r['spanning_domains'], r['spanning_share'])
                for r in json.loads(result.stdout)]
        self.assertEqual([
            ('flat', 'gpu.h100.1x.upstream', 1, 6, 6, 0, 0, 0, 0.0),
            ('flat', 'gpu.h100.2x.upstream', 2, 7, 5, 2, 0, 5, 1.0),
            ('flat', 'gpu.h100.4x.upstream', 4, 3, 2, 1, 0, 1, 0.5),
            ('reshaped', 'gpu.h100.1x', 1, 6, 6, 0, 0, 0, 0.0),
            ('reshaped', 'gpu.h100.2x', 2, 7, 5, 2, 0, 0, 0.0),
            ('reshaped', 'gpu.h100.4x', 4, 3, 1, 2, 1, 0, 0.0)], rows)
        with open(timeline) as f:
            points = json.load(f)
        self.assertEqual(['flat', 'reshaped'], sorted(points))
        self.assertEqual(24, len(points['flat']))
        # The first boot is a 2-GPU server: upstream, its GPUs break two
        # pairs and a quad; reshaped, one pair.
        self.assertEqual({'gpus_in_use': 2, 'time': 0.3011,
                          'free_domains': {'2': 6, '4': 3}},
                         points['flat'][0])
        self.assertEqual({'gpus_in_use': 2, 'time': 0.3011,
                          'free_domains': {'2': 7, '4': 3}},
                         points['reshaped'][0])
        with open(picture) as f:
            svg = f.read()
        self.assertTrue(svg.startswith('<?xml'))
        self.assertEqual(6, svg.count('<polyline'))   # 3 panels x 2 layouts
        self.assertIn('free 4-GPU NVLink domains', svg)

    def test_snapshot_host_layout_summary_and_state(self):
        workload = self.write('workload.yaml', WORKLOAD)
        aliases = self.write('alias.json', [{'name': 'h100',
                                             'resource_class': RC}])
        state = os.path.join(self.tmp, 'state')
        result = self.simulate('--workload', workload, '--snapshot',
                               fbase.H100_SNAPSHOT, '--host', 'compute-01',
                               '--layout', 'reshaped', '--alias-config',
                               aliases, '--summary', '--save-state', state,
                               '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual([{'layout': 'reshaped', 'events': 24, 'gpus': 8,
                           'mean_gpus_in_use': 6.5, 'peak_gpus_in_use': 8,
                           'end_free_domains': '2-GPU: 1, 4-GPU: 0'}],
                         json.loads(result.stdout))
        saved = snapshot.read_file(os.path.join(state, 'reshaped.json'))
        # The snapshot's own consumer plus the servers alive at the end,
        # all on compute-01 (compute-02 was not simulated).
        self.assertEqual(4, len(saved['allocations']))
        names = {rp['uuid']: rp['name'] for rp in saved['resource_providers']}
        hosts = {names[rp].split('_')[0]
                 for c in saved['allocations'].values()
                 for rp in c['allocations']}
        self.assertEqual({'compute-01'}, hosts)
        self.assertFalse(os.path.exists(os.path.join(state, 'flat.json')))

    def test_bad_workload_runs_nothing(self):
        bad = copy.deepcopy(WORKLOAD)
        bad['flavors'][1]['weight'] = 'heavy'
        workload = self.write('workload.yaml', bad)
        picture = os.path.join(self.tmp, 'run.svg')
        result = self.simulate('--workload', workload, '--from-topology',
                               '--resource-class', RC, '--svg', picture)
        self.assertEqual(1, result.code)
        self.assertIn("%s: flavors[1].weight: expected a number, got a "
                      "string 'heavy'" % workload, result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        self.assertFalse(os.path.exists(picture))

    def test_size_without_flavor(self):
        more = copy.deepcopy(WORKLOAD)
        more['flavors'].append({'gpus': 3, 'weight': 1})
        workload = self.write('workload.yaml', more)
        result = self.simulate('--workload', workload, '--from-topology',
                               '--resource-class', RC)
        self.assertEqual(1, result.code)
        self.assertIn('%s: flavors: the mix asks for 3 GPUs, but %s has '
                      'flavors for 1, 2, 4 only' % (workload, self.flavors),
                      result.stderr)

    def test_needs_a_start(self):
        workload = self.write('workload.yaml', WORKLOAD)
        result = self.simulate('--workload', workload)
        self.assertEqual(3, result.code)
        self.assertIn('one of the arguments --snapshot --from-topology is '
                      'required', result.stderr)


def _consumer(host, addresses, vcpus, ram, disk=100):
    node = nova_tree.node_uuid(host)
    allocations = {nova_tree.pci_uuid(node, a): {RC: 1} for a in addresses}
    allocations[node] = {'VCPU': vcpus, 'MEMORY_MB': ram, 'DISK_GB': disk}
    return snapshot.consumer_entry('p1', 'u1', allocations)


class _DefragFiles(_Files):

    def reshape(self, flat):
        """``reshape --save-snapshot`` of the snapshot ``flat``: its path."""
        reshaped = os.path.join(self.tmp, 'reshaped.json')
        result = cli.run(self, 'nvlink', 'reshape', '--topology',
                         fbase.H100_TOPOLOGY, '--snapshot', flat,
                         '--save-snapshot', reshaped)
        self.assertEqual(0, result.code, result.stderr)
        return reshaped

    def defrag(self, state, *argv):
        return cli.run(self, 'nvlink', 'defrag', '--topology',
                       fbase.H100_TOPOLOGY, '--flavors', self.flavors,
                       '--resource-class', RC, '--snapshot', state, *argv)


class TestDefrag(_DefragFiles):
    """Two H100 hosts, every 4-GPU domain holding one small server."""

    def setUp(self):
        super().setUp()
        topology = loader.load(fbase.H100_TOPOLOGY)
        self.hosts = topology.hosts
        document = as_configured.from_topology(topology, resource_class=RC)
        by_module = {name: {g.module_id: a for a, g in h.gpus.items()}
                     for name, h in self.hosts.items()}
        one = (16, 131072)
        two = (32, 262144)
        document['allocations'] = {
            's-01-m1': _consumer('compute-01', [by_module['compute-01'][1]],
                                 *one),
            's-01-m5': _consumer('compute-01', [by_module['compute-01'][5]],
                                 *one),
            's-02-m2': _consumer('compute-02', [by_module['compute-02'][2]],
                                 *one),
            's-02-m57': _consumer('compute-02', [
                by_module['compute-02'][5], by_module['compute-02'][7]],
                *two),
        }
        # Consumers are uuids in Placement.
        self.servers = {}
        for name in list(document['allocations']):
            uuid = nova_tree.node_uuid(name)
            self.servers[uuid] = name
            document['allocations'][uuid] = document['allocations'].pop(name)
        self.flat = self.write('flat.json', document)
        self.reshaped = self.reshape(self.flat)

    def test_moves_proven_on_placement(self):
        after = os.path.join(self.tmp, 'after.json')
        result = self.defrag(self.reshaped, '--size', '4', '--count', '2',
                             '--save-snapshot', after, '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        moves = json.loads(result.stdout)
        self.assertEqual(
            [(1, 's-01-m1', 'gpu.h100.1x', 'compute-01', 'compute-02',
              'compute-01_nvlink-group-of-4-a'),
             (2, 's-01-m5', 'gpu.h100.1x', 'compute-01', 'compute-02',
              'compute-01_nvlink-group-of-4-b')],
            [(m['step'], self.servers[m['server']], m['flavor'], m['source'],
              m['destination'], m['frees']) for m in moves])
        self.assertEqual(
            'openstack --os-compute-api-version 2.56 server migrate --host '
            'compute-02 %s' % moves[0]['server'], moves[0]['command'])
        self.assertIn('defrag: 0 free 4-GPU domain(s) before, 2 after 2 '
                      'move(s)', result.stderr)
        # The proof, on its own: load the state after the moves into a
        # fresh Placement; the 4-GPU flavor's candidates hold both freed
        # domains, and the moved servers sit on compute-02 only.
        document = snapshot.read_file(after)
        four = next(f for f in h100_flavors() if f['name'] == 'gpu.h100.4x')
        query = request.build(request.flavor_from_dict(four),
                              {'h100': request.Alias('h100', RC)})
        with embedded.EmbeddedPlacement(document) as client:
            names = {rp['uuid']: rp['name'] for rp in client.get(
                '/resource_providers')['resource_providers']}
            body = client.get(query.url, version='1.36')
            offered = {frozenset(names[u] for u, a in c['allocations'].items()
                                 if RC in a['resources'])
                       for c in body['allocation_requests']}
            for move in moves:
                allocations = client.get('/allocations/%s' % move['server'])
                self.assertEqual({'compute-02'}, {
                    names[u].split('_')[0]
                    for u in allocations['allocations']})
        host = self.hosts['compute-01']
        for group in host.groups:
            if group.size == 4:
                self.assertIn(frozenset(host.gpu_provider_name(a)
                                        for a in group.members), offered)
        self.assertEqual(set(), {s for s in offered
                                 if not s <= set(names.values())})

    def test_live_cloud_is_read_not_written(self):
        # Against a live Placement (gunicorn, over HTTP): the same advice
        # as from the snapshot, and the cloud is left as it was.
        server = placement_server.PlacementServer(
            snapshot=snapshot.read_file(self.reshaped)).start()
        self.addCleanup(server.stop)
        before = self.live_state(server)
        live = cli.run(self, *server.cli_auth(), 'nvlink', 'defrag',
                       '--topology', fbase.H100_TOPOLOGY, '--flavors',
                       self.flavors, '--resource-class', RC, '--size', '4',
                       '--count', '2', '-f', 'json')
        self.assertEqual(0, live.code, live.stderr)
        offline = self.defrag(self.reshaped, '--size', '4', '--count', '2',
                              '-f', 'json')
        self.assertEqual(json.loads(offline.stdout), json.loads(live.stdout))
        self.assertEqual(2, len(json.loads(live.stdout)))
        self.assertEqual(before, self.live_state(server))

    def live_state(self, server):
        return json.dumps(snapshot_api.export(
            pc.PlacementClient(server.adapter())), sort_keys=True)

    def test_commands_and_shortfall(self):
        result = self.defrag(self.reshaped, '--size', '4', '--count', '3',
                             '--commands')
        self.assertEqual(1, result.code)
        lines = result.stdout.splitlines()
        self.assertEqual(2, len(lines))
        self.assertTrue(all(line.startswith(
            'openstack --os-compute-api-version 2.56 server migrate --host ')
            for line in lines), lines)
        self.assertIn('only 2 free 4-GPU domain(s) reachable, 3 wanted',
                      result.stderr)

    def test_upstream_flat_tree(self):
        result = self.defrag(self.flat, '--size', '4', '--count', '1',
                             '--upstream', '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        moves = json.loads(result.stdout)
        self.assertEqual(['gpu.h100.1x.upstream'],
                         [m['flavor'] for m in moves])

    def test_usage_errors(self):
        result = self.defrag(self.reshaped, '--size', '4', '--count', '0')
        self.assertEqual(3, result.code)
        self.assertIn('--size and --count must be at least 1', result.stderr)
        result = self.defrag(self.reshaped, '--size', '3', '--count', '1')
        self.assertEqual(1, result.code)
        self.assertIn('no flavor of 3 GPUs (sizes: 1, 2, 4)', result.stderr)
        result = self.defrag(self.reshaped, '--size', '4', '--count', '1',
                             '--commands', '-f', 'json')
        self.assertEqual(3, result.code)
        self.assertIn('does not go with --commands', result.stderr)

    def test_flavors_of_another_tree(self):
        result = self.defrag(self.flat, '--size', '4', '--count', '1')
        self.assertEqual(1, result.code)
        self.assertIn('compute-01, compute-02: the GPUs are on the flat '
                      'tree (not reshaped), and the flavors file\'s flavors '
                      'ask for NVLink domains: the servers there run '
                      'upstream flavors: run defrag with --upstream',
                      result.stderr)


class TestDefragWeighsDomainsTogether(_DefragFiles):
    """Servers spanning two quads: freeing both quads of one host at once.

    compute-01: x (module 1), s (modules 3 and 7), y (module 5): each quad
    needs 2 moves, both need 3 (x, s, y). compute-02: u (modules 1, 5) and
    v (3, 7) each hold GPUs of both quads: 2 moves free both. Taking the
    cheapest quad first (compute-01's first, by host order) would take 3.
    """

    def setUp(self):
        super().setUp()
        topology = loader.load(fbase.H100_TOPOLOGY)
        document = as_configured.from_topology(topology, resource_class=RC)
        module = {name: {g.module_id: a for a, g in h.gpus.items()}
                  for name, h in topology.hosts.items()}
        one, two = (16, 131072), (32, 262144)
        self.names = {}
        for name, host, modules, size in (
                ('x', 'compute-01', (1,), one),
                ('s', 'compute-01', (3, 7), two),
                ('y', 'compute-01', (5,), one),
                ('u', 'compute-02', (1, 5), two),
                ('v', 'compute-02', (3, 7), two)):
            uuid = nova_tree.node_uuid('server-%s' % name)
            self.names[uuid] = name
            document['allocations'][uuid] = _consumer(
                host, [module[host][m] for m in modules], *size)
        self.reshaped = self.reshape(self.write('flat.json', document))

    def test_fewest_moves(self):
        result = self.defrag(self.reshaped, '--size', '4', '--count', '2',
                             '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        # Moving u and v frees both quads: each holds GPUs of both.
        both = ('compute-02_nvlink-group-of-4-a, '
                'compute-02_nvlink-group-of-4-b')
        self.assertEqual(
            [('u', 'compute-02', 'compute-01', both),
             ('v', 'compute-02', 'compute-01', both)],
            [(self.names[m['server']], m['source'], m['destination'],
              m['frees']) for m in json.loads(result.stdout)])
        self.assertIn('defrag: 0 free 4-GPU domain(s) before, 2 after 2 '
                      'move(s)', result.stderr)
