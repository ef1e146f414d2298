"""``check`` learns the GPU consumers from Nova's own server list.

One HGX H100 compute on the flat tree, upstream flavors of 1 and 2 GPUs
(``pci_passthrough:alias=h100:N``): Nova 34 gives each server whatever
GPUs come first, so 2-GPU servers can straddle two NVLink pairs. After
``reshape``, ``check`` finds them. With ``--consumers nova`` it reads
Nova's ``GET /servers/detail`` (paged: ``[api] max_limit`` set to 2 here,
so the marker is followed) and then Placement once per server of two GPUs
or more; with ``--consumers placement`` it reads the compute node and
every consumer there. Both find the same split servers, and those are the
servers whose GPUs (read from Placement) share no pair of the topology.
Servers of another alias (one FPGA each) account for no GPU: a
migration's consumer on their host is still found.
"""

import json
import warnings

from nova_tests import base
from nvlink_placement.flavors import servers
from nvlink_placement.plan import desired
from nvlink_placement.plan import run
from nvlink_placement.topology import loader

HOST = 'compute-01'
CLOUD = 'nova34-check'
#: GPUs per server, in boot order: 2-GPU servers between 1-GPU ones, so
#: that some of them straddle two pairs.
BOOTS = (1, 2, 2, 1, 2)


class TestCheckConsumers(base.NovaTestCase):

    def setUp(self):
        super().setUp()
        self.flags(max_limit=2, group='api')
        # Nova's marker lookup uses noload(), deprecated in SQLAlchemy 2.1:
        # the framework turns the warning into an error (HTTP 500).
        warnings.filterwarnings('ignore', message='The noload')
        self.start_board(HOST)
        flavors = {}
        for size in (1, 2):
            flavors[size] = self._create_flavor(
                name='upstream.%dx' % size, vcpu=size, memory_mb=512 * size,
                disk=1, extra_spec={'pci_passthrough:alias': '%s:%d' % (
                    base.ALIAS, size)})
        self.servers = [self._create_server(flavor_id=flavors[size],
                                            networks=[])
                        for size in BOOTS]
        self.reshape([HOST])
        self.use_cloud(CLOUD)

    def split_servers(self):
        """Servers whose GPUs share no pair, judged from Placement."""
        topology = loader.parse(base.topology_document([HOST]), '<test>')
        host = topology.hosts[HOST]
        names = {uuid: name for name, (uuid, _) in self.providers().items()}
        split = []
        for server in self.servers:
            allocations = self._get_allocations_by_server_uuid(server['id'])
            gpus = [names[u].split('_', 1)[1].lower()
                    for u, a in allocations.items()
                    if base.RC in a['resources']]
            if len(gpus) == 2 and host.domain_label(gpus, 2) is None:
                split.append(server['id'])
        return sorted(split)

    def cli_check(self, *options):
        result = base.cli.run(self, '--os-cloud', CLOUD, '-v', 'nvlink',
                              'check', '--topology', self.topology([HOST]),
                              '-f', 'json', *options)
        rows = json.loads(result.stdout) if result.stdout else []
        return result, sorted(
            r['detail'].split()[1] for r in rows
            if r['drift'] == 'split-allocation')

    def test_same_findings_fewer_reads(self):
        expected = self.split_servers()
        self.assertNotEqual([], expected, 'no 2-GPU server straddles two '
                            'pairs: the boot order no longer shows splits')

        listed, pages = servers.read(self.connection().compute)
        # Five servers, two a page: three pages, following the marker.
        self.assertEqual(3, pages)
        self.assertEqual(sorted(s['id'] for s in self.servers),
                         sorted(s.uuid for s in listed))
        self.assertEqual({HOST}, {s.node for s in listed})
        self.assertEqual(sorted(BOOTS), sorted(s.devices for s in listed))

        topology = loader.parse(base.topology_document([HOST]), '<test>')
        hosts = [desired.from_topology(h) for h in topology.hosts.values()]
        found = {}
        for source, given in (('nova', servers.by_node(listed)),
                              ('placement', None)):
            client = self.client()
            result = run.run(client, hosts, apply=False,
                             allocations=run.ALL_HOSTS, servers=given)
            found[source] = (sorted(f.consumer for f in result.findings),
                             client.requests['GET'])
        self.assertEqual(expected, found['nova'][0])
        self.assertEqual(expected, found['placement'][0])
        # Nova's list spares the node's read and the 1-GPU servers'.
        self.assertEqual(found['placement'][1] - 1 - BOOTS.count(1),
                         found['nova'][1])

    def test_command_line(self):
        expected = self.split_servers()
        result, split = self.cli_check('--consumers', 'nova')
        self.assertEqual(2, result.code, result.stderr)
        self.assertEqual(expected, split)
        self.assertIn('consumers from the compute API: 5 servers in 3 reads',
                      result.stderr)
        # auto is nova when the compute API answers.
        result, split = self.cli_check()
        self.assertEqual((2, expected), (result.code, split), result.stderr)
        self.assertIn('consumers from the compute API', result.stderr)
        result, split = self.cli_check('--consumers', 'placement')
        self.assertEqual((2, expected), (result.code, split), result.stderr)
        self.assertNotIn('consumers from the compute API', result.stderr)


#: Another PCI passthrough device on the host: an FPGA (10ee:5000) with
#: its own alias, as a NIC VF or another GPU model would have.
FPGA = {'vendor_id': '10ee', 'product_id': '5000'}
FPGA_ADDRESSES = ('0000:e1:00.0', '0000:e2:00.0')
MIGRATION = 'c0c0c0c0-0000-4000-8000-000000000001'


class TestOneDeviceServersOfAnotherAlias(base.NovaTestCase):
    """1-device servers of another alias hide no GPU consumer.

    Two servers with one FPGA each and, on the same host, a migration's
    consumer (which Nova's server list does not name) holding GPUs of two
    NVLink pairs. ``check --consumers nova``, ``auto`` and ``placement``
    must all find that split.
    """

    PCI_ALIAS = base.NovaTestCase.PCI_ALIAS + [json.dumps(dict(
        FPGA, name='fpga', device_type='type-PCI'))]

    def setUp(self):
        super().setUp()
        self.device_spec[HOST] = self.device_spec[HOST] + [json.dumps(FPGA)]
        info = base.pci_info(base.BOARDS[HOST])
        for group, address in enumerate(FPGA_ADDRESSES):
            _, bus, _ = address.split(':')
            info.add_device(dev_type='PCI', bus=int(bus, 16), slot=0,
                            function=0, iommu_group=60 + group, numa_node=0,
                            vend_id=FPGA['vendor_id'],
                            prod_id=FPGA['product_id'])
        self.start_compute(hostname=HOST, pci_info=info)
        flavor = self._create_flavor(
            name='fpga.1x', vcpu=1, memory_mb=512, disk=1,
            extra_spec={'pci_passthrough:alias': 'fpga:1'})
        self.servers = [self._create_server(flavor_id=flavor, networks=[])
                        for _ in FPGA_ADDRESSES]
        self.reshape([HOST])
        # The migration's consumer: modules 1 and 2, of pairs {1,3} and
        # {2,4} (what the source host holds while a resize is confirmed).
        names = {name: uuid for name, (uuid, _) in self.providers().items()}
        by_module = {m: a for a, m in base.BOARDS[HOST].items()}
        client = self.client()
        client.request(
            'PUT', '/allocations/%s' % MIGRATION, version='1.38',
            expect=(204,), body={
                'allocations': dict({
                    names['%s_%s' % (HOST, by_module[m].upper())]: {
                        'resources': {base.RC: 1}} for m in (1, 2)}, **{
                    names[HOST]: {'resources': {'VCPU': 1,
                                                'MEMORY_MB': 512}}}),
                'project_id': self.api_fixture.admin_api.project_id,
                'user_id': 'admin', 'consumer_generation': None,
                'consumer_type': 'MIGRATION'})
        self.use_cloud(CLOUD)

    def test_every_source_finds_the_split(self):
        fpga = {u for name, (u, _) in self.providers().items()
                if name.split('_', 1)[-1].lower() in FPGA_ADDRESSES}
        for server in self.servers:
            held = self._get_allocations_by_server_uuid(server['id'])
            self.assertEqual(1, len(fpga & set(held)), held)
        for options in (('--consumers', 'nova'), (),
                        ('--consumers', 'placement')):
            result = base.cli.run(
                self, '--os-cloud', CLOUD, 'nvlink', 'check', '--topology',
                self.topology([HOST]), '-f', 'json', *options)
            rows = json.loads(result.stdout) if result.stdout else []
            self.assertEqual(
                (2, [MIGRATION]),
                (result.code, [r['detail'].split()[1] for r in rows
                               if r['drift'] == 'split-allocation']),
                (options, result.stderr))
