"""Reading the PCI devices of a libvirt domain XML."""

from oslotest import base

from nvlink_placement import errors
from nvlink_placement.hook import domain
from tests.unit.hook import samples


class TestParse(base.BaseTestCase):

    def test_nova_guest_with_gpus_and_other_devices(self):
        text = samples.domain_xml(
            ['0000:db:00.0', '0000:3a:00.0'],
            samples.NIC_HOSTDEV + samples.SRIOV_INTERFACE + samples.MDEV +
            samples.USB)
        # GPUs and the PCI NIC hostdev; not the SR-IOV interface, the mdev,
        # the USB device, or any guest-side <address>.
        self.assertEqual(
            domain.Domain('instance-0000002a',
                          ('0000:0c:00.0', '0000:3a:00.0', '0000:db:00.0')),
            domain.parse(text))

    def test_guest_without_hostdevs(self):
        self.assertEqual(domain.Domain('instance-0000002a', ()),
                         domain.parse(samples.domain_xml()))

    def test_mdev_only_guest(self):
        self.assertEqual(
            domain.Domain('instance-0000002a', ()),
            domain.parse(samples.domain_xml(extra=samples.MDEV)))

    def test_numbers_as_libvirt_reads_them(self):
        # strtoul base 0: hex, octal with a leading 0, decimal; missing: 0.
        text = ("<domain><name>g</name><devices>"
                "<hostdev mode='subsystem' type='pci'><source>"
                "<address domain='0x10000' bus='0X1A' slot='017' "
                "function='3'/></source></hostdev>"
                "<hostdev type='pci'><source>"
                "<address bus='25' slot='0'/></source></hostdev>"
                "<hostdev mode='capabilities' type='storage'><source>"
                "<block>/dev/sdf1</block></source></hostdev>"
                "</devices></domain>")
        self.assertEqual(
            domain.Domain('g', ('0000:19:00.0', '10000:1a:0f.3')),
            domain.parse(text))

    def test_same_device_twice_is_listed_once(self):
        text = samples.domain_xml(['0000:3a:00.0', '0000:3a:00.0'])
        self.assertEqual(('0000:3a:00.0',), domain.parse(text).pci_addresses)

    def test_c_number(self):
        for text, value in (('0x0', 0), ('0xff', 255), ('0', 0),
                            ('010', 8), ('19', 19), (' 0x1f ', 31)):
            self.assertEqual(value, domain.c_number(text), text)
        for text in ('', '0x', '08', '-1', '1.0', 'ab'):
            self.assertIsNone(domain.c_number(text), text)

    def test_errors(self):
        hostdev = ("<domain><devices><hostdev type='pci'/>"
                   "<hostdev type='pci'><source>%s</source></hostdev>"
                   "</devices></domain>")
        for text, message in (
                ('<domain><name>g', 'X: invalid XML: no element found: '
                                    'line 1, column 15'),
                ('<network/>', 'X: expected a <domain> document, got '
                               '<network>'),
                ("<domain><devices><hostdev type='pci'><source/></hostdev>"
                 "</devices></domain>",
                 "X: <hostdev type='pci'> #1 of 1: no <source><address>"),
                (hostdev % "<address bus='0x100'/>",
                 "X: <hostdev type='pci'> #1 of 2: no <source><address>"),
                (hostdev.replace("<hostdev type='pci'/>", '') %
                 "<address bus='0x100'/>",
                 "X: <hostdev type='pci'> #1 of 1: bus='0x100': expected a "
                 "number up to 0xff"),
                (hostdev.replace("<hostdev type='pci'/>", '') %
                 "<address slot='0x20'/>",
                 "X: <hostdev type='pci'> #1 of 1: slot='0x20': expected a "
                 "number up to 0x1f"),
                (hostdev.replace("<hostdev type='pci'/>", '') %
                 "<address function='8'/>",
                 "X: <hostdev type='pci'> #1 of 1: function='8': expected a "
                 "number up to 0x7"),
                (hostdev.replace("<hostdev type='pci'/>", '') %
                 "<address domain='zz'/>",
                 "X: <hostdev type='pci'> #1 of 1: domain='zz': expected a "
                 "number up to 0xffffffff")):
            exc = self.assertRaises(errors.NvlinkError, domain.parse, text,
                                    'X')
            self.assertEqual(message, str(exc))
