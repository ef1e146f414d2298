import ctypes
import json

import fixtures
from oslotest import base

from nvlink_placement.discovery import fm_partitions as fmp
from nvlink_placement import errors
from nvlink_placement.fabric import client as fm
from tests.unit.discovery import helpers

HOST = list(helpers.BOARD2)


class TestAbi(base.BaseTestCase):
    """Layouts and versions of reference/fabric-manager.md."""

    def test_struct_sizes(self):
        self.assertEqual(272, ctypes.sizeof(fm.ConnectParams))
        self.assertEqual(128, ctypes.sizeof(fm.PartitionGpuInfo))
        self.assertEqual(2060, ctypes.sizeof(fm.PartitionInfo))
        self.assertEqual(131852, ctypes.sizeof(fm.PartitionList))

    def test_struct_versions(self):
        self.assertEqual(33554704, fm.CONNECT_PARAMS_VERSION)
        self.assertEqual(16909068, fm.PARTITION_LIST_VERSION)

    def test_return_code_table(self):
        self.assertEqual(list(range(-29, 1)), sorted(fm.RETURN_CODES))
        self.assertEqual('FM_ST_CONNECTION_NOT_VALID', fm.RETURN_CODES[-9])
        self.assertEqual('FM_ST_NOT_READY', fm.RETURN_CODES[-22])
        self.assertEqual('FM_ST_PARTITION_ROUTE_PROGRAMMING_ERROR',
                         fm.RETURN_CODES[-29])

    def test_error_messages(self):
        self.assertEqual(
            'FM: fmConnect failed: FM_ST_NOT_SUPPORTED (-3): Fabric Manager '
            'is not in shared NVSwitch mode (FABRIC_MODE=1)',
            str(fm.FabricManagerError('FM', 'fmConnect', -3)))
        self.assertEqual(
            'FM: fmConnect failed: FM_ST_RESOURCE_BAD (-11)',
            str(fm.FabricManagerError('FM', 'fmConnect', -11)))
        self.assertEqual(
            'FM: fmConnect failed: unknown return code (-77)',
            str(fm.FabricManagerError('FM', 'fmConnect', -77)))

    def test_inet_address(self):
        self.assertEqual('127.0.0.1:6666', fm.parse_inet_address('127.0.0.1'))
        self.assertEqual('10.0.0.5:7000',
                         fm.parse_inet_address('10.0.0.5:7000'))
        for bad in ('fe80::1', ':6666', '10.0.0.5:0', '10.0.0.5:x'):
            self.assertRaises(errors.NvlinkError, fm.parse_inet_address, bad)

    def test_pci_bus_id(self):
        self.assertIsNone(fm.usable_pci_bus_id('', 'p'))
        self.assertIsNone(fm.usable_pci_bus_id('00000000:00:00.0', 'p'))
        self.assertEqual('0000:07:00.0',
                         fm.usable_pci_bus_id('00000000:07:00.0', 'p'))
        exc = self.assertRaises(errors.NvlinkError, fm.usable_pci_bus_id,
                                'GPU-1', 'fm: partition 3')
        self.assertEqual("fm: partition 3: pciBusId: 'GPU-1' is not a PCI "
                         "address (expected dddd:bb:dd.f)", str(exc))


class TestFmpmJson(base.BaseTestCase):

    def test_jsoncpp_output(self):
        report = fmp.parse_fmpm_json(helpers.fmpm_json(helpers.H100_TABLE),
                                     'fmpm.json')
        self.assertEqual(list(range(15)), [p.id for p in report.partitions])
        self.assertEqual(
            fm.Partition(3, False, (fm.PartitionGpu(1, None, 18, 18),
                                    fm.PartitionGpu(3, None, 18, 18))),
            report.partitions[3])
        self.assertEqual('fmpm.json', report.source)

    def test_keys_in_any_order_and_active(self):
        text = json.dumps({'version': 1, 'partitionInfo': [
            {'partitionId': 4, 'gpuInfo': [
                {'pciBusId': '00000000:07:00.0', 'physicalId': 9},
                {'physicalId': 10, 'pciBusId': '00000000:0F:00.0'}],
             'isActive': 1}]})
        report = fmp.parse_fmpm_json(text, 'f')
        self.assertEqual([fm.Partition(4, True, (
            fm.PartitionGpu(9, '0000:07:00.0', None, None),
            fm.PartitionGpu(10, '0000:0f:00.0', None, None)))],
            report.partitions)

    def test_errors_name_the_key_path(self):
        for document, message in (
                ({}, 'f: missing "partitionInfo"'),
                ({'partitionInfo': [{'partitionId': 1, 'isActive': 2,
                                     'gpuInfo': []}]},
                 'f: partitionInfo[0].isActive: expected 0 or 1, got 2'),
                ({'partitionInfo': [{'partitionId': 1, 'isActive': 0,
                                     'gpuInfo': [{'pciBusId': ''}]}]},
                 'f: partitionInfo[0].gpuInfo[0]: missing "physicalId"'),
                ({'partitionInfo': [{'partitionId': '1', 'isActive': 0,
                                     'gpuInfo': []}]},
                 'f: partitionInfo[0].partitionId: unexpected value "1"'),
                ({'partitionInfo': [{'partitionId': 1, 'isActive': 0,
                                     'numGpus': 2, 'gpuInfo': []}]},
                 'f: partitionInfo[0]: numGpus is 2 but gpuInfo lists 0'),
                ({'numPartitions': 1, 'partitionInfo': []},
                 'f: numPartitions is 1 but partitionInfo lists 0')):
            exc = self.assertRaises(errors.NvlinkError, fmp.parse_fmpm_json,
                                    json.dumps(document), 'f')
            self.assertEqual(message, str(exc))

    def test_invalid_json(self):
        exc = self.assertRaises(errors.NvlinkError, fmp.parse_fmpm_json,
                                '{\n   "partitionInfo" : [\n', 'f')
        self.assertEqual('f: line 3 column 1: invalid JSON: Expecting value',
                         str(exc))


class TestFmView(base.BaseTestCase):

    def _report(self, table, **kwargs):
        return fmp.parse_fmpm_json(helpers.fmpm_json(table, **kwargs), 'fmpm')

    def test_h100_diagonal_pairs_by_module_id(self):
        view = fmp.fm_view(self._report(helpers.H100_TABLE), HOST,
                           helpers.BOARD2)
        self.assertEqual([helpers.modules(1, 2, 3, 4),
                          helpers.modules(5, 6, 7, 8),
                          ('0000:3a:00.0', '0000:5d:00.0'),
                          ('0000:18:00.0', '0000:2a:00.0'),
                          ('0000:ba:00.0', '0000:db:00.0'),
                          ('0000:9a:00.0', '0000:ab:00.0')], view.groups)
        self.assertEqual([1, 2, 3, 4, 5, 6], view.group_ids)
        self.assertEqual([], view.dropped)
        self.assertEqual({}, view.degraded)

    def test_b200_adjacent_pairs(self):
        view = fmp.fm_view(self._report(helpers.B200_TABLE), HOST,
                           helpers.BOARD2)
        self.assertEqual([helpers.modules(1, 2), helpers.modules(3, 4),
                          helpers.modules(5, 6), helpers.modules(7, 8)],
                         view.groups[2:])
        self.assertEqual([2, 3, 4, 5, 6, 7], view.group_ids)

    def test_crossing_partitions_dropped_in_id_order(self):
        table = [(0, range(1, 9)), (1, range(1, 5)), (2, range(3, 7)),
                 (3, range(5, 9)), (4, (1, 2))]
        view = fmp.fm_view(self._report(table), HOST, helpers.BOARD2)
        self.assertEqual([2], view.dropped)
        self.assertEqual([1, 3, 4], view.group_ids)

    def test_pci_bus_ids_need_no_module_ids(self):
        # HGX A100: FM fills pciBusId; physical ids are tray strapping ids.
        table = [(1, range(9, 17)), (7, range(9, 13)), (11, (9, 10))]
        ids = {9 + i: '00000000:%02X:00.0' % int(a[5:7], 16)
               for i, a in enumerate(HOST)}
        view = fmp.fm_view(self._report(table, pci_bus_ids=ids), HOST, {})
        self.assertEqual([tuple(HOST[:4]), tuple(HOST[:2])], view.groups)

    def test_degraded_nvlinks(self):
        view = fmp.fm_view(self._report(helpers.H100_TABLE, links={6: 16}),
                           HOST, helpers.BOARD2)
        self.assertEqual({'0000:9a:00.0': ['16 of 18 NVLinks available '
                                           '(fmpm)']}, view.degraded)

    def test_module_ids_missing(self):
        exc = self.assertRaises(errors.NvlinkError, fmp.fm_view,
                                self._report(helpers.H100_TABLE), HOST, {})
        self.assertEqual('fmpm: partition 0 lists physical id 1, but no GPU '
                         'of this host has that module id (known: none; give '
                         '--mapping or --nvidia-smi-q)', str(exc))

    def test_module_ids_repeat(self):
        ids = dict.fromkeys(HOST, 1)
        exc = self.assertRaises(errors.NvlinkError, fmp.fm_view,
                                self._report(helpers.H100_TABLE), HOST, ids)
        self.assertIn('Fabric Manager partitions (fmpm) need unique module '
                      'ids, but module id 1 is reported for 0000:18:00.0, '
                      '0000:2a:00.0, ', str(exc))

    def test_gpu_not_on_host(self):
        table = [(1, (1, 2))]
        exc = self.assertRaises(
            errors.NvlinkError, fmp.fm_view,
            self._report(table, pci_bus_ids={1: '00000000:17:00.0',
                                             2: '00000000:18:00.0'}),
            HOST, {})
        self.assertEqual('fmpm: partition 1 lists GPU 0000:17:00.0, which '
                         'sysfs does not show on this host', str(exc))


class TestClientAgainstFakeLibrary(base.BaseTestCase):
    """The ctypes client against tests/fakes/fake_nvfm.c."""

    def setUp(self):
        super().setUp()
        self.path = helpers.build_fake_nvfm(self)
        self.library = fm.load_library(self.path)

    def _env(self, name, value):
        self.useFixture(fixtures.EnvironmentVariable(name, value))

    def _last_connect(self):
        params = fm.ConnectParams()
        self.library.fakeNvfmLastConnect(ctypes.byref(params))
        return (params.version, params.addressInfo, params.timeoutMs,
                params.addressIsUnixSocket, params.addressType)

    def _partitions(self, **kwargs):
        with fm.FabricManagerClient(self.library, **kwargs) as client:
            return client.supported_partitions()

    def test_h100_table_gives_diagonal_groups(self):
        report = fm.FmReport('fm', self._partitions())
        self.assertEqual(list(range(15)), [p.id for p in report.partitions])
        view = fmp.fm_view(report, HOST, helpers.BOARD2)
        self.assertEqual(sorted(helpers.H100_GROUPS), sorted(view.groups))
        self.assertEqual((33554704, b'127.0.0.1:6666', 5000, 0, 1),
                         self._last_connect())

    def test_b200_table_all_zero_pci_bus_ids(self):
        self._env('FAKE_NVFM_TABLE', 'b200')
        partitions = self._partitions(address='10.1.2.3:7777',
                                      timeout_ms=1500)
        self.assertEqual(list(range(1, 16)), [p.id for p in partitions])
        self.assertEqual(fm.PartitionGpu(7, None, 18, 18),
                         partitions[6].gpus[0])
        view = fmp.fm_view(fm.FmReport('fm', partitions), HOST,
                           helpers.BOARD2)
        self.assertEqual(
            sorted([helpers.modules(1, 2, 3, 4), helpers.modules(5, 6, 7, 8),
                    helpers.modules(1, 2), helpers.modules(3, 4),
                    helpers.modules(5, 6), helpers.modules(7, 8)]),
            sorted(view.groups))
        self.assertEqual((33554704, b'10.1.2.3:7777', 1500, 0, 1),
                         self._last_connect())

    def test_unix_socket(self):
        self._partitions(unix_socket='/run/nvidia-fabricmanager/fm.sock')
        self.assertEqual((33554704, b'/run/nvidia-fabricmanager/fm.sock',
                          5000, 1, 2), self._last_connect())

    def test_named_errors(self):
        for code, text in (
                (-3, 'FM_ST_NOT_SUPPORTED (-3): Fabric Manager is not in '
                     'shared NVSwitch mode (FABRIC_MODE=1)'),
                (-8, 'FM_ST_NOT_CONFIGURED (-8): Fabric Manager is still '
                     'initializing; try again once it is up'),
                (-6, 'FM_ST_VERSION_MISMATCH (-6): libnvfm must match the '
                     'running Fabric Manager version (install the '
                     'nvidia-fabricmanager-devel package of the same '
                     'version)')):
            self._env('FAKE_NVFM_FAIL', 'fmConnect:%d' % code)
            exc = self.assertRaises(fm.FabricManagerError, self._partitions)
            self.assertEqual('Fabric Manager at 127.0.0.1:6666: fmConnect '
                             'failed: ' + text, str(exc))
            self.assertEqual(code, exc.code)

    def test_reconnects_once(self):
        self._env('FAKE_NVFM_FAIL_ONCE', 'fmGetSupportedFabricPartitions:-9')
        self.assertEqual(15, len(self._partitions()))
        self.assertEqual(2, self.library.fakeNvfmConnectCount())

    def test_reconnects_only_once(self):
        self._env('FAKE_NVFM_FAIL', 'fmGetSupportedFabricPartitions:-4')
        exc = self.assertRaises(fm.FabricManagerError, self._partitions)
        self.assertEqual('Fabric Manager at 127.0.0.1:6666: '
                         'fmGetSupportedFabricPartitions failed: '
                         'FM_ST_UNINITIALIZED (-4): libnvfm is not '
                         'initialized or Fabric Manager restarted', str(exc))
        self.assertEqual(2, self.library.fakeNvfmConnectCount())

    def test_no_reconnect_for_other_errors(self):
        self._env('FAKE_NVFM_FAIL_ONCE', 'fmGetSupportedFabricPartitions:-8')
        self.assertRaises(fm.FabricManagerError, self._partitions)
        self.assertEqual(1, self.library.fakeNvfmConnectCount())

    def test_fake_checks_struct_versions(self):
        self.assertEqual(0, self.library.fmLibInit())
        params = fm.ConnectParams(version=268 | 1 << 24,
                                  addressInfo=b'127.0.0.1:6666',
                                  addressType=1)
        handle = ctypes.c_void_p()
        self.assertEqual(-6, self.library.fmConnect(ctypes.byref(params),
                                                    ctypes.byref(handle)))
        params.version = fm.CONNECT_PARAMS_VERSION
        self.assertEqual(0, self.library.fmConnect(ctypes.byref(params),
                                                   ctypes.byref(handle)))
        listing = fm.PartitionList(version=131852 | 2 << 24)
        self.assertEqual(-6, self.library.fmGetSupportedFabricPartitions(
            handle, ctypes.byref(listing)))
        self.assertEqual(0, self.library.fmDisconnect(handle))
        self.assertEqual(0, self.library.fmLibShutdown())

    def test_client_maps_version_mismatch(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nvlink_placement.fabric.client.'
            'PARTITION_LIST_VERSION', 131852 | 2 << 24))
        exc = self.assertRaises(fm.FabricManagerError, self._partitions)
        self.assertEqual('fmGetSupportedFabricPartitions', exc.call)
        self.assertEqual('FM_ST_VERSION_MISMATCH', exc.name)

    def test_closes_the_session(self):
        self._partitions()
        # fmLibShutdown ran: the library is uninitialized again.
        params = fm.ConnectParams(version=fm.CONNECT_PARAMS_VERSION)
        self.assertEqual(-4, self.library.fmConnect(
            ctypes.byref(params), ctypes.byref(ctypes.c_void_p())))

    def test_activate_and_deactivate(self):
        with fm.FabricManagerClient(self.library) as client:
            client.activate_partition(3)
            self.assertEqual([3], [p.id for p in client.supported_partitions()
                                   if p.active])
            exc = self.assertRaises(fm.FabricManagerError,
                                    client.activate_partition, 3)
            self.assertEqual('Fabric Manager at 127.0.0.1:6666: '
                             'fmActivateFabricPartition failed: FM_ST_IN_USE '
                             '(-7): the partition is already active',
                             str(exc))
            exc = self.assertRaises(fm.FabricManagerError,
                                    client.activate_partition, 1)
            self.assertEqual('FM_ST_RESOURCE_USED_IN_ANOTHER_PARTITION',
                             exc.name)
            exc = self.assertRaises(fm.FabricManagerError,
                                    client.activate_partition, 99)
            self.assertEqual('FM_ST_BADPARAM', exc.name)
            client.deactivate_partition(3)
            self.assertEqual([], [p.id for p in client.supported_partitions()
                                  if p.active])
            exc = self.assertRaises(fm.FabricManagerError,
                                    client.deactivate_partition, 3)
            self.assertEqual('Fabric Manager at 127.0.0.1:6666: '
                             'fmDeactivateFabricPartition failed: '
                             'FM_ST_UNINITIALIZED (-4): the partition is not '
                             'active (or Fabric Manager restarted)', str(exc))

    def test_library_loading(self):
        exc = self.assertRaises(fm.LibraryNotFound, fm.load_library,
                                '/nonexistent/libnvfm.so.1')
        self.assertIn('cannot load libnvfm: /nonexistent/libnvfm.so.1: ',
                      str(exc))
        exc = self.assertRaises(fm.LibraryNotFound, fm.load_library,
                                'libc.so.6')
        self.assertEqual('libc.so.6 has no fmLibInit: not a libnvfm',
                         str(exc))

    def test_address_and_socket_exclusive(self):
        self.assertRaises(errors.NvlinkError, fm.FabricManagerClient,
                          self.library, address='1.2.3.4', unix_socket='/s')
