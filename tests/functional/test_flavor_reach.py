"""``flavor generate --host`` and ``flavor verify --host`` judge every host
the flavor's query reaches.

A 4-GPU board host (four-01, one 4-GPU domain, the whole host) and an
8-GPU HGX host (eight-01, two quads) of the same GPU class. The alias
names the class, not the host: a flavor generated "for four-01" lands on
eight-01 too. Against a real (embedded) Placement loaded with both hosts.
"""

import json
import os

import fixtures
from oslotest import base
import yaml

from tests.functional import cli
from tests import novalike

RC = novalike.GPU_RC
MEMBERS = {'trait_h100-%d:CUSTOM_PCI_GROUP4_MEMBER%d' % (i, i): 'required'
           for i in range(4)}
# What generate --host four-01 printed before: a whole-host flavor (no
# group trait, no same_subtree) that eight-01's quads also satisfy.
FORMER_4X = {'name': 'gpu.h100.4x', 'vcpus': 64, 'ram': 524288, 'disk': 100,
             'extra_specs': dict({'pci_passthrough:alias': 'h100:4:_h100'},
                                 **MEMBERS,
                                 **{'placement:group_policy': 'none'})}


class TestFlavorReach(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.topology = self.path('topology.yaml')
        with open(self.topology, 'w') as f:
            yaml.safe_dump({'version': 1, 'hosts': {
                'four-01': {'board': 'hgx-a100-4gpu', 'gpus': {
                    '0000:4c:00.0': 2, '0000:19:00.0': 1,
                    '0000:5d:00.0': 3, '0000:3b:00.0': 4}},
                'eight-01': {'board': 'hgx-h100-8gpu', 'gpus': dict(
                    sorted(novalike.BOARD1.items(),
                           key=lambda item: item[1]))}}}, f,
                sort_keys=False)
        flat, self.reshaped = self.path('flat.json'), self.path('r.json')
        self.nvlink('snapshot', '--from-topology', self.topology,
                    '--resource-class', RC, '-o', flat)
        self.nvlink('reshape', '--topology', self.topology, '--snapshot',
                    flat, '--save-snapshot', self.reshaped)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def nvlink(self, *argv, code=0):
        result = cli.run(self, 'nvlink', *argv)
        self.assertEqual(code, result.code, result.stderr)
        return result

    def verify(self, flavors, code, *extra):
        path = self.path('flavors.json')
        with open(path, 'w') as f:
            json.dump(flavors, f)
        result = self.nvlink('flavor', 'verify', '--topology', self.topology,
                             '--flavors', path, '--snapshot', self.reshaped,
                             '--resource-class', RC, '--host', 'four-01',
                             '-f', 'json', *extra, code=code)
        return {(r['host'], r['flavor']): r for r in json.loads(
            result.stdout)}, result

    def test_former_whole_host_flavor_fails_verify(self):
        rows, result = self.verify([FORMER_4X], 1)
        # 2 quads of eight-01, 4 member classes: every set of one GPU of
        # each class but the 2 quads themselves = 2^4 - 2 = 14.
        self.assertEqual((14, 0, 14), (
            rows[('eight-01', 'gpu.h100.4x')]['candidates'],
            rows[('eight-01', 'gpu.h100.4x')]['valid_sets'],
            rows[('eight-01', 'gpu.h100.4x')]['invalid_sets']))
        self.assertEqual(1, rows[('four-01', 'gpu.h100.4x')]['valid_sets'])
        self.assertIn('a host not selected', result.stderr)

    def test_generate_for_one_host_is_a_domain_flavor(self):
        out = self.nvlink('flavor', 'generate', '--topology', self.topology,
                          '--host', 'four-01', '--alias', 'h100',
                          '-f', 'json').stdout
        flavors = {f['name']: f for f in json.loads(out)}
        self.assertEqual(['gpu.h100.1x', 'gpu.h100.2x', 'gpu.h100.4x'],
                         sorted(flavors))
        specs = flavors['gpu.h100.4x']['extra_specs']
        self.assertEqual('_h100-0,_h100-1,_h100-2,_h100-3,_nvl4',
                         specs['placement:same_subtree'])
        self.assertEqual('required', specs['trait_nvl4:CUSTOM_PCI_GROUP4'])
        rows, _ = self.verify(list(flavors.values()), 0)
        self.assertEqual((1, 1, 0), tuple(
            rows[('four-01', 'gpu.h100.4x')][k]
            for k in ('candidates', 'valid_sets', 'invalid_sets')))
        # eight-01's valid quads are not listed for --host four-01, and
        # nothing invalid was found there.
        self.assertNotIn(('eight-01', 'gpu.h100.4x'), rows)
