"""``nvidia-smi -q`` parsing and running nvidia-smi with a bounded timeout.

Format facts (``reference/host-formats.md``, captures in ``data/``):

- One block per GPU, opened by ``GPU 00000000:18:00.0`` at column 0, in
  NVML index order (the order ``nvidia-smi topo -m`` numbers GPUs in).
  Inside, ``Key : Value`` fields and section titles, nested by 4 spaces.
- ``Bus Id`` (in ``PCI``) has an 8-digit, upper-case domain.
- Module id: top-level ``Module ID`` on driver 555 and older; ``Module Id``
  inside ``Platform Info`` on 565+. Matched case-insensitively, any indent.
- ``MIG Mode``/``Current``: ``Enabled``/``Disabled``/``N/A``.
  ``GPU Virtualization Mode``/``Virtualization Mode``: ``Host VGPU`` when
  the vGPU manager owns the GPU.
- ``ECC Errors``/``Volatile``: counters since the driver loaded;
  uncorrected ones are named ``... Uncorrectable ...`` (Ampere and later)
  or sit under ``Double Bit`` (older drivers).
- ``Retired Pages``/``Pending Page Blacklist`` (or ``... Retirement``) and
  ``Remapped Rows``/``Pending``: ``Yes`` when a retirement or row remap
  waits for a GPU reset.
- ``Temperature``/``GPU Current Temp``: ``30 C``.
- ``Attached GPUs : 8`` before the blocks: the GPUs the driver attached.
  A GPU NVML cannot open gets no block but a line ``Unable to determine
  the device handle for GPU 0000:C1:00.0: GPU is lost. Reboot the system
  to recover this GPU`` (also ``Unknown Error``; some drivers print
  ``GPU0000:C1:00.0`` run together, Windows ``detect`` for
  ``determine``), and nvidia-smi exits non-zero.

Lines starting with ``#`` (comments in our captures) are ignored.
"""

import dataclasses
import re
import shutil
import subprocess

from nvlink_placement.discovery import files
from nvlink_placement.discovery import module_ids
from nvlink_placement import documents
from nvlink_placement import errors
from nvlink_placement.topology import pci

DEFAULT_TIMEOUT = 5.0  # seconds; `topo -m` has been seen to take 112 s
_GPU_HEADER = re.compile(r'^GPU\s+(\S+:\S+)\s*$')
_TEMPERATURE = re.compile(r'^(-?[0-9]{1,6})\s*C$')
# A count nvidia-smi prints (no more digits than a 64-bit counter has).
_COUNT = re.compile(r'^[0-9]{1,20}$')
_LOST = re.compile(r'Unable to (?:determine|detect) the device handle for '
                   r'GPU\s*([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-7])'
                   r'\s*:\s*(.*?)\s*$')


@dataclasses.dataclass
class SmiGpu:
    """What ``nvidia-smi -q`` says about one GPU.

    :ivar address: sysfs form of ``Bus Id``.
    :ivar line: line number of the GPU's block (for messages).
    :ivar module_id: int or None (``N/A`` or not printed).
    :ivar mig_enabled: ``MIG Mode``/``Current`` is ``Enabled``.
    :ivar host_vgpu: ``Virtualization Mode`` is ``Host VGPU``.
    :ivar ecc_uncorrected: list of ``(counter name, count)`` of non-zero
        volatile uncorrected ECC counters.
    :ivar pending_retirement: list of the ``Pending`` fields that say
        ``Yes`` (e.g. ``'Remapped Rows/Pending'``).
    :ivar temperature_c: ``GPU Current Temp`` in degrees C, or None.
    """

    address: str
    line: int
    module_id: int | None = None
    mig_enabled: bool = False
    host_vgpu: bool = False
    ecc_uncorrected: list = dataclasses.field(default_factory=list)
    pending_retirement: list = dataclasses.field(default_factory=list)
    temperature_c: int | None = None


@dataclasses.dataclass
class SmiReport:
    """Parsed ``nvidia-smi -q``.

    :ivar source: a file name or the command.
    :ivar gpus: list of :class:`SmiGpu` in NVML index order.
    :ivar attached: the ``Attached GPUs`` count, or None when absent.
    :ivar lost: dict ``{address: (line number, message)}`` of the GPUs
        nvidia-smi could not open (``Unable to determine the device handle
        for GPU ...: GPU is lost ...``).
    """

    source: str
    gpus: list
    attached: int | None = None
    lost: dict = dataclasses.field(default_factory=dict)

    def unaccounted(self):
        """Attached GPUs neither described nor reported lost (0 if unknown).

        Negative when more GPUs are described than attached.
        """
        if self.attached is None:
            return 0
        return self.attached - len(self.gpus) - len(self.lost)

    def module_ids(self):
        """The module ids it reports, as :class:`module_ids.ModuleIds`."""
        return module_ids.ModuleIds(self.source, {
            g.address: g.module_id for g in self.gpus
            if g.module_id is not None})


def _fields(text):
    """Yield ``(lineno, gpu header or None, path, value)`` per field line.

    ``path`` is a tuple of lower-case section titles ending with the
    lower-case key; ``value`` is None for a section title.
    """
    stack = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.startswith('#') or not line.strip() or _LOST.search(line):
            continue
        header = _GPU_HEADER.match(line)
        if header:
            stack = []
            yield lineno, header.group(1), (), None
            continue
        indent = len(line) - len(line.lstrip(' '))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key, sep, value = line.partition(':')
        key = key.strip().lower()
        if sep:
            yield lineno, None, tuple(n for _, n in stack) + (key,), \
                value.strip()
        else:
            stack.append((indent, key))


def _address(text, source, lineno):
    try:
        return pci.normalize_address(text)
    except ValueError as exc:
        raise files.line_error(source, lineno, exc)


def parse_query(text, source):
    """Parse ``nvidia-smi -q`` output.

    :param text: the output (comment lines starting with ``#`` ignored).
    :param source: file name or command, used in messages.
    :returns: :class:`SmiReport`.
    :raises NvlinkError: with file and line when a ``Bus Id`` or a lost
        GPU's address is not a PCI address, a module id, temperature or
        ``Attached GPUs`` is not a number, or a GPU appears twice; naming
        the file when there is neither a GPU block nor a lost GPU.
    """
    gpus, attached, lost = [], None, {}
    for lineno, line in enumerate(text.splitlines(), 1):
        match = _LOST.search(line) if not line.startswith('#') else None
        if match:
            address = _address(match.group(1), source, lineno)
            lost.setdefault(address, (lineno, match.group(2)))
    for lineno, header, path, value in _fields(text):
        if header is not None:
            gpus.append(SmiGpu(address=_address(header, source, lineno),
                               line=lineno))
            continue
        if path == ('attached gpus',) and not gpus:
            if not _COUNT.match(value):
                raise files.line_error(source, lineno, 'Attached GPUs %s '
                                       'is not a number'
                                       % documents.short(value))
            attached = int(value)
            continue
        if not gpus or value in ('N/A', ''):
            continue
        gpu = gpus[-1]
        key = path[-1]
        if path == ('pci', 'bus id'):
            gpu.address = _address(value, source, lineno)
        elif key == 'module id':
            try:
                gpu.module_id = module_ids.parse_module_id(value)
            except ValueError:
                raise files.line_error(source, lineno,
                                       'module id %s is not a number'
                                       % documents.short(value))
        elif path == ('mig mode', 'current'):
            gpu.mig_enabled = value.lower() == 'enabled'
        elif path == ('gpu virtualization mode', 'virtualization mode'):
            gpu.host_vgpu = value.lower() == 'host vgpu'
        elif path[:2] == ('ecc errors', 'volatile') and any(
                'uncorrectable' in p or p == 'double bit' for p in path):
            if _COUNT.match(value) and int(value):
                gpu.ecc_uncorrected.append(('/'.join(path[2:]),
                                            int(value)))
        elif (path[0] in ('retired pages', 'remapped rows') and
              'pending' in key and value.lower() == 'yes'):
            gpu.pending_retirement.append('/'.join(path))
        elif path == ('temperature', 'gpu current temp'):
            match = _TEMPERATURE.match(value)
            if not match:
                raise files.line_error(source, lineno,
                                       'temperature %s is not "<n> C"'
                                       % documents.short(value))
            gpu.temperature_c = int(match.group(1))
    if not gpus and not lost:
        raise errors.NvlinkError(
            '%s: no GPU block ("GPU 00000000:18:00.0") found: is this '
            '`nvidia-smi -q` output?' % source)
    first = {}
    for gpu in gpus:
        if gpu.address in first:
            raise files.line_error(source, gpu.line,
                                   'GPU %s was already listed at line %d'
                                   % (gpu.address, first[gpu.address]))
        first[gpu.address] = gpu.line
    for address, (lineno, _) in lost.items():
        if address in first:
            raise files.line_error(source, lineno, 'GPU %s is reported lost,'
                                   ' but line %d describes it'
                                   % (address, first[address]))
    return SmiReport(source, gpus, attached, lost)


def run(arguments, timeout=DEFAULT_TIMEOUT, keep_failed=False):
    """Run ``nvidia-smi`` with ``arguments`` when it is on PATH.

    nvidia-smi sees only GPUs bound to the nvidia driver: on a passthrough
    host (GPUs on vfio-pci) it finds none, and it can hang on a sick GPU.
    So failures are not errors: they are returned as a note.

    :param arguments: list, e.g. ``['-q']`` or ``['topo', '-m']``.
    :param timeout: seconds before the command is killed.
    :param keep_failed: when it exits non-zero but printed a report or a
        lost GPU, use that output (standard output, then standard error):
        ``nvidia-smi -q`` exits non-zero when a GPU is lost and still
        describes the others, and the lost GPU is the news.
    :returns: ``(output text or None, note or None)``; both None when
        nvidia-smi is not installed.
    """
    shown = ' '.join(['nvidia-smi'] + list(arguments))
    executable = shutil.which('nvidia-smi')
    if executable is None:
        return None, None
    try:
        done = subprocess.run([executable] + list(arguments),
                              capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None, '`%s` timed out after %g s and was not used' % (
            shown, timeout)
    except OSError as exc:
        return None, '`%s` could not run: %s' % (shown, exc)
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip().splitlines()
        first = output[0] if output else 'no output'
        text = done.stdout + '\n' + done.stderr
        if keep_failed and (_LOST.search(text) or any(
                _GPU_HEADER.match(line) for line in text.splitlines())):
            return text, (
                '`%s` exited with %d (%s); its output was read'
                % (shown, done.returncode, first))
        return None, '`%s` exited with %d (%s) and was not used' % (
            shown, done.returncode, first)
    return done.stdout, None
