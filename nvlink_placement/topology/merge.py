"""Merge topology fragments (one per host, from host inspection) into one.

A host present in two fragments is an error unless both entries are
identical; so is a board defined twice differently, or two different
``group_trait_prefix`` values. ``gpus_file`` paths are rewritten to stay
valid relative to the merged file.
"""

import os

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
            problems.append((path, 'not a topology document of version 1'))
            continue
        base = os.path.dirname(os.path.abspath(path))
        prefix = document.get('group_trait_prefix')
        if prefix is not None:
            if merged.setdefault('group_trait_prefix', prefix) != prefix:
                problems.append((path, 'group_trait_prefix %r differs from '
                                 '%r in %s' % (prefix,
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
                    problems.append((path, '%s.%s differs from the one in %s'
                                     % (kind, name, origin[(kind, name)])))
                    continue
                section[name] = spec
                origin.setdefault((kind, name), path)
    if problems:
        raise errors.TopologyError(problems)
    if 'boards' in merged:
        merged = dict(merged, boards=merged.pop('boards'))
    return merged
