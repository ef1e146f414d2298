import os

from oslotest import base

from nvlink_placement.discovery import sysfs
from nvlink_placement import errors
from tests.unit.discovery import helpers


class TestAttributeParsers(base.BaseTestCase):
    """The attribute formats of ``data/sysfs/pci-attribute-formats.txt``."""

    def setUp(self):
        super().setUp()
        self.formats = helpers.read_fixture('sysfs',
                                            'pci-attribute-formats.txt')

    def test_hex_ids_and_class(self):
        self.assertEqual(0x10de, sysfs.parse_hex('0x10de\n', 'vendor'))
        self.assertEqual(0x2330, sysfs.parse_hex('0x2330\n', 'device'))
        self.assertEqual(0x030200, sysfs.parse_hex('0x030200\n', 'class'))

    def test_bad_hex_names_the_file(self):
        exc = self.assertRaises(errors.NvlinkError, sysfs.parse_hex,
                                'zz\n', '/sys/x/vendor')
        self.assertEqual("/sys/x/vendor: expected a hex number, got 'zz'",
                         str(exc))

    def test_link_speed_both_kernel_spellings(self):
        self.assertEqual(16.0, sysfs.parse_link_speed('16.0 GT/s PCIe\n'))
        self.assertEqual(16.0, sysfs.parse_link_speed('16 GT/s\n'))
        self.assertEqual(2.5, sysfs.parse_link_speed('2.5 GT/s PCIe'))
        self.assertEqual(5.0, sysfs.parse_link_speed('5 GT/s'))
        self.assertIsNone(sysfs.parse_link_speed('Unknown\n'))
        self.assertIsNone(sysfs.parse_link_speed('Unknown speed\n'))

    def test_aer_current_format(self):
        block = helpers.capture_block(self.formats, 'aer_dev_correctable')
        self.assertEqual(0, sysfs.parse_aer_counters(block, 'f'))
        block = helpers.capture_block(self.formats, 'aer_dev_fatal')
        self.assertEqual(0, sysfs.parse_aer_counters(block, 'f'))
        self.assertEqual(1, sysfs.parse_aer_counters(
            block.replace('TOTAL_ERR_FATAL 0', 'TOTAL_ERR_FATAL 1'), 'f'))

    def test_aer_older_multi_word_names(self):
        start = self.formats.index('Receiver Error 2')
        end = self.formats.index('TOTAL_ERR_COR 2') + len('TOTAL_ERR_COR 2')
        block = self.formats[start:end]
        self.assertEqual(2, sysfs.parse_aer_counters(block, 'f'))
        # Without the TOTAL line the named counts are summed.
        self.assertEqual(2, sysfs.parse_aer_counters(
            block.replace('TOTAL_ERR_COR 2', ''), 'f'))

    def test_aer_garbage_names_file_and_line(self):
        exc = self.assertRaises(errors.NvlinkError,
                                sysfs.parse_aer_counters,
                                'RxErr 0\nBadTLP x\n', '/d/aer_dev_fatal')
        self.assertEqual('/d/aer_dev_fatal: line 2: expected "<name> '
                         '<count>", got \'BadTLP x\'', str(exc))

    def test_config_from_captured_hexdump(self):
        # hexdump prints little-endian 16-bit words: 10de 2330 ...
        data = bytes.fromhex('de10 3023 4705 1000')
        self.assertIs(False, sysfs.config_reads_all_ones(data))
        self.assertIs(True, sysfs.config_reads_all_ones(b'\xff' * 64))
        self.assertIsNone(sysfs.config_reads_all_ones(b'\xff\xff'))


class TestScan(base.BaseTestCase):

    def test_clean_host(self):
        host = self.useFixture(helpers.FakeSysfs())
        inventory = sysfs.scan(host.root)
        self.assertEqual(list(helpers.BOARD2), list(inventory.gpus))
        self.assertEqual(helpers.NVSWITCHES, inventory.nvswitches)
        gpu = inventory.gpus['0000:18:00.0']
        self.assertEqual(sysfs.PciGpu(
            address='0000:18:00.0', vendor_id='10de', device_id='2330',
            numa_node=0, iommu_group='30', driver='vfio-pci',
            link=sysfs.PciLink(16, 16, 32.0, 32.0),
            aer={'correctable': 0, 'nonfatal': 0, 'fatal': 0},
            config_all_ones=False, vgpu=None), gpu)
        self.assertEqual('CUSTOM_PCI_10DE_2330', gpu.resource_class)
        self.assertEqual('37', inventory.gpus['0000:db:00.0'].iommu_group)
        self.assertEqual(1, inventory.gpus['0000:db:00.0'].numa_node)

    def test_quirks(self):
        host = self.useFixture(helpers.FakeSysfs(quirks=True))
        gpus = sysfs.scan(host.root).gpus
        self.assertIs(True, gpus['0000:9a:00.0'].config_all_ones)
        self.assertEqual({'correctable': 0, 'nonfatal': 0, 'fatal': 1},
                         gpus['0000:ab:00.0'].aer)
        self.assertIsNone(gpus['0000:5d:00.0'].numa_node)
        self.assertEqual({'correctable': None, 'nonfatal': None,
                          'fatal': None}, gpus['0000:5d:00.0'].aer)
        self.assertEqual('vGPU in use (mdev parent, 1 mdev instance)',
                         gpus['0000:db:00.0'].vgpu)
        self.assertEqual(sysfs.PciLink(8, 16, 16.0, 32.0),
                         gpus['0000:2a:00.0'].link)

    def test_unbound_gpu_and_vga_class(self):
        host = self.useFixture(helpers.FakeSysfs())
        host.add_device('0000:e1:00.0', '0x10de', '0x26b9', '0x030000')
        gpus = sysfs.scan(host.root).gpus
        gpu = gpus['0000:e1:00.0']
        self.assertEqual('26b9', gpu.device_id)
        self.assertIsNone(gpu.driver)
        self.assertIsNone(gpu.iommu_group)
        self.assertIsNone(gpu.numa_node)
        self.assertEqual(sysfs.PciLink(), gpu.link)

    def test_sriov_vgpu_pf_excluded_and_vfs_not_listed(self):
        """vGPU 17+ layout of ``data/sysfs/vgpu-and-mdev.txt``."""
        host = self.useFixture(helpers.FakeSysfs())
        capture = helpers.read_fixture('sysfs', 'vgpu-and-mdev.txt')
        typed = helpers.capture_block(
            capture, 'cat /sys/bus/pci/devices/0000\\:41\\:00.4/nvidia/'
            'current_vgpu_type')
        self.assertEqual('1414\n', typed)
        host.add_gpu('0000:41:00.0', iommu_group=60, numa=0,
                     device='0x2335', driver='nvidia')
        host.write('0000:41:00.0', 'sriov_numvfs', '2\n')
        for vf, vgpu_type in (('0000:41:00.4', typed),
                              ('0000:41:00.5', '0\n')):
            host.add_gpu(vf, iommu_group=61, numa=0, device='0x2335',
                         driver='nvidia')
            host.link(vf, 'physfn', os.path.join('..', '0000:41:00.0'))
            host.write(vf, os.path.join('nvidia', 'current_vgpu_type'),
                       vgpu_type)
            host.link('0000:41:00.0', 'virtfn%s' % vf[-1],
                      os.path.join('..', vf))
        gpus = sysfs.scan(host.root).gpus
        self.assertNotIn('0000:41:00.4', gpus)
        self.assertNotIn('0000:41:00.5', gpus)
        self.assertEqual('vGPU in use (SR-IOV, 1 of 2 VFs have a vGPU type)',
                         gpus['0000:41:00.0'].vgpu)

    def test_missing_root(self):
        exc = self.assertRaises(errors.NvlinkError, sysfs.scan,
                                '/nonexistent/sys')
        self.assertEqual('cannot list PCI devices in '
                         '/nonexistent/sys/bus/pci/devices: No such file or '
                         'directory; run nvlink-host-inspect on the GPU '
                         'host, or give --sysfs-root a copy of its /sys (to '
                         'plan before the hosts exist, write the topology by '
                         'hand: "openstack nvlink snapshot --from-topology '
                         'FILE" gives the trees Nova will report)', str(exc))

    def test_entry_that_is_not_a_pci_address(self):
        host = self.useFixture(helpers.FakeSysfs())
        os.makedirs(os.path.join(host.root, 'bus', 'pci', 'devices',
                                 'notes.txt'))
        exc = self.assertRaises(errors.NvlinkError, sysfs.scan, host.root)
        self.assertEqual(
            "%s/bus/pci/devices/notes.txt: not a PCI address (expected "
            "dddd:bb:dd.f, as the kernel names the entries there): is "
            "--sysfs-root a copy of a host's /sys?" % host.root, str(exc))

    def test_missing_attribute_names_the_file(self):
        host = self.useFixture(helpers.FakeSysfs())
        os.unlink(host.path('0000:2a:00.0', 'device'))
        exc = self.assertRaises(errors.NvlinkError, sysfs.scan, host.root)
        self.assertEqual('%s/bus/pci/devices/0000:2a:00.0/device is missing'
                         % host.root, str(exc))

    def test_bad_attribute_names_the_file(self):
        host = self.useFixture(helpers.FakeSysfs())
        host.write('0000:18:00.0', 'numa_node', 'zero\n')
        exc = self.assertRaises(errors.NvlinkError, sysfs.scan, host.root)
        self.assertEqual(
            "%s/bus/pci/devices/0000:18:00.0/numa_node: expected an "
            "integer, got 'zero'" % host.root, str(exc))
