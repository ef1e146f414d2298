"""2- and 4-GPU servers boot in one NVLink domain, end to end.

Needs a Nova 34 with the named PCI alias request groups of
``nova-patches/`` (``tox -e nova-patched`` applies it); on an unpatched
Nova the tests skip, saying so. One nova-compute reports an HGX H100 board
configured with ``nova-config``'s ``[pci]`` values; the tool reshapes its
tree; ``flavor generate --apply`` (mosk dialect) creates the flavors
through Nova's compute API. Servers then boot until the host is full and
are deleted again. For every server the PCI devices of its libvirt guest
definition (Nova's fake libvirt) must be exactly the GPUs of its Placement
allocation and form one NVLink domain of the topology; a boot finds no
valid host when no free domain remains although enough GPUs are free; the
query Nova sends is ``flavor verify``'s, byte for byte.
"""

import json

import fixtures
from lxml import etree

from nova_tests import base
from nova_tests import series
from nvlink_placement.flavors import compute
from nvlink_placement.flavors import generate
from nvlink_placement.flavors import inputs
from nvlink_placement.flavors import request
from nvlink_placement.novaconfig import settings as novaconfig
from nvlink_placement.topology import loader

HOST = 'compute-01'
ROWS = novaconfig.settings(list(loader.parse(
    base.topology_document([HOST]), '<nova_tests>').hosts.values()),
    base.ALIAS)
# Options Nova reads per request; enabled_filters is read when the
# scheduler starts, before a test can set it (Nova's PCI functional base
# enables PciPassthroughFilter itself).
PER_REQUEST = {('filter_scheduler', 'pci_in_placement'),
               ('filter_scheduler', 'allow_pci_traits_in_flavor'),
               ('scheduler', 'max_placement_results')}


def values(section, option):
    return [r.value for r in ROWS
            if (r.section, r.option) == (section, option)]


@series.requires_series
class TestNvlinkBoots(base.NovaTestCase):

    # Every device_spec nova-config prints (one per GPU where it tags the
    # GPUs with member traits).
    PCI_DEVICE_SPEC = values('pci', 'device_spec')
    PCI_ALIAS = values('pci', 'alias')

    def setUp(self):
        # A device_spec with one address makes Nova ask sysfs whether the
        # device is an SR-IOV PF; Nova's own functional tests mock that as
        # these do. The GPUs are type-PCI.
        self.useFixture(fixtures.MonkeyPatch(
            'nova.pci.utils.is_physical_function', lambda *address: False))
        super().setUp()
        for row in ROWS:
            if (row.section, row.option) in PER_REQUEST:
                self.flags(**{row.option: row.value, 'group': row.section})
        if not values('filter_scheduler', 'allow_pci_traits_in_flavor'):
            # nova-config does not print it (yet): flavors without member
            # traits do not need it, and it changes nothing for them.
            self.flags(allow_pci_traits_in_flavor=True,
                       group='filter_scheduler')
        self.assertIn('PciPassthroughFilter', values(
            'filter_scheduler', 'enabled_filters')[0].split(','))
        self.start_board(HOST)
        self.reshape([HOST])
        self._run_periodics()
        self.assertEqual((0, []), self.check([HOST]))
        self.host = loader.load(self.topology([HOST])).hosts[HOST]
        self.queries = self.record_queries()
        self.defined = self.record_guest_xml()
        self.flavors = self.generate_and_apply()

    def record_guest_xml(self):
        """The guest XML Nova's libvirt driver defines, by instance uuid.

        Read where Nova's fake libvirt drops PCI ``<hostdev>`` elements
        from the domain (Nova 29, :data:`base.FAKE_LIBVIRT_KEEPS_PCI`):
        there ``XMLDesc`` cannot show the guest's GPUs, the definition the
        driver hands to libvirt (``Host.write_instance_config``) does.
        """
        defined = {}
        if base.FAKE_LIBVIRT_KEEPS_PCI:
            return defined
        from nova.virt.libvirt import host as libvirt_host
        original = libvirt_host.Host.write_instance_config

        def spy(host, xml):
            defined[etree.fromstring(xml).findtext('./uuid')] = xml
            return original(host, xml)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.host.Host.write_instance_config', spy))
        return defined

    # -- the tool ----------------------------------------------------------

    def generate_and_apply(self):
        """``flavor generate`` (mosk), written by its ``--apply`` code.

        :returns: dict size -> flavor as printed, plus the Nova ``id``.
        """
        printed = base.cli.run(
            self, 'nvlink', 'flavor', 'generate', '--topology',
            self.topology([HOST]), '--alias', base.ALIAS, '--sizes', '1,2,4',
            '--dialect', generate.MOSK, '--vcpus-per-gpu', '1',
            '--ram-per-gpu', '512', '--disk', '1', '-f', 'json')
        self.assertEqual(0, printed.code, printed.stderr)
        specs = generate.generate([self.host], base.ALIAS, sizes=[1, 2, 4],
                                  dialect=generate.MOSK, vcpus_per_gpu=1,
                                  ram_per_gpu=512, disk=1).flavors
        self.assertEqual(json.loads(printed.stdout),
                         [s.as_dict() for s in specs])
        self.assertNotEqual([], compute.apply(self.connection(), specs))
        flavors = {}
        for spec in specs:
            flavor = compute.read(self.connection(), spec.name)
            self.assertEqual(spec.extra_specs, flavor['extra_specs'])
            flavors[spec.size] = dict(spec.as_dict(), id=self.flavor_id(
                spec.name))
        return flavors

    def flavor_id(self, name):
        return next(f['id'] for f in self.admin_api.get_flavors()
                    if f['name'] == name)

    def tool_query(self, size):
        aliases = inputs.parse_alias_config('[%s]' % ','.join(
            values('pci', 'alias')))
        return request.build(inputs.flavor_from_dict(self.flavors[size]),
                             aliases, nova=base.tool_nova()).querystring

    # -- what the cloud did ------------------------------------------------

    def gpus(self, server):
        """PCI addresses of the GPUs allocated to ``server`` in Placement."""
        names = {u: n for n, (u, _) in self.providers().items()}
        allocations = self._get_allocations_by_server_uuid(server['id'])
        return {names[u].split('_', 1)[1].lower()
                for u, a in allocations.items() if base.RC in a['resources']}

    def guest_devices(self, server):
        """PCI addresses of the host devices in the libvirt guest XML."""
        if base.FAKE_LIBVIRT_KEEPS_PCI:
            conn = self.computes[HOST].driver._host.get_connection()
            xml = etree.fromstring(
                conn.lookupByUUIDString(server['id']).XMLDesc(0))
        else:
            xml = etree.fromstring(self.defined[server['id']])
        return {'%04x:%02x:%02x.%x' % tuple(
            int(a.get(k), 16) for k in ('domain', 'bus', 'slot', 'function'))
            for a in xml.findall(
                "./devices/hostdev[@type='pci']/source/address")}

    def free_gpus(self):
        used = set()
        for server in self.api.get_servers():
            used |= self.gpus(server)
        return set(base.BOARDS[HOST]) - used

    def quad_of(self, gpus):
        """The 4-GPU domain holding ``gpus``."""
        quad, = [d for d in generate.domains(self.host, 4) if gpus <= d]
        return quad

    # -- booting -----------------------------------------------------------

    def boot(self, size):
        """Boot a ``size``-GPU server and check its GPUs."""
        server = self._create_server(
            flavor_id=self.flavors[size]['id'], networks=[])
        gpus = self.gpus(server)
        self.assertEqual(size, len(gpus))
        self.assertEqual(gpus, self.guest_devices(server))
        if size > 1:
            self.assertIn(frozenset(gpus), generate.domains(self.host, size))
            self.assertEqual(self.tool_query(size), self.queries[-1])
        return server, frozenset(gpus)

    def refused(self, size):
        """A ``size``-GPU boot finds no valid host."""
        server = self._create_server(
            flavor_id=self.flavors[size]['id'], networks=[],
            expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])
        if size > 1:
            self.assertEqual(self.tool_query(size), self.queries[-1])
        self._delete_server(server)

    def test_boot_until_full_delete_and_boot_again(self):
        pairs = [self.boot(2) for _ in range(4)]
        self.assertEqual(set(generate.domains(self.host, 2)),
                         {gpus for _, gpus in pairs})
        self.assertEqual(set(), self.free_gpus())
        self.refused(2)
        self.refused(1)

        # Free one pair in each 4-GPU domain: 4 GPUs free, no free domain.
        kept = {}
        for server, gpus in pairs:
            quad = self.quad_of(gpus)
            if quad in kept:
                self._delete_server(server)
            else:
                kept[quad] = server
        self.assertEqual(2, len(kept))
        self.assertEqual(4, len(self.free_gpus()))
        self.refused(4)

        # A 1-GPU server breaks one free pair; a 2-GPU server takes the
        # other one, exactly.
        free_pairs = {p for p in generate.domains(self.host, 2)
                      if p <= self.free_gpus()}
        self.assertEqual(2, len(free_pairs))
        single, single_gpu = self.boot(1)
        pair, pair_gpus = self.boot(2)
        self.assertEqual({pair_gpus},
                         {p for p in free_pairs if not single_gpu <= p})
        self.assertEqual(1, len(self.free_gpus()))
        self.refused(2)

        # Delete: the 4-GPU domain of the first kept pair is free again and
        # takes a 4-GPU server, exactly; the other one still is not free.
        (quad_a, server_a), _ = sorted(kept.items(),
                                       key=lambda kv: sorted(kv[0]))
        for server in (single, pair, server_a):
            self._delete_server(server)
        self.assertEqual(quad_a, self.boot(4)[1])
        self.assertEqual(2, len(self.free_gpus()))
        self.refused(4)

        # Empty the host: two 4-GPU servers fill it, one per domain.
        for server in self.api.get_servers():
            self._delete_server(server)
        self.assertEqual(set(generate.domains(self.host, 4)),
                         {self.boot(4)[1] for _ in range(2)})
        self.refused(4)
