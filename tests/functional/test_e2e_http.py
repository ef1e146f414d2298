"""End to end: gunicorn Placement, the installed ``openstack`` CLI."""

import json
import os
import socket
import subprocess
import sys

import fixtures
from oslotest import base
import requests

from nvlink_placement.placement import client as pc
from nvlink_placement.placement import snapshot
from tests.functional import base as fbase
from tests import novalike
from tests import placement_server


def openstack(*args):
    """Run the installed ``openstack`` CLI; returns CompletedProcess."""
    exe = os.path.join(os.path.dirname(sys.executable), 'openstack')
    return subprocess.run([exe] + list(args), capture_output=True,
                          text=True, timeout=300)


class TestReshapeOverHttp(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.server = placement_server.PlacementServer().start()
        self.addCleanup(self.server.stop)
        self.client = pc.PlacementClient(self.server.adapter())
        novalike.seed_host(self.client, 'compute-01', novalike.BOARD1)
        novalike.seed_host(self.client, 'compute-02', novalike.BOARD2)

    def get(self, path):
        response = requests.get(self.server.url + path, headers={
            'X-Auth-Token': 'admin',
            'OpenStack-API-Version': 'placement 1.37'}, timeout=30)
        self.assertEqual(200, response.status_code, response.text)
        return response.json()

    def test_reshape_check_and_tree(self):
        auth = self.server.cli_auth()
        check = openstack('nvlink', 'check', '--topology',
                          fbase.H100_TOPOLOGY, '-f', 'json', *auth)
        self.assertEqual(2, check.returncode, check.stderr)
        self.assertEqual(43, len(json.loads(check.stdout)))

        done = openstack('nvlink', 'reshape', '--topology',
                         fbase.H100_TOPOLOGY, '-f', 'json', *auth)
        self.assertEqual(0, done.returncode, done.stderr)
        rows = json.loads(done.stdout)
        self.assertEqual(43, len(rows))
        self.assertEqual({'host', 'action', 'provider', 'parent', 'detail'},
                         set(rows[0]))

        providers = self.get('/resource_providers')['resource_providers']
        by_uuid = {p['uuid']: p['name'] for p in providers}
        parent = {p['name']: by_uuid.get(p['parent_provider_uuid'])
                  for p in providers}
        self.assertEqual(2 + 16 + 12, len(providers))
        self.assertEqual('compute-01_nvlink-group-of-2-a',
                         parent['compute-01_0000:4C:00.0'])
        self.assertEqual('compute-01_nvlink-group-of-2-a',
                         parent['compute-01_0000:5D:00.0'])
        self.assertEqual('compute-02_nvlink-group-of-2-c',
                         parent['compute-02_0000:DB:00.0'])
        self.assertEqual('compute-02',
                         parent['compute-02_nvlink-group-of-4-b'])
        group = [p for p in providers
                 if p['name'] == 'compute-02_nvlink-group-of-2-c'][0]
        traits = self.get('/resource_providers/%s/traits' % group['uuid'])
        self.assertEqual(['CUSTOM_OWNER_NVLINK_PLACEMENT',
                          'CUSTOM_PCI_GROUP2'], sorted(traits['traits']))

        again = openstack('nvlink', 'reshape', '--topology',
                          fbase.H100_TOPOLOGY, '-f', 'json', *auth)
        self.assertEqual(0, again.returncode, again.stderr)
        self.assertEqual([], json.loads(again.stdout))
        check = openstack('nvlink', 'check', '--topology',
                          fbase.H100_TOPOLOGY, *auth)
        self.assertEqual(0, check.returncode, check.stderr)
        # No compute API behind these credentials (admin_token: no
        # catalog, no compute_endpoint_override): auto does not ask, reads
        # the consumers from Placement and says why with -v; nova asks
        # (at the one endpoint there is) and fails.
        check = openstack('-v', 'nvlink', 'check', '--topology',
                          fbase.H100_TOPOLOGY, *auth)
        self.assertEqual(0, check.returncode, check.stderr)
        self.assertIn('consumers from Placement (no compute API: auth type '
                      'admin_token has no service catalog and no '
                      'compute_endpoint_override is set)', check.stderr)
        check = openstack('nvlink', 'check', '--topology',
                          fbase.H100_TOPOLOGY, '--consumers', 'nova', *auth)
        self.assertEqual(1, check.returncode, check.stderr)
        self.assertIn("--consumers nova: cannot read the compute API's "
                      "server list (", check.stderr)
        self.assertNotIn('Traceback', check.stderr)

        # Export the live state; the snapshot replays to the same check.
        out = os.path.join(self.useFixture(fixtures.TempDir()).path,
                           'live.json')
        exported = openstack('nvlink', 'snapshot', '--host', 'compute-01',
                             '-o', out, *auth)
        self.assertEqual(0, exported.returncode, exported.stderr)
        self.assertEqual('', exported.stdout)
        self.assertIn('%s: 15 resource providers, 0 consumers\n' % out,
                      exported.stderr)
        document = snapshot.read_file(out)
        self.assertEqual({'compute-01'}, {
            rp['name'].split('_')[0]
            for rp in document['resource_providers']})
        offline = openstack('nvlink', 'check', '--topology',
                            fbase.H100_TOPOLOGY, '--host', 'compute-01',
                            '--snapshot', out)
        self.assertEqual(0, offline.returncode, offline.stderr)


class TestUnreachablePlacement(base.BaseTestCase):

    def test_clear_error(self):
        port = placement_server.free_port()
        result = openstack('nvlink', 'check', '--topology',
                           fbase.H100_TOPOLOGY, '--retry-window', '1',
                           '--os-auth-type', 'admin_token', '--os-token',
                           'admin', '--os-endpoint',
                           'http://127.0.0.1:%d' % port)
        self.assertEqual(1, result.returncode)
        self.assertIn('cannot reach Placement', result.stderr)
        self.assertIn('--retry-window', result.stderr)
        self.assertNotIn('Traceback', result.stderr)

    def test_identity_service_that_never_answers(self):
        # Keystone accepts the connection and says nothing: the token
        # request is bounded by --request-timeout, before any Placement
        # request, and named.
        listener = socket.socket()
        self.addCleanup(listener.close)
        listener.bind(('127.0.0.1', 0))
        listener.listen(16)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith('OS_')}
        result = subprocess.run(
            [os.path.join(os.path.dirname(sys.executable), 'openstack'),
             'nvlink', 'check', '--topology', fbase.H100_TOPOLOGY,
             '--request-timeout', '1', '--os-auth-url',
             'http://127.0.0.1:%d/v3' % listener.getsockname()[1],
             '--os-username', 'u', '--os-password', 'p',
             '--os-project-name', 'p', '--os-user-domain-name', 'Default',
             '--os-project-domain-name', 'Default',
             '--os-identity-api-version', '3'],
            capture_output=True, text=True, env=env, timeout=120)
        self.assertEqual(1, result.returncode, result.stderr)
        self.assertIn('the identity service did not answer within 1 s '
                      '(--request-timeout): Request to http://127.0.0.1:%d'
                      '/v3/auth/tokens timed out'
                      % listener.getsockname()[1], result.stderr)
        self.assertNotIn('Traceback', result.stderr)

    def test_compute_api_that_never_answers(self):
        # The server list waits --request-timeout per page: nova fails
        # saying so, auto goes on with Placement's consumers.
        listener = socket.socket()
        self.addCleanup(listener.close)
        listener.bind(('127.0.0.1', 0))
        listener.listen(16)
        server = placement_server.PlacementServer().start()
        self.addCleanup(server.stop)
        novalike.seed_host(pc.PlacementClient(server.adapter()),
                           'compute-01', novalike.BOARD1)
        tmp = self.useFixture(fixtures.TempDir()).path
        clouds = os.path.join(tmp, 'clouds.yaml')
        with open(clouds, 'w') as f:
            json.dump({'clouds': {'hung': {
                'auth_type': 'admin_token',
                'auth': {'endpoint': server.url, 'token': 'admin'},
                'compute_endpoint_override': 'http://127.0.0.1:%d/v2.1'
                % listener.getsockname()[1]}}}, f)
        env = dict({k: v for k, v in os.environ.items()
                    if not k.startswith('OS_')}, OS_CLIENT_CONFIG_FILE=clouds)
        command = [os.path.join(os.path.dirname(sys.executable), 'openstack'),
                   '--os-cloud', 'hung', '-v', 'nvlink', 'check',
                   '--topology', fbase.H100_TOPOLOGY, '--host', 'compute-01',
                   '--request-timeout', '1']
        result = subprocess.run(command + ['--consumers', 'nova'],
                                capture_output=True, text=True, env=env,
                                timeout=120)
        self.assertEqual(1, result.returncode, result.stderr)
        self.assertIn("--consumers nova: cannot read the compute API's "
                      "server list (", result.stderr)
        # Named (the discovery keystoneauth runs first is what times out).
        self.assertIn('http://127.0.0.1:%d/v2.1' % listener.getsockname()[1],
                      result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        result = subprocess.run(command, capture_output=True, text=True,
                                env=env, timeout=120)
        self.assertEqual(2, result.returncode, result.stderr)
        self.assertIn('consumers from Placement', result.stderr)

    def test_every_live_command_takes_the_option_it_names(self):
        # The message names --retry-window: each command that reads a live
        # Placement takes it (and says it gave up within it).
        port = placement_server.free_port()
        auth = ('--os-auth-type', 'admin_token', '--os-token', 'admin',
                '--os-endpoint', 'http://127.0.0.1:%d' % port)
        tmp = self.useFixture(fixtures.TempDir()).path
        flavors = os.path.join(tmp, 'flavors.json')
        with open(flavors, 'w') as f:
            f.write(openstack('nvlink', 'flavor', 'generate', '--topology',
                              fbase.H100_TOPOLOGY, '--alias', 'h100',
                              '--sizes', '2', '-f', 'json').stdout)
        for command in (('tree',), ('capacity',),
                        ('snapshot', '-o', os.path.join(tmp, 'out.json')),
                        ('flavor', 'verify', '--topology',
                         fbase.H100_TOPOLOGY, '--flavors', flavors,
                         '--resource-class', novalike.GPU_RC)):
            result = openstack('nvlink', *command, '--retry-window', '0',
                               *auth)
            self.assertEqual(1, result.returncode, (command, result.stderr))
            self.assertIn('(retried for 0 s, --retry-window)',
                          result.stderr, command)
            self.assertNotIn('Traceback', result.stderr)
