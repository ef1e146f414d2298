"""Every setting ``nova-config`` prints, read by Nova 34 and Placement 16.

``nova-config --ini`` is pasted into nova.conf and placement.conf as it
is. Here its text is parsed by oslo.config with each service's own option
registry (``nova.conf.opts.list_opts()``, ``placement.conf
.register_opts``): every option must exist in its section and its value
must parse as the option's type. Nova's own parsers then read the
``[pci]`` values (``nova.pci.request.get_alias_from_config``,
``nova.pci.whitelist.Whitelist``) and its flavor extra spec validators
(compute API 2.86+) the per-size flavor advice.
"""

import collections
import configparser
import glob
import json
import os

import fixtures
from nova.api.validation.extra_specs import validators
from nova.compute import pci_placement_translator
import nova.conf.opts
from nova import exception
from nova.pci import whitelist
from nova import test
from oslo_config import cfg
import placement.conf

from nova_tests import base
from nova_tests import series
from nvlink_placement.flavors import generate
from nvlink_placement.novaconfig import settings as novaconfig
from nvlink_placement.topology import loader


# placement.conf's wide-tree workaround (not in openstack-placement 11.0.1).
WIDE_TREES = ('workarounds', 'optimize_for_wide_provider_trees')


def registry(service, sections):
    """A fresh ConfigOpts with the options of Nova or Placement.

    Nova's option list (the one its sample config is generated from) is
    registered for ``sections`` only: other groups repeat keystoneauth's.
    """
    conf = cfg.ConfigOpts()
    if service == novaconfig.PLACEMENT:
        placement.conf.register_opts(conf)
        # Required, and not about the tree.
        conf.set_default('connection', 'sqlite://', 'placement_database')
        return conf
    for group, opts in nova.conf.opts.list_opts():
        name = getattr(group, 'name', group)
        if name in sections:
            conf.register_group(cfg.OptGroup(name))
            conf.register_opts(opts, group=name)
    return conf


class TestNovaConfig(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        topology = loader.parse(base.topology_document(base.BOARDS),
                                '<nova_tests>')
        self.hosts = list(topology.hosts.values())
        self.rows = novaconfig.settings(self.hosts, base.ALIAS)
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def service_files(self, rows):
        """``rows`` as each service's config file, as an operator pastes them.

        :returns: dict (service, host or None) -> rows.

        A compute host's file holds the ``nova-compute`` rows and the
        ``nova-compute (<hosts>)`` rows that name it (its GPUs' member
        traits).
        """
        files = collections.OrderedDict()
        names = [h.name for h in self.hosts]
        for row in rows:
            if row.section == novaconfig.EXTRA_SPECS:
                continue
            hosts = base.row_hosts(row, names)
            for host in hosts or [None]:
                service = novaconfig.COMPUTE if hosts else row.service
                files.setdefault((service, host), []).append(row)
        return files

    def read_back(self, service, rows):
        """``to_ini(rows)`` parsed with ``service``'s option registry."""
        path = os.path.join(self.tmp, 'service.conf')
        with open(path, 'w') as f:
            f.write(novaconfig.to_ini(rows))
        conf = registry(service, {r.section for r in rows})
        conf(['--config-file', path], project='x',
             default_config_files=[], default_config_dirs=[])
        return conf

    def check_options(self, rows, mosk_only=()):
        """Every option of ``rows`` read back; returns how many.

        ``[workarounds] optimize_for_wide_provider_trees`` of placement.conf
        is not counted where the installed Placement predates it
        (:data:`base.PLACEMENT_WIDE_TREES`): oslo.config ignores it there.

        Multi-valued options as read are left in ``self.read_values``
        (service, host, option) -> list.
        """
        checked = 0
        self.read_values = {}
        for (service, host), file_rows in self.service_files(rows).items():
            conf = self.read_back(service, file_rows)
            values = collections.OrderedDict()
            for row in file_rows:
                values.setdefault((row.section, row.option), []).append(
                    row.value)
            for (section, option), given in values.items():
                where = (service, host, section, option)
                if (service == novaconfig.PLACEMENT and
                        (section, option) == WIDE_TREES and
                        not base.PLACEMENT_WIDE_TREES):
                    # openstack-placement 11.0.1 (2024.1).
                    self.assertNotIn(section, conf, where)
                    continue
                group = conf[section]
                if option in mosk_only and option not in group:
                    # oslo.config ignores an option it does not know:
                    # upstream Nova 34 (the patch series adds it).
                    self.assertFalse(series.installed(), where)
                    continue
                self.assertIn(option, group, where)
                value = getattr(group, option)
                self.assertIsNotNone(value, where)
                opt = conf._get_opt_info(option, section)['opt']
                checked += 1
                if isinstance(opt, cfg.MultiStrOpt):
                    self.assertEqual(given, value, where)
                    self.read_values[service, host, option] = value
                    continue
                self.assertEqual(1, len(given), where)
                if isinstance(opt, cfg.ListOpt):
                    self.assertEqual(given[0].split(','), value, where)
                else:
                    self.assertEqual(opt.type(given[0]), value, where)
        return checked

    def test_every_option_exists_with_a_valid_value(self):
        services = sorted({r.service for r in self.rows
                           if r.section != novaconfig.EXTRA_SPECS})
        self.assertEqual([novaconfig.ALIAS_SERVICES, novaconfig.CONTROL,
                          novaconfig.COMPUTE,
                          novaconfig.COMPUTE_ON % 'compute-01',
                          novaconfig.COMPUTE_ON % 'compute-02',
                          novaconfig.SCHEDULER], services)
        # Per compute host: device_spec (9 entries: 8 GPUs and the
        # generic one) and report_in_placement; alias; pci_in_placement;
        # enabled_filters and max_placement_results.
        # allow_pci_traits_in_flavor is the MOSK extension's: upstream
        # Nova 34 has no such option, Nova with nova-patches/ has.
        self.assertEqual(2 * 2 + 1 + 1 + 2 + series.installed(),
                         self.check_options(
                             self.rows,
                             mosk_only=('allow_pci_traits_in_flavor',)))
        # Each host's nova-compute reads its own entries, generic last.
        self.assertEqual(
            {(novaconfig.COMPUTE, host, 'device_spec'): specs
             for host, specs in base.device_specs().items()},
            {k: v for k, v in self.read_values.items()
             if k[2] == 'device_spec'})
        self.assertEqual([9, 9], [len(v) for v in self.read_values.values()
                                  if len(v) > 1])

    def test_upstream_dialect_options_all_exist(self):
        rows = novaconfig.settings(self.hosts, base.ALIAS,
                                   dialect=generate.UPSTREAM)
        services = sorted({r.service for r in rows
                           if r.section != novaconfig.EXTRA_SPECS})
        self.assertEqual([novaconfig.ALIAS_SERVICES, novaconfig.CONTROL,
                          novaconfig.COMPUTE, novaconfig.SCHEDULER,
                          novaconfig.PLACEMENT], services)
        self.assertNotIn('allow_pci_traits_in_flavor',
                         [r.option for r in rows])
        # Its whole-host flavor has no member traits: the wide-tree
        # Placement settings come back (3 options; 2 that the installed
        # Placement reads where it predates the workaround).
        self.assertEqual(2 * 2 + 1 + 1 + 2 + 2 + base.PLACEMENT_WIDE_TREES,
                         self.check_options(rows))
        self.assertIn(WIDE_TREES, [(r.section, r.option) for r in rows])
        self.assertEqual(
            {(novaconfig.COMPUTE, host, 'device_spec'):
             base.generic_device_spec() for host in base.BOARDS},
            {k: v for k, v in self.read_values.items()
             if k[2] == 'device_spec'})

    def test_sample_files_parse(self):
        samples = sorted(glob.glob(os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            'etc', 'nova', '*.conf.sample')))
        self.assertEqual(['nova-compute.conf.sample',
                          'nova-scheduler.conf.sample'],
                         [os.path.basename(p) for p in samples])
        for path in samples:
            parser = configparser.ConfigParser(strict=False)
            parser.read(path)
            conf = registry('nova', set(parser.sections()))
            conf(['--config-file', path], project='x',
                 default_config_files=[], default_config_dirs=[])
            for section in parser.sections():
                for option, text in parser.items(section):
                    if (option == 'allow_pci_traits_in_flavor' and
                            not series.installed()):
                        # The MOSK extension's (and the series'), not
                        # upstream Nova 34's.
                        self.assertNotIn(option, conf[section], path)
                        continue
                    self.assertIn(option, conf[section], path)
                    self.assertIsNotNone(getattr(conf[section], option))

    def test_nova_reads_the_pci_values(self):
        values = base.nova_config()
        self.flags(alias=[values[('pci', 'alias')]],
                   device_spec=base.generic_device_spec(), group='pci')
        self.flags(pci_in_placement=True, group='filter_scheduler')
        self.assertEqual(
            {base.ALIAS: ('legacy', [{'vendor_id': base.VENDOR_ID,
                                      'product_id': base.PRODUCT_ID}])},
            base.alias_from_config(self))
        specs = whitelist.Whitelist(nova.conf.CONF.pci.device_spec).specs
        self.assertEqual(1, len(specs))
        self.assertTrue(specs[0].match({
            'vendor_id': base.VENDOR_ID, 'product_id': base.PRODUCT_ID,
            'address': '0000:19:00.0', 'parent_addr': None,
            'dev_type': 'type-PCI'}))

    def test_nova_reads_one_alias_per_model(self):
        """A fleet of H100 and B200 hosts: Nova's view of one run's lines.

        ``[pci] alias`` is multi-valued: Nova reads each line as one alias
        with its own ids, and ``device_spec`` likewise; a B200 device
        matches the B200 entries only.
        """
        topology = loader.load(os.path.join(base.EXAMPLES,
                                            'hgx-h100-b200.yaml'))
        rows = novaconfig.settings(list(topology.hosts.values()),
                                   ['h100', 'b200'])
        self.flags(alias=[r.value for r in rows if r.option == 'alias'],
                   group='pci')
        self.flags(pci_in_placement=True, group='filter_scheduler')
        self.assertEqual(
            {'h100': ('legacy', [{'vendor_id': '10de',
                                  'product_id': '2330'}]),
             'b200': ('legacy', [{'vendor_id': '10de',
                                  'product_id': '2901'}])},
            base.alias_from_config(self))
        self.useFixture(fixtures.MockPatch(
            'nova.pci.utils.is_physical_function', return_value=False))
        specs = novaconfig.host_device_specs(rows, ['b200-01'])['b200-01']
        self.flags(device_spec=specs, group='pci')
        dev_filter = whitelist.Whitelist(nova.conf.CONF.pci.device_spec)
        # Module 1 of the B200 board (illustrative map): pair member 0.
        spec = base.matching_spec(dev_filter, {
            'vendor_id': '10de', 'product_id': '2901',
            'address': '0000:3d:00.0', 'parent_addr': None,
            'dev_type': 'type-PCI'})
        self.assertEqual(
            {'CUSTOM_PCI_GROUP2_MEMBER0', 'CUSTOM_PCI_GROUP4_MEMBER0',
             'CUSTOM_PCI_GROUP8_MEMBER0', 'COMPUTE_MANAGED_PCI_DEVICE'},
            pci_placement_translator._get_traits_for_dev(spec.tags))
        self.assertEqual('CUSTOM_PCI_10DE_2901',
                         pci_placement_translator.get_resource_class(
                             spec.tags.get('resource_class'), '10de',
                             '2901'))
        # An H100 device on that host would take the H100 generic entry.
        spec = base.matching_spec(dev_filter, {
            'vendor_id': '10de', 'product_id': '2330',
            'address': '0000:3d:00.0', 'parent_addr': None,
            'dev_type': 'type-PCI'})
        self.assertEqual('2330', spec.product_id)
        self.assertEqual({'COMPUTE_MANAGED_PCI_DEVICE'},
                         pci_placement_translator._get_traits_for_dev(
                             spec.tags))

    def test_each_gpu_matches_its_member_entry_first(self):
        """Nova's whitelist picks each GPU's own entry, not the generic one.

        Nova's ``Whitelist`` gives the first matching spec
        (:func:`base.matching_spec`); the translator's
        ``_get_traits_for_dev`` makes the provider traits from its tags
        (``OWNER_NOVA`` is added by the report client).
        """
        # Nova's own tests stub this sysfs read (no such device here).
        self.useFixture(fixtures.MockPatch(
            'nova.pci.utils.is_physical_function', return_value=False))
        # Expected: what Nova 34 wrote on these boards, captured in the
        # example snapshot (nova_tests/test_compute_writes.py checks it).
        with open(os.path.join(base.EXAMPLES,
                               'hgx-h100-snapshot.json')) as f:
            members = {rp['name']: tuple(t for t in rp['traits']
                                         if '_MEMBER' in t)
                       for rp in json.load(f)['resource_providers']}
        for host, specs in base.device_specs().items():
            self.assertEqual(9, len(specs), host)
            self.flags(device_spec=specs, group='pci')
            dev_filter = whitelist.Whitelist(nova.conf.CONF.pci.device_spec)
            for address in base.BOARDS[host]:
                spec = base.matching_spec(dev_filter, {
                    'vendor_id': base.VENDOR_ID,
                    'product_id': base.PRODUCT_ID, 'address': address,
                    'parent_addr': None, 'dev_type': 'type-PCI'})
                name = '%s_%s' % (host, address.upper())
                self.assertEqual(
                    set(base.pci_traits(members[name])) - {'OWNER_NOVA'},
                    pci_placement_translator._get_traits_for_dev(spec.tags),
                    name)

    def test_flavor_advice_and_upstream_flavors_pass_nova_validation(self):
        advice = [r for r in self.rows if r.section == novaconfig.EXTRA_SPECS]
        self.assertEqual(
            [('hw:numa_nodes', '1'),
             ('hw:pci_numa_affinity_policy', 'required')] * 3 +
            [('hw:numa_nodes', '2'),
             ('hw:pci_numa_affinity_policy', 'preferred')],
            [(r.option, r.value) for r in advice])
        upstream = [kv for f in generate.generate(
            self.hosts, base.ALIAS, dialect=generate.UPSTREAM).flavors
            for kv in f.extra_specs.items()]
        for name, value in [(r.option, r.value) for r in advice] + upstream:
            validators.validate(name, value)
        mosk = [f for f in generate.generate(self.hosts, base.ALIAS).flavors
                if f.kind == generate.DOMAIN]
        self.assertEqual([2, 4], [f.size for f in mosk])
        # With nova-patches/ every key passes (the placement: keys then
        # have a validator too).
        patched = series.installed()
        refused = []
        for flavor in mosk:
            for name, value in flavor.extra_specs.items():
                if name == generate.ALIAS_KEY and not patched:
                    self.assertRaises(exception.ValidationError,
                                      validators.validate, name, value)
                    refused.append(flavor.size)
                else:
                    validators.validate(name, value)
        # Upstream Nova refuses the named alias of each of them.
        self.assertEqual([] if patched else [2, 4], refused)
