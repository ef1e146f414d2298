"""Flavor generation: keys, sizes, dialects, refusals."""

from oslotest import base

from nvlink_placement import errors
from nvlink_placement.flavors import generate
from tests.unit.flavors import helpers

H100 = helpers.hosts(**{'compute-01': helpers.h100_host()})


class TestGenerate(base.BaseTestCase):

    def test_default_sizes_and_keys(self):
        result = generate.generate(H100, 'h100')
        self.assertEqual([], result.skipped)
        self.assertEqual([], result.notes)
        self.assertEqual([
            {'name': 'gpu.h100.1x', 'vcpus': 16, 'ram': 131072,
             'disk': 100,
             'extra_specs': {'pci_passthrough:alias': 'h100:1'}},
            {'name': 'gpu.h100.2x', 'vcpus': 32, 'ram': 262144,
             'disk': 100,
             'extra_specs': {
                 'pci_passthrough:alias': 'h100:2:_h100',
                 'trait_nvl2:CUSTOM_PCI_GROUP2': 'required',
                 'trait_h100-0:CUSTOM_PCI_GROUP2_MEMBER0': 'required',
                 'trait_h100-1:CUSTOM_PCI_GROUP2_MEMBER1': 'required',
                 'placement:same_subtree': '_h100-0,_h100-1,_nvl2',
                 'placement:group_policy': 'none'}},
            {'name': 'gpu.h100.4x', 'vcpus': 64, 'ram': 524288,
             'disk': 100,
             'extra_specs': dict(
                 {'pci_passthrough:alias': 'h100:4:_h100',
                  'trait_nvl4:CUSTOM_PCI_GROUP4': 'required'},
                 **{'trait_h100-%d:CUSTOM_PCI_GROUP4_MEMBER%d' % (i, i):
                    'required' for i in range(4)},
                 **{'placement:same_subtree':
                    '_h100-0,_h100-1,_h100-2,_h100-3,_nvl4',
                    'placement:group_policy': 'none'})},
            {'name': 'gpu.h100.8x', 'vcpus': 128, 'ram': 1048576,
             'disk': 100,
             'extra_specs': dict(
                 {'pci_passthrough:alias': 'h100:8:_h100'},
                 **{'trait_h100-%d:CUSTOM_PCI_GROUP8_MEMBER%d' % (i, i):
                    'required' for i in range(8)},
                 **{'placement:group_policy': 'none'})},
        ], [f.as_dict() for f in result.flavors])
        # The display order: alias, domain group, members, subtree, policy.
        self.assertEqual(
            ['pci_passthrough:alias', 'trait_nvl2:CUSTOM_PCI_GROUP2',
             'trait_h100-0:CUSTOM_PCI_GROUP2_MEMBER0',
             'trait_h100-1:CUSTOM_PCI_GROUP2_MEMBER1',
             'placement:same_subtree', 'placement:group_policy'],
            list(result.flavors[1].extra_specs))
        self.assertEqual([generate.SINGLE, generate.DOMAIN, generate.DOMAIN,
                          generate.WHOLE_HOST],
                         [f.kind for f in result.flavors])

    def test_options_and_trait_prefix(self):
        result = generate.generate(
            H100, 'gpu-a', sizes=[2], trait_prefix='CUSTOM_NVL',
            name_template='{alias}/{size}', vcpus_per_gpu=8,
            ram_per_gpu=1024, disk=0)
        self.assertEqual([{
            'name': 'gpu-a/2', 'vcpus': 16, 'ram': 2048, 'disk': 0,
            'extra_specs': {
                'pci_passthrough:alias': 'gpu-a:2:_gpu-a',
                'trait_nvl2:CUSTOM_NVL2': 'required',
                'trait_gpu-a-0:CUSTOM_NVL2_MEMBER0': 'required',
                'trait_gpu-a-1:CUSTOM_NVL2_MEMBER1': 'required',
                'placement:same_subtree': '_gpu-a-0,_gpu-a-1,_nvl2',
                'placement:group_policy': 'none'}}],
            [f.as_dict() for f in result.flavors])

    def test_size_without_domain_is_refused(self):
        exc = self.assertRaises(errors.NvlinkError, generate.generate,
                                H100, 'h100', sizes=[2, 3, 5])
        self.assertEqual(
            'size 3 refused: no NVLink domain of 3 GPUs in the topology; '
            'sizes that exist: 1, 2, 4, 8\n'
            'size 5 refused: no NVLink domain of 5 GPUs in the topology; '
            'sizes that exist: 1, 2, 4, 8', str(exc))

    def test_upstream_refuses_domain_sizes(self):
        exc = self.assertRaises(errors.NvlinkError, generate.generate,
                                H100, 'h100', sizes=[1, 4],
                                dialect=generate.UPSTREAM)
        self.assertEqual('size 4 refused: ' + generate.UPSTREAM_REASON % 4,
                         str(exc))
        self.assertIn('silently get GPUs from different domains', str(exc))

    def test_upstream_default_sizes_skip_domains(self):
        result = generate.generate(H100, 'h100', dialect=generate.UPSTREAM)
        self.assertEqual(
            [('gpu.h100.1x', {'pci_passthrough:alias': 'h100:1'}),
             ('gpu.h100.8x', {'pci_passthrough:alias': 'h100:8'})],
            [(f.name, f.extra_specs) for f in result.flavors])
        self.assertEqual([(2, generate.UPSTREAM_REASON % 2),
                          (4, generate.UPSTREAM_REASON % 4)],
                         result.skipped)

    def test_whole_host_refused_when_bigger_host_lacks_domain(self):
        hosts = helpers.hosts(small=helpers.pcie_pairs(4),
                              big=helpers.pcie_pairs(8))
        self.assertEqual([1, 2, 4, 8], generate.default_sizes(hosts))
        self.assertEqual(
            (None, '4 GPUs are the whole of host(s) small, but host(s) big '
                   'have more GPUs and no 4-GPU NVLink domain: Nova could '
                   'give such a flavor 4 GPUs from different domains '
                   'there'), generate.classify(hosts, 4))
        self.assertEqual((generate.WHOLE_HOST, None),
                         generate.classify(hosts, 8))
        self.assertEqual((generate.DOMAIN, None),
                         generate.classify(hosts, 2))

    def test_note_for_hosts_without_the_group(self):
        hosts = helpers.hosts(**{'compute-01': helpers.h100_host(),
                                 'pcie-07': helpers.pcie_pairs(2)})
        result = generate.generate(hosts, 'h100')
        self.assertEqual([1, 2, 4, 8], [f.size for f in result.flavors])
        self.assertEqual(
            ['size 2 asks for a 2-GPU NVLink group provider; host(s) '
             'pcie-07 have none, so this flavor never lands there'],
            result.notes)

    def test_alias_names(self):
        exc = self.assertRaises(errors.NvlinkError, generate.generate,
                                H100, 'h1:00')
        self.assertIn('alias \'h1:00\': an alias name must be non-empty',
                      str(exc))
        long_alias = 'a' * 62
        exc = self.assertRaises(errors.NvlinkError, generate.generate,
                                H100, long_alias, sizes=[2])
        self.assertIn("request group suffix '_%s-1' is not a valid "
                      "Placement suffix" % long_alias, str(exc))
        # The mosk whole-host flavor names its groups too; 1-GPU flavors
        # and the upstream whole-host flavor name none: any alias works.
        exc = self.assertRaises(errors.NvlinkError, generate.generate,
                                H100, long_alias, sizes=[8])
        self.assertIn("'_%s-7'" % long_alias, str(exc))
        self.assertEqual(['%s:1' % long_alias, '%s:8' % long_alias], [
            f.extra_specs['pci_passthrough:alias'] for f in
            generate.generate(H100, long_alias, sizes=[1, 8],
                              dialect=generate.UPSTREAM).flavors])

    def test_name_template(self):
        exc = self.assertRaises(errors.NvlinkError, generate.generate,
                                H100, 'h100', name_template='{bogus}')
        self.assertIn("--name-template '{bogus}': 'bogus'", str(exc))
        exc = self.assertRaises(errors.NvlinkError, generate.generate,
                                H100, 'h100', name_template='gpu-{alias}')
        self.assertEqual("--name-template 'gpu-{alias}' gives sizes 1 and 2 "
                         "the same name 'gpu-h100'; include {size}",
                         str(exc))

    def test_amounts(self):
        exc = self.assertRaises(errors.NvlinkError, generate.generate,
                                H100, 'h100', vcpus_per_gpu=0)
        self.assertEqual('--vcpus-per-gpu must be at least 1, not 0',
                         str(exc))
        exc = self.assertRaises(errors.NvlinkError, generate.generate,
                                H100, 'h100', disk=10 ** 20)
        self.assertEqual("--disk must be at most 2147483647 (Nova's limit "
                         "for a flavor)", str(exc))
        # Fits per GPU, not for the 8-GPU flavor.
        exc = self.assertRaises(errors.NvlinkError, generate.generate,
                                H100, 'h100', ram_per_gpu=2 ** 30)
        self.assertEqual("the 2-GPU flavor would get ram 2147483648, above "
                         "Nova's limit of 2147483647: lower --ram-per-gpu",
                         str(exc))
        largest = generate.generate(H100, 'h100',
                                    vcpus_per_gpu=0x7FFFFFFF // 8)
        self.assertEqual(0x7FFFFFFF // 8 * 8, largest.flavors[-1].vcpus)

    def test_parse_sizes(self):
        self.assertEqual([1, 2, 4], generate.parse_sizes(' 4,1, 2,2'))
        for bad in ('x', '0', '2,,4', ''):
            self.assertRaises(errors.NvlinkError, generate.parse_sizes, bad)


class TestDomains(base.BaseTestCase):

    def test_h100_domains(self):
        host = H100[0]
        self.assertEqual({
            helpers.by_module(1, 3): 'compute-01_nvlink-group-of-2-a',
            helpers.by_module(2, 4): 'compute-01_nvlink-group-of-2-b',
            helpers.by_module(5, 7): 'compute-01_nvlink-group-of-2-c',
            helpers.by_module(6, 8): 'compute-01_nvlink-group-of-2-d'},
            generate.domains(host, 2))
        self.assertEqual({
            helpers.by_module(1, 2, 3, 4): 'compute-01_nvlink-group-of-4-a',
            helpers.by_module(5, 6, 7, 8): 'compute-01_nvlink-group-of-4-b'},
            generate.domains(host, 4))
        self.assertEqual({frozenset(helpers.H100_MAP):
                          'compute-01 (whole host)'},
                         generate.domains(host, 8))
        self.assertEqual(8, len(generate.domains(host, 1)))
        self.assertEqual({}, generate.domains(host, 3))

    def test_excluded_gpu_breaks_its_domains(self):
        host = helpers.hosts(**{'compute-01': helpers.h100_host(
            details={5: {'excluded': 'MIG enabled'}})})[0]
        self.assertEqual({helpers.by_module(1, 3), helpers.by_module(2, 4),
                          helpers.by_module(6, 8)},
                         set(generate.domains(host, 2)))
        self.assertEqual({helpers.by_module(1, 2, 3, 4)},
                         set(generate.domains(host, 4)))
        self.assertEqual({}, generate.domains(host, 8))
        self.assertEqual([1, 2, 4, 7], generate.default_sizes([host]))


def _mesh_host(name_count=4):
    return {'groups': [{'members': ['0000:%02x:00.0' % (0x10 * (i + 1))
                                    for i in range(name_count)],
                        'mesh': True}]}


class TestMeshHosts(base.BaseTestCase):

    def test_mesh_only_fleet(self):
        hosts = helpers.hosts(m1=_mesh_host(), m2=_mesh_host())
        # Pairs are mesh domains; 4 is the whole host (no subtree needed,
        # so upstream Nova can express it).
        self.assertEqual([2], generate.domain_sizes(hosts))
        self.assertEqual([(1, 'single'), (2, 'domain'), (4, 'whole-host')],
                         [(f.size, f.kind) for f in
                          generate.generate(hosts, 'a').flavors])
        upstream = generate.generate(hosts, 'a', dialect='upstream')
        self.assertEqual([1, 4], [f.size for f in upstream.flavors])

    def test_mesh_next_to_nvswitch_hosts(self):
        hosts = helpers.hosts(**{'compute-01': helpers.h100_host(),
                                 'm1': _mesh_host()})
        generated = generate.generate(hosts, 'a')
        self.assertEqual([(1, 'single'), (2, 'domain'), (4, 'domain'),
                          (8, 'whole-host')],
                         [(f.size, f.kind) for f in generated.flavors])
        # The mesh provider carries GROUP2 and GROUP4: no host is left out.
        self.assertEqual([], generated.notes)

    def test_mesh_domains(self):
        host, = helpers.hosts(m1=_mesh_host())
        members = frozenset(host.gpus)
        self.assertEqual({}, generate.domains(host, 2))
        self.assertEqual({members: 'm1_nvlink-group-of-4-a'},
                         host.meshes(2))
        self.assertEqual({members: 'm1 (whole host)'},
                         generate.domains(host, 4))
        self.assertEqual('m1_nvlink-group-of-4-a', host.domain_label(
            sorted(members)[1:3], 2))
        self.assertEqual('m1 (whole host)', host.domain_label(members, 4))
        self.assertIsNone(host.domain_label(sorted(members)[:3], 3))
