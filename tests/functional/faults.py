"""Shared by the fault tests: gunicorn Placement behind the fault proxy.

Each test class gets one real Placement (gunicorn, SQLite on tmpfs) and one
:class:`tests.fault_proxy.FaultProxy` in front of it; each test seeds its
own Nova-like hosts (names prefixed by the test) so the tests of a class
share the server without seeing each other's trees.
"""

import os
import uuid

import fixtures
from oslotest import base
import yaml

from nvlink_placement.plan import desired
from nvlink_placement.plan import run
from nvlink_placement.topology import loader
from nvlink_placement.topology import pci
from tests import fault_proxy
from tests.functional import cli
from tests import novalike
from tests import placement_server

BOARD = 'hgx-h100-8gpu'
#: Modules 1 and 3 (0000:4c, 0000:5d) form one NVLink pair: the seeded
#: instance holds a whole 2-GPU domain.
PAIR = ('0000:4c:00.0', '0000:5d:00.0')
UNHEALTHY = '0000:19:00.0'


def topology_doc(hosts, unhealthy=()):
    """A topology of HGX H100 hosts with novalike's board-1 map."""
    doc = {'version': 1, 'hosts': {}}
    for host in hosts:
        gpus = {}
        for address, module in novalike.BOARD1.items():
            if address in unhealthy:
                module = {'module_id': module, 'health': {
                    'status': 'unhealthy', 'reasons': ['test']}}
            gpus[address] = module
        doc['hosts'][host] = {'board': BOARD, 'gpus': gpus}
    return doc


def consumer_of(host):
    """The uuid of the instance seeded on ``host``."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, host))


def seed(client, hosts):
    """Seed ``hosts`` as Nova does, each with one 2-GPU instance.

    :returns: dict RP name -> uuid.
    """
    names = {}
    for host in hosts:
        names.update(novalike.seed_host(client, host, novalike.BOARD1))
        novalike.allocate(client, consumer_of(host), {
            names[host]: {'VCPU': 8, 'MEMORY_MB': 4096},
            names[pci.nova_provider_name(host, PAIR[0])]:
                {novalike.GPU_RC: 1},
            names[pci.nova_provider_name(host, PAIR[1])]:
                {novalike.GPU_RC: 1}})
    return names


def shape(client, host):
    """A host's tree without uuids: what must equal a clean run's.

    ``{name: (parent name, traits, inventories)}`` with the host name
    replaced by ``HOST``; providers of every tree whose root is ``host``.
    """
    rps = client.get('/resource_providers?in_tree=%s' % novalike.node_uuid(
        host))['resource_providers']
    names = {rp['uuid']: rp['name'] for rp in rps}
    result = {}
    for rp in rps:
        traits = client.get('/resource_providers/%s/traits' % rp['uuid'])
        inv = client.get('/resource_providers/%s/inventories' % rp['uuid'])
        result[rp['name'].replace(host, 'HOST')] = (
            names.get(rp['parent_provider_uuid'], '').replace(host, 'HOST'),
            sorted(traits['traits']), inv['inventories'])
    return result


def providers_of(client, hosts):
    """Every provider named ``<one of hosts>_...`` or after a host.

    :returns: dict name -> root name (an orphan shows as its own root).
    """
    rps = client.get('/resource_providers')['resource_providers']
    names = {rp['uuid']: rp['name'] for rp in rps}
    return {rp['name']: names[rp['root_provider_uuid']] for rp in rps
            if rp['name'].split('_')[0] in hosts}


class ProxyTestCase(base.BaseTestCase):
    """A gunicorn Placement and a fault proxy per class.

    :cvar THREADS: gunicorn threads (more than one on SQLite makes
        Placement answer "database is locked").
    """

    THREADS = 1

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.server = placement_server.PlacementServer(
            threads=cls.THREADS).start()
        try:
            cls.proxy = fault_proxy.FaultProxy(cls.server.url).start()
        except Exception:
            cls.server.stop()
            raise
        cls.upstream = cls.proxy.upstream_client()

    @classmethod
    def tearDownClass(cls):
        cls.proxy.stop()
        cls.server.stop()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.proxy.rule = lambda request: fault_proxy.PASS
        self.addCleanup(setattr, self.proxy, 'rule',
                        lambda request: fault_proxy.PASS)
        del self.proxy.log[:]
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def hosts(self, count, tag='host'):
        """``count`` host names unique to this test (no ``_`` in them)."""
        prefix = self.id().rsplit('.', 1)[-1].replace('_', '-')
        return ['%s-%s%d' % (prefix, tag, i) for i in range(count)]

    def topology(self, hosts, unhealthy=()):
        """Write a topology for ``hosts``; return its path."""
        path = os.path.join(self.tmp, 'topology.yaml')
        with open(path, 'w') as f:
            yaml.safe_dump(topology_doc(hosts, unhealthy), f)
        return path

    def desired(self, hosts, unhealthy=()):
        """:class:`DesiredHost` list for ``hosts``."""
        topology = loader.parse(topology_doc(hosts, unhealthy))
        return [desired.from_topology(h) for h in topology.hosts.values()]

    def reference(self, unhealthy=()):
        """The shape a clean reshape gives one host (run here, no faults)."""
        host = self.hosts(1, 'ref')[0]
        seed(self.upstream, [host])
        result = run.run(self.upstream, self.desired([host], unhealthy))
        self.assertEqual([], result.failures)
        return shape(self.upstream, host)

    def openstack(self, *args):
        """``openstack <args>`` in process, against the proxy."""
        return cli.run(self, *(args + ('--os-auth-type', 'admin_token',
                                       '--os-token', 'admin',
                                       '--os-endpoint', self.proxy.url)))

    def assertConverged(self, hosts, expected):
        """Each host's tree equals ``expected``.

        Also: its instance's allocation is untouched, and no provider
        named after it is outside its tree.
        """
        for host in hosts:
            self.assertEqual(expected, shape(self.upstream, host), host)
            allocation = self.upstream.get('/allocations/%s'
                                           % consumer_of(host))
            self.assertEqual(
                {novalike.node_uuid(host):
                    {'VCPU': 8, 'MEMORY_MB': 4096},
                 novalike.pci_uuid(novalike.node_uuid(host), PAIR[0]):
                    {novalike.GPU_RC: 1},
                 novalike.pci_uuid(novalike.node_uuid(host), PAIR[1]):
                    {novalike.GPU_RC: 1}},
                {u: a['resources']
                 for u, a in allocation['allocations'].items()})
        roots = providers_of(self.upstream, hosts)
        self.assertEqual(len(expected) * len(hosts), len(roots))
        for name, root in roots.items():
            self.assertEqual(name.split('_')[0], root, name)
