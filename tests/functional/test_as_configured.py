"""``snapshot --as-configured``: a snapshot as Nova reports it once
nova-compute runs the ``device_spec`` entries ``nova-config`` prints.

Expected traits come from the printed ``nova-config --host H --ini`` text,
read by :mod:`tests.novaspec` (first matching entry, as Nova), never from
the code that computes member traits; the hosts list their GPUs out of
PCI order.
"""

import json
import os

import fixtures
from oslotest import base
import yaml

from nvlink_placement.placement import snapshot
from tests.functional import cli
from tests import novalike
from tests import novaspec

RC = novalike.GPU_RC
# HGX H100 boards (module ids of shared/reference/host-formats.md) listed
# in neither PCI nor module order.
SCRAMBLED1 = {'0000:db:00.0': 8, '0000:5d:00.0': 3, '0000:19:00.0': 2,
              '0000:bb:00.0': 5, '0000:4c:00.0': 1, '0000:cb:00.0': 6,
              '0000:3b:00.0': 4, '0000:9b:00.0': 7}
SCRAMBLED2 = {'0000:ab:00.0': 8, '0000:18:00.0': 2, '0000:db:00.0': 7,
              '0000:3a:00.0': 1, '0000:9a:00.0': 6, '0000:2a:00.0': 4,
              '0000:ba:00.0': 5, '0000:5d:00.0': 3}
NIC_RC = 'CUSTOM_PCI_15B3_101E'


class TestAsConfigured(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.topology = self.path('topology.yaml')
        with open(self.topology, 'w') as f:
            yaml.safe_dump({'version': 1, 'hosts': {
                'gpu-a': {'board': 'hgx-h100-8gpu', 'gpus': SCRAMBLED1},
                'gpu-b': {'board': 'hgx-h100-8gpu', 'gpus': SCRAMBLED2}}},
                f, sort_keys=False)
        # Production before the rollout: Nova without member entries.
        self.prod_doc = novalike.document(
            {'gpu-a': SCRAMBLED1, 'gpu-b': SCRAMBLED2}, board=None)
        self.prod = self.path('prod.json')
        snapshot.write_file(self.prod_doc, self.prod)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def nvlink(self, *argv, code=0):
        result = cli.run(self, 'nvlink', *argv)
        self.assertEqual(code, result.code, result.stderr)
        return result

    def printed(self, host):
        """device_spec values nova-config prints for ``host``."""
        text = self.nvlink('nova-config', '--topology', self.topology,
                           '--host', host, '--alias', 'h100', '--vendor-id',
                           '10de', '--product-id', '2330', '--ini').stdout
        values = novaspec.ini_values(text)
        self.assertTrue(values)
        return values

    def as_configured(self, source=None):
        planned = self.path('planned.json')
        result = self.nvlink('snapshot', '--snapshot',
                             source or self.prod, '--as-configured',
                             self.topology, '-o', planned)
        with open(planned) as f:
            return json.load(f), result

    def test_traits_are_those_of_the_printed_entries(self):
        planned, result = self.as_configured()
        expected = {}
        for host, board in (('gpu-a', SCRAMBLED1), ('gpu-b', SCRAMBLED2)):
            values = self.printed(host)
            for address in board:
                traits = novaspec.traits_for(values, address)
                self.assertEqual(3, len([t for t in traits
                                         if '_MEMBER' in t]), address)
                expected['%s_%s' % (host, address.upper())] = sorted(
                    traits | {'OWNER_NOVA'})
        got = {rp['name']: rp['traits']
               for rp in planned['resource_providers']
               if rp['name'] in expected}
        self.assertEqual(expected, got)
        # A value an operator can check by hand: module 2 of the first
        # board (0000:19:00.0) is member 0 of its pair, 1 of its quad and
        # of the board.
        self.assertEqual(
            ['COMPUTE_MANAGED_PCI_DEVICE', 'CUSTOM_PCI_GROUP2_MEMBER0',
             'CUSTOM_PCI_GROUP4_MEMBER1', 'CUSTOM_PCI_GROUP8_MEMBER1',
             'OWNER_NOVA'], got['gpu-a_0000:19:00.0'])
        # Nothing else changed: the same document but for those traits.
        before = {rp['uuid']: rp for rp in self.prod_doc[
            'resource_providers']}
        for rp in planned['resource_providers']:
            old = dict(before.pop(rp['uuid']))
            new = dict(rp)
            if rp['name'] in expected:
                old.pop('traits'), new.pop('traits')
            self.assertEqual(old, new)
        self.assertEqual({}, before)
        self.assertEqual(self.prod_doc['allocations'],
                         planned['allocations'])
        self.assertIn('as configured: gpu-a: 8 of 8 GPU provider(s) given '
                      'traits (14 new: CUSTOM_PCI_GROUP2_MEMBER0',
                      result.stderr)
        self.assertIn('as configured: 2 host(s), 16 of 16 GPU provider(s) '
                      'given traits, 0 unmatched', result.stderr)

    def test_idempotent(self):
        planned, _ = self.as_configured()
        again, result = self.as_configured(self.path('planned.json'))
        self.assertEqual(planned, again)
        self.assertIn('gpu-a: 0 of 8 GPU provider(s) given traits',
                      result.stderr)

    def test_ci_flow_verifies_before_the_rollout(self):
        self.as_configured()
        reshaped, flavors = self.path('reshaped.json'), self.path('f.json')
        # Without --as-configured the multi-GPU flavors cannot verify.
        self.nvlink('reshape', '--topology', self.topology, '--snapshot',
                    self.prod, '--save-snapshot', self.path('bare.json'))
        with open(flavors, 'w') as f:
            f.write(self.nvlink('flavor', 'generate', '--topology',
                                self.topology, '--alias', 'h100', '-f',
                                'json').stdout)
        self.nvlink('flavor', 'verify', '--topology', self.topology,
                    '--flavors', flavors, '--snapshot',
                    self.path('bare.json'), '--resource-class', RC, code=1)
        self.nvlink('reshape', '--topology', self.topology, '--snapshot',
                    self.path('planned.json'), '--save-snapshot', reshaped)
        rows = json.loads(self.nvlink(
            'flavor', 'verify', '--topology', self.topology, '--flavors',
            flavors, '--snapshot', reshaped, '--resource-class', RC,
            '-f', 'json').stdout)
        got = {(r['host'], r['flavor']): (r['candidates'], r['valid_sets'],
                                          r['invalid_sets'])
               for r in rows}
        # One candidate per free domain: 4 pairs, 2 quads, 1 board.
        for host in ('gpu-a', 'gpu-b'):
            self.assertEqual(
                [(8, 8, 0), (4, 4, 0), (2, 2, 0), (1, 1, 0)],
                [got[(host, 'gpu.h100.%dx' % n)] for n in (1, 2, 4, 8)])
        self.nvlink('check', '--topology', self.topology, '--snapshot',
                    reshaped)

    def test_unmatched_provider_is_named_and_left_alone(self):
        # A NIC passed through by the operator's own entry: nova-config's
        # entries do not match it.
        doc = json.loads(json.dumps(self.prod_doc))
        node = novalike.node_uuid('gpu-a')
        nic = snapshot.provider_entry(
            novalike.pci_uuid(node, '0000:ca:00.0'), 'gpu-a_0000:CA:00.0',
            node, {NIC_RC: {'total': 1, 'reserved': 0, 'min_unit': 1,
                            'max_unit': 1, 'step_size': 1,
                            'allocation_ratio': 1.0}},
            novalike.PCI_TRAITS)
        doc['resource_providers'].append(nic)
        source = self.path('with-nic.json')
        snapshot.write_file(snapshot.document(doc['resource_providers'], {}),
                            source)
        planned, result = self.as_configured(source)
        got = {rp['name']: rp['traits']
               for rp in planned['resource_providers']}
        self.assertEqual(novalike.PCI_TRAITS, got['gpu-a_0000:CA:00.0'])
        self.assertIn('NO device_spec entry matches gpu-a_0000:CA:00.0',
                      result.stderr)
        self.assertIn('1 GPU provider(s) match no device_spec entry',
                      result.stderr)
        self.assertIn('17 GPU provider(s) given traits, 1 unmatched',
                      result.stderr.replace('16 of 17', '17'))

    def test_excluded_gpu_is_reported_not_given_member_traits(self):
        gpus = dict(SCRAMBLED1)
        gpus['0000:db:00.0'] = {'module_id': 8, 'excluded': 'MIG enabled'}
        with open(self.topology, 'w') as f:
            yaml.safe_dump({'version': 1, 'hosts': {
                'gpu-a': {'board': 'hgx-h100-8gpu', 'gpus': gpus}}}, f,
                sort_keys=False)
        planned, result = self.as_configured()
        got = {rp['name']: rp['traits']
               for rp in planned['resource_providers']}
        self.assertEqual([], [t for t in got['gpu-a_0000:DB:00.0']
                              if '_MEMBER' in t])
        # Named either way: no entry matches it (nova-config prints none
        # for it), or an entry does although the topology excludes it.
        self.assertTrue(
            'NO device_spec entry matches gpu-a_0000:DB:00.0' in
            result.stderr or 'gpu-a_0000:DB:00.0: the topology excludes '
            'this GPU (MIG enabled) but entry' in result.stderr,
            result.stderr)
        # The 7 others: a 7-GPU whole host and the remaining domains.
        self.assertIn('gpu-a: 7 of 8 GPU provider(s) given traits',
                      result.stderr)

    def test_not_with_from_topology(self):
        result = self.nvlink('snapshot', '--from-topology', self.topology,
                             '--as-configured', self.topology, '-o',
                             self.path('x.json'), code=3)
        self.assertIn('--as-configured goes with --snapshot', result.stderr)
        self.assertFalse(os.path.exists(self.path('x.json')))

    def test_bad_topology_reads_nothing(self):
        bad = self.path('bad.yaml')
        with open(bad, 'w') as f:
            f.write('version: 1\nhosts: {h: {gpus: [nope]}}\n')
        result = self.nvlink('snapshot', '--snapshot', self.prod,
                             '--as-configured', bad, '-o',
                             self.path('x.json'), code=1)
        self.assertIn('bad.yaml', result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        self.assertFalse(os.path.exists(self.path('x.json')))
