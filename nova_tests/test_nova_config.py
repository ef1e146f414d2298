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

import configparser
import glob
import os

import fixtures
from nova.api.validation.extra_specs import validators
import nova.conf.opts
from nova import exception
from nova.pci import request as pci_request
from nova.pci import whitelist
from nova import test
from oslo_config import cfg
import placement.conf

from nova_tests import base
from nova_tests import series
from nvlink_placement.flavors import generate
from nvlink_placement.flavors import novaconfig
from nvlink_placement.topology import loader


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

    def test_every_option_exists_with_a_valid_value(self):
        services = sorted({r.service for r in self.rows
                           if r.section != novaconfig.EXTRA_SPECS})
        self.assertEqual([novaconfig.ALIAS_SERVICES, novaconfig.CONTROL,
                          novaconfig.COMPUTE, novaconfig.SCHEDULER,
                          novaconfig.PLACEMENT], services)
        checked = 0
        for service in services:
            rows = [r for r in self.rows if r.service == service]
            path = os.path.join(self.tmp, 'service.conf')
            with open(path, 'w') as f:
                f.write(novaconfig.to_ini(rows))
            conf = registry(service, {r.section for r in rows})
            conf(['--config-file', path], project='x',
                 default_config_files=[], default_config_dirs=[])
            for row in rows:
                group = conf[row.section]
                self.assertIn(row.option, group, row)
                value = getattr(group, row.option)
                self.assertIsNotNone(value, row)
                opt = conf._get_opt_info(row.option, row.section)['opt']
                if isinstance(opt, cfg.MultiStrOpt):
                    self.assertEqual([row.value], value)
                elif isinstance(opt, cfg.ListOpt):
                    self.assertEqual(row.value.split(','), value)
                else:
                    self.assertEqual(opt.type(row.value), value, row)
                checked += 1
        self.assertEqual(9, checked)

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
                    self.assertIn(option, conf[section], path)
                    self.assertIsNotNone(getattr(conf[section], option))

    def test_nova_reads_the_pci_values(self):
        values = {(r.section, r.option): r.value for r in self.rows}
        self.flags(alias=[values[('pci', 'alias')]],
                   device_spec=[values[('pci', 'device_spec')]], group='pci')
        self.flags(pci_in_placement=True, group='filter_scheduler')
        pci_request.get_alias_from_config.cache_clear()
        self.addCleanup(pci_request.get_alias_from_config.cache_clear)
        self.assertEqual(
            {base.ALIAS: ('legacy', [{'vendor_id': base.VENDOR_ID,
                                      'product_id': base.PRODUCT_ID}])},
            pci_request.get_alias_from_config())
        specs = whitelist.Whitelist(nova.conf.CONF.pci.device_spec).specs
        self.assertEqual(1, len(specs))
        self.assertTrue(specs[0].match({
            'vendor_id': base.VENDOR_ID, 'product_id': base.PRODUCT_ID,
            'address': '0000:19:00.0', 'parent_addr': None,
            'dev_type': 'type-PCI'}))

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
