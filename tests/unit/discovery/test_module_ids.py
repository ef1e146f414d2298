import os

import fixtures
from oslotest import base

from nvlink_placement.discovery import module_ids
from nvlink_placement import errors


class TestMappingFile(base.BaseTestCase):

    def test_nvidia_smi_keys_and_string_values(self):
        text = ('{"00000000:18:00.0": "2", "00000000:2A:00.0": 4,\n'
                ' "0000:3a:00.0": " 1 "}')
        mapping = module_ids.parse_mapping(text, 'm.json')
        self.assertEqual({'0000:18:00.0': 2, '0000:2a:00.0': 4,
                          '0000:3a:00.0': 1}, mapping.ids)
        self.assertEqual('m.json', mapping.source)

    def test_wide_domains_kept(self):
        """Domains from ``data/misc/bdf-domain-quirks.txt``."""
        mapping = module_ids.parse_mapping(
            '{"03F8CFDD:00:00.0": 1, "00000009:01:00.0": 2}', 'm.json')
        self.assertEqual({'3f8cfdd:00:00.0': 1, '0009:01:00.0': 2},
                         mapping.ids)

    def test_same_device_twice(self):
        # beam-cloud/beta9#984: one driver prints 0001:..., another
        # 00000001:... for the same GPU.
        exc = self.assertRaises(
            errors.NvlinkError, module_ids.parse_mapping,
            '{"0001:00:00.0": 1, "00000001:00:00.0": 1}', 'm.json')
        self.assertEqual('m.json: "0001:00:00.0" and "00000001:00:00.0" are '
                         'the same device 0001:00:00.0', str(exc))

    def test_invalid_json_names_line_and_column(self):
        exc = self.assertRaises(errors.NvlinkError, module_ids.parse_mapping,
                                '{"0000:18:00.0": 2,\n "x" 3}', 'm.json')
        self.assertEqual("m.json: line 2 column 6: invalid JSON: Expecting "
                         "':' delimiter; %s" % module_ids.EXPECTED, str(exc))

    def test_not_an_object(self):
        exc = self.assertRaises(errors.NvlinkError, module_ids.parse_mapping,
                                '[["0000:18:00.0", 2]]', 'm.json')
        self.assertEqual(
            'm.json: got a list; expected the GPU PCI address -> module id '
            'mapping file: a JSON object such as {"00000000:18:00.0": 1, '
            '"00000000:2a:00.0": 2}, as Fabric Manager writes '
            '/run/nvidia-fabricmanager/gpu-pci-module-mapping.json',
            str(exc))

    def test_bad_key_and_values(self):
        for text, message in (
                ('{"18:00": 2}', 'm.json: ["18:00"]: \'18:00\' is not a PCI '
                 'address (expected dddd:bb:dd.f)'),
                ('{"0000:18:00.0": "0x2"}', 'm.json: ["0000:18:00.0"]: '
                 "'0x2' is not a module id (expected an integer or a "
                 'decimal string)'),
                ('{"0000:18:00.0": true}', 'm.json: ["0000:18:00.0"]: True '
                 'is not a module id'),
                ('{"0000:18:00.0": 2.5}', 'm.json: ["0000:18:00.0"]: '
                 'expected a module id, got 2.5'),
                ('{"0000:18:00.0": {"id": 2}}', 'm.json: ["0000:18:00.0"]: '
                 'expected a module id, got {"id": 2}')):
            exc = self.assertRaises(errors.NvlinkError,
                                    module_ids.parse_mapping, text, 'm.json')
            self.assertEqual(message, str(exc))

    def test_read_missing_file(self):
        exc = self.assertRaises(errors.NvlinkError, module_ids.read_mapping,
                                '/nonexistent/map.json')
        self.assertEqual('cannot read mapping file /nonexistent/map.json: '
                         'No such file or directory', str(exc))

    def test_read_file(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'map.json')
        with open(path, 'w') as handle:
            handle.write('{"00000000:DB:00.0": "7"}\n')
        self.assertEqual({'0000:db:00.0': 7},
                         module_ids.read_mapping(path).ids)


class TestMergeAndInvert(base.BaseTestCase):

    def test_merge_agreeing(self):
        ids = module_ids.merge([
            module_ids.ModuleIds('map.json', {'0000:18:00.0': 2}),
            None,
            module_ids.ModuleIds('q.txt', {'0000:18:00.0': 2,
                                           '0000:2a:00.0': 4})])
        self.assertEqual({'0000:18:00.0': 2, '0000:2a:00.0': 4}, ids)

    def test_merge_disagreeing_names_both(self):
        exc = self.assertRaises(errors.NvlinkError, module_ids.merge, [
            module_ids.ModuleIds('map.json', {'0000:18:00.0': 2}),
            module_ids.ModuleIds('q.txt', {'0000:18:00.0': 4})])
        self.assertEqual('module id of 0000:18:00.0: map.json says 2, q.txt '
                         'says 4', str(exc))

    def test_invert(self):
        self.assertEqual({2: '0000:18:00.0', 4: '0000:2a:00.0'},
                         module_ids.by_module_id({'0000:18:00.0': 2,
                                                  '0000:2a:00.0': 4}, 'x'))

    def test_duplicates_name_the_addresses(self):
        # PCIe cards all report module id 1 (host-formats.md).
        exc = self.assertRaises(
            errors.NvlinkError, module_ids.by_module_id,
            {'0000:31:00.0': 1, '0000:17:00.0': 1, '0000:4b:00.0': 4,
             '0000:ca:00.0': 4}, 'Fabric Manager partitions (fm)')
        self.assertEqual(
            'Fabric Manager partitions (fm): module ids must be unique, but '
            'module id 1 is reported for 0000:17:00.0, 0000:31:00.0; module '
            'id 4 is reported for 0000:4b:00.0, 0000:ca:00.0 (PCIe cards and '
            'VMs repeat module ids; give the real map with --mapping)',
            str(exc))
