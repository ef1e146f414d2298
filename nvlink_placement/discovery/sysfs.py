"""NVIDIA PCI devices as the kernel shows them under ``/sys``.

File formats (``reference/host-formats.md``; Linux
``drivers/pci/pci-sysfs.c``, ``drivers/pci/pcie/aer.c``,
``Documentation/ABI/testing/sysfs-bus-pci*``,
``Documentation/driver-api/vfio-mediated-device.rst``):

- ``vendor`` ``0x%04x``, ``device`` ``0x%04x``, ``class`` ``0x%06x``;
  cached at enumeration, so a GPU that fell off the bus still shows them.
  The first bytes of ``config`` read ``ff ff ff ff`` for such a device.
- ``numa_node`` ``%d``, ``-1`` meaning unknown; ``local_cpulist`` the
  CPUs near the device as a kernel list (``0-55,112-167``).
- ``current_link_width``/``max_link_width`` ``%u``;
  ``current_link_speed``/``max_link_speed`` ``16.0 GT/s PCIe`` (kernel
  5.7+) or ``16 GT/s`` (up to 5.6), or ``Unknown``/``Unknown speed``.
- ``aer_dev_correctable``/``_nonfatal``/``_fatal``: ``<name> <count>``
  lines (names may contain spaces) ending with ``TOTAL_ERR_*``; absent
  without the AER capability.
- ``iommu_group`` and ``driver`` are symlinks; SR-IOV ``physfn``,
  ``virtfnN``, ``sriov_numvfs``; vGPU 17+ per-VF
  ``nvidia/current_vgpu_type`` (non-zero: a vGPU type is set); mdev
  parents have ``mdev_supported_types/`` and their instances are child
  directories named by UUID.
"""

import dataclasses
import os
import re

from nvlink_placement import errors
from nvlink_placement.topology import pci

NVIDIA_VENDOR = 0x10de
# PCI base class 03 (display), subclasses 00 (VGA) and 02 (3D controller).
GPU_CLASSES = (0x0300, 0x0302)
# Base class 06 (bridge), subclass 80 (other): NVSwitch.
NVSWITCH_CLASS = 0x068000

_SPEED = re.compile(r'^(\d+(?:\.\d+)?) GT/s(?: PCIe)?$')
_UUID = re.compile(r'^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                   r'[0-9a-f]{12}$')
AER_KINDS = ('correctable', 'nonfatal', 'fatal')


@dataclasses.dataclass
class PciLink:
    """PCIe link state; widths in lanes, speeds in GT/s; None = unknown."""

    current_width: int | None = None
    max_width: int | None = None
    current_speed: float | None = None
    max_speed: float | None = None


@dataclasses.dataclass
class PciGpu:
    """One NVIDIA GPU (a physical function) found in sysfs.

    :ivar address: sysfs form ``dddd:bb:dd.f``.
    :ivar vendor_id: ``'10de'``; :ivar device_id: e.g. ``'2330'`` (lower
        case hex, four digits).
    :ivar numa_node: int, or None when the kernel says ``-1`` (unknown).
    :ivar local_cpus: frozenset of CPU numbers from ``local_cpulist``, or
        None when absent.
    :ivar iommu_group: group number as a string, None when IOMMU is off.
    :ivar driver: bound driver name (``vfio-pci``, ``nvidia``), or None.
    :ivar aer: dict ``{'correctable'|'nonfatal'|'fatal': total or None}``
        (None: the counter file is absent).
    :ivar config_all_ones: True when ``config`` reads ``ff ff ff ff``
        (the device fell off the bus); None when it could not be read.
    :ivar vgpu: why the GPU is in vGPU use, or None.
    """

    address: str
    vendor_id: str
    device_id: str
    numa_node: int | None = None
    iommu_group: str | None = None
    driver: str | None = None
    link: PciLink = dataclasses.field(default_factory=PciLink)
    aer: dict = dataclasses.field(default_factory=dict)
    config_all_ones: bool | None = None
    vgpu: str | None = None
    local_cpus: frozenset | None = None

    @property
    def resource_class(self):
        """Nova's resource class for the device: ``CUSTOM_PCI_10DE_2330``.

        Source: nova ``pci_placement_translator`` names it
        ``CUSTOM_PCI_<VENDOR>_<PRODUCT>`` upper case.
        """
        return 'CUSTOM_PCI_%s_%s' % (self.vendor_id.upper(),
                                     self.device_id.upper())


@dataclasses.dataclass
class PciInventory:
    """NVIDIA devices of one host.

    :ivar root: the sysfs root read (``/sys`` normally).
    :ivar gpus: dict ``{address: PciGpu}`` in address order.
    :ivar nvswitches: addresses of NVSwitches, in address order.
    """

    root: str
    gpus: dict
    nvswitches: list


def parse_hex(text, path):
    """Parse a ``0x%04x``/``0x%06x`` attribute into an int.

    :raises NvlinkError: naming ``path`` when the text is not hex.
    """
    try:
        return int(text.strip(), 16)
    except ValueError:
        raise errors.NvlinkError('%s: expected a hex number, got %r'
                                 % (path, text.strip()))


def parse_int(text, path):
    """Parse a ``%d``/``%u`` attribute; raises NvlinkError naming path."""
    try:
        return int(text.strip())
    except ValueError:
        raise errors.NvlinkError('%s: expected an integer, got %r'
                                 % (path, text.strip()))


def parse_list(text):
    """A kernel list (``0-55,112-167``, ``3``) as a frozenset of ints.

    The format of ``local_cpulist`` and of nvidia-smi's affinity cells.

    :returns: None for None, an empty text, ``N/A`` or anything that is
        not such a list.
    """
    found = set()
    for item in (text or '').strip().split(','):
        first, _, last = item.partition('-')
        if not first.isdigit() or (last and not last.isdigit()):
            return None
        found.update(range(int(first), int(last or first) + 1))
    return frozenset(found)


def parse_link_speed(text):
    """Return a link speed in GT/s (float), None for ``Unknown`` forms.

    Accepts both kernel spellings, ``16.0 GT/s PCIe`` and ``16 GT/s``.
    """
    match = _SPEED.match(text.strip())
    return float(match.group(1)) if match else None


def parse_aer_counters(text, path):
    """Return the total of an ``aer_dev_*`` file.

    The count is the last token of each line (older kernels use names with
    spaces). The ``TOTAL_ERR_*`` line is the total; without one, the lines
    are summed.

    :raises NvlinkError: naming ``path`` and the line for a line whose last
        token is not a count.
    """
    total, summed = None, 0
    for lineno, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 2 or not fields[-1].isdigit():
            raise errors.NvlinkError(
                '%s: line %d: expected "<name> <count>", got %r'
                % (path, lineno, line))
        if fields[0].startswith('TOTAL_ERR_'):
            total = int(fields[-1])
        else:
            summed += int(fields[-1])
    return summed if total is None else total


def config_reads_all_ones(data):
    """True when the first four config-space bytes are all 0xff.

    :param data: bytes read from ``config``.
    :returns: True/False, or None when fewer than four bytes were read.
    """
    if len(data) < 4:
        return None
    return data[:4] == b'\xff\xff\xff\xff'


def _read(path):
    """Text of a sysfs attribute, or None when it does not exist."""
    try:
        with open(path, encoding='ascii', errors='replace') as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise errors.NvlinkError('cannot read %s: %s'
                                 % (path, exc.strerror or exc))


def _read_hex(path):
    """An attribute every PCI device has (vendor, device, class), as int."""
    text = _read(path)
    if text is None:
        raise errors.NvlinkError('%s is missing' % path)
    return parse_hex(text, path)


def _link_name(path):
    """Basename of a symlink's target, or None when there is no link."""
    try:
        return os.path.basename(os.readlink(path))
    except OSError:
        return None


def _read_config(path):
    try:
        with open(path, 'rb') as handle:
            return config_reads_all_ones(handle.read(4))
    except OSError:
        return None


def _vgpu_use(device_dir):
    """Say why a GPU is in vGPU use (mdev parent or SR-IOV VFs), or None."""
    if os.path.isdir(os.path.join(device_dir, 'mdev_supported_types')):
        instances = [n for n in os.listdir(device_dir) if _UUID.match(n)]
        return ('vGPU in use (mdev parent, %d mdev instance%s)'
                % (len(instances), '' if len(instances) == 1 else 's'))
    numvfs_path = os.path.join(device_dir, 'sriov_numvfs')
    numvfs_text = _read(numvfs_path)
    if numvfs_text is None or parse_int(numvfs_text, numvfs_path) == 0:
        return None
    vfs = sorted(n for n in os.listdir(device_dir)
                 if re.match(r'^virtfn\d+$', n))
    typed = 0
    for vf in vfs:
        type_path = os.path.join(device_dir, vf, 'nvidia',
                                 'current_vgpu_type')
        type_text = _read(type_path)
        if type_text is not None and parse_int(type_text, type_path):
            typed += 1
    return ('vGPU in use (SR-IOV, %d of %d VFs have a vGPU type)'
            % (typed, len(vfs)))


def read_gpu(device_dir, address):
    """Read one GPU's attributes from its sysfs directory.

    :param device_dir: ``<sysfs root>/bus/pci/devices/<address>``.
    :returns: :class:`PciGpu`.
    :raises NvlinkError: when an attribute has an unexpected format.
    """
    def attr(name):
        return _read(os.path.join(device_dir, name))

    def number(name, parse):
        text = attr(name)
        return None if text is None else parse(
            text, os.path.join(device_dir, name))

    def speed(name):
        text = attr(name)
        return None if text is None else parse_link_speed(text)

    numa = number('numa_node', parse_int)
    return PciGpu(
        address=address,
        vendor_id='%04x' % _read_hex(os.path.join(device_dir, 'vendor')),
        device_id='%04x' % _read_hex(os.path.join(device_dir, 'device')),
        numa_node=None if numa is None or numa < 0 else numa,
        iommu_group=_link_name(os.path.join(device_dir, 'iommu_group')),
        driver=_link_name(os.path.join(device_dir, 'driver')),
        link=PciLink(
            current_width=number('current_link_width', parse_int),
            max_width=number('max_link_width', parse_int),
            current_speed=speed('current_link_speed'),
            max_speed=speed('max_link_speed')),
        aer={kind: number('aer_dev_' + kind, parse_aer_counters)
             for kind in AER_KINDS},
        config_all_ones=_read_config(os.path.join(device_dir, 'config')),
        vgpu=_vgpu_use(device_dir),
        local_cpus=parse_list(attr('local_cpulist')))


def scan(sysfs_root='/sys'):
    """Find the NVIDIA GPUs and NVSwitches of a host.

    GPUs are vendor 0x10de devices of class 0x0300xx/0x0302xx that are not
    SR-IOV virtual functions (those have ``physfn``; they are reported
    through their parent). NVSwitches are class 0x068000.

    :param sysfs_root: where sysfs is mounted (a test tree or a chroot).
    :returns: :class:`PciInventory`.
    :raises NvlinkError: when ``<root>/bus/pci/devices`` is missing or an
        attribute has an unexpected format.
    """
    devices = os.path.join(sysfs_root, 'bus', 'pci', 'devices')
    try:
        names = os.listdir(devices)
    except OSError as exc:
        raise errors.NvlinkError(
            'cannot list PCI devices in %s: %s; run nvlink-host-inspect on '
            'the GPU host, or give --sysfs-root a copy of its /sys (to plan '
            'before the hosts exist, write the topology by hand: "openstack '
            'nvlink snapshot --from-topology FILE" gives the trees Nova will '
            'report)' % (devices, exc.strerror or exc))
    for name in names:
        try:
            pci.normalize_address(name)
        except ValueError:
            raise errors.NvlinkError(
                '%s: not a PCI address (expected dddd:bb:dd.f, as the kernel '
                'names the entries there): is --sysfs-root a copy of a '
                "host's /sys?" % os.path.join(devices, name))
    gpus, nvswitches = {}, []
    for name in sorted(names, key=pci.address_sort_key):
        device_dir = os.path.join(devices, name)
        if _read_hex(os.path.join(device_dir, 'vendor')) != NVIDIA_VENDOR:
            continue
        pci_class = _read_hex(os.path.join(device_dir, 'class'))
        address = pci.normalize_address(name)
        if pci_class == NVSWITCH_CLASS:
            nvswitches.append(address)
        elif (pci_class >> 8 in GPU_CLASSES and
              not os.path.lexists(os.path.join(device_dir, 'physfn'))):
            gpus[address] = read_gpu(device_dir, address)
    return PciInventory(sysfs_root, gpus, nvswitches)
