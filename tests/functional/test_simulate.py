"""``simulate`` and ``defrag`` through the CLI, on the embedded Placement.

``simulate``'s results are judged on what must hold whatever the seed (the
same boots in every layout, counts that add up, no spanning where the
flavors or NUMA affinity forbid it), not on one seed's numbers.
"""

import copy
import json
import os

import fixtures
from oslotest import base
import yaml

from nvlink_placement.flavors import generate
from nvlink_placement.flavors import inputs
from nvlink_placement.flavors import request
from nvlink_placement.novaconfig import as_configured
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
#: The example H100 hosts with their GPUs' NUMA nodes.
NUMA_TOPOLOGY = os.path.join(fbase.EXAMPLES, 'hgx-h100-numa.yaml')
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
    """The command's results, judged on what must hold for any seed."""

    def simulate(self, *argv, topology=NUMA_TOPOLOGY):
        return cli.run(self, 'nvlink', 'simulate', '--topology', topology,
                       '--flavors', self.flavors, *argv)

    def test_layouts_and_seeds_per_seed(self):
        workload = self.write('workload.yaml', WORKLOAD)
        timeline = os.path.join(self.tmp, 'timeline.json')
        picture = os.path.join(self.tmp, 'run.svg')
        result = self.simulate('--workload', workload, '--from-topology',
                               '--resource-class', RC, '--seeds', '2',
                               '--processes', '1',
                               '--per-seed', '--timeline', timeline,
                               '--svg', picture, '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        rows = json.loads(result.stdout)
        self.assertEqual(2 * 3 * 3, len(rows))
        self.assertEqual({11, 12}, {r['seed'] for r in rows})
        by = {(r['seed'], r['layout'], r['gpus']): r for r in rows}
        self.assertEqual('gpu.h100.4x.upstream-numa',
                         by[11, 'flat-numa', 4]['flavor'])
        for (seed, layout, gpus), row in by.items():
            # The same boots in every layout of a seed.
            self.assertEqual(by[seed, 'flat', gpus]['requested'],
                             row['requested'])
            self.assertEqual(row['requested'],
                             row['placed'] + row['no_valid_host'])
            self.assertEqual(row['no_valid_host'],
                             row['fragmentation_loss'] + row['no_capacity'])
            # Generated flavors never span; NUMA affinity keeps a 4-GPU
            # server on one socket, which on HGX H100 is one quad.
            if layout == 'reshaped' or (layout, gpus) == ('flat-numa', 4):
                self.assertEqual(0, row['spanning_domains'], row)
            # Upstream flavors never meet fragmentation: any N free GPUs
            # of a host will do.
            if layout == 'flat':
                self.assertEqual(0, row['fragmentation_loss'], row)
        with open(timeline) as f:
            points = json.load(f)
        self.assertEqual(['flat', 'flat-numa', 'reshaped'], sorted(points))
        self.assertEqual(24, len(points['flat']))
        for layout, series in points.items():
            self.assertTrue(all(0 <= p['gpus_in_use'] <= 16
                                for p in series))
        with open(picture) as f:
            svg = f.read()
        self.assertTrue(svg.startswith('<?xml'))
        self.assertEqual(9, svg.count('<polyline'))   # 3 panels x 3 layouts
        self.assertIn('seed 11', svg)

    def test_figures_over_seeds(self):
        workload = self.write('workload.yaml', WORKLOAD)
        result = self.simulate('--workload', workload, '--from-topology',
                               '--resource-class', RC, '--seeds', '2',
                               '--shuffle-best-same-weighed-hosts',
                               '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        table = {row['figure']: row for row in json.loads(result.stdout)}
        self.assertEqual(
            ['2-GPU servers on one NVLink domain',
             '4-GPU servers on one NVLink domain',
             '1-GPU boots requested', '1-GPU boots refused, no capacity',
             '1-GPU boots refused, fragmentation', '2-GPU boots requested',
             '2-GPU boots refused, no capacity',
             '2-GPU boots refused, fragmentation', '4-GPU boots requested',
             '4-GPU boots refused, no capacity',
             '4-GPU boots refused, fragmentation', 'GPU-hours served',
             'mean GPUs busy (of 16)'], list(table))
        quads = table['4-GPU servers on one NVLink domain']
        for layout in ('flat-numa', 'reshaped'):
            self.assertEqual({'mean': 100.0, 'low': 100.0, 'high': 100.0,
                              'seeds': 2}, quads[layout])
        self.assertEqual(table['1-GPU boots requested']['flat'],
                         table['1-GPU boots requested']['reshaped'])
        for row in table.values():
            for layout in ('flat', 'flat-numa', 'reshaped'):
                cell = row[layout]
                if cell['mean'] is not None:
                    self.assertLessEqual(cell['low'], cell['mean'])
                    self.assertLessEqual(cell['mean'], cell['high'])
        busy = table['mean GPUs busy (of 16)']['reshaped']['mean']
        self.assertTrue(0 < busy <= 16, busy)

    def test_snapshot_host_layout_and_state(self):
        workload = self.write('workload.yaml', WORKLOAD)
        aliases = self.write('alias.json', [{'name': 'h100',
                                             'resource_class': RC}])
        state = os.path.join(self.tmp, 'state')
        result = self.simulate('--workload', workload, '--snapshot',
                               fbase.H100_SNAPSHOT, '--host', 'compute-01',
                               '--layout', 'reshaped', '--alias-config',
                               aliases, '--seeds', '1', '--per-seed',
                               '--save-state', state, '-f', 'json',
                               topology=fbase.H100_TOPOLOGY)
        self.assertEqual(0, result.code, result.stderr)
        rows = json.loads(result.stdout)
        self.assertEqual([('reshaped', 11, 1), ('reshaped', 11, 2),
                          ('reshaped', 11, 4)],
                         [(r['layout'], r['seed'], r['gpus']) for r in rows])
        saved = snapshot.read_file(os.path.join(state, 'reshaped.json'))
        # The snapshot's own consumer plus the servers alive at the end,
        # all on compute-01 (compute-02 was not simulated).
        self.assertGreater(len(saved['allocations']), 1)
        names = {rp['uuid']: rp['name'] for rp in saved['resource_providers']}
        hosts = {names[rp].split('_')[0]
                 for c in saved['allocations'].values()
                 for rp in c['allocations']}
        self.assertEqual({'compute-01'}, hosts)
        self.assertFalse(os.path.exists(os.path.join(state, 'flat.json')))
        self.assertIn('reshaped.json: ', result.stderr)

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

    def test_nan_weight_refused(self):
        workload = os.path.join(self.tmp, 'workload.yaml')
        with open(workload, 'w') as f:
            f.write(yaml.safe_dump(WORKLOAD).replace('weight: 2\n',
                                                     'weight: .nan\n'))
        timeline = os.path.join(self.tmp, 'timeline.json')
        result = self.simulate('--workload', workload, '--from-topology',
                               '--resource-class', RC, '--timeline',
                               timeline)
        self.assertEqual(1, result.code)
        self.assertIn('%s: flavors[1].weight: expected a finite number, got '
                      'nan' % workload, result.stderr)
        self.assertFalse(os.path.exists(timeline))

    def test_outputs_checked_before_the_run(self):
        # A million events: the warning says hours; the bad --svg stops
        # the command before any of it runs, and nothing is written.
        huge = dict(WORKLOAD, events=1000000)
        workload = self.write('workload.yaml', huge)
        timeline = os.path.join(self.tmp, 'timeline.json')
        state = os.path.join(self.tmp, 'state')
        result = self.simulate('--workload', workload, '--from-topology',
                               '--resource-class', RC, '--timeline',
                               timeline, '--save-state', state, '--svg',
                               self.tmp)
        self.assertEqual(1, result.code)
        self.assertIn('--svg: cannot write %s: it is a directory' % self.tmp,
                      result.stderr)
        self.assertIn('simulate: 1000000 events x 60 runs (layouts x seeds) '
                      'on 2 hosts take about', result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        self.assertEqual(['flavors.json', 'workload.yaml'],
                         sorted(os.listdir(self.tmp)))
        small = self.write('small.yaml', WORKLOAD)
        for option, path, message in (
                ('--timeline', os.path.join(self.tmp, 'no', 't.json'),
                 'directory %s does not exist' % os.path.join(self.tmp,
                                                              'no')),
                ('--save-state', self.flavors, 'it exists and is not a '
                 'directory'),
                ('--save-state', os.path.join(self.tmp, 'no', 'state'),
                 'directory %s does not exist' % os.path.join(self.tmp,
                                                              'no'))):
            result = self.simulate('--workload', small, '--from-topology',
                                   '--resource-class', RC, option, path)
            self.assertEqual(1, result.code, option)
            self.assertIn('%s: cannot write %s: %s' % (option, path,
                                                       message),
                          result.stderr)
            self.assertNotIn('simulate: ', result.stderr)

    def test_flat_numa_needs_numa_nodes(self):
        workload = self.write('workload.yaml', WORKLOAD)
        result = self.simulate('--workload', workload, '--from-topology',
                               '--resource-class', RC, '--layout',
                               'flat-numa', topology=fbase.H100_TOPOLOGY)
        self.assertEqual(1, result.code)
        self.assertIn('the flat-numa layout needs the GPUs\' NUMA nodes: '
                      'the topology has no numa_node for the GPUs of '
                      'compute-01, compute-02', result.stderr)

    def test_seeds_bounds(self):
        workload = self.write('workload.yaml', WORKLOAD)
        result = self.simulate('--workload', workload, '--from-topology',
                               '--resource-class', RC, '--seeds', '0')
        self.assertEqual(3, result.code)
        self.assertIn('--seeds: expected 1 to 1000, got 0', result.stderr)
        result = self.simulate('--workload', workload, '--from-topology',
                               '--resource-class', RC, '--processes', '0')
        self.assertEqual(3, result.code)
        self.assertIn('--processes: expected at least 1, got 0',
                      result.stderr)

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
        query = request.build(inputs.flavor_from_dict(four),
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
