"""The allocation candidates query built from a flavor, as Nova does."""

from oslotest import base

from nvlink_placement import errors
from nvlink_placement.flavors import aliases as aliases_mod
from nvlink_placement.flavors import generate
from nvlink_placement.flavors import inputs
from nvlink_placement.flavors import release
from nvlink_placement.flavors import request
from tests.unit.flavors import helpers

RC = 'CUSTOM_PCI_10DE_2330'
ALIASES = {'h100': request.Alias('h100', RC)}
H100 = helpers.hosts(**{'compute-01': helpers.h100_host()})


def flavor(size=2, **specs):
    spec = {f.size: f for f in generate.generate(H100, 'h100').flavors}[size]
    data = spec.as_dict()
    data['extra_specs'].update(specs)
    return inputs.flavor_from_dict(data)


def plain(name='f', vcpus=4, ram=1024, disk=10, **specs):
    return inputs.flavor_from_dict({'name': name, 'vcpus': vcpus,
                                    'ram': ram, 'disk': disk,
                                    'extra_specs': specs})


class TestBuild(base.BaseTestCase):

    def test_mosk_pair(self):
        query = request.build(flavor(2), ALIASES)
        self.assertEqual((
            ('group_policy', 'none'),
            ('limit', 1000),
            ('required_h100-0', 'CUSTOM_PCI_GROUP2_MEMBER0,OWNER_NOVA'),
            ('required_h100-1', 'CUSTOM_PCI_GROUP2_MEMBER1,OWNER_NOVA'),
            ('required_nvl2', 'CUSTOM_PCI_GROUP2'),
            ('resources', 'DISK_GB:100,MEMORY_MB:262144,VCPU:32'),
            ('resources_h100-0', RC + ':1'),
            ('resources_h100-1', RC + ':1'),
            ('root_required', 'OWNER_NOVA,!COMPUTE_STATUS_DISABLED'),
            ('same_subtree', '_h100-0,_h100-1,_nvl2')), query.params)
        self.assertEqual(2, query.size)
        self.assertEqual(('_h100-0', '_h100-1'), query.gpu_groups)
        self.assertEqual(release.NovaQuery(), query.nova)
        self.assertEqual(
            'group_policy=none&limit=1000'
            '&required_h100-0=CUSTOM_PCI_GROUP2_MEMBER0,OWNER_NOVA'
            '&required_h100-1=CUSTOM_PCI_GROUP2_MEMBER1,OWNER_NOVA'
            '&required_nvl2=CUSTOM_PCI_GROUP2'
            '&resources=DISK_GB:100,MEMORY_MB:262144,VCPU:32'
            '&resources_h100-0=CUSTOM_PCI_10DE_2330:1'
            '&resources_h100-1=CUSTOM_PCI_10DE_2330:1'
            '&root_required=OWNER_NOVA,!COMPUTE_STATUS_DISABLED'
            '&same_subtree=_h100-0,_h100-1,_nvl2', query.display)
        self.assertEqual(
            '/allocation_candidates?group_policy=none&limit=1000'
            '&required_h100-0=CUSTOM_PCI_GROUP2_MEMBER0%2COWNER_NOVA'
            '&required_h100-1=CUSTOM_PCI_GROUP2_MEMBER1%2COWNER_NOVA'
            '&required_nvl2=CUSTOM_PCI_GROUP2'
            '&resources=DISK_GB%3A100%2CMEMORY_MB%3A262144%2CVCPU%3A32'
            '&resources_h100-0=CUSTOM_PCI_10DE_2330%3A1'
            '&resources_h100-1=CUSTOM_PCI_10DE_2330%3A1'
            '&root_required=OWNER_NOVA%2C%21COMPUTE_STATUS_DISABLED'
            '&same_subtree=_h100-0%2C_h100-1%2C_nvl2', query.url)

    def test_older_nova_and_owner_filter_off(self):
        # Nova 27..33, and Nova 34 while a nova-compute is older than
        # service version 73: only the disabled-host filter, on the root.
        for nova in (release.choose(33), release.choose(34, release.OFF)):
            params = request.build(flavor(2), ALIASES, nova=nova).params
            self.assertEqual(
                ('!COMPUTE_STATUS_DISABLED', 'CUSTOM_PCI_GROUP2_MEMBER0',
                 False),
                (dict(params)['root_required'],
                 dict(params).get('required_h100-0'),
                 'required' in dict(params)), nova)

    def test_same_subtree_sorted_as_nova_sorts_it(self):
        query = request.build(flavor(2, **{
            'placement:same_subtree': '_nvl2, _h100-1,_h100-0'}), ALIASES)
        self.assertEqual('_h100-0,_h100-1,_nvl2',
                         dict(query.params)['same_subtree'])

    def test_upstream_alias_gets_uuid_groups_and_default_policy(self):
        query = request.build(
            plain('gpu.h100.2x', 32, 262144, 100,
                  **{'pci_passthrough:alias': 'h100:2'}), ALIASES, limit=50)
        prefix = request.uuid.uuid5(
            request.uuid.NAMESPACE_URL, 'nvlink-placement/gpu.h100.2x/h100')
        self.assertEqual((
            ('group_policy', 'none'),
            ('limit', 50),
            ('required%s-0' % prefix, 'OWNER_NOVA'),
            ('required%s-1' % prefix, 'OWNER_NOVA'),
            ('resources', 'DISK_GB:100,MEMORY_MB:262144,VCPU:32'),
            ('resources%s-0' % prefix, RC + ':1'),
            ('resources%s-1' % prefix, RC + ':1'),
            ('root_required', 'OWNER_NOVA,!COMPUTE_STATUS_DISABLED')),
            query.params)
        self.assertEqual('3259cb0f-3d3a-5e26-9dbd-6dfb011a1c76-0',
                         request.build(flavor(1), ALIASES).gpu_groups[0])

    def test_no_default_policy_with_two_flavor_groups(self):
        query = request.build(plain(**{
            'pci_passthrough:alias': 'h100:1',
            'resources1:CUSTOM_NIC': '1', 'resources2:CUSTOM_NIC': '1'}),
            ALIASES)
        self.assertNotIn('group_policy', dict(query.params))
        self.assertEqual('CUSTOM_NIC:1', dict(query.params)['resources1'])

    def test_cpu_pinning_numa_and_overrides(self):
        query = request.build(plain(vcpus=8, ram=2048, disk=20, **{
            'pci_passthrough:alias': 'h100:1',
            'hw:cpu_policy': 'dedicated',
            'hw:cpu_thread_policy': 'isolate',
            'hw:emulator_threads_policy': 'isolate',
            'hw:pci_numa_affinity_policy': 'socket',
            'resources:DISK_GB': '0',
            'trait:CUSTOM_FAST': 'required'}), ALIASES)
        params = dict(query.params)
        self.assertEqual('MEMORY_MB:2048,PCPU:9', params['resources'])
        self.assertEqual('COMPUTE_SOCKET_PCI_NUMA_AFFINITY,CUSTOM_FAST,'
                         '!HW_CPU_HYPERTHREADING', params['required'])

    def test_swap_and_ephemeral_count_as_disk(self):
        data = plain(disk=10, **{'pci_passthrough:alias': 'h100:1'})
        data.update(ephemeral=5, swap=1025)
        self.assertEqual('DISK_GB:17,MEMORY_MB:1024,VCPU:4',
                         dict(request.build(data, ALIASES).params)[
                             'resources'])

    def test_alias_traits(self):
        aliases = {'h100': request.Alias('h100', RC, ('CUSTOM_NVL',))}
        params = dict(request.build(flavor(2), aliases).params)
        self.assertEqual('CUSTOM_NVL,CUSTOM_PCI_GROUP2_MEMBER0,OWNER_NOVA',
                         params['required_h100-0'])
        self.assertEqual('CUSTOM_NVL,CUSTOM_PCI_GROUP2_MEMBER1,OWNER_NOVA',
                         params['required_h100-1'])

    def test_member_traits_join_the_named_gpu_groups(self):
        # allow_pci_traits_in_flavor: trait_h100-<i> joins group _h100-<i>.
        params = dict(request.build(flavor(4), ALIASES).params)
        self.assertEqual(['CUSTOM_PCI_GROUP4_MEMBER%d,OWNER_NOVA' % i
                          for i in range(4)],
                         [params['required_h100-%d' % i] for i in range(4)])
        self.assertNotIn('required_h100-4', params)
        # Without the option Nova would make a second group of that name.
        nova = release.NovaQuery(pci_traits_in_flavor=False)
        exc = self.assertRaises(errors.NvlinkError, request.build,
                                flavor(2), ALIASES, nova=nova)
        self.assertIn("request group '_h100-0' is named by the alias and by "
                      "another extra spec (traits join a named PCI group "
                      "only with [filter_scheduler] "
                      "allow_pci_traits_in_flavor)", str(exc))
        # A flavor group that asks resources never joins.
        exc = self.assertRaises(errors.NvlinkError, request.build, flavor(
            2, **{'resources_h100-0:VCPU': '1'}), ALIASES)
        self.assertIn("request group '_h100-0' is named by the alias and "
                      "by another extra spec", str(exc))

    def test_refusals(self):
        cases = [
            ({}, "flavor f: no pci_passthrough:alias: it asks for no GPU"),
            ({'pci_passthrough:alias': 'h100:1,nic:1'},
             "flavor f: pci_passthrough:alias='h100:1,nic:1' asks for "
             "several aliases; flavor verify checks one GPU alias per "
             "flavor"),
            ({'pci_passthrough:alias': 'a100:1'},
             "flavor f: alias 'a100' is not configured (known: h100)"),
            ({'pci_passthrough:alias': 'h100:two'},
             "flavor f: pci_passthrough:alias='h100:two': expected "
             "alias:count or alias:count:prefix"),
            ({'pci_passthrough:alias': 'h100:1', 'trait:X': 'yes'},
             "flavor f: trait:X='yes': a trait is \"required\" or "
             "\"forbidden\""),
            ({'pci_passthrough:alias': 'h100:1', 'hw:cpu_policy': 'mixed'},
             'flavor f: hw:cpu_policy=mixed is not modelled by flavor '
             'verify'),
            ({'pci_passthrough:alias': 'h100:1',
              'accel:device_profile': 'fpga'},
             'flavor f: accel:device_profile changes the Placement query '
             'in a way flavor verify does not model'),
            ({'pci_passthrough:alias': 'h100:1', 'group_policy': 'none',
              'placement:group_policy': 'isolate'},
             'flavor f: group_policy and placement:group_policy disagree'),
            ({'pci_passthrough:alias': 'h100:2:_g',
              'resources_g-1:VCPU': '1'},
             "flavor f: request group '_g-1' is named by the alias and by "
             "another extra spec"),
        ]
        for specs, message in cases:
            exc = self.assertRaises(errors.NvlinkError, request.build,
                                    plain(**specs), ALIASES)
            self.assertEqual(message, str(exc))


class TestFlavorInput(base.BaseTestCase):

    def test_properties_and_optional_fields(self):
        self.assertEqual(
            {'name': 'x', 'vcpus': 1, 'ram': 2, 'disk': 3, 'ephemeral': 0,
             'swap': 0, 'extra_specs': {'a': '1'}},
            inputs.flavor_from_dict({'name': 'x', 'vcpus': 1, 'ram': 2,
                                     'disk': 3, 'swap': '',
                                     'properties': {'a': 1}}))

    def test_bad_fields(self):
        exc = self.assertRaises(errors.NvlinkError, inputs.flavor_from_dict,
                                {'name': 'x', 'vcpus': '4', 'ram': 1,
                                 'disk': 1}, 'f.json')
        self.assertEqual("f.json: flavor x: vcpus must be a non-negative "
                         "integer up to 2147483647, got '4'", str(exc))
        self.assertRaises(errors.NvlinkError, inputs.flavor_from_dict,
                          {'vcpus': 1}, 'f.json')
        self.assertRaises(errors.NvlinkError, inputs.flavor_from_dict,
                          ['x'], 'f.json')


class TestAliases(base.BaseTestCase):

    def test_resource_class_names(self):
        self.assertEqual(RC, request.resource_class_name(None, '10de',
                                                         '2330'))
        self.assertEqual('PGPU', request.resource_class_name('pgpu'))
        self.assertEqual('CUSTOM_MY_GPU',
                         request.resource_class_name('my gpu'))
        self.assertEqual('CUSTOM_H100',
                         request.resource_class_name('CUSTOM_H100'))

    def test_nova_conf_aliases(self):
        text = '''[DEFAULT]
alias = {"name": "ignored", "vendor_id": "1", "product_id": "2"}

[pci]
# The GPUs
alias = {"name": "h100", "vendor_id": "10de",
  "product_id": "2330", "device_type": "type-PCI"}
alias = {"name": "gpu2", "resource_class": "big gpu",
         "traits": "hw-nvlink, HW_GPU_API_VULKAN"}
device_spec = {"vendor_id": "10de"}
'''
        self.assertEqual(
            {'h100': request.Alias('h100', RC),
             'gpu2': request.Alias('gpu2', 'CUSTOM_BIG_GPU',
                                   ('CUSTOM_HW_NVLINK',
                                    'HW_GPU_API_VULKAN'))},
            inputs.parse_alias_config(text))

    def test_json_aliases_and_errors(self):
        self.assertEqual(
            {'h100': request.Alias('h100', RC)},
            inputs.parse_alias_config(
                '[{"name": "h100", "vendor_id": "10de", '
                '"product_id": "2330"}]'))
        exc = self.assertRaises(
            errors.NvlinkError, inputs.parse_alias_config,
            '- {name: a, resource_class: X}\n- {name: a, resource_class: Y}',
            'a.yaml')
        self.assertEqual("a.yaml: alias 'a' is defined twice; with PCI in "
                         "Placement an alias has exactly one spec", str(exc))
        exc = self.assertRaises(errors.NvlinkError,
                                inputs.parse_alias_config,
                                '{"name": "a", "vendor_id": "10de"}', 'c')
        self.assertEqual("c: alias 'a' needs resource_class or vendor_id and "
                         "product_id (Nova derives the Placement resource "
                         "class from them)", str(exc))
        exc = self.assertRaises(errors.NvlinkError,
                                inputs.parse_alias_config,
                                '[pci]\nalias = {"name": \n', 'c')
        self.assertIn('c: line 2: alias is not JSON', str(exc))
        self.assertRaises(errors.NvlinkError, inputs.parse_alias_config,
                          '[pci]\ndevice_spec = {}\n', 'c')

    def test_topology_resource_class(self):
        b200 = {m: {'vendor_id': '10de', 'device_id': '2901'}
                for m in range(1, 9)}
        hosts = helpers.hosts(b=helpers.h100_host(details=b200))
        self.assertEqual('CUSTOM_PCI_10DE_2901',
                         aliases_mod.topology_resource_class(hosts))
        self.assertEqual('CUSTOM_X',
                         aliases_mod.topology_resource_class(hosts, 'x'))
        exc = self.assertRaises(errors.NvlinkError,
                                aliases_mod.topology_resource_class, H100)
        self.assertIn('give --resource-class', str(exc))
        mixed = helpers.hosts(b=helpers.h100_host(details=b200),
                              h=helpers.h100_host(details={
                                  1: {'resource_class': 'CUSTOM_H'}}))
        exc = self.assertRaises(errors.NvlinkError,
                                aliases_mod.topology_resource_class, mixed)
        self.assertEqual(
            'the GPUs are of several resource classes (CUSTOM_H on h; '
            'CUSTOM_PCI_10DE_2901 on b): pick the hosts of one class with '
            '--host, or give --resource-class or --alias-config', str(exc))

    def test_alias_names(self):
        self.assertEqual(['a', 'b'], inputs.alias_names([
            plain(**{'pci_passthrough:alias': 'b:2:_b'}),
            plain(**{'pci_passthrough:alias': ' a:1 , b:1'}), plain()]))
