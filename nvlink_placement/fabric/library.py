"""Is a file libnvfm? Answered from the ELF file, without loading it.

Loading a shared object runs its constructors, as root in the hook; so
before ``fm_library`` is loaded, its file must be a 64-bit ELF shared
object of this machine (``e_machine`` of the running Python), with the
runtime library's SONAME ``libnvfm.so.1`` (``reference/fabric-manager.md``)
and defining every call the FM client makes (its dynamic symbol table).

This catches a wrong path (``libnvidia-ml.so``, a script, a truncated
copy); it cannot tell NVIDIA's library from a look-alike built to pass:
who may write the file and its directories is what keeps a hostile one
out (:mod:`.trust`). ELF layout: the System V gABI (``elf.h``).
"""

import struct
import sys

from nvlink_placement import errors

SONAME = 'libnvfm.so.1'
CALLS = ('fmLibInit', 'fmLibShutdown', 'fmConnect', 'fmDisconnect',
         'fmGetSupportedFabricPartitions', 'fmActivateFabricPartition',
         'fmDeactivateFabricPartition')
# libnvfm is a few MB; a file much larger than this is not it.
MAX_BYTES = 256 * 1024 * 1024

_ELF64, _LITTLE, _ET_DYN = 2, 1, 3
_SHT_DYNAMIC, _SHT_DYNSYM = 6, 11
_DT_NULL, _DT_SONAME = 0, 14
_SHN_UNDEF = 0
_HEADER = struct.Struct('<16sHHIQQQIHHHHHH')
_SECTION = struct.Struct('<IIQQQQIIQQ')
_SYMBOL = struct.Struct('<IBBHQQ')
_DYNAMIC = struct.Struct('<qQ')


class NotLibnvfm(errors.NvlinkError):
    """The file is not the libnvfm the FM client can use."""


def _header(data):
    if len(data) < _HEADER.size or data[:4] != b'\x7fELF':
        return None
    fields = _HEADER.unpack_from(data)
    if fields[0][4] != _ELF64 or fields[0][5] != _LITTLE:
        return None
    return fields


def _machine():
    """``e_machine`` of the running Python's executable, or None."""
    try:
        with open(sys.executable, 'rb') as handle:
            fields = _header(handle.read(_HEADER.size))
    except OSError:
        return None
    return fields[2] if fields else None


def _string(data, offset):
    end = data.find(b'\0', offset)
    if offset >= len(data) or end < 0:
        raise ValueError('string offset %d outside its table' % offset)
    return data[offset:end].decode('ascii', 'replace')


def _sections(data, header):
    offset, entry, count = header[6], header[11], header[12]
    if entry != _SECTION.size:
        raise ValueError('unexpected section header size %d' % entry)
    if offset + count * entry > len(data):
        raise ValueError('section headers beyond the end of the file')
    return [_SECTION.unpack_from(data, offset + i * entry)
            for i in range(count)]


def _contents(data, section):
    start, size = section[4], section[5]
    if start + size > len(data):
        raise ValueError('a section runs past the end of the file')
    return data[start:start + size]


def identity(data):
    """``(soname, defined dynamic symbols)`` of an ELF shared object.

    :param data: the file's bytes.
    :returns: ``(str or None, frozenset of str)``, or None when ``data``
        is not a 64-bit little-endian ELF shared object.
    :raises ValueError: for a malformed one.
    """
    header = _header(data)
    if header is None or header[1] != _ET_DYN:
        return None
    sections = _sections(data, header)
    soname, symbols = None, set()
    for section in sections:
        kind, link = section[1], section[6]
        if kind not in (_SHT_DYNAMIC, _SHT_DYNSYM):
            continue
        if link >= len(sections):
            raise ValueError('a section links to a missing string table')
        strings = _contents(data, sections[link])
        table = _contents(data, section)
        if kind == _SHT_DYNSYM:
            for start in range(0, len(table) - _SYMBOL.size + 1,
                               _SYMBOL.size):
                name, _, _, index, _, _ = _SYMBOL.unpack_from(table, start)
                if name and index != _SHN_UNDEF:
                    symbols.add(_string(strings, name))
            continue
        for start in range(0, len(table) - _DYNAMIC.size + 1,
                           _DYNAMIC.size):
            tag, value = _DYNAMIC.unpack_from(table, start)
            if tag == _DT_NULL:
                break
            if tag == _DT_SONAME:
                soname = _string(strings, value)
    return soname, frozenset(symbols)


def check(path):
    """Refuse ``path`` unless its file looks like libnvfm (see above).

    :raises NotLibnvfm: naming the file and what does not match.
    """
    where = 'fm_library %s' % path
    try:
        with open(path, 'rb') as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise NotLibnvfm('%s: %s' % (where, exc.strerror or exc))
    if len(data) > MAX_BYTES:
        raise NotLibnvfm('%s: larger than %d bytes: not a libnvfm'
                         % (where, MAX_BYTES))
    try:
        found = identity(data)
    except (ValueError, struct.error) as exc:
        raise NotLibnvfm('%s: a malformed ELF file (%s)' % (where, exc))
    if found is None:
        raise NotLibnvfm('%s: not a 64-bit ELF shared library' % where)
    machine = _machine()
    if machine is not None and machine != _header(data)[2]:
        raise NotLibnvfm('%s: built for another machine (ELF e_machine '
                         '%d, this Python is %d)'
                         % (where, _header(data)[2], machine))
    soname, symbols = found
    if soname != SONAME:
        raise NotLibnvfm('%s: its SONAME is %s, not %s: not the Fabric '
                         'Manager runtime library'
                         % (where, repr(soname) if soname else 'missing',
                            SONAME))
    missing = [call for call in CALLS if call not in symbols]
    if missing:
        raise NotLibnvfm('%s: does not define %s: not a libnvfm this tool '
                         'can use' % (where, ', '.join(missing)))
