"""``defrag`` takes each server's flavor from Nova's own server list.

Two HGX H100 computes on the flat tree; servers of an upstream 1-GPU
flavor with an ephemeral disk (Nova's test helper gives every flavor 10 GB
of it), so each allocation holds ``DISK_GB`` = root + ephemeral = 11, which
no flavor of the flavors file (root disk 1, as ``openstack flavor show``
would be copied into one without the ephemeral disk) matches by its
resources. One server on compute-01, five on compute-02 (so both of its
quads are in use): freeing compute-01's second quad takes one move, to
compute-02. Live with the compute API, ``defrag`` names the flavor from
``GET /servers/detail`` and moves the server with its own resources; with
Placement alone it cannot tell its flavor and says so.
"""

import json

from nova_tests import base
from nvlink_placement.topology import loader

HOSTS = ('compute-01', 'compute-02')
CLOUD = 'nova34-defrag'


class TestDefragFlavors(base.NovaTestCase):

    def setUp(self):
        super().setUp()
        for host in HOSTS:
            self.start_board(host)
        one = self._create_flavor(
            name='upstream.1x', vcpu=1, memory_mb=512, disk=1,
            extra_spec={'pci_passthrough:alias': '%s:1' % base.ALIAS})
        self.servers = [
            self._create_server(flavor_id=one, networks='none', host=host)
            for host in ['compute-01'] + ['compute-02'] * 5]
        self.flavors = self.write_flavors()

    def write_flavors(self):
        path = '%s/flavors.json' % self.tmp
        with open(path, 'w') as f:
            json.dump([{'name': 'upstream.%dx' % n, 'vcpus': n,
                        'ram': 512 * n, 'disk': 1, 'extra_specs': {
                            'pci_passthrough:alias': '%s:%d' % (
                                base.ALIAS, n)}} for n in (1, 2, 4)], f)
        return path

    def free_quads(self):
        """Quads of the topology with no GPU in use (Placement)."""
        topology = loader.parse(base.topology_document(HOSTS), '<test>')
        uuids = {name: uuid for name, (uuid, _) in self.providers().items()}
        free = 0
        for host in topology.hosts.values():
            for pair in host.fixed_domains(4):
                usages = [self.client().get(
                    '/resource_providers/%s/usages'
                    % uuids[host.gpu_provider_name(a)])['usages']
                    for a in pair]
                free += all(u.get(base.RC, 0) == 0 for u in usages)
        return free

    def defrag(self, *auth):
        self.assertEqual(1, self.free_quads())
        return base.cli.run(
            self, *auth, '-v', 'nvlink', 'defrag', '--topology',
            self.topology(list(HOSTS)), '--flavors', self.flavors,
            '--resource-class', base.RC, '--size', '4', '--count', '2',
            '-f', 'json')

    def test_flavor_named_by_nova(self):
        self.assertEqual(
            {'compute-01': 1, 'compute-02': 5},
            {h: sum(1 for s in self.servers
                    if s['OS-EXT-SRV-ATTR:host'] == h) for h in HOSTS})
        allocations = self._get_allocations_by_server_uuid(
            self.servers[0]['id'])
        self.assertIn({'VCPU': 1, 'MEMORY_MB': 512, 'DISK_GB': 11}, [
            a['resources'] for a in allocations.values()])
        self.use_cloud(CLOUD)
        result = self.defrag('--os-cloud', CLOUD)
        self.assertEqual(0, result.code, result.stderr)
        self.assertIn('flavors from the compute API: 6 server(s) in 1 '
                      'read(s)', result.stderr)
        self.assertEqual(
            [(self.servers[0]['id'], 'upstream.1x', 'compute-01',
              'compute-02')],
            [(m['server'], m['flavor'], m['source'], m['destination'])
             for m in json.loads(result.stdout)])

    def test_placement_alone_names_the_cause(self):
        result = self.defrag('--os-auth-type', 'admin_token', '--os-token',
                             'admin', '--os-endpoint',
                             self.placement_fixture.endpoint)
        self.assertEqual(1, result.code, result.stderr)
        self.assertNotIn('flavors from the compute API', result.stderr)
        self.assertIn('holds DISK_GB=11, MEMORY_MB=512, VCPU=1; the 1-GPU '
                      'flavors of the flavors file ask for upstream.1x: '
                      'DISK_GB=1, MEMORY_MB=512, VCPU=1', result.stderr)
