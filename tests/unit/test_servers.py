"""Nova's server list entries and the PCI devices of their flavors."""

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import noauth
from keystoneauth1 import session
from openstack import connection as openstack_connection
from oslotest import base

from nvlink_placement import errors
from nvlink_placement.flavors import servers
from tests import compute_pages
from tests import placement_server


class TestPciDevices(base.BaseTestCase):

    def test_forms(self):
        for specs, devices in (
                ({'pci_passthrough:alias': 'h100:2'}, 2),
                ({'pci_passthrough:alias': 'h100:4:_h100'}, 4),
                ({'pci_passthrough:alias': 'h100:1, nic:2'}, 3),
                ({'hw:cpu_policy': 'dedicated'}, 0),
                ({}, 0),
                (None, None),
                ({'pci_passthrough:alias': 'h100'}, None),
                ({'pci_passthrough:alias': 'h100:two'}, None),
                ({'pci_passthrough:alias': ':2'}, None),
                ({'pci_passthrough:alias': 'a:1:b:c'}, None)):
            self.assertEqual(devices, servers.pci_devices(specs), specs)

    def test_aliases(self):
        for specs, aliases in (
                ({'pci_passthrough:alias': 'h100:2'}, {'h100': 2}),
                ({'pci_passthrough:alias': 'h100:4:_h100'}, {'h100': 4}),
                ({'pci_passthrough:alias': 'h100:1, nic:2'},
                 {'h100': 1, 'nic': 2}),
                ({'pci_passthrough:alias': 'nic:1,nic:1'}, {'nic': 2}),
                ({}, {}),
                (None, None),
                ({'pci_passthrough:alias': 'h100'}, None)):
            self.assertEqual(aliases, servers.pci_aliases(specs), specs)

    def test_from_body(self):
        body = {'id': 's1', 'OS-EXT-SRV-ATTR:hypervisor_hostname': 'cn-1',
                'flavor': {'original_name': 'gpu.2x', 'extra_specs': {
                    'pci_passthrough:alias': 'h100:2'}}}
        self.assertEqual(servers.Server('s1', 'cn-1', 2, ('h100',),
                                        'gpu.2x'),
                         servers.from_body(body))
        # Extra specs hidden (policy), no node (shelved offloaded).
        hidden = {'id': 's2', 'flavor': {'original_name': 'gpu.2x'}}
        self.assertEqual(servers.Server('s2', None, None, None, 'gpu.2x'),
                         servers.from_body(hidden))
        self.assertEqual(servers.Server('s3', None, None),
                         servers.from_body({'id': 's3'}))
        self.assertEqual({'cn-1': [servers.Server('s1', 'cn-1', 2,
                                                  ('h100',), 'gpu.2x')]},
                         servers.by_node([servers.from_body(body),
                                          servers.from_body(hidden)]))


class TestPages(base.BaseTestCase):
    """:func:`servers.read` follows the pages of the server list."""

    def read(self, listed, max_limit):
        with compute_pages.ComputePages(listed, max_limit) as pages:
            adapter = ks_adapter.Adapter(
                session.Session(auth=noauth.NoAuth()),
                service_type='compute', endpoint_override=pages.url)
            found, requests = servers.read(adapter)
        return found, requests, pages.queries

    def test_every_page_is_read(self):
        listed = [{'id': 's%d' % i,
                   'OS-EXT-SRV-ATTR:hypervisor_hostname': 'cn-%d' % (i % 2),
                   'flavor': {'extra_specs': {
                       'pci_passthrough:alias': 'h100:%d' % (1 + i % 2)}}}
                  for i in range(5)]
        found, requests, queries = self.read(listed, max_limit=2)
        self.assertEqual(
            [servers.Server('s%d' % i, 'cn-%d' % (i % 2), 1 + i % 2,
                            ('h100',)) for i in range(5)], found)
        self.assertEqual(3, requests)
        self.assertEqual([None, ['s1'], ['s3']],
                         [q.get('marker') for q in queries])
        self.assertEqual([['True']] * 3,
                         [q.get('all_tenants') for q in queries])
        # A last page that is full: one more request, answered empty.
        found, requests, queries = self.read(listed[:4], max_limit=2)
        self.assertEqual((['s0', 's1', 's2', 's3'], 3),
                         ([s.uuid for s in found], requests))


class TestFromComputeApi(base.BaseTestCase):
    """The one server-list read of ``check`` and ``defrag``.

    A real openstacksdk connection with an admin token onto a port nobody
    listens on: no service catalog, and nothing answers there.
    """

    def setUp(self):
        super().setUp()
        self.port = placement_server.free_port()
        self.connection = openstack_connection.Connection(
            auth_type='admin_token', auth={
                'token': 'admin',
                'endpoint': 'http://127.0.0.1:%d' % self.port})

    def not_read(self, connect, **kwargs):
        return self.assertRaises(servers.NotRead, servers.from_compute_api,
                                 connect, 5, **kwargs)

    def test_no_catalog_is_not_asked(self):
        exc = self.not_read(lambda: self.connection)
        self.assertEqual('no compute API: auth type admin_token has no '
                         'service catalog and no compute_endpoint_override '
                         'is set', str(exc))
        self.assertIsNone(exc.detail)

    def test_asked_anyway_names_the_endpoint(self):
        exc = self.not_read(lambda: self.connection, only_named=False)
        self.assertIn('127.0.0.1:%d' % self.port, exc.detail)
        self.assertEqual("the compute API's server list was not read: %s"
                         % exc.detail, str(exc))

    def test_no_credentials(self):
        def connect():
            raise errors.NvlinkError('no compute API credentials (x)')
        exc = self.not_read(connect)
        self.assertEqual('no compute API credentials (x)', exc.detail)
