"""GPU module ids: the BDF -> module id mapping file and merging sources.

Fabric Manager names GPUs by physical id, which equals the "Module Id" of
``nvidia-smi -q`` on HGX H100 and later (``reference/fabric-manager.md``).
Module ids do not follow PCI order, so grouping by module id needs a map.
The mapping file convention, shared with NVIDIA's KubeVirt device plugin
work, is ``/run/nvidia-fabricmanager/gpu-pci-module-mapping.json``: a flat
JSON object ``{"<bdf>": <module id>}`` with keys in any BDF form and values
as ints or decimal strings.
"""

import json
import re

from nvlink_placement.discovery import files
from nvlink_placement import documents
from nvlink_placement import errors
from nvlink_placement.topology import pci

DEFAULT_MAPPING_FILE = '/run/nvidia-fabricmanager/gpu-pci-module-mapping.json'
# Larger than any module or FM physical id (FM structs hold 32 bits).
MAX_MODULE_ID = 2 ** 31 - 1
#: What a mapping file must hold, for messages.
EXPECTED = ('expected the GPU PCI address -> module id mapping file: a JSON '
            'object such as {"00000000:18:00.0": 1, "00000000:2a:00.0": 2}, '
            'as Fabric Manager writes %s' % DEFAULT_MAPPING_FILE)
_DECIMAL = re.compile(r'^\s*[0-9]+\s*$')


class ModuleIds:
    """Module ids of some GPUs and where they came from.

    :ivar source: human-readable origin, e.g. a file name.
    :ivar ids: dict ``{address: module id}``, addresses in sysfs form.
    """

    def __init__(self, source, ids):
        self.source = source
        self.ids = dict(ids)


def parse_module_id(value):
    """Return a module id from a JSON int or a decimal string.

    :raises ValueError: for anything else (bools, negative numbers, hex),
        or a number above :data:`MAX_MODULE_ID`.
    """
    if isinstance(value, bool):
        raise ValueError('%r is not a module id' % (value,))
    if isinstance(value, str) and _DECIMAL.match(value):
        digits = value.strip()
        value = int(digits) if len(digits) <= 10 else MAX_MODULE_ID + 1
    if isinstance(value, int) and value >= 0:
        if value > MAX_MODULE_ID:
            raise ValueError('%s is larger than any module id (at most %d)'
                             % (documents.short(value), MAX_MODULE_ID))
        return value
    raise ValueError('%s is not a module id (expected an integer or a '
                     'decimal string)' % documents.short(value))


def _key(key):
    return '["%s"]' % documents.clip(key)


def parse_mapping(text, source):
    """Parse a gpu-pci-module-mapping.json document.

    :param text: the JSON text.
    :param source: file name used in error messages.
    :returns: :class:`ModuleIds`.
    :raises NvlinkError: invalid JSON (with line and column), not an object,
        a key that is not a PCI address, a value that is not a module id,
        or one device listed twice under different spellings.
    """
    # A key given twice is refused by the reader (documents.parse_json).
    try:
        pairs = files.parse_json(text, source)
    except documents.DocumentError as exc:
        if not exc.reason.startswith('invalid JSON'):
            raise
        # Not JSON at all: another file given as the map (a topology?).
        raise errors.NvlinkError('%s: %s; %s' % (exc.location, exc.reason,
                                                 EXPECTED))
    if not isinstance(pairs, dict):
        raise errors.NvlinkError('%s: got %s; %s' % (
            source, documents.kind(pairs), EXPECTED))
    ids = {}
    spelled = {}
    for key, value in pairs.items():
        if not isinstance(key, str) or not isinstance(value, (int, str)):
            raise errors.NvlinkError(
                '%s: %s: expected a module id, got %s'
                % (source, _key(key), documents.clip(json.dumps(value))))
        try:
            address = pci.normalize_address(key)
            module_id = parse_module_id(value)
        except ValueError as exc:
            raise errors.NvlinkError('%s: %s: %s' % (source, _key(key), exc))
        if address in ids:
            raise errors.NvlinkError(
                '%s: "%s" and "%s" are the same device %s'
                % (source, spelled[address], key, address))
        ids[address] = module_id
        spelled[address] = key
    return ModuleIds(source, ids)


def read_mapping(path):
    """Read a mapping file; see :func:`parse_mapping`.

    :raises NvlinkError: when the file cannot be read or parsed.
    """
    return parse_mapping(files.read_text(path, 'mapping file'), path)


def merge(sources):
    """Merge module ids from several :class:`ModuleIds` (None skipped).

    :returns: dict ``{address: module id}``.
    :raises NvlinkError: when two sources give one GPU different ids; the
        message names both.
    """
    ids, origin = {}, {}
    for src in sources:
        if src is None:
            continue
        for address, module_id in src.ids.items():
            if address in ids and ids[address] != module_id:
                raise errors.NvlinkError(
                    'module id of %s: %s says %d, %s says %d'
                    % (address, origin[address], ids[address], src.source,
                       module_id))
            ids.setdefault(address, module_id)
            origin.setdefault(address, src.source)
    return ids


def by_module_id(ids, purpose):
    """Invert ``{address: module id}`` for grouping by module id.

    :param purpose: what needs the inversion, for the error message
        (e.g. ``'Fabric Manager partitions'``).
    :returns: dict ``{module id: address}``.
    :raises NvlinkError: when two GPUs share a module id (PCIe cards all
        report 1, VMs repeat values: ``reference/host-formats.md``); the
        message names the addresses.
    """
    inverse, clashes = {}, {}
    for address in sorted(ids, key=pci.address_sort_key):
        module_id = ids[address]
        if module_id in inverse:
            clashes.setdefault(module_id, [inverse[module_id]]).append(
                address)
        else:
            inverse[module_id] = address
    if clashes:
        raise errors.NvlinkError(
            '%s: module ids must be unique, but %s (PCIe cards and VMs '
            'repeat '
            'module ids; give the real map with --mapping)'
            % (purpose, '; '.join(
                'module id %d is reported for %s' % (mid, ', '.join(addrs))
                for mid, addrs in sorted(clashes.items()))))
    return inverse
