"""nova-config: PCI, scheduler, wide-tree and NUMA settings."""

import json

from oslotest import base

from nvlink_placement import errors
from nvlink_placement.flavors import generate
from nvlink_placement.novaconfig import settings as novaconfig
from nvlink_placement.topology import members
from tests.unit.flavors import helpers


def inspected(numa=lambda module: 0 if module <= 4 else 1, **extra):
    """Inspection details for the 8 modules of an HGX board."""
    return {m: dict({'vendor_id': '10de', 'device_id': '2330',
                     'numa_node': numa(m)}, **extra) for m in range(1, 9)}


def rows(settings):
    return [(s.service, s.section, s.option, s.value) for s in settings]


class TestSettings(base.BaseTestCase):

    def test_hand_written_topology_needs_ids(self):
        hosts = helpers.hosts(**{'compute-01': helpers.h100_host()})
        exc = self.assertRaises(errors.NvlinkError, novaconfig.settings,
                                hosts, 'h100')
        self.assertIn('give --vendor-id and --product-id', str(exc))
        self.assertRaises(errors.NvlinkError, novaconfig.settings, hosts,
                          'h100', vendor_id='10de')
        self.assertEqual([
            ('nova-compute', 'pci', 'device_spec',
             '{"vendor_id": "10de", "product_id": "2330"}'),
            ('nova-compute', 'pci', 'report_in_placement', 'True'),
            ('nova-api, nova-compute', 'pci', 'alias',
             '{"name": "h100", '
             '"vendor_id": "10de", "product_id": "2330"}'),
            ('nova-api, nova-scheduler, nova-conductor', 'filter_scheduler',
             'pci_in_placement', 'True'),
            ('nova-scheduler', 'filter_scheduler', 'enabled_filters',
             'ComputeFilter,ComputeCapabilitiesFilter,ImagePropertiesFilter,'
             'ServerGroupAntiAffinityFilter,ServerGroupAffinityFilter,'
             'PciPassthroughFilter'),
            ('nova-scheduler', 'scheduler', 'max_placement_results', '1000'),
            ('placement-api', 'placement', 'max_allocation_candidates',
             '1000'),
            ('placement-api', 'placement',
             'allocation_candidates_generation_strategy', 'breadth-first'),
            ('placement-api', 'workarounds',
             'optimize_for_wide_provider_trees', 'True'),
        ], rows(novaconfig.settings(hosts, 'h100', vendor_id='10DE',
                                    product_id='2330',
                                    dialect=generate.UPSTREAM)))
        # The mosk dialect: one device_spec per GPU with its member traits
        # first, allow_pci_traits_in_flavor, no wide-tree settings.
        mosk = rows(novaconfig.settings(hosts, 'h100', vendor_id='10de',
                                        product_id='2330'))
        host = hosts[0]
        traits = members.traits(host, 'CUSTOM_PCI_GROUP')
        self.assertEqual([
            ('nova-compute (compute-01)', 'pci', 'device_spec', json.dumps(
                {'vendor_id': '10de', 'product_id': '2330',
                 'address': address, 'traits': ','.join(traits[address])}))
            for address in sorted(traits)], mosk[:8])
        self.assertEqual(8, len({r[3] for r in mosk[:8]}))
        self.assertEqual(('nova-compute', 'pci', 'device_spec',
                          '{"vendor_id": "10de", "product_id": "2330"}'),
                         mosk[8])
        self.assertIn(('nova-api, nova-scheduler, nova-conductor',
                       'filter_scheduler', 'allow_pci_traits_in_flavor',
                       'True'), mosk)
        self.assertEqual([], [r for r in mosk
                              if r[0] == novaconfig.PLACEMENT])

    def test_wide_tree_reason_has_the_numbers(self):
        hosts = helpers.hosts(**{'compute-01': helpers.h100_host()})
        settings = novaconfig.settings(hosts, 'h100', sizes=[8],
                                       vendor_id='10de', product_id='2330',
                                       dialect=generate.UPSTREAM)
        self.assertEqual(
            'host(s) compute-01 have 8 or more GPUs of one class and '
            'flavors ask up to 8: N separate GPU groups make Placement '
            'enumerate up to 8!/(8-N)! permutations per host. Measured on '
            'openstack-placement 16.0.0, one flat 8-GPU host, default '
            'settings: N=4 0.35 s per 2 hosts, N=6 78 s, N=8 unfinished '
            'after 3.5 minutes; with these settings N=8 takes 2.4 s',
            [s for s in settings
             if s.option == 'max_allocation_candidates'][0].reason)

    def test_no_wide_tree_settings_up_to_four_gpus(self):
        hosts = helpers.hosts(**{'compute-01': helpers.h100_host()})
        settings = novaconfig.settings(hosts, 'h100', sizes=[1, 2, 4],
                                       vendor_id='10de', product_id='2330')
        self.assertEqual([], [s for s in settings
                              if s.service == novaconfig.PLACEMENT])
        small = helpers.hosts(p=helpers.pcie_pairs(4))
        self.assertEqual([], novaconfig.wide_hosts(small))

    def test_reach_settings_past_the_limit(self):
        # 126 HGX boards: 1008 GPUs, more 1-GPU candidates than Nova's
        # 1000. The mosk dialect gets the two settings that give reach
        # (no wide-tree workaround: member traits need none); 125 boards
        # (1000 GPUs) get none.
        many = helpers.hosts(**{'cn-%03d' % i: helpers.h100_host()
                                for i in range(126)})
        placement = [(s.section, s.option, s.value) for s in
                     novaconfig.settings(many, 'h100', vendor_id='10de',
                                         product_id='2330')
                     if s.service == novaconfig.PLACEMENT]
        self.assertEqual([
            ('placement', 'max_allocation_candidates', '1000'),
            ('placement', 'allocation_candidates_generation_strategy',
             'breadth-first')], placement)
        reason = [s.reason for s in novaconfig.settings(
            many, 'h100', vendor_id='10de', product_id='2330')
            if s.option == 'max_allocation_candidates'][0]
        self.assertTrue(reason.startswith('the topology has 1008 GPUs'),
                        reason)
        fewer = helpers.hosts(**{'cn-%03d' % i: helpers.h100_host()
                                 for i in range(125)})
        self.assertEqual([], [s for s in novaconfig.settings(
            fewer, 'h100', vendor_id='10de', product_id='2330')
            if s.service == novaconfig.PLACEMENT])

    def test_resource_class(self):
        hosts = helpers.hosts(**{'compute-01': helpers.h100_host(
            details=inspected(resource_class='CUSTOM_H100_SXM'))})
        settings = novaconfig.settings(hosts, 'h100', sizes=[2])
        self.assertEqual(
            ['{"vendor_id": "10de", "product_id": "2330", '
             '"resource_class": "CUSTOM_H100_SXM"}',
             '{"name": "h100", "vendor_id": '
             '"10de", "product_id": "2330", "resource_class": '
             '"CUSTOM_H100_SXM"}'],
            [s.value for s in settings
             if s.option in ('device_spec', 'alias') and
             'address' not in s.value])
        # The per-GPU entries carry the class too.
        per_gpu = [json.loads(s.value) for s in settings
                   if s.option == 'device_spec' and 'address' in s.value]
        self.assertEqual(8, len(per_gpu))
        self.assertEqual({'CUSTOM_H100_SXM'},
                         {e['resource_class'] for e in per_gpu})
        settings = novaconfig.settings(hosts, 'h100', sizes=[2],
                                       resource_class='CUSTOM_X')
        self.assertIn('"resource_class": "CUSTOM_X"', settings[0].value)

    def test_two_models_one_alias_each(self):
        hosts = helpers.hosts(
            a=helpers.h100_host(details=inspected()),
            b=helpers.h100_host(details={m: {'vendor_id': '10de',
                                             'device_id': '2901'}
                                         for m in range(1, 9)}))
        found = rows(novaconfig.settings(hosts, ['h100', 'b200']))
        generic = [r[3] for r in found if r[2] == 'device_spec' and
                   'address' not in r[3]]
        self.assertEqual(['{"vendor_id": "10de", "product_id": "2330"}',
                          '{"vendor_id": "10de", "product_id": "2901"}'],
                         generic)
        self.assertEqual([
            ('nova-api, nova-compute', 'pci', 'alias',
             '{"name": "h100", "vendor_id": "10de", "product_id": "2330"}'),
            ('nova-api, nova-compute', 'pci', 'alias',
             '{"name": "b200", "vendor_id": "10de", "product_id": "2901"}'),
        ], [r for r in found if r[2] == 'alias'])
        # Each host's per-GPU entries name its own model.
        specs = novaconfig.host_device_specs(
            novaconfig.settings(hosts, ['h100', 'b200']), ['a', 'b'])
        self.assertEqual({'2330'}, {json.loads(e)['product_id']
                                    for e in specs['b'][:0] + specs['a'][:8]})
        self.assertEqual({'2901'}, {json.loads(e)['product_id']
                                    for e in specs['b'][:8]})
        self.assertEqual(10, len(specs['b']))
        # NAME=VENDOR:PRODUCT names a model whatever the order; a model
        # left unnamed gets its derived name.
        named = rows(novaconfig.settings(hosts, ['b200=10de:2901']))
        self.assertEqual(
            ['{"name": "pci-10de-2330", "vendor_id": "10de", '
             '"product_id": "2330"}',
             '{"name": "b200", "vendor_id": "10de", "product_id": "2901"}'],
            [r[3] for r in named if r[2] == 'alias'])
        self.assertIn('flavors of 2 GPU(s) of alias pci-10de-2330',
                      [r[0] for r in named])
        exc = self.assertRaises(errors.NvlinkError, novaconfig.settings,
                                hosts, ['h100'], vendor_id='10de',
                                product_id='2330')
        self.assertIn('the topology has 2 GPU models (10de:2330, '
                      '10de:2901): --vendor-id', str(exc))
        exc = self.assertRaises(errors.NvlinkError, novaconfig.settings,
                                hosts, ['x=10de:20b0'])
        self.assertEqual('--alias x=10de:20b0: no GPU of the topology has '
                         'these ids (it has 10de:2330, 10de:2901)', str(exc))
        exc = self.assertRaises(errors.NvlinkError, novaconfig.settings,
                                hosts, ['a', 'b', 'c'])
        self.assertIn('3 --alias NAME given for 2 GPU model(s)', str(exc))

    def test_a_host_with_two_models(self):
        details = inspected()
        for module in (5, 6, 7, 8):
            details[module] = dict(details[module], device_id='2901')
        hosts = helpers.hosts(a=helpers.h100_host(details=details))
        specs = novaconfig.host_device_specs(
            novaconfig.settings(hosts, ['h100', 'b200']), ['a'])['a']
        self.assertEqual(['2330'] * 4 + ['2901'] * 4 + ['2330', '2901'],
                         [json.loads(e)['product_id'] for e in specs])


class TestNumaAdvice(base.BaseTestCase):

    def test_domains_on_one_node_but_the_whole_host(self):
        hosts = helpers.hosts(**{'compute-01': helpers.h100_host(
            details=inspected())})
        self.assertEqual([
            ('flavors of 2 GPU(s)', 'extra_specs', 'hw:numa_nodes', '1'),
            ('flavors of 2 GPU(s)', 'extra_specs',
             'hw:pci_numa_affinity_policy', 'required'),
            ('flavors of 8 GPU(s)', 'extra_specs', 'hw:numa_nodes', '2'),
            ('flavors of 8 GPU(s)', 'extra_specs',
             'hw:pci_numa_affinity_policy', 'preferred'),
        ], rows(novaconfig.numa_advice(hosts, [2, 3, 8])))
        self.assertEqual(
            'domains span NUMA nodes: compute-01 (whole host) (nodes 0,1); '
            'one guest NUMA node per host node keeps memory local',
            novaconfig.numa_advice(hosts, [8])[0].reason)

    def test_spanning_pair_and_unknown_nodes_are_named(self):
        # Module 3 on node 1: the diagonal pair {1,3} spans two nodes.
        hosts = helpers.hosts(**{'compute-01': helpers.h100_host(
            details=inspected(numa=lambda m: {3: 1, 6: 'unknown'}.get(
                m, 0 if m <= 4 else 1)))})
        advice = novaconfig.numa_advice(hosts, [2])
        self.assertEqual(['2', 'preferred'], [s.value for s in advice])
        self.assertEqual(
            'domains span NUMA nodes: compute-01_nvlink-group-of-2-a (nodes '
            '0,1); one guest NUMA node per host node keeps memory local; '
            'NUMA node unknown for compute-01_nvlink-group-of-2-d',
            advice[0].reason)

    def test_no_numa_data_no_advice(self):
        hosts = helpers.hosts(**{'compute-01': helpers.h100_host()})
        self.assertEqual([], novaconfig.numa_advice(hosts, [1, 2, 4, 8]))


class TestIni(base.BaseTestCase):

    def test_fragments(self):
        settings = [
            novaconfig.Setting('nova-compute', 'pci', 'report_in_placement',
                               'True', 'why'),
            novaconfig.Setting('placement-api', 'workarounds', 'o', 'True',
                               'because'),
            novaconfig.Setting('flavors of 2 GPU(s)', 'extra_specs',
                               'hw:numa_nodes', '1', 'local'),
        ]
        self.assertEqual(
            '# nova.conf on nova-compute\n'
            '[pci]\n'
            '# why\n'
            'report_in_placement = True\n'
            '\n'
            '# placement.conf on placement-api\n'
            '[workarounds]\n'
            '# because\n'
            'o = True\n'
            '\n'
            '# flavors of 2 GPU(s): openstack --os-compute-api-version '
            '2.86 flavor set --property '
            'KEY=VALUE\n'
            '#   hw:numa_nodes=1  (local)\n', novaconfig.to_ini(settings))


class TestPciIdOption(base.BaseTestCase):
    """--vendor-id / --product-id as Nova and sysfs write PCI ids."""

    def test_normalized_or_refused(self):
        import argparse

        from nvlink_placement.osc import novaconfig as command
        self.assertEqual(['10de', '2330', '20b2'],
                         [command.pci_id(t) for t in ('0x10DE', '2330',
                                                      ' 20B2 ')])
        for bad in ('zz', '233', '10de1', 'a b', ''):
            self.assertRaises(argparse.ArgumentTypeError, command.pci_id, bad)
