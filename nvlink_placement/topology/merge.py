"""Merge topology fragments (one per host, from host inspection) into one.

A host present in two fragments is an error, naming both files, even when
both entries are identical: two hosts that report the same name (cloned
images, containers) would otherwise become one; the same file given twice
is read once. A board defined twice differently is an error, and so are
two different ``group_trait_prefix`` values. ``gpus_file`` paths are
rewritten to stay valid relative to the merged file; one that then leads
outside the merged file's directory (and the allowed ``gpus_file``
directories) is an error saying where to write the merged file or which
directory to allow: the merged file could not be read back.
"""

import os

from nvlink_placement import documents
from nvlink_placement import errors
from nvlink_placement.topology import loader


def merge(paths, output, gpus_file_dirs=(), shown=None, origins=None):
    """Merge the topology files ``paths`` into one document.

    :param output: path the merged document will be written to (for
        ``gpus_file`` paths).
    :param gpus_file_dirs: directories a ``gpus_file`` may lead to besides
        the merged file's own (``--os-nvlink-gpus-file-dir``).
    :param shown: the merged file in messages (default ``output``).
    :param origins: a dict to fill with host name -> the fragment it
        comes from, or None.
    :returns: the merged document (dict); validate it with
        :func:`nvlink_placement.topology.loader.parse` before writing.
    :raises TopologyError: naming both files for every conflict.
    """
    merged = {'version': 1, 'hosts': {}}
    origin = {}
    problems = []
    out_dir = os.path.dirname(os.path.abspath(output))
    for path in _once(paths):
        document = loader.read_document(path)
        if not isinstance(document, dict) or document.get('version') != 1:
            problems.append((path, 'not a topology document of version 1%s'
                             % (' (the file is empty)' if document is None
                                else '')))
            continue
        if not document.get('hosts') and not document.get('boards'):
            problems.append((path, 'no hosts: not a topology fragment%s' % (
                ' but a Placement snapshot (give it to --snapshot)'
                if 'resource_providers' in document else
                ' (host inspect writes one host under "hosts")')))
            continue
        base = os.path.dirname(os.path.abspath(path))
        prefix = document.get('group_trait_prefix')
        if prefix is not None:
            if merged.setdefault('group_trait_prefix', prefix) != prefix:
                problems.append((path, conflict(
                    ['group_trait_prefix'], prefix, path,
                    merged['group_trait_prefix'],
                    origin['group_trait_prefix'])))
            origin.setdefault('group_trait_prefix', path)
        for kind in ('boards', 'hosts'):
            for name, spec in (document.get(kind) or {}).items():
                if kind == 'hosts' and isinstance(spec, dict) and (
                        'gpus_file' in spec):
                    spec = dict(spec, gpus_file=os.path.relpath(
                        os.path.join(base, spec['gpus_file']), out_dir))
                    problem = _outside(spec['gpus_file'], out_dir,
                                       shown or output, gpus_file_dirs)
                    if problem:
                        problems.append(('%s: hosts.%s.gpus_file' % (
                            path, name), problem))
                        continue
                section = merged.setdefault(kind, {})
                if kind == 'hosts' and section.get(name, _MISSING) == spec:
                    problems.append((path, twice(name, origin[(kind, name)])))
                    continue
                if name in section and section[name] != spec:
                    problems.append((path, conflict(
                        [kind, name], spec, path, section[name],
                        origin[(kind, name)]) + (
                            '. ' + SAME_NAME if kind == 'hosts' else '')))
                    continue
                section[name] = spec
                origin.setdefault((kind, name), path)
                if kind == 'hosts' and origins is not None:
                    origins.setdefault(name, path)
    if problems:
        raise errors.TopologyError(problems)
    if 'boards' in merged:
        merged = dict(merged, boards=merged.pop('boards'))
    return merged


def _once(paths):
    """``paths`` without a file given again (same file, any spelling)."""
    seen = set()
    for path in paths:
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            yield path


SAME_NAME = ('Two hosts that report the same name (cloned images, '
             'containers) need hypervisor_hostname set per host to Nova\'s '
             'name for each')


def twice(name, other):
    """Host ``name`` is also, identically, in the fragment ``other``."""
    return ('%s is also in %s, identically: each host must come from one '
            'fragment (drop one if the same host was given twice). %s' % (
                documents.keypath(['hosts', name]), other, SAME_NAME))


def _outside(relpath, out_dir, output, gpus_file_dirs):
    """Why the merged file cannot name the GPU map ``relpath``, or None."""
    path, allowed = loader.resolve_gpus_file(out_dir, relpath,
                                             gpus_file_dirs)
    if allowed:
        return None
    return ('the GPU map %s is outside %s, the directory of the merged file '
            '%s, which could then not read it: write the merged file (-o) '
            'in %s or a directory above it, or allow the map\'s directory '
            'with %s' % (
                loader.show_path(path), loader.show_path(out_dir),
                loader.show_path(output),
                loader.show_path(os.path.dirname(os.path.realpath(path))),
                loader.gpus_file_dir_hint(path)))


_MISSING = object()
MAX_SHOWN = 3


def _differences(parts, here, there):
    """Key paths where ``here`` and ``there`` differ, with both values."""
    if isinstance(here, dict) and isinstance(there, dict):
        found = []
        for key in list(there) + [k for k in here if k not in there]:
            found += _differences(parts + [key], here.get(key, _MISSING),
                                  there.get(key, _MISSING))
        return found
    if here == there:
        return []
    return [(parts, here, there)]


def _show(value):
    return 'not set' if value is _MISSING else documents.short(value)


def conflict(parts, here, source, there, other):
    """The message for one entry two fragments define differently.

    Names the key paths that differ (at most :data:`MAX_SHOWN`) with the
    value in each file: ``hosts.c1 differs from the one in a.yaml:
    hosts.c1.board: 'hgx-b200-8gpu' in b.yaml, 'hgx-h100-8gpu' in
    a.yaml``.
    """
    found = _differences(parts, here, there)
    shown = ['%s: %s in %s, %s in %s' % (
        documents.keypath(where), _show(mine), source, _show(theirs), other)
        for where, mine, theirs in found[:MAX_SHOWN]]
    if len(found) > MAX_SHOWN:
        shown.append('and %d more' % (len(found) - MAX_SHOWN))
    return '%s differs from the one in %s: %s' % (
        documents.keypath(parts), other, '; '.join(shown))
