"""What a new user stumbled on: outputs, misplaced files, empty clouds."""

import json
import os

import fixtures
from oslotest import base as oslo_base

from nvlink_placement.placement import snapshot
from tests.functional import base
from tests.functional import cli

EMPTY = {'format': snapshot.FORMAT, 'version': 1, 'resource_providers': [],
         'allocations': {}}


class TestFriction(oslo_base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def test_snapshot_dash_is_standard_output(self):
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(self.tmp)
        result = cli.run(self, 'nvlink', 'snapshot', '--snapshot',
                         base.H100_SNAPSHOT, '-o', '-')
        self.assertEqual((0, '<stdout>: 18 resource providers, 1 consumer\n'),
                         (result.code, result.stderr))
        self.assertEqual(snapshot.read_file(base.H100_SNAPSHOT),
                         snapshot.canonical(json.loads(result.stdout)))
        self.assertEqual([], os.listdir(self.tmp))    # no file named "-"

    def test_empty_placement_says_so(self):
        empty = self.write('empty.json', json.dumps(EMPTY))
        for command in (('tree',), ('capacity',)):
            result = cli.run(self, 'nvlink', *command + ('--snapshot',
                                                         empty))
            self.assertEqual((0, ''), (result.code, result.stdout), command)
            self.assertIn('no GPU compute nodes in Placement (no tree holds '
                          'a Nova PCI provider, trait '
                          'COMPUTE_MANAGED_PCI_DEVICE): nothing to show',
                          result.stderr)
        result = cli.run(self, 'nvlink', 'capacity', '--snapshot', empty,
                         '-f', 'json')
        self.assertEqual('[]', result.stdout.strip())

    def test_provider_listing_is_not_a_snapshot(self):
        listing = self.write('list.json', json.dumps([{
            'uuid': '94d2d7ee-cd1e-5ba7-b08a-d93eccd8bcaa',
            'name': 'compute-01', 'generation': 12,
            'root_provider_uuid': '94d2d7ee-cd1e-5ba7-b08a-d93eccd8bcaa',
            'parent_provider_uuid': None}]))
        result = cli.run(self, 'nvlink', 'tree', '--snapshot', listing)
        self.assertEqual((1, ''), (result.code, result.stdout))
        self.assertEqual(
            '%s: a list of 1 resource provider (as "openstack resource '
            'provider list -f json" prints it), not a snapshot: a snapshot '
            'holds the trees of resource providers with their inventories, '
            'traits and aggregates, and the allocations on them '
            '(doc/source/snapshot-format.rst); write one with "openstack '
            'nvlink snapshot -o FILE" against the cloud, or "openstack '
            'nvlink snapshot --from-topology TOPOLOGY -o FILE" without one\n'
            % listing, result.stderr)
        self.assertNotIn('generation', result.stderr)   # no data dumped
        answer = self.write('answer.json', json.dumps({
            'resource_providers': [{'uuid': 'x', 'name': 'c',
                                    'generation': 1}]}))
        result = cli.run(self, 'nvlink', 'tree', '--snapshot', answer)
        self.assertEqual(1, result.code)
        self.assertIn('%s: a listing of resource providers (as "GET '
                      '/resource_providers" answers it), not a snapshot: it '
                      'has no "format": "nvlink-placement-snapshot"; a '
                      'snapshot holds' % answer, result.stderr)

    def test_printed_flavors_are_not_a_flavors_file(self):
        for options, what in (
                (('--print-commands',), 'openstack commands ("flavor '
                 'generate --print-commands" output)'),
                ((), 'a table ("flavor generate" output without -f)')):
            result = cli.run(self, 'nvlink', 'flavor', 'generate',
                             '--topology', base.H100_TOPOLOGY, '--alias',
                             'h100', '--sizes', '2', *options)
            self.assertEqual(0, result.code, result.stderr)
            printed = self.write('printed.txt', result.stdout)
            result = cli.run(self, 'nvlink', 'flavor', 'verify',
                             '--topology', base.H100_TOPOLOGY, '--flavors',
                             printed, '--snapshot', base.H100_SNAPSHOT)
            self.assertEqual(
                (1, '', '%s: holds %s, not flavors: give --flavors what '
                 '"openstack nvlink flavor generate ... -f json" (or -f '
                 'yaml) prints\n' % (printed, what)),
                (result.code, result.stdout, result.stderr))

    def test_help_says_what_from_topology_takes(self):
        result = cli.run(self, 'nvlink', 'snapshot', '--help')
        text = ' '.join(result.stdout.split())
        self.assertIn('--from-topology FILE', text)
        self.assertIn('Here it takes the file; simulate --from-topology is a '
                      'flag that uses the file of its --topology.', text)
        self.assertIn('- writes it to standard output', text)
        result = cli.run(self, 'nvlink', 'simulate', '--help')
        text = ' '.join(result.stdout.split())
        self.assertIn('A flag: the topology is --topology\'s file (snapshot '
                      '--from-topology takes the file itself).', text)

    def test_token_left_with_auth_type_none(self):
        # The laptop recipe exports OS_TOKEN; "--os-auth-type none" then
        # got keystoneauth's TypeError text alone.
        result = cli.run(self, '--os-auth-type', 'none', '--os-token',
                         'admin', '--os-endpoint', 'http://127.0.0.1:9',
                         'nvlink', 'tree')
        self.assertEqual(
            (1, '', 'the Placement credentials mix auth types: '
             '--os-auth-type none does not take an option given in OS_* '
             'variables or --os-* options (FixedEndpointPlugin.__init__() '
             'got an unexpected keyword argument \'token\'); unset it\n'),
            (result.code, result.stdout, result.stderr))
