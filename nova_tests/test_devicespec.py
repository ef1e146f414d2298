"""``snapshot --as-configured`` reads ``device_spec`` as Nova 34 does.

:mod:`nvlink_placement.novaconfig.devicespec` (what ``--as-configured`` and
``--from-topology`` use) against Nova's own ``nova.pci.whitelist.
Whitelist`` (first matching entry) and ``pci_placement_translator.
_get_traits_for_dev``, on the entries ``nova-config`` prints for hosts
listed out of PCI order and on the other forms Nova accepts (globs,
regexes, wildcards, traits to normalize), for every device of a grid of
addresses and ids.

The module models Nova 34: on Nova 33 and older, whose translator adds no
``HW_PCI_LIVE_MIGRATABLE`` for a ``live_migratable`` tag, that trait of
the model is not compared (:func:`test_live_migratable_is_nova_34s`
records the difference).
"""

import inspect
import json

import fixtures
from nova.compute import pci_placement_translator
from nova import exception
from nova.pci import whitelist
from nova import test

from nova_tests import base
from nvlink_placement import errors
from nvlink_placement.novaconfig import devicespec
from nvlink_placement.novaconfig import settings as novaconfig
from nvlink_placement.topology import loader

OTHER_FORMS = [
    {'vendor_id': '10de', 'product_id': '2330', 'address': '0000:19:00.0',
     'traits': 'CUSTOM_PCI_GROUP2_MEMBER1,hw_gpu_x,COMPUTE_NODE'},
    {'vendor_id': '10de', 'address': ':3b:00.', 'traits': 'one,two'},
    {'vendor_id': '10de', 'product_id': '*', 'address': '*:5d:*.*',
     'traits': 'CUSTOM_A'},
    {'address': {'domain': '0000', 'bus': '[9a]b', 'slot': '00',
                 'function': '0'}, 'traits': 'regex'},
    {'vendor_id': '10de', 'product_id': '2331', 'traits': 'other_product'},
    {'vendor_id': '15b3', 'live_migratable': 'yes'},
    {'vendor_id': '10de', 'product_id': '2330', 'address': 'cb:00.0',
     'traits': 'short'},
    {'vendor_id': '10de', 'product_id': '2330'},
]
# Nova 34's translator adds HW_PCI_LIVE_MIGRATABLE for a live_migratable
# tag (nova/compute/pci_placement_translator.py _get_traits_for_dev);
# Nova 33 and older do not.
LIVE_MIGRATABLE_TRAIT = 'HW_PCI_LIVE_MIGRATABLE' in inspect.getsource(
    pci_placement_translator)
ADDRESSES = sorted({a for board in base.BOARDS.values() for a in board} |
                   {'0001:19:00.0', '0000:19:00.1', '0000:ab:1f.7'})
IDS = [('10de', '2330'), ('10de', '2331'), ('15b3', '101e')]
#: A host of two models: an NVLink-bridged H100 PCIe pair (10de:2331)
#: and two L40S (10de:26b9), by PCI address.
TWO_MODELS = {'0000:19:00.0': '2331', '0000:3b:00.0': '2331',
              '0000:4c:00.0': '26b9', '0000:5d:00.0': '26b9'}
OTHER = {'2331': '26b9', '26b9': '2331'}


class TestDeviceSpecLikeNova(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        # Nova's own tests stub this sysfs read (no such device here).
        self.useFixture(fixtures.MockPatch(
            'nova.pci.utils.is_physical_function', return_value=False))

    def assert_same(self, values):
        nova = whitelist.Whitelist(values)
        ours = devicespec.parse(values)
        checked = 0
        for address in ADDRESSES:
            for vendor, product in IDS:
                spec = base.matching_spec(nova, {
                    'vendor_id': vendor, 'product_id': product,
                    'address': address, 'parent_addr': None,
                    'dev_type': 'type-PCI'})
                entry = devicespec.first_match(ours, address, vendor,
                                               product)
                where = '%s %s:%s' % (address, vendor, product)
                self.assertEqual(spec is None, entry is None, where)
                if spec is not None:
                    checked += 1
                    modelled = set(entry.traits())
                    if not LIVE_MIGRATABLE_TRAIT:
                        # Modelled on Nova 34 (see the module docstring).
                        modelled.discard('HW_PCI_LIVE_MIGRATABLE')
                    self.assertEqual(
                        pci_placement_translator._get_traits_for_dev(
                            spec.tags), modelled, where)
        return checked

    def test_nova_config_entries(self):
        specs = base.device_specs()
        for host, values in specs.items():
            self.assertEqual(9, len(values), host)
            self.assertGreater(self.assert_same(values), 8)

    def test_two_models_on_one_host(self):
        """A host with H100 PCIe and L40S GPUs: its entries, read by Nova.

        Each model's per-GPU entries match only its own ids, so a GPU of
        the other model at the same address falls through to its model's
        generic entry (no member traits).
        """
        topology = loader.parse({'version': 1, 'hosts': {'mixed-01': {
            'gpus': {a: {'vendor_id': '10de', 'device_id': product}
                     for a, product in TWO_MODELS.items()},
            'groups': [['0000:19:00.0', '0000:3b:00.0']]}}}, '<two models>')
        values = novaconfig.host_device_specs(novaconfig.settings(
            list(topology.hosts.values()), ['h100pcie', 'l40s']),
            ['mixed-01'])['mixed-01']
        self.assertEqual(6, len(values))
        nova = whitelist.Whitelist(values)
        traits = {}
        for address, product in TWO_MODELS.items():
            for ids in (('10de', product), ('10de', OTHER[product])):
                spec = base.matching_spec(nova, {
                    'vendor_id': ids[0], 'product_id': ids[1],
                    'address': address, 'parent_addr': None,
                    'dev_type': 'type-PCI'})
                # Nova adds COMPUTE_MANAGED_PCI_DEVICE to every one.
                traits[address, ids[1]] = (
                    spec.product_id, sorted(
                        pci_placement_translator._get_traits_for_dev(
                            spec.tags) - {'COMPUTE_MANAGED_PCI_DEVICE'}))
        self.assertEqual({
            ('0000:19:00.0', '2331'): ('2331', ['CUSTOM_PCI_GROUP2_MEMBER0']),
            ('0000:3b:00.0', '2331'): ('2331', ['CUSTOM_PCI_GROUP2_MEMBER1']),
            ('0000:4c:00.0', '26b9'): ('26b9', ['CUSTOM_PCI_GROUP2_MEMBER0']),
            ('0000:5d:00.0', '26b9'): ('26b9', ['CUSTOM_PCI_GROUP2_MEMBER1']),
            # The other model at the same address: its generic entry.
            ('0000:19:00.0', '26b9'): ('26b9', []),
            ('0000:3b:00.0', '26b9'): ('26b9', []),
            ('0000:4c:00.0', '2331'): ('2331', []),
            ('0000:5d:00.0', '2331'): ('2331', []),
        }, traits)
        # Our matcher agrees with Nova's on every address and id.
        self.assertGreater(self.assert_same(values), 8)

    def test_other_forms_nova_accepts(self):
        values = [json.dumps(e) for e in OTHER_FORMS]
        self.assertGreater(self.assert_same(values), 20)
        # As a JSON list in one value.
        self.assert_same([json.dumps(OTHER_FORMS[:4])] +
                         [json.dumps(e) for e in OTHER_FORMS[4:]])

    def test_refused_alike(self):
        for entry in ({'address': '10000:19:00.0'},
                      {'address': '0000:19:20.0'},
                      {'address': '0000:19:00.8'},
                      {'address': 'a:b:c:d.0'}):
            value = [json.dumps(dict(entry, vendor_id='10de'))]
            self.assertRaises((exception.PciConfigInvalidSpec,
                               exception.PciDeviceWrongAddressFormat),
                              whitelist.Whitelist, value)
            self.assertRaises(errors.NvlinkError, devicespec.parse, value)

    def test_live_migratable_is_nova_34s(self):
        values = [json.dumps({'vendor_id': '15b3',
                              'live_migratable': 'yes'})]
        spec = base.matching_spec(whitelist.Whitelist(values), {
            'vendor_id': '15b3', 'product_id': '101e',
            'address': '0000:18:00.0', 'parent_addr': None,
            'dev_type': 'type-PCI'})
        self.assertEqual(
            LIVE_MIGRATABLE_TRAIT, 'HW_PCI_LIVE_MIGRATABLE' in
            pci_placement_translator._get_traits_for_dev(spec.tags))
        self.assertIn('HW_PCI_LIVE_MIGRATABLE', devicespec.first_match(
            devicespec.parse(values), '0000:18:00.0', '15b3',
            '101e').traits())
