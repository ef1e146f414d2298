"""Merge topology fragments (one per host, from host inspection) into one.

A host present in two fragments is an error unless both entries are
identical; so is a board defined twice differently, or two different
``group_trait_prefix`` values. ``gpus_file`` paths are rewritten to stay
valid relative to the merged file.
"""

import os

from nvlink_placement import documents
from nvlink_placement import errors
from nvlink_placement.topology import loader


def merge(paths, output):
    """Merge the topology files ``paths`` into one document.

    :param output: path the merged document will be written to (for
        ``gpus_file`` paths).
    :returns: the merged document (dict); validate it with
        :func:`nvlink_placement.topology.loader.parse` before writing.
    :raises TopologyError: naming both files for every conflict.
    """
    merged = {'version': 1, 'hosts': {}}
    origin = {}
    problems = []
    out_dir = os.path.dirname(os.path.abspath(output))
    for path in paths:
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
                section = merged.setdefault(kind, {})
                if name in section and section[name] != spec:
                    problems.append((path, conflict(
                        [kind, name], spec, path, section[name],
                        origin[(kind, name)])))
                    continue
                section[name] = spec
                origin.setdefault((kind, name), path)
    if problems:
        raise errors.TopologyError(problems)
    if 'boards' in merged:
        merged = dict(merged, boards=merged.pop('boards'))
    return merged


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
