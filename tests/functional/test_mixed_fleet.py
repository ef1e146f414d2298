"""A fleet of two GPU models, through the command line.

The operator guide's "A fleet of several GPU models" commands run as
printed (its ``cp`` done by :meth:`TestMixedFleet.setUp`), in a directory
holding ``etc/examples/hgx-h100-b200.yaml`` as ``fleet.yaml`` (two HGX
H100 and two HGX B200 hosts); the other tests also use ``prod.json``: the
flat trees Nova reports for them before the rollout (no member traits).
Then each ``--alias`` form, ``flavor verify``'s per-host
statuses and a host with GPUs of two models.
"""

import json
import os
import shlex
import shutil

import fixtures
from oslotest import base
import yaml

from tests.functional import base as fbase
from tests.functional import cli
from tests.functional import test_operator_guide_ci as ci

GUIDE = os.path.join(fbase.ROOT, 'doc', 'source', 'operator-guide.rst')
MIXED = os.path.join(fbase.EXAMPLES, 'hgx-h100-b200.yaml')
H100, B200 = 'CUSTOM_PCI_10DE_2330', 'CUSTOM_PCI_10DE_2901'
H100_HOSTS, B200_HOSTS = ('h100-01', 'h100-02'), ('b200-01', 'b200-02')
ALIASES = ('--alias', 'h100=10de:2330', '--alias', 'b200=10de:2901')


def guide_commands():
    """The section's commands: list of (argv, stdout file or None)."""
    with open(GUIDE) as f:
        text = f.read()
    start = text.index('A fleet of several GPU models\n---')
    start = text.index('on such a fleet', start)
    return ci.block_commands(text[text.index('::\n', start) + 3:])


class TestMixedFleet(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        shutil.copy(MIXED, self.path('fleet.yaml'))
        flat = self.path('flat.json')
        self.ok('snapshot', '--from-topology', MIXED, '-o', flat)
        with open(flat) as f:
            prod = json.load(f)
        for rp in prod['resource_providers']:
            rp['traits'] = [t for t in rp['traits'] if '_MEMBER' not in t]
        with open(self.path('prod.json'), 'w') as f:
            json.dump(prod, f)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def ok(self, *argv):
        result = cli.run(self, 'nvlink', *argv)
        self.assertEqual(0, result.code, '%s: %s' % (
            shlex.join(argv), result.stderr))
        return result

    def flow(self):
        """Run the guide's commands in the directory; their results."""
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(self.tmp)
        commands = guide_commands()
        self.assertEqual(
            ['snapshot', 'snapshot', 'reshape', 'flavor', 'flavor', 'check',
             'capacity', 'nova-config'], [argv[1] for argv, _ in commands])
        results = {}
        for argv, out in commands:
            if argv[1] in ('flavor', 'capacity') and not out:
                argv = argv + ['-f', 'json']
            result = cli.run(self, *argv)
            self.assertEqual(0, result.code, '%s: %s' % (
                shlex.join(argv), result.stderr))
            if out:
                with open(out, 'w') as f:
                    f.write(result.stdout)
            results[' '.join(argv[1:3])] = result
        return results

    def test_the_guide_flow_passes(self):
        results = self.flow()
        verify = json.loads(results['flavor verify'].stdout)
        got = {(r['flavor'], r['host']): (
            r['candidates'], r['valid_sets'], r['invalid_sets'],
            r['missing_sets'], r['status']) for r in verify}
        expected = {}
        for alias, mine, other in (('h100', H100_HOSTS, B200_HOSTS),
                                   ('b200', B200_HOSTS, H100_HOSTS)):
            for size, sets in ((1, 8), (2, 4), (4, 2), (8, 1)):
                flavor = 'gpu.%s.%dx' % (alias, size)
                for host in mine:
                    expected[flavor, host] = (sets, sets, 0, 0, 'ok')
                for host in other:
                    expected[flavor, host] = (0, 0, 0, 0, 'other-class')
        self.assertEqual(expected, got)
        # Each model's flavors name its own alias.
        with open(self.path('fleet-flavors.json')) as f:
            flavors = {f['name']: f['extra_specs'] for f in json.load(f)}
        self.assertEqual('b200:2:_b200', flavors['gpu.b200.2x'][
            'pci_passthrough:alias'])
        self.assertEqual('h100:4:_h100', flavors['gpu.h100.4x'][
            'pci_passthrough:alias'])
        capacity = {(r['host'], r['size'], r['resource_class']): (
            r['fits'], r['free_gpus'], r['stranded_gpus'])
            for r in json.loads(results['capacity --topology'].stdout)}
        for rc in (H100, B200):
            self.assertEqual((16, 16, 0), capacity['total', 1, rc])
            self.assertEqual((2, 16, 0), capacity['total', 8, rc])
        self.assertEqual((4, 8, 0), capacity['b200-01', 2, B200])
        self.assertNotIn(('b200-01', 2, H100), capacity)
        ini = results['nova-config --topology'].stdout
        self.assertEqual(
            ['alias = {"name": "h100", "vendor_id": "10de", '
             '"product_id": "2330"}',
             'alias = {"name": "b200", "vendor_id": "10de", '
             '"product_id": "2901"}'],
            [line for line in ini.splitlines()
             if line.startswith('alias = ')])

    def reshaped(self):
        planned, reshaped = self.path('planned.json'), self.path('r.json')
        self.ok('snapshot', '--snapshot', self.path('prod.json'),
                '--as-configured', MIXED, '-o', planned)
        self.ok('reshape', '--topology', MIXED, '--snapshot', planned,
                '--save-snapshot', reshaped)
        return reshaped

    def flavors(self, *argv, topology=MIXED):
        out = self.path('flavors-%d.json' % len(os.listdir(self.tmp)))
        result = self.ok('flavor', 'generate', '--topology', topology,
                         '-f', 'json', *argv)
        with open(out, 'w') as f:
            f.write(result.stdout)
        return out, [f['name'] for f in json.loads(result.stdout)], result

    def test_verify_statuses_are_each_hosts_own(self):
        reshaped = self.reshaped()
        flavors, names, _ = self.flavors('--alias', 'h100', '--host',
                                         'h100-01', '--sizes', '2')
        self.assertEqual(['gpu.h100.2x'], names)
        # Only the B200 hosts named: the flavor can land on none of them.
        result = cli.run(self, 'nvlink', 'flavor', 'verify', '--flavors',
                         flavors, '--topology', MIXED, '--snapshot',
                         reshaped, '--host', 'b200-01', '--host', 'b200-02',
                         '--alias', 'h100', '-f', 'json')
        self.assertEqual(1, result.code, result.stderr)
        self.assertEqual({'no-match'}, {r['status'] for r in json.loads(
            result.stdout)})
        self.assertIn('gpu.h100.2x: no match, nothing proven: none of the '
                      'host(s) b200-01, b200-02 verified has a GPU of '
                      'resource class CUSTOM_PCI_10DE_2330', result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        # A B200 host among them: the H100 host is ok on its own.
        result = cli.run(self, 'nvlink', 'flavor', 'verify', '--flavors',
                         flavors, '--topology', MIXED, '--snapshot',
                         reshaped, '--host', 'h100-02', '--host', 'b200-01',
                         '--alias', 'h100', '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual({'h100-02': 'ok', 'b200-01': 'other-class'},
                         {r['host']: r['status']
                          for r in json.loads(result.stdout)})

    def test_a_problem_marks_only_its_host(self):
        reshaped = self.reshaped()
        with open(reshaped) as f:
            document = json.load(f)
        # h100-02's GPU 0000:19:00.0 loses its member traits.
        for rp in document['resource_providers']:
            if rp['name'] == 'h100-02_0000:19:00.0':
                rp['traits'] = [t for t in rp['traits']
                                if '_MEMBER' not in t]
        broken = self.path('broken.json')
        with open(broken, 'w') as f:
            json.dump(document, f)
        flavors, _, _ = self.flavors(*ALIASES + ('--sizes', '2'))
        result = cli.run(self, 'nvlink', 'flavor', 'verify', '--flavors',
                         flavors, '--topology', MIXED, '--snapshot', broken,
                         *ALIASES + ('-f', 'json'))
        self.assertEqual(1, result.code, result.stderr)
        self.assertEqual({
            ('gpu.h100.2x', 'h100-01'): 'ok',
            ('gpu.h100.2x', 'h100-02'): 'no member traits',
            ('gpu.h100.2x', 'b200-01'): 'other-class',
            ('gpu.h100.2x', 'b200-02'): 'other-class',
            ('gpu.b200.2x', 'h100-01'): 'other-class',
            ('gpu.b200.2x', 'h100-02'): 'other-class',
            ('gpu.b200.2x', 'b200-01'): 'ok',
            ('gpu.b200.2x', 'b200-02'): 'ok',
        }, {(r['flavor'], r['host']): r['status']
            for r in json.loads(result.stdout)})

    def test_verify_needs_to_know_which_model_an_alias_is(self):
        reshaped = self.reshaped()
        flavors, _, _ = self.flavors(*ALIASES + ('--sizes', '1'))
        result = cli.run(self, 'nvlink', 'flavor', 'verify', '--flavors',
                         flavors, '--topology', MIXED, '--snapshot',
                         reshaped)
        self.assertEqual(1, result.code, result.stderr)
        self.assertIn('flavor gpu.h100.1x names alias h100, which no GPU '
                      'model of the topology has (aliases: pci-10de-2330, '
                      'pci-10de-2901): give the --alias options',
                      result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        self.assertEqual('', result.stdout)
        # Half the --alias options: the example names the model left
        # unnamed (B200), not H100's ids, which h100 already has.
        result = cli.run(self, 'nvlink', 'flavor', 'verify', '--flavors',
                         flavors, '--topology', MIXED, '--snapshot',
                         reshaped, '--alias', 'h100')
        self.assertEqual((1, ''), (result.code, result.stdout))
        self.assertIn('flavor gpu.b200.1x names alias b200, which no GPU '
                      'model of the topology has (aliases: h100, '
                      'pci-10de-2901): give the --alias options given to '
                      'flavor generate (e.g. --alias b200=10de:2901), or '
                      '--alias-config\n', result.stderr)
        # Nova's own alias lines (nova-config --ini) tell it too.
        ini = self.ok('nova-config', '--topology', MIXED, *ALIASES +
                      ('--ini',)).stdout
        with open(self.path('nova.conf'), 'w') as f:
            f.write(ini)
        result = self.ok('flavor', 'verify', '--flavors', flavors,
                         '--topology', MIXED, '--snapshot', reshaped,
                         '--alias-config', self.path('nova.conf'),
                         '-f', 'json')
        self.assertEqual(
            ['ok', 'ok', 'other-class', 'other-class'] * 1 +
            ['other-class', 'other-class', 'ok', 'ok'],
            [r['status'] for r in json.loads(result.stdout)])

    def test_alias_forms(self):
        # Bare names in topology order; NAME=VENDOR:PRODUCT in any order.
        _, names, result = self.flavors('--alias', 'h100', '--alias', 'b200',
                                        '--sizes', '1')
        self.assertEqual(['gpu.h100.1x', 'gpu.b200.1x'], names)
        # Named by order: said, with the form that pins it.
        self.assertIn('--alias h100 names GPU model 10de:2330 (CUSTOM_PCI_'
                      '10DE_2330, on h100-01, h100-02) by topology order; '
                      '--alias h100=10de:2330 keeps it so', result.stderr)
        self.assertIn('--alias b200=10de:2901 keeps it so', result.stderr)
        _, names, result = self.flavors('--alias', 'b=10de:2901', '--alias',
                                        'h', '--sizes', '1')
        self.assertEqual(['gpu.h.1x', 'gpu.b.1x'], names)
        # One model left for the bare name: no order to depend on.
        self.assertNotIn('topology order', result.stderr)
        # The B200 hosts listed first: the bare names swap models, and
        # the warning says which model each name now names.
        with open(MIXED) as f:
            doc = yaml.safe_load(f)
        doc['hosts'] = dict(sorted(doc['hosts'].items()))
        with open(self.path('fleet.yaml'), 'w') as f:
            yaml.safe_dump(doc, f, sort_keys=False)
        _, names, result = self.flavors('--alias', 'h100', '--alias', 'b200',
                                        '--sizes', '1',
                                        topology=self.path('fleet.yaml'))
        self.assertEqual(['gpu.h100.1x', 'gpu.b200.1x'], names)
        self.assertIn('--alias h100 names GPU model 10de:2901 (CUSTOM_PCI_'
                      '10DE_2901, on b200-01, b200-02) by topology order',
                      result.stderr)
        # A model no --alias names gets its derived alias, said so.
        _, names, result = self.flavors('--alias', 'h100', '--sizes', '1')
        self.assertEqual(['gpu.h100.1x', 'gpu.pci-10de-2901.1x'], names)
        self.assertIn('GPU model 10de:2901 (CUSTOM_PCI_10DE_2901, on '
                      'b200-01, b200-02) gets alias pci-10de-2901: no '
                      '--alias names it', result.stderr)
        # --host of one model and one --alias: that model, as before.
        _, names, _ = self.flavors('--alias', 'b200', '--host', 'b200-02')
        self.assertEqual(['gpu.b200.1x', 'gpu.b200.2x', 'gpu.b200.4x',
                          'gpu.b200.8x'], names)

    def test_alias_mistakes(self):
        for argv, message in (
                (('--alias', 'x=10de:20b0'), '--alias x=10de:20b0: no GPU '
                 'of the topology has these ids (it has 10de:2330, '
                 '10de:2901)'),
                (('--alias', 'a', '--alias', 'b', '--alias', 'c'),
                 '3 --alias NAME given for 2 GPU model(s)'),
                (('--alias', 'a', '--alias', 'a'), '--alias a is given '
                 'twice'),
                (ALIASES + ('--name-template', 'gpu.{size}x'),
                 "--name-template 'gpu.{size}x' gives the flavors of "
                 "aliases h100 and b200 the same name 'gpu.1x'; include "
                 "{alias}")):
            for command in (('flavor', 'generate'), ('nova-config',)):
                if '--name-template' in argv and command[0] != 'flavor':
                    continue
                result = cli.run(self, 'nvlink', *command + (
                    '--topology', MIXED) + argv)
                self.assertEqual(1, result.code, (argv, result.stderr))
                self.assertIn(message, result.stderr)
                self.assertNotIn('Traceback', result.stderr)
                self.assertEqual('', result.stdout)
        result = cli.run(self, 'nvlink', 'flavor', 'generate', '--topology',
                         MIXED, '--alias', 'h100=10de')
        self.assertNotEqual(0, result.code)
        self.assertIn("--alias 'h100=10de': expected NAME or "
                      "NAME=VENDOR:PRODUCT", result.stderr)

    def test_a_host_with_two_models(self):
        topology = self.path('two.yaml')
        gpu = {'vendor_id': '10de', 'numa_node': 0}
        with open(topology, 'w') as f:
            yaml.safe_dump({'version': 1, 'hosts': {'mixed-01': {
                'gpus': {
                    '0000:17:00.0': dict(gpu, device_id='2331'),
                    '0000:31:00.0': dict(gpu, device_id='2331'),
                    '0000:4b:00.0': dict(gpu, device_id='26b9'),
                    '0000:ca:00.0': dict(gpu, device_id='26b9')},
                'groups': [['0000:17:00.0', '0000:31:00.0']]}}}, f)
        rows = json.loads(self.ok(
            'nova-config', '--topology', topology, '--alias', 'h100pcie',
            '--alias', 'l40s', '-f', 'json').stdout)
        per_gpu = [json.loads(r['value']) for r in rows
                   if r['option'] == 'device_spec' and 'address'
                   in r['value']]
        # Each model's whole host is its own two GPUs.
        self.assertEqual([
            ('0000:17:00.0', '2331', 'CUSTOM_PCI_GROUP2_MEMBER0'),
            ('0000:31:00.0', '2331', 'CUSTOM_PCI_GROUP2_MEMBER1'),
            ('0000:4b:00.0', '26b9', 'CUSTOM_PCI_GROUP2_MEMBER0'),
            ('0000:ca:00.0', '26b9', 'CUSTOM_PCI_GROUP2_MEMBER1')],
            [(e['address'], e['product_id'], e['traits']) for e in per_gpu])
        flat, reshaped = self.path('f2.json'), self.path('r2.json')
        self.ok('snapshot', '--from-topology', topology, '-o', flat)
        self.ok('reshape', '--topology', topology, '--snapshot', flat,
                '--save-snapshot', reshaped)
        result = self.ok('flavor', 'generate', '--topology', topology,
                         '--alias', 'h100pcie', '--alias', 'l40s', '-f',
                         'json')
        flavors = self.path('two-flavors.json')
        with open(flavors, 'w') as f:
            f.write(result.stdout)
        specs = {f['name']: f['extra_specs']
                 for f in json.loads(result.stdout)}
        self.assertEqual(['gpu.h100pcie.1x', 'gpu.h100pcie.2x',
                          'gpu.l40s.1x', 'gpu.l40s.2x'], sorted(specs))
        # The H100 pair is an NVLink domain; the L40S pair is that
        # model's whole host (no subtree).
        self.assertIn('placement:same_subtree', specs['gpu.h100pcie.2x'])
        self.assertNotIn('placement:same_subtree', specs['gpu.l40s.2x'])
        # check expects the same member traits nova-config printed.
        check = self.ok('check', '--topology', topology, '--snapshot',
                        reshaped, '-f', 'json')
        self.assertEqual([], json.loads(check.stdout))
        verify = self.ok('flavor', 'verify', '--flavors', flavors,
                         '--topology', topology, '--snapshot', reshaped,
                         '--alias', 'h100pcie', '--alias', 'l40s',
                         '-f', 'json')
        self.assertEqual({
            'gpu.h100pcie.1x': (2, 2, 'ok'), 'gpu.h100pcie.2x': (1, 1, 'ok'),
            'gpu.l40s.1x': (2, 2, 'ok'), 'gpu.l40s.2x': (1, 1, 'ok')},
            {r['flavor']: (r['candidates'], r['valid_sets'], r['status'])
             for r in json.loads(verify.stdout)})
        capacity = self.ok('capacity', '--snapshot', reshaped, '-f',
                           'json')
        self.assertEqual({
            ('mixed-01', 1, 'CUSTOM_PCI_10DE_2331'): 2,
            ('mixed-01', 2, 'CUSTOM_PCI_10DE_2331'): 1,
            ('mixed-01', 1, 'CUSTOM_PCI_10DE_26B9'): 2,
            ('mixed-01', 2, 'CUSTOM_PCI_10DE_26B9'): 1},
            {(r['host'], r['size'], r['resource_class']): r['fits']
             for r in json.loads(capacity.stdout) if r['host'] != 'total'})

    def test_simulate_runs_on_the_flavors_model(self):
        flavors, _, _ = self.flavors('--alias', 'h100', '--alias', 'b200',
                                     '--host', 'b200-01', '--sizes', '1,2,4')
        workload = self.path('workload.yaml')
        with open(workload, 'w') as f:
            yaml.safe_dump({
                'version': 1, 'seed': 11, 'events': 24,
                'arrival': {'distribution': 'exponential', 'mean': 0.5},
                'lifetime': {'distribution': 'exponential', 'mean': 6},
                'flavors': [{'gpus': 1, 'weight': 3},
                            {'gpus': 2, 'weight': 2},
                            {'gpus': 4, 'weight': 1}]}, f)
        state = self.path('state')
        result = cli.run(self, 'nvlink', 'simulate', '--topology', MIXED,
                         '--flavors', flavors, '--workload', workload,
                         '--from-topology', '--layout', 'reshaped',
                         '--seeds', '1', '--alias', 'h100', '--alias',
                         'b200', '--save-state', state)
        self.assertEqual(0, result.code, result.stderr)
        self.assertIn('mean GPUs busy (of 16)', result.stdout)
        with open(os.path.join(state, 'reshaped.json')) as f:
            saved = json.load(f)
        names = {rp['uuid']: rp['name'] for rp in saved['resource_providers']}
        hosts = {names[rp].split('_')[0]
                 for c in saved['allocations'].values()
                 for rp in c['allocations']}
        self.assertTrue(hosts)
        self.assertLessEqual(hosts, set(B200_HOSTS))
        # Without --alias the flavors' alias names no model of the fleet.
        result = cli.run(self, 'nvlink', 'simulate', '--topology', MIXED,
                         '--flavors', flavors, '--workload', workload,
                         '--from-topology', '--seeds', '1')
        self.assertEqual(1, result.code, result.stderr)
        self.assertIn('flavor gpu.b200.1x names alias b200', result.stderr)

    def test_defrag_counts_the_flavors_model(self):
        reshaped = self.reshaped()
        flavors, _, _ = self.flavors('--alias', 'h100', '--alias', 'b200',
                                     '--host', 'b200-01', '--sizes', '2')
        result = cli.run(self, 'nvlink', 'defrag', '--topology', MIXED,
                         '--flavors', flavors, '--snapshot', reshaped,
                         '--size', '2', '--count', '1', '--alias', 'h100',
                         '--alias', 'b200')
        self.assertEqual(0, result.code, result.stderr)
        # The B200 hosts' 8 pairs, not the H100 ones.
        self.assertIn('defrag: 8 free 2-GPU domain(s) before',
                      result.stderr)
        result = cli.run(self, 'nvlink', 'defrag', '--topology', MIXED,
                         '--flavors', flavors, '--snapshot', reshaped,
                         '--size', '2', '--count', '1')
        self.assertEqual(1, result.code, result.stderr)
        self.assertIn('flavor gpu.b200.2x names alias b200', result.stderr)
