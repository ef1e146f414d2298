"""Member traits: one allocation candidate per free NVLink domain.

Every board of the built-in catalog, through the commands an operator
runs: ``snapshot --from-topology`` (the trees Nova reports with
``nova-config``'s ``device_spec``), ``reshape --snapshot``, ``flavor
generate`` and ``flavor verify`` against the embedded Placement. The
expected counts are derived from the board's domains, not written down:
a domain of N GPUs is one candidate of the N-GPU flavor; a mesh offers one
candidate per choice of one GPU of each member class (the product of the
class sizes); the whole host one.
"""

import itertools
import json
import os

import fixtures
from oslotest import base
import yaml

from nvlink_placement.topology import boards
from nvlink_placement.topology import loader
from nvlink_placement.topology import members
from tests.functional import cli
from tests import novalike

RC = 'CUSTOM_PCI_10DE_2330'


def board_host(board, skip=()):
    """A host document of ``board``: module m at ``0000:<m*8>:00.0``."""
    return {'board': board, 'gpus': {
        '0000:%02x:00.0' % (8 * m): m for m in boards.get(board).gpus
        if m not in skip}}


def expected(host, size):
    """Candidates of the ``size``-GPU flavor on a free ``host``."""
    if size == len(host.usable()):
        return 1
    count = 0
    classes = members.indexes(host)
    for group in host.groups:
        if not group.serves(size):
            continue
        if not group.mesh:
            count += len(group.members) == size
            continue
        per_class = [sum(1 for a in group.members
                         if classes[a].get(size) == i) for i in range(size)]
        product = 1
        for n in per_class:
            product *= n
        count += product
    return count


class TestEveryBoard(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def path(self, name):
        return os.path.join(self.tmp, name)

    def nvlink(self, *argv):
        result = cli.run(self, 'nvlink', *argv)
        self.assertEqual(0, result.code, result.stderr)
        return result

    def verify_all(self, hosts, prefix=None):
        """Run the whole flow on ``hosts``; returns (topology, rows)."""
        topology = self.path('topology.yaml')
        document = {'version': 1, 'hosts': hosts}
        if prefix:
            document['group_trait_prefix'] = prefix
        with open(topology, 'w') as f:
            # In the order given: the file order is part of the test.
            yaml.safe_dump(document, f, sort_keys=False)
        flat, reshaped = self.path('flat.json'), self.path('reshaped.json')
        self.nvlink('snapshot', '--from-topology', topology,
                    '--resource-class', RC, '-o', flat)
        self.nvlink('reshape', '--topology', topology, '--snapshot', flat,
                    '--save-snapshot', reshaped)
        flavors = self.path('flavors.json')
        with open(flavors, 'w') as f:
            # Small enough per GPU that 16 GPUs fit one compute node.
            f.write(self.nvlink('flavor', 'generate', '--topology', topology,
                                '--alias', 'gpu', '--vcpus-per-gpu', '4',
                                '--ram-per-gpu', '65536',
                                '-f', 'json').stdout)
        result = self.nvlink('flavor', 'verify', '--topology', topology,
                             '--flavors', flavors, '--snapshot', reshaped,
                             '--resource-class', RC, '-f', 'json')
        return loader.load(topology), json.loads(result.stdout), result

    def assert_one_candidate_per_domain(self, hosts, prefix=None):
        topology, rows, result = self.verify_all(hosts, prefix)
        checked = 0
        for row in rows:
            size = int(row['flavor'].split('.')[-1].rstrip('x'))
            host = topology.hosts[row['host']]
            want = expected(host, size) if size > 1 else len(host.usable())
            self.assertEqual(
                (want, want, 0, 0, 0),
                (row['candidates'], row['distinct_sets'], row['duplicates'],
                 row['invalid_sets'], row['missing_sets']),
                '%s %s' % (row['host'], row['flavor']))
            checked += size > 1 and want > 0
        self.assertGreater(checked, len(hosts))
        self.assertNotIn('duplicates; reached 0', result.stderr)
        return rows

    def test_eight_gpu_boards(self):
        names = [n for n in boards.names() if len(boards.get(n).gpus) == 8]
        self.assertIn('hgx-h100-8gpu', names)
        self.assertIn('dgx-1-v100', names)
        rows = self.assert_one_candidate_per_domain(
            {'cn-' + n: board_host(n) for n in names})
        by = {(r['host'], r['flavor']): r['candidates'] for r in rows}
        # The figures an operator knows: 4 pairs, 2 quads, 1 board on
        # NVSwitch; the DGX-1 quad meshes give 2 x 2 x 2 pairs.
        self.assertEqual((4, 2, 1), tuple(
            by[('cn-hgx-h100-8gpu', 'gpu.gpu.%dx' % n)] for n in (2, 4, 8)))
        self.assertEqual((8, 2, 1), tuple(
            by[('cn-dgx-1-v100', 'gpu.gpu.%dx' % n)] for n in (2, 4, 8)))

    def test_prefix_with_a_digit_before_its_last_character(self):
        # CUSTOM_NVL2_ + 2 + _MEMBER0: the size is read after the prefix.
        rows = self.assert_one_candidate_per_domain(
            {'cn': board_host('hgx-h100-8gpu')}, prefix='CUSTOM_NVL2_')
        self.assertEqual([('gpu.gpu.%dx' % n, c) for n, c in (
            (1, 8), (2, 4), (4, 2), (8, 1))],
            [(r['flavor'], r['candidates']) for r in rows])
        with open(self.path('reshaped.json')) as f:
            traits = {t for p in json.load(f)['resource_providers']
                      for t in p.get('traits', ())}
        self.assertLessEqual({'CUSTOM_NVL2_2', 'CUSTOM_NVL2_2_MEMBER0',
                              'CUSTOM_NVL2_8_MEMBER7'}, traits)

    def test_prefix_ending_in_a_digit_is_refused(self):
        # Once, verify read CUSTOM_NVL22_MEMBER0 as size 22 and said a
        # free pair was "never offered"; such a prefix is refused now.
        topology = self.path('digit.yaml')
        with open(topology, 'w') as f:
            yaml.safe_dump({'version': 1, 'group_trait_prefix': 'CUSTOM_NVL2',
                            'hosts': {'cn': board_host('hgx-h100-8gpu')}}, f)
        fine = self.path('fine.yaml')
        with open(fine, 'w') as f:
            yaml.safe_dump({'version': 1, 'group_trait_prefix': 'CUSTOM_NVL',
                            'hosts': {'cn': board_host('hgx-h100-8gpu')}}, f)
        snap, flavors = self.path('flat.json'), self.path('flavors.json')
        self.nvlink('snapshot', '--from-topology', fine, '--resource-class',
                    RC, '-o', snap)
        with open(flavors, 'w') as f:
            f.write(self.nvlink('flavor', 'generate', '--topology', fine,
                                '--alias', 'gpu', '-f', 'json').stdout)
        why = ('%s: group_trait_prefix: CUSTOM_NVL2 ends in a digit, so its '
               'traits read two ways' % topology)
        for argv in (('topology', 'validate', topology),
                     ('snapshot', '--from-topology', topology,
                      '--resource-class', RC, '-o', self.path('x.json')),
                     ('flavor', 'verify', '--topology', topology,
                      '--flavors', flavors, '--snapshot', snap,
                      '--resource-class', RC)):
            result = cli.run(self, 'nvlink', *argv)
            self.assertEqual((1, ''), (result.code, result.stdout), argv)
            self.assertIn(why, result.stderr)
            self.assertNotIn('never offered', result.stderr)
            self.assertNotIn('Traceback', result.stderr)
        self.assertFalse(os.path.exists(self.path('x.json')))

    def test_four_and_sixteen_gpu_boards(self):
        for count in (4, 16):
            names = [n for n in boards.names()
                     if len(boards.get(n).gpus) == count]
            self.assertTrue(names)
            self.assert_one_candidate_per_domain(
                {'cn-' + n: board_host(n) for n in names})

    def test_gpus_listed_out_of_pci_order(self):
        # Listed by module id, at addresses out of module order: a real
        # HGX H100 map (tests.novalike.BOARD1) and, for the others, module
        # m at 0000:<(m*k mod (n+1))*8>:00.0. A mere rotation or reversal
        # would not do: it maps these boards' domains onto domains.
        hosts = {'cn-hgx-h100-8gpu': {'board': 'hgx-h100-8gpu', 'gpus': {
            a: m for a, m in sorted(novalike.BOARD1.items(),
                                    key=lambda item: item[1])}}}
        for name, k in (('dgx-1-v100', 2), ('hgx-a100-4gpu', 2)):
            modules = sorted(boards.get(name).gpus)
            hosts['cn-' + name] = {'board': name, 'gpus': {
                '0000:%02x:00.0' % (8 * (m * k % (len(modules) + 1))): m
                for m in modules}}
        rows = self.assert_one_candidate_per_domain(hosts)
        by = {(r['host'], r['flavor']): r['candidates'] for r in rows}
        self.assertEqual((4, 2, 1), tuple(
            by[('cn-hgx-h100-8gpu', 'gpu.gpu.%dx' % n)] for n in (2, 4, 8)))

    def test_lost_and_excluded_gpus_leave_the_other_domains_reachable(self):
        lost = board_host('hgx-h100-8gpu', skip=(8,))
        excluded = board_host('hgx-h100-8gpu')
        excluded['gpus']['0000:18:00.0'] = {'module_id': 3,
                                            'excluded': 'MIG enabled'}
        topology, rows, _ = self.verify_all({'lost': lost,
                                             'excluded': excluded})
        by = {(r['host'], r['flavor']): r['candidates'] for r in rows}
        # Module 8 lost: pairs {1,3} {2,4} {5,7}, quad 1-4. Module 3
        # excluded: pairs {2,4} {5,7} {6,8}, quad 5-8.
        self.assertEqual((3, 1), (by[('lost', 'gpu.gpu.2x')],
                                  by[('lost', 'gpu.gpu.4x')]))
        self.assertEqual((3, 1), (by[('excluded', 'gpu.gpu.2x')],
                                  by[('excluded', 'gpu.gpu.4x')]))
        self.assertEqual({0}, {r['duplicates'] for r in rows})
        # The other domains keep their member indexes; the whole host is
        # the 7 GPUs left.

        def indexes(name, module):
            host = topology.hosts[name]
            address = [a for a, g in host.gpus.items()
                       if g.module_id == module][0]
            return members.indexes(host)[address]
        self.assertEqual([{2: 0, 7: 4}, {2: 1, 7: 6}],
                         [indexes('lost', 5), indexes('lost', 7)])
        self.assertEqual([{2: 0, 4: 0, 7: 3}, {2: 1, 4: 2, 7: 5}],
                         [indexes('excluded', 5), indexes('excluded', 7)])


class TestMeshRule(base.BaseTestCase):
    """The rule a mesh follows, on every pair (pure)."""

    def test_candidates_are_the_sets_of_one_of_each_class(self):
        topology = loader.parse({'version': 1, 'hosts': {
            'm': board_host('hgx-h100-4gpu')}}, '<test>')
        host = topology.hosts['m']
        classes = members.indexes(host)
        pairs = [frozenset(p) for p in itertools.combinations(
            sorted(host.gpus), 2)]
        offered = [p for p in pairs if members.one_of_each(
            [classes[a][2] for a in p], 2)]
        # 4 of the 6 pairs; the two left out are modules {1,3} and {2,4}.
        self.assertEqual(4, len(offered))
        self.assertEqual(
            {frozenset((1, 3)), frozenset((2, 4))},
            {frozenset(host.gpus[a].module_id for a in p)
             for p in set(pairs) - set(offered)})
        self.assertEqual(2, members.reachable(
            [classes[a][2] for a in host.gpus], 2))
        self.assertEqual(0, members.reachable([0, 0], 2))
        self.assertEqual(1, members.reachable([0, 1, 1, None], 2))
