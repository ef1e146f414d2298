"""``openstack nvlink flavor generate --apply`` against Nova 34's compute API.

The command runs as an operator runs it: ``openstack --os-cloud nova34
nvlink flavor generate ... --apply`` in process, its compute API the
nova-api of Nova's functional framework (wsgi-intercept, the endpoint
from ``clouds.yaml``). Nova then holds the flavors and extra specs the
command printed; a second run changes nothing. Nova's own API code
validates the extra specs at microversion 2.86: the named-alias flavors
of the default dialect are refused and leave nothing behind.

Keystone is not running: the framework stubs its middleware and makes the
request context from ``X-Auth-User`` / ``X-Roles`` headers that its own
test client sends. Here the token ``admin`` stands for an admin of the
framework's project (what keystonemiddleware would put in the request
after validating a token).
"""

import json

from nova_tests import base
from nova_tests import series

CLOUD = 'nova34'
TOKEN = 'admin'


class TestFlavorApply(base.NovaTestCase):

    def setUp(self):
        super().setUp()
        self.use_cloud(CLOUD, TOKEN)
        self.topology_path = self.topology(['compute-01'])

    def generate(self, *options):
        """``flavor generate --apply``: (exit code, rows, stderr)."""
        result = base.cli.run(
            self, '--os-cloud', CLOUD, 'nvlink', 'flavor', 'generate',
            '--topology', self.topology_path, '--alias', base.ALIAS,
            '--apply', '-f', 'json', *options)
        rows = json.loads(result.stdout) if result.stdout else None
        return result.code, rows, result.stderr

    def nova_flavors(self):
        """What Nova holds: name -> (vcpus, ram, disk, extra specs)."""
        api = self.api_fixture.admin_api
        return {f['name']: (f['vcpus'], f['ram'], f['disk'], api.api_get(
            '/flavors/%s/os-extra_specs' % f['id']).body['extra_specs'])
            for f in api.get_flavors()}

    def test_apply_twice(self):
        before = self.nova_flavors()
        options = ('--dialect', 'upstream', '--name-template',
                   'nvl.{alias}.{size}', '--vcpus-per-gpu', '1',
                   '--ram-per-gpu', '512', '--disk', '1')
        code, rows, err = self.generate('--dry-run', *options)
        self.assertEqual(0, code, err)
        self.assertEqual(4, len(rows))
        self.assertEqual(before, self.nova_flavors())

        code, rows, err = self.generate(*options)
        self.assertEqual(0, code, err)
        self.assertEqual([
            {'flavor': 'nvl.h100.1', 'action': 'create-flavor', 'key': '',
             'value': 'vcpus=1 ram=512 disk=1'},
            {'flavor': 'nvl.h100.1', 'action': 'set-property',
             'key': 'pci_passthrough:alias', 'value': 'h100:1'},
            {'flavor': 'nvl.h100.8', 'action': 'create-flavor', 'key': '',
             'value': 'vcpus=8 ram=4096 disk=1'},
            {'flavor': 'nvl.h100.8', 'action': 'set-property',
             'key': 'pci_passthrough:alias', 'value': 'h100:8'}], rows)
        expected = dict(before, **{
            'nvl.h100.1': (1, 512, 1, {'pci_passthrough:alias': 'h100:1'}),
            'nvl.h100.8': (8, 4096, 1, {'pci_passthrough:alias': 'h100:8'})})
        self.assertEqual(expected, self.nova_flavors())

        # Idempotent: the second run finds everything in place.
        code, rows, err = self.generate(*options)
        self.assertEqual(0, code, err)
        self.assertEqual([], rows)
        self.assertEqual(expected, self.nova_flavors())

        # An extra spec changed in Nova is set back; the operator's own
        # keys stay.
        api = self.api_fixture.admin_api
        flavor_id = next(f['id'] for f in api.get_flavors()
                         if f['name'] == 'nvl.h100.8')
        api.api_post('/flavors/%s/os-extra_specs' % flavor_id,
                     {'extra_specs': {'pci_passthrough:alias': 'h100:2',
                                      'hw:numa_nodes': '1'}})
        code, rows, err = self.generate(*options)
        self.assertEqual(0, code, err)
        self.assertEqual([{'flavor': 'nvl.h100.8', 'action': 'set-property',
                           'key': 'pci_passthrough:alias',
                           'value': 'h100:8'}], rows)
        self.assertEqual(
            (8, 4096, 1, {'pci_passthrough:alias': 'h100:8',
                          'hw:numa_nodes': '1'}),
            self.nova_flavors()['nvl.h100.8'])

    def test_member_trait_flavors_wait_for_nova_to_report_them(self):
        # Rollout order: no nova-compute reports member traits yet.
        before = self.nova_flavors()
        code, rows, err = self.generate('--sizes', '1,2', '--dry-run')
        self.assertEqual(1, code)
        self.assertIn('gpu.h100.2x requires member traits no resource '
                      'provider in Placement has yet: '
                      'CUSTOM_PCI_GROUP2_MEMBER0, CUSTOM_PCI_GROUP2_MEMBER1',
                      err)
        self.assertIn('--skip-member-trait-check creates them anyway; '
                      'nothing was written.', err)
        self.assertNotIn('Traceback', err)
        self.assertEqual(before, self.nova_flavors())
        # The operator overrides it: a dry run lists the changes.
        code, rows, err = self.generate('--sizes', '1,2', '--dry-run',
                                        '--skip-member-trait-check')
        self.assertEqual(0, code, err)
        self.assertEqual({'gpu.h100.1x', 'gpu.h100.2x'},
                         {r['flavor'] for r in rows})
        # nova-compute started with nova-config's device_spec entries:
        # Nova writes the member traits and the check passes.
        self.start_board('compute-01')
        code, rows, err = self.generate('--sizes', '1,2', '--dry-run')
        self.assertEqual(0, code, err)
        self.assertEqual({'gpu.h100.1x', 'gpu.h100.2x'},
                         {r['flavor'] for r in rows})
        self.assertEqual(before, self.nova_flavors())
        # Upstream-dialect flavors need no member traits: no check.
        self.assertEqual(0, self.generate('--dialect', 'upstream',
                                          '--dry-run')[0])

    @series.upstream_only
    def test_named_alias_flavors_are_refused_and_nothing_stays(self):
        # Nova reports the member traits (the rollout order is kept).
        self.start_board('compute-01')
        before = self.nova_flavors()
        code, rows, err = self.generate('--sizes', '1,2')
        self.assertEqual(1, code)
        self.assertIn("Nova refused the extra specs of flavor gpu.h100.2x at "
                      "compute API microversion 2.86 (HTTP 400: Validation "
                      "failed; 'h100:2:_h100' is not of the format", err)
        self.assertIn('On upstream Nova generate with --dialect upstream',
                      err)
        self.assertIn('Flavor gpu.h100.2x, created by this run, was deleted '
                      'again. Nothing else was written.', err)
        self.assertNotIn('Traceback', err)
        self.assertEqual(before, self.nova_flavors())
