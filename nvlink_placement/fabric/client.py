"""NVIDIA Fabric Manager's client: libnvfm through ctypes.

The partitions it answers with (:class:`FmReport`) are also what a saved
``fmpm -l`` JSON file holds (:mod:`nvlink_placement.discovery.fm_partitions`
reads those and turns partitions into NVLink groups).

Facts (``reference/fabric-manager.md``; the SDK headers ``nv_fm_agent.h``
and ``nv_fm_types.h``):

- Runtime library ``libnvfm.so.1`` (``libnvfm.so`` is a dev symlink that
  is often missing); it must match the running FM's version, otherwise
  calls answer VERSION_MISMATCH.
- Calls: ``fmLibInit()``, ``fmConnect(&params, &handle)``,
  ``fmGetSupportedFabricPartitions(handle, &list)``,
  ``fmActivateFabricPartition(handle, id)``,
  ``fmDeactivateFabricPartition(handle, id)``, ``fmDisconnect(handle)``,
  ``fmLibShutdown()``; all return ``fmReturn_t`` (int); ``fmHandle_t`` is
  an opaque pointer. FM restarts invalidate connections.
- Structs (x86-64, 32-bit unsigned scalars and enums, no padding); a
  struct's version is ``sizeof(struct) | (ver << 24)``.
- A partition GPU's ``physicalId`` equals the nvidia-smi module id on HGX
  H100 and later, where ``uuid`` and ``pciBusId`` are empty (some versions
  print ``00000000:00:00.0``). HGX A100 fills ``pciBusId``.
"""

import collections
import ctypes
import dataclasses

from nvlink_placement import errors
from nvlink_placement.topology import pci

FM_MAX_STR_LENGTH = 256
FM_UUID_BUFFER_SIZE = 80
FM_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32
FM_MAX_NUM_GPUS = 16
FM_MAX_FABRIC_PARTITIONS = 64
FM_CMD_PORT_NUMBER = 6666
ADDRESS_TYPE_INET = 1
ADDRESS_TYPE_UNIX = 2
LIBRARY_NAMES = ('libnvfm.so.1', 'libnvfm.so')
DEFAULT_ADDRESS = '127.0.0.1'
DEFAULT_TIMEOUT_MS = 5000


class ConnectParams(ctypes.Structure):
    """``fmConnectParams_v2`` (272 bytes)."""

    _fields_ = [('version', ctypes.c_uint),
                ('addressInfo', ctypes.c_char * FM_MAX_STR_LENGTH),
                ('timeoutMs', ctypes.c_uint),
                ('addressIsUnixSocket', ctypes.c_uint),
                ('addressType', ctypes.c_uint)]


class PartitionGpuInfo(ctypes.Structure):
    """``fmFabricPartitionGpuInfo_t`` (128 bytes)."""

    _fields_ = [('physicalId', ctypes.c_uint),
                ('uuid', ctypes.c_char * FM_UUID_BUFFER_SIZE),
                ('pciBusId', ctypes.c_char * FM_DEVICE_PCI_BUS_ID_BUFFER_SIZE),
                ('numNvLinksAvailable', ctypes.c_uint),
                ('maxNumNvLinks', ctypes.c_uint),
                ('nvlinkLineRateMBps', ctypes.c_uint)]


class PartitionInfo(ctypes.Structure):
    """``fmFabricPartitionInfo_t`` (2060 bytes)."""

    _fields_ = [('partitionId', ctypes.c_uint),
                ('isActive', ctypes.c_uint),
                ('numGpus', ctypes.c_uint),
                ('gpuInfo', PartitionGpuInfo * FM_MAX_NUM_GPUS)]


class PartitionList(ctypes.Structure):
    """``fmFabricPartitionList_v2`` (131852 bytes; struct version 1)."""

    _fields_ = [('version', ctypes.c_uint),
                ('numPartitions', ctypes.c_uint),
                ('maxNumPartitions', ctypes.c_uint),
                ('partitionInfo', PartitionInfo * FM_MAX_FABRIC_PARTITIONS)]


def struct_version(struct, version):
    """``MAKE_FM_PARAM_VERSION``: ``sizeof(struct) | (version << 24)``."""
    return ctypes.sizeof(struct) | (version << 24)


CONNECT_PARAMS_VERSION = struct_version(ConnectParams, 2)    # 33554704
PARTITION_LIST_VERSION = struct_version(PartitionList, 1)    # 16909068

RETURN_CODES = {
    0: 'FM_ST_SUCCESS',
    -1: 'FM_ST_BADPARAM',
    -2: 'FM_ST_GENERIC_ERROR',
    -3: 'FM_ST_NOT_SUPPORTED',
    -4: 'FM_ST_UNINITIALIZED',
    -5: 'FM_ST_TIMEOUT',
    -6: 'FM_ST_VERSION_MISMATCH',
    -7: 'FM_ST_IN_USE',
    -8: 'FM_ST_NOT_CONFIGURED',
    -9: 'FM_ST_CONNECTION_NOT_VALID',
    -10: 'FM_ST_NVLINK_ERROR',
    -11: 'FM_ST_RESOURCE_BAD',
    -12: 'FM_ST_RESOURCE_IN_USE',
    -13: 'FM_ST_RESOURCE_NOT_IN_USE',
    -14: 'FM_ST_RESOURCE_EXHAUSTED',
    -15: 'FM_ST_RESOURCE_NOT_READY',
    -16: 'FM_ST_PARTITION_EXISTS',
    -17: 'FM_ST_PARTITION_ID_IN_USE',
    -18: 'FM_ST_PARTITION_ID_NOT_IN_USE',
    -19: 'FM_ST_PARTITION_NAME_IN_USE',
    -20: 'FM_ST_PARTITION_NAME_NOT_IN_USE',
    -21: 'FM_ST_PARTITION_ID_NAME_MISMATCH',
    -22: 'FM_ST_NOT_READY',
    -23: 'FM_ST_RESOURCE_USED_IN_THIS_PARTITION',
    -24: 'FM_ST_RESOURCE_USED_IN_ANOTHER_PARTITION',
    -25: 'FM_ST_PARTITION_MISWIRED_TRUNKS',
    -26: 'FM_ST_PARTITION_INSUFFICIENT_TRUNKS',
    -27: 'FM_ST_PARTITION_MISSING_SWITCHES',
    -28: 'FM_ST_PARTITION_NETWORK_CONFIG_ERROR',
    -29: 'FM_ST_PARTITION_ROUTE_PROGRAMMING_ERROR',
}
_CODE = {name: code for code, name in RETURN_CODES.items()}
# What the operator should know or do, for the codes with a known cause.
HINTS = {
    _CODE['FM_ST_NOT_SUPPORTED']:
        'Fabric Manager is not in shared NVSwitch mode (FABRIC_MODE=1)',
    _CODE['FM_ST_NOT_CONFIGURED']:
        'Fabric Manager is still initializing; try again once it is up',
    _CODE['FM_ST_NOT_READY']:
        'Fabric Manager is not ready to serve requests yet',
    _CODE['FM_ST_VERSION_MISMATCH']:
        'libnvfm must match the running Fabric Manager version (install '
        'the nvidia-fabricmanager-devel package of the same version)',
    _CODE['FM_ST_CONNECTION_NOT_VALID']:
        'the connection to Fabric Manager was lost (did it restart?)',
    _CODE['FM_ST_UNINITIALIZED']:
        'libnvfm is not initialized or Fabric Manager restarted',
    _CODE['FM_ST_TIMEOUT']:
        'Fabric Manager did not answer in time (is it running, at that '
        'address?)',
}
# Hints that depend on the call as well (nv_fm_agent.h).
CALL_HINTS = {
    ('fmConnect', _CODE['FM_ST_CONNECTION_NOT_VALID']):
        'Fabric Manager could not be reached (is nvidia-fabricmanager '
        'running and listening there?)',
    ('fmActivateFabricPartition', _CODE['FM_ST_IN_USE']):
        'the partition is already active',
    ('fmDeactivateFabricPartition', _CODE['FM_ST_UNINITIALIZED']):
        'the partition is not active (or Fabric Manager restarted)',
}
# Codes after which one reconnection is tried (FM restarts drop clients).
RECONNECT_CODES = (_CODE['FM_ST_CONNECTION_NOT_VALID'],
                   _CODE['FM_ST_UNINITIALIZED'])


class FabricManagerError(errors.NvlinkError):
    """A libnvfm call failed.

    :ivar call: the C function name; :ivar code: its return code;
    :ivar name: the ``FM_ST_*`` name of the code.
    """

    def __init__(self, where, call, code):
        self.call = call
        self.code = code
        self.name = RETURN_CODES.get(code, 'unknown return code')
        message = '%s: %s failed: %s (%d)' % (where, call, self.name, code)
        hint = CALL_HINTS.get((call, code), HINTS.get(code))
        if hint:
            message += ': ' + hint
        super().__init__(message)


class LibraryNotFound(errors.NvlinkError):
    """No libnvfm could be loaded."""


PartitionGpu = collections.namedtuple(
    'PartitionGpu', 'physical_id pci_bus_id nvlinks_available max_nvlinks')
PartitionGpu.__doc__ = """A GPU in a fabric partition.

:ivar physical_id: FM physical id (= module id on HGX H100 and later).
:ivar pci_bus_id: sysfs-form address, or None when FM left it empty or
    all zeros.
:ivar nvlinks_available: NVLinks usable now; :ivar max_nvlinks: without
    degradation (either may be None when unknown).
"""
Partition = collections.namedtuple('Partition', 'id active gpus')
Partition.__doc__ = """A supported fabric partition: ``id`` (int),
``active`` (bool), ``gpus`` (tuple of :class:`PartitionGpu`)."""


@dataclasses.dataclass
class FmReport:
    """Supported partitions and where they came from.

    :ivar source: e.g. ``Fabric Manager at 127.0.0.1:6666`` or an fmpm
        JSON file name.
    :ivar partitions: list of :class:`Partition`.
    """

    source: str
    partitions: list


def usable_pci_bus_id(text, where):
    """Return FM's ``pciBusId`` in sysfs form, or None when unusable.

    None when it is empty or all zeros (FM on HGX H100+ leaves it so).

    :raises NvlinkError: naming ``where`` when it is not a PCI address.
    """
    if not text or not text.strip():
        return None
    try:
        address = pci.normalize_address(text)
    except ValueError as exc:
        raise errors.NvlinkError('%s: pciBusId: %s' % (where, exc))
    return None if address == '0000:00:00.0' else address


def parse_inet_address(text):
    """Return ``host:port`` for ``--fm-address HOST[:PORT]``.

    The port defaults to FM_CMD_PORT_NUMBER (6666). FM takes IPv4
    addresses (``a.b.c.d[:port]``).

    :raises NvlinkError: for an empty host, an IPv6-looking address or a
        port outside 1..65535.
    """
    host, sep, port = text.strip().rpartition(':')
    if not sep:
        host, port = port, str(FM_CMD_PORT_NUMBER)
    if not host or ':' in host:
        raise errors.NvlinkError('Fabric Manager address %r: expected '
                                 'HOST[:PORT] (IPv4)' % text)
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise errors.NvlinkError('Fabric Manager address %r: port must be '
                                 '1..65535' % text)
    return '%s:%d' % (host, int(port))


def load_library(path=None):
    """Load libnvfm and declare the call signatures.

    :param path: a file to load; default: ``libnvfm.so.1``, then
        ``libnvfm.so``, through the dynamic loader's search path.
    :returns: ``ctypes.CDLL``.
    :raises LibraryNotFound: listing each name tried and why it failed.
    """
    failures = []
    for name in ([path] if path else LIBRARY_NAMES):
        try:
            library = ctypes.CDLL(name)
        except OSError as exc:
            failures.append(str(exc))
            continue
        handle = ctypes.c_void_p
        for call, argtypes in (
                ('fmLibInit', []),
                ('fmLibShutdown', []),
                ('fmConnect', [ctypes.POINTER(ConnectParams),
                               ctypes.POINTER(handle)]),
                ('fmDisconnect', [handle]),
                ('fmGetSupportedFabricPartitions',
                 [handle, ctypes.POINTER(PartitionList)]),
                ('fmActivateFabricPartition', [handle, ctypes.c_uint]),
                ('fmDeactivateFabricPartition', [handle, ctypes.c_uint])):
            function = getattr(library, call, None)
            if function is None:
                raise LibraryNotFound('%s has no %s: not a libnvfm'
                                      % (name, call))
            function.argtypes = argtypes
            function.restype = ctypes.c_int
        return library
    raise LibraryNotFound(
        'cannot load libnvfm: %s (it ships in nvidia-fabricmanager-devel '
        'or -dev, of the running Fabric Manager\'s version; point '
        '--fm-library (fm_library in the hook\'s hook.conf) at it, or give '
        '--fmpm-json with saved `fmpm -l` output)'
        % '; '.join(failures))


class FabricManagerClient:
    """A connection to a running Fabric Manager.

    Use as a context manager::

        with FabricManagerClient(load_library(), address='10.0.0.5') as fm:
            partitions = fm.supported_partitions()

    :param library: a ``ctypes.CDLL`` from :func:`load_library`.
    :param address: ``HOST[:PORT]`` (TCP, default ``127.0.0.1:6666``).
    :param unix_socket: path of FM's Unix domain socket (instead of TCP).
    :param timeout_ms: connection timeout in milliseconds.
    """

    def __init__(self, library, address=None, unix_socket=None,
                 timeout_ms=DEFAULT_TIMEOUT_MS):
        if address and unix_socket:
            raise errors.NvlinkError('give a Fabric Manager address or a '
                                     'Unix socket, not both')
        self._library = library
        self._unix = bool(unix_socket)
        self._address = (unix_socket if unix_socket else
                         parse_inet_address(address or DEFAULT_ADDRESS))
        if len(self._address.encode()) >= FM_MAX_STR_LENGTH:
            raise errors.NvlinkError('Fabric Manager address is longer '
                                     'than %d bytes' % (FM_MAX_STR_LENGTH - 1))
        self._timeout_ms = int(timeout_ms)
        self._handle = None
        self._initialized = False

    @property
    def description(self):
        """``Fabric Manager at <address>`` (``unix:<path>`` for sockets)."""
        return 'Fabric Manager at %s%s' % ('unix:' if self._unix else '',
                                           self._address)

    def _check(self, call, code):
        if code != 0:
            raise FabricManagerError(self.description, call, code)

    def open(self):
        """Initialize libnvfm and connect.

        :raises FabricManagerError: naming the failed call and its code.
        """
        self._check('fmLibInit', self._library.fmLibInit())
        self._initialized = True
        self._connect()

    def _connect(self):
        params = ConnectParams()
        params.version = CONNECT_PARAMS_VERSION
        params.addressInfo = self._address.encode()
        params.timeoutMs = self._timeout_ms
        params.addressIsUnixSocket = 1 if self._unix else 0
        params.addressType = (ADDRESS_TYPE_UNIX if self._unix else
                              ADDRESS_TYPE_INET)
        handle = ctypes.c_void_p()
        self._check('fmConnect', self._library.fmConnect(
            ctypes.byref(params), ctypes.byref(handle)))
        self._handle = handle

    def close(self):
        """Disconnect and shut libnvfm down; return codes are ignored."""
        if self._handle is not None:
            self._library.fmDisconnect(self._handle)
            self._handle = None
        if self._initialized:
            self._library.fmLibShutdown()
            self._initialized = False

    def __enter__(self):
        try:
            self.open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info):
        self.close()

    def _call(self, call, *args):
        """Call ``call(handle, *args)``, reconnecting once if needed.

        FM restarts drop clients: on CONNECTION_NOT_VALID or
        UNINITIALIZED the connection is made again and the call repeated.
        """
        function = getattr(self._library, call)
        code = function(self._handle, *args)
        if code in RECONNECT_CODES:
            self._library.fmDisconnect(self._handle)
            self._handle = None
            self._connect()
            code = function(self._handle, *args)
        self._check(call, code)

    def supported_partitions(self):
        """``fmGetSupportedFabricPartitions``.

        :returns: list of :class:`Partition` in FM's order.
        :raises FabricManagerError: for a failed call.
        :raises NvlinkError: when FM reports more partitions or GPUs than
            the struct holds, or a malformed ``pciBusId``.
        """
        listing = PartitionList()
        listing.version = PARTITION_LIST_VERSION
        self._call('fmGetSupportedFabricPartitions', ctypes.byref(listing))
        if listing.numPartitions > FM_MAX_FABRIC_PARTITIONS:
            raise errors.NvlinkError('%s reports %d partitions, more than '
                                     'the %d the API holds'
                                     % (self.description,
                                        listing.numPartitions,
                                        FM_MAX_FABRIC_PARTITIONS))
        partitions = []
        for info in listing.partitionInfo[:listing.numPartitions]:
            where = '%s: partition %d' % (self.description, info.partitionId)
            if info.numGpus > FM_MAX_NUM_GPUS:
                raise errors.NvlinkError('%s has %d GPUs, more than %d'
                                         % (where, info.numGpus,
                                            FM_MAX_NUM_GPUS))
            gpus = tuple(
                PartitionGpu(gpu.physicalId,
                             usable_pci_bus_id(gpu.pciBusId.decode(
                                 'ascii', 'replace'), where),
                             gpu.numNvLinksAvailable, gpu.maxNumNvLinks)
                for gpu in info.gpuInfo[:info.numGpus])
            partitions.append(Partition(info.partitionId,
                                        bool(info.isActive), gpus))
        return partitions

    def activate_partition(self, partition_id):
        """``fmActivateFabricPartition``; raises FabricManagerError."""
        self._call('fmActivateFabricPartition', int(partition_id))

    def deactivate_partition(self, partition_id):
        """``fmDeactivateFabricPartition``; raises FabricManagerError."""
        self._call('fmDeactivateFabricPartition', int(partition_id))
