"""Test helpers: captured fixtures, a fake sysfs tree, the fake libnvfm.

The fake host is an 8-GPU HGX H100 bound to vfio-pci with the real
board-2 BDF -> module id map of ``shared/reference/host-formats.md``
(driver 565 capture): 18->2, 2a->4, 3a->1, 5d->3, 9a->6, ab->8, ba->5,
db->7.
"""

import atexit
import json
import os
import re
import shutil
import subprocess
import tempfile

import fixtures

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(TESTS, 'fixtures')
FAKE_NVFM_SOURCE = os.path.join(TESTS, 'fakes', 'fake_nvfm.c')

# Board 2: address -> module id, in address (= NVML index) order.
BOARD2 = {
    '0000:18:00.0': 2, '0000:2a:00.0': 4, '0000:3a:00.0': 1,
    '0000:5d:00.0': 3, '0000:9a:00.0': 6, '0000:ab:00.0': 8,
    '0000:ba:00.0': 5, '0000:db:00.0': 7,
}
BY_MODULE = {m: a for a, m in BOARD2.items()}
NVSWITCHES = ['0000:05:00.0', '0000:06:00.0']

# FM User Guide default partitions: (id, physical ids).
H100_TABLE = ([(0, range(1, 9)), (1, range(1, 5)), (2, range(5, 9)),
               (3, (1, 3)), (4, (2, 4)), (5, (5, 7)), (6, (6, 8))] +
              [(7 + i, (i + 1,)) for i in range(8)])
B200_TABLE = ([(1, range(1, 9)), (2, range(1, 5)), (3, range(5, 9)),
               (4, (1, 2)), (5, (3, 4)), (6, (5, 6)), (7, (7, 8))] +
              [(8 + i, (i + 1,)) for i in range(8)])


def modules(*ids):
    """Addresses of board-2 module ids, as a tuple in address order."""
    return tuple(sorted(BY_MODULE[i] for i in ids))


# What FM's H100 table must give on board 2: quads, then diagonal pairs.
H100_GROUPS = [modules(1, 2, 3, 4), modules(2, 4), modules(1, 3),
               modules(5, 6, 7, 8), modules(6, 8), modules(5, 7)]


class HostTempDir(fixtures.Fixture):
    """A temp dir, with the default FM mapping file pointed into it.

    So no test reads ``/run/nvidia-fabricmanager/...`` of the machine it
    runs on. :ivar path: the directory.
    """

    def _setUp(self):
        self.path = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.MonkeyPatch(
            'nvlink_placement.discovery.module_ids.DEFAULT_MAPPING_FILE',
            os.path.join(self.path, 'absent.json')))


def fixture_path(*parts):
    return os.path.join(FIXTURES, *parts)


def read_fixture(*parts):
    with open(fixture_path(*parts), encoding='utf-8') as handle:
        return handle.read()


def capture_block(text, command):
    """Lines after a ``$ <command>`` line up to the next ``$``/``#`` line.

    Our sysfs captures quote file contents this way
    (``$ cat aer_dev_correctable``).
    """
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.startswith('$ ') and command in line)
    block = []
    for line in lines[start + 1:]:
        if line.startswith(('$', '#')):
            break
        block.append(line)
    return '\n'.join(block) + '\n'


def h100_query_all_gpus():
    """``nvidia-smi -q`` for all 8 GPUs of the H100 driver-565 capture.

    The capture holds GPU 00000000:18:00.0 in full and, in comment lines,
    the minor number, Bus Id and Module Id of all eight. Each block here
    is the captured one with those three values (and the derived ``Bus``
    and ``Board ID``) replaced: the GPU data of the same host.
    """
    text = read_fixture('nvidia-smi', 'q-h100-sxm-x8-driver565.txt')
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith('GPU '))
    end = next(i for i, line in enumerate(lines) if line.startswith('# ----'))
    head, block = lines[:first], '\n'.join(lines[first:end]) + '\n'
    out = ['\n'.join(head)]
    summary = re.findall(r'^# minor (\d+)\s+(\S+)\s+Module Id (\d+)$', text,
                         re.MULTILINE)
    for minor, bus_id, module_id in summary:
        bus = bus_id.split(':')[1]
        gpu = block.replace('00000000:18:00.0', bus_id)
        gpu = re.sub(r'(Minor Number\s+: )0', r'\g<1>' + minor, gpu)
        gpu = re.sub(r'(Module Id\s+: )2', r'\g<1>' + module_id, gpu)
        gpu = re.sub(r'(Bus\s+: )0x18', r'\g<1>0x' + bus, gpu)
        gpu = re.sub(r'(Board ID\s+: )0x1800', r'\g<1>0x%s00' % bus, gpu)
        out.append(gpu)
    return '\n'.join(out)


def query_text(addresses, module_ids=None, attached=None):
    """``nvidia-smi -q`` describing GPUs at ``addresses`` (NVML order).

    Each block is the first block of the driver-555 A100 capture with its
    Bus Id (and Bus) replaced, and its ``Module ID`` replaced by
    ``module_ids[address]`` or removed when there is none.

    :param attached: the ``Attached GPUs`` count (default: the number of
        addresses).
    """
    text = read_fixture('nvidia-smi', 'q-a100-sxm4-x4-driver555.txt')
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith('GPU '))
    end = next(i for i, line in enumerate(lines) if line.startswith('# ----'))
    head = [line for line in lines[:first] if not line.startswith('#')]
    head = [re.sub(r'(Attached GPUs\s+: )\d+', r'\g<1>%d' % (
        len(addresses) if attached is None else attached), line)
        for line in head]
    block = '\n'.join(lines[first:end]).rstrip('\n')
    out = head
    for address in addresses:
        bus_id = '0000' + address.upper()
        gpu = block.replace('00000000:68:00.0', bus_id)
        gpu = re.sub(r'(\n        Bus\s+: )0x68', r'\g<1>0x' + address[5:7],
                     gpu)
        module = (module_ids or {}).get(address)
        gpu = (re.sub(r'(Module ID\s+: )\d+', r'\g<1>%d' % module, gpu)
               if module is not None else
               re.sub(r'\n    Module ID\s+: \d+', '', gpu))
        out.append(gpu)
    return '\n'.join(out) + '\n'


def topo_text(n, link):
    """A TAB-separated ``nvidia-smi topo -m`` for ``n`` GPUs.

    :param link: function ``(i, j) -> cell`` for ``i != j``.
    """
    names = ['GPU%d' % i for i in range(n)]
    rows = ['\t' + '\t'.join(names + ['CPU Affinity', 'NUMA Affinity',
                                      'GPU NUMA ID'])]
    for i in range(n):
        cells = [' X ' if i == j else link(i, j) for j in range(n)]
        node = 0 if i < n // 2 else 1
        rows.append('\t'.join(['GPU%d' % i] + cells +
                              ['0-55', str(node), '', 'N/A']))
    return '\n'.join(rows) + '\n\nLegend:\n\n  X    = Self\n'


def fmpm_json(table, pci_bus_ids=None, links=None):
    """``fmpm -l`` output for a partition table, written as JsonCpp does.

    Keys in alphabetical order, 3-space indent, ``"key" : value``.

    :param table: list of ``(partition id, physical ids)``.
    :param pci_bus_ids: optional dict ``{physical id: pciBusId}``.
    :param links: optional dict ``{physical id: numNvLinksAvailable}``.
    """
    partitions = []
    for pid, members in table:
        gpus = [{'maxNumNvLinks': 18,
                 'numNvLinksAvailable': (links or {}).get(m, 18),
                 'nvlinkLineRateMBps': 0,
                 'pciBusId': (pci_bus_ids or {}).get(m, ''),
                 'physicalId': m, 'uuid': ''} for m in members]
        partitions.append({'gpuInfo': gpus, 'isActive': 0,
                           'numGpus': len(gpus), 'partitionId': pid})
    document = {'maxNumPartitions': 64, 'numPartitions': len(partitions),
                'partitionInfo': partitions, 'version': 16909068}
    return json.dumps(document, indent=3, sort_keys=True,
                      separators=(',', ' : ')) + '\n'


class FakeSysfs(fixtures.Fixture):
    """A sysfs tree on disk for the board-2 HGX H100 host.

    All GPUs are 10de:2330 class 0x030200 bound to vfio-pci, PCIe x16
    32.0 GT/s (max the same), AER files all zero, NUMA node 0 for the
    first four and 1 for the rest; plus two NVSwitches (10de:22a3, class
    0x068000; left out when ``nvswitches`` is False) and a Mellanox NIC.
    With ``quirks``:

    - 0000:9a:00.0 (module 6): ``config`` reads all ones;
    - 0000:ab:00.0 (module 8): fatal AER (MalfTLP 1, TOTAL_ERR_FATAL 1);
    - 0000:5d:00.0 (module 3): ``numa_node`` -1, and no AER files;
    - 0000:db:00.0 (module 7): mdev parent with one mdev instance;
    - 0000:2a:00.0 (module 4): link trained at x8, 16 GT/s (old kernel
      spelling ``16 GT/s``).

    :ivar root: the sysfs root to pass as ``--sysfs-root``.
    """

    MDEV_UUID = 'aa618089-8b16-4d01-a136-25a0f3c73123'

    def __init__(self, quirks=False, nvswitches=True, gpus=None,
                 device='0x2330', driver='vfio-pci', local_cpus=None):
        """:param gpus: dict address -> NUMA node (default: board 2).

        :param local_cpus: dict address -> ``local_cpulist`` text (the
            file is absent for other GPUs).
        """
        super().__init__()
        self.quirks = quirks
        self.nvswitches = nvswitches
        self.gpus = gpus or {a: 0 if i < 4 else 1
                             for i, a in enumerate(BOARD2)}
        self.device = device
        self.driver = driver
        self.local_cpus = local_cpus or {}

    def _setUp(self):
        self.root = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(self.root, 'bus', 'pci', 'devices'))
        formats = read_fixture('sysfs', 'pci-attribute-formats.txt')
        self.aer = {kind: capture_block(formats, 'aer_dev_' + kind)
                    for kind in ('correctable', 'fatal')}
        # aer_dev_nonfatal has the fatal layout (see the capture).
        self.aer['nonfatal'] = self.aer['fatal'].replace(
            'TOTAL_ERR_FATAL', 'TOTAL_ERR_NONFATAL')
        for index, (address, numa) in enumerate(self.gpus.items()):
            self.add_gpu(address, iommu_group=30 + index, numa=numa,
                         device=self.device, driver=self.driver)
        for address, text in self.local_cpus.items():
            self.write(address, 'local_cpulist', text + '\n')
        for address in NVSWITCHES if self.nvswitches else ():
            self.add_device(address, '0x10de', '0x22a3', '0x068000')
        self.add_device('0000:0c:00.0', '0x15b3', '0x101b', '0x020700')
        if self.quirks:
            self.write('0000:9a:00.0', 'config', b'\xff' * 64)
            self.write('0000:ab:00.0', 'aer_dev_fatal',
                       self.aer['fatal'].replace('MalfTLP 0', 'MalfTLP 1')
                       .replace('TOTAL_ERR_FATAL 0', 'TOTAL_ERR_FATAL 1'))
            self.write('0000:5d:00.0', 'numa_node', '-1\n')
            for kind in ('correctable', 'nonfatal', 'fatal'):
                os.unlink(self.path('0000:5d:00.0', 'aer_dev_' + kind))
            types = os.path.join('mdev_supported_types', 'nvidia-41')
            self.write('0000:db:00.0', os.path.join(types, 'name'),
                       'GRID H100-2Q\n')
            self.write('0000:db:00.0',
                       os.path.join(types, 'available_instances'), '3\n')
            self.write('0000:db:00.0', os.path.join(types, 'device_api'),
                       'vfio-pci\n')
            os.makedirs(self.path('0000:db:00.0', self.MDEV_UUID))
            self.link('0000:db:00.0',
                      os.path.join(self.MDEV_UUID, 'mdev_type'),
                      os.path.join('..', types))
            self.write('0000:2a:00.0', 'current_link_width', '8\n')
            self.write('0000:2a:00.0', 'current_link_speed', '16 GT/s\n')

    def path(self, address, *parts):
        return os.path.join(self.root, 'devices', 'pci0000:00', address,
                            *parts)

    def write(self, address, name, content):
        path = self.path(address, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        mode = 'wb' if isinstance(content, bytes) else 'w'
        with open(path, mode) as handle:
            handle.write(content)

    def link(self, address, name, target):
        os.symlink(target, self.path(address, name))

    def add_device(self, address, vendor, device, pci_class):
        """A device directory with vendor/device/class and its bus link."""
        os.makedirs(self.path(address))
        self.write(address, 'vendor', vendor + '\n')
        self.write(address, 'device', device + '\n')
        self.write(address, 'class', pci_class + '\n')
        os.symlink(os.path.join('..', '..', '..', 'devices', 'pci0000:00',
                                address),
                   os.path.join(self.root, 'bus', 'pci', 'devices', address))

    def add_gpu(self, address, iommu_group, numa, device='0x2330',
                driver='vfio-pci'):
        """A GPU as the kernel shows it (values from the captures)."""
        self.add_device(address, '0x10de', device, '0x030200')
        # First config bytes of the captured H100 (hexdump of config).
        self.write(address, 'config',
                   bytes.fromhex('de10 3023 4705 1000 a100 0203') +
                   b'\x00' * 52)
        self.write(address, 'numa_node', '%d\n' % numa)
        self.write(address, 'current_link_width', '16\n')
        self.write(address, 'max_link_width', '16\n')
        self.write(address, 'current_link_speed', '32.0 GT/s PCIe\n')
        self.write(address, 'max_link_speed', '32.0 GT/s PCIe\n')
        for kind, text in self.aer.items():
            self.write(address, 'aer_dev_' + kind, text)
        self.link(address, 'iommu_group', os.path.join(
            '..', '..', '..', 'kernel', 'iommu_groups', str(iommu_group)))
        if driver:
            self.link(address, 'driver', os.path.join(
                '..', '..', '..', 'bus', 'pci', 'drivers', driver))


_BUILT = {}
# Taken at import: oslotest points tempfile at a directory of each test.
_PROCESS_TMP = tempfile.gettempdir()


def _compiled_fake_nvfm(compiler):
    """The fake libnvfm compiled once per test process (then reused)."""
    if 'path' not in _BUILT:
        directory = tempfile.mkdtemp(prefix='fake-nvfm-', dir=_PROCESS_TMP)
        atexit.register(shutil.rmtree, directory, True)
        out = os.path.join(directory, 'libnvfm.so.1')
        subprocess.run([compiler, '-shared', '-fPIC', '-O1', '-Wall',
                        '-Werror', '-Wl,-soname,libnvfm.so.1', '-o', out,
                        FAKE_NVFM_SOURCE], check=True, capture_output=True)
        _BUILT['path'] = out
    return _BUILT['path']


def build_fake_nvfm(test):
    """A fresh copy of ``tests/fakes/fake_nvfm.c`` as a shared library.

    Compiled once per test process; each call copies it into a new
    temporary directory, so each test loads its own copy (own state: the
    dynamic loader loads each file once). Its SONAME is ``libnvfm.so.1``,
    as the real library's. Skips the test when there is no compiler.

    :returns: path of the library.
    """
    compiler = shutil.which('gcc') or shutil.which('cc')
    if compiler is None:
        test.skipTest('no C compiler (gcc or cc) on PATH: cannot build the '
                      'fake libnvfm')
    for name in ('FAKE_NVFM_TABLE', 'FAKE_NVFM_FAIL', 'FAKE_NVFM_FAIL_ONCE',
                 'FAKE_NVFM_HANG', 'FAKE_NVFM_HANG_PIDFILE',
                 'FAKE_NVFM_STATE'):
        test.useFixture(fixtures.EnvironmentVariable(name))
    out = os.path.join(test.useFixture(fixtures.TempDir()).path,
                       'libnvfm.so.1')
    shutil.copyfile(_compiled_fake_nvfm(compiler), out)
    os.chmod(out, 0o755)
    return out
