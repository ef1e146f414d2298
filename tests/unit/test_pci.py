from oslotest import base

from nvlink_placement.topology import pci


class TestNormalize(base.BaseTestCase):

    def test_forms(self):
        cases = {
            '0000:19:00.0': '0000:19:00.0',
            '00000000:4C:00.0': '0000:4c:00.0',
            '4c:00.0': '0000:4c:00.0',
            '00000009:01:00.0': '0009:01:00.0',      # Grace
            # Hyper-V: the kernel prints %04x, so all 7 digits stay.
            '03F8CFDD:00:00.0': '3f8cfdd:00:00.0',
            '00010000:01:02.3': '10000:01:02.3',     # above 0xffff
            ' 0001:AB:1F.7 ': '0001:ab:1f.7',
        }
        for text, expected in cases.items():
            self.assertEqual(expected, pci.normalize_address(text), text)

    def test_rejects(self):
        for text in ('zz', '0000:19:00', '0000:19:00.8', '0000:119:00.0',
                     '0000:19:20.0', '', '000000000:19:00.0'):
            self.assertRaises(ValueError, pci.normalize_address, text)

    def test_nova_name(self):
        self.assertEqual('compute-01_0000:4C:00.0',
                         pci.nova_provider_name('compute-01',
                                                '00000000:4c:00.0'))

    def test_sort_key_is_numeric(self):
        addresses = ['10000:00:00.0', '0009:01:00.0', '0000:9b:00.0',
                     '0000:19:00.0']
        self.assertEqual(['0000:19:00.0', '0000:9b:00.0', '0009:01:00.0',
                          '10000:00:00.0'],
                         sorted(addresses, key=pci.address_sort_key))

    def test_address_of_provider(self):
        self.assertEqual('0000:4c:00.0', pci.address_of_provider(
            'compute-01', 'compute-01_0000:4C:00.0'))
        self.assertEqual('10000:01:00.0', pci.address_of_provider(
            'h', 'h_10000:01:00.0'))
        for name in ('compute-01_nvlink-group-of-2-a',
                     'compute-01_0000:4c:00.0',      # Nova upper-cases
                     'compute-02_0000:4C:00.0', 'compute-01_4C:00.0',
                     'compute-01'):
            self.assertIsNone(pci.address_of_provider('compute-01', name),
                              name)


class TestNovaRefusal(base.BaseTestCase):
    """Nova 34's address limits (nova/pci/devspec.py MAX_DOMAIN ...)."""

    def test_limits(self):
        self.assertIsNone(pci.nova_refusal('ffff:ff:1f.7'))
        self.assertIsNone(pci.nova_refusal('0000:19:00.0'))
        self.assertEqual(
            'PCI domain 0x10000 is above 0xffff, the largest Nova accepts '
            '(nova/pci/devspec.py): Nova cannot pass this GPU through',
            pci.nova_refusal('10000:01:00.0'))
        # Hyper-V's 7-digit domains too.
        self.assertIn('PCI domain 0x3f8cfdd is above 0xffff',
                      pci.nova_refusal('3f8cfdd:00:00.0'))
        # Fields normalize_address never gives, judged all the same.
        for address, field in (('0000:100:00.0', 'bus 0x100'),
                               ('0000:00:20.0', 'slot 0x20'),
                               ('0000:00:00.8', 'function 0x8')):
            self.assertIn('PCI %s is above' % field,
                          pci.nova_refusal(address), address)
