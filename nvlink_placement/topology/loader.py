"""Load and validate topology files (format version 1, design.rst s3).

:func:`load` reads YAML or JSON, checks it against
:data:`nvlink_placement.topology.schema.TOPOLOGY` (:mod:`.schema_check`),
then checks what a schema cannot say (laminar groups, module ids on the
board, duplicate addresses, RP name lengths) and builds a
:class:`nvlink_placement.topology.model.Topology`. All problems are
collected and raised together as one
:class:`nvlink_placement.errors.TopologyError`, each naming the file and
the key path, e.g. ``hosts.compute-01.gpus["0000:19:00.0"]``.
"""

import difflib
import os

from nvlink_placement import documents
from nvlink_placement import errors
from nvlink_placement.topology import boards as catalog
from nvlink_placement.topology import coverage
from nvlink_placement.topology import laminar
from nvlink_placement.topology import members
from nvlink_placement.topology import model
from nvlink_placement.topology import pci
from nvlink_placement.topology import schema
from nvlink_placement.topology import schema_check


# Longest gpus_file accepted, and longest name in it (Linux NAME_MAX).
MAX_PATH = 1024
MAX_NAME = 255


def read_document(path):
    """Parse a YAML or JSON file into Python data.

    One reader for every input file (:func:`documents.load`): bounded
    size and nesting, UTF-8, no YAML aliases, string keys given once.

    :raises TopologyError: naming the file and the line or key path.
    """
    try:
        return documents.load(path)
    except documents.DocumentError as exc:
        raise errors.TopologyError([(exc.location, exc.reason)])


def _is_address(text):
    try:
        pci.normalize_address(text)
    except ValueError:
        return False
    return True


def _module_id(value):
    if isinstance(value, dict):
        value = value.get('module_id')
    return None if value is None else int(value)


#: Longest path shown whole in a message; a longer one is cut at the end.
SHOWN_PATH = 500


def show_path(path):
    """``path`` for a message: whole, control characters escaped.

    Paths are the operator's data: only one longer than
    :data:`SHOWN_PATH` is cut, at the end.
    """
    if not path.isprintable():
        path = repr(path)[1:-1]
    return documents.clip(path, SHOWN_PATH)


def resolve_gpus_file(base, relpath, gpus_file_dirs=()):
    """Where a ``gpus_file`` leads, and whether it may be read.

    :param base: the topology file's directory.
    :returns: ``(path, allowed)``: the normalized path, and whether it
        resolves (symbolic links followed) inside ``base`` or one of
        ``gpus_file_dirs``.
    """
    path = os.path.normpath(os.path.join(base, relpath))
    real = os.path.realpath(path)
    for allowed in (base,) + tuple(gpus_file_dirs):
        allowed = os.path.realpath(allowed)
        if os.path.commonpath([allowed, real]) == allowed:
            return path, True
    return path, False


def gpus_file_dir_hint(path):
    """How to allow the GPU map ``path``'s directory (a global option)."""
    directory = show_path(os.path.dirname(os.path.realpath(path)))
    return ('the global option --os-nvlink-gpus-file-dir, given before '
            '"nvlink": openstack --os-nvlink-gpus-file-dir %s nvlink ...'
            % directory)


def load(path, gpus_file_dirs=()):
    """Load and validate the topology file at ``path``.

    :param gpus_file_dirs: directories besides the topology file's own
        from which ``gpus_file`` may be read (see :func:`parse`).
    :returns: :class:`nvlink_placement.topology.model.Topology`.
    :raises TopologyError: listing every problem found.
    """
    return parse(read_document(path), path, gpus_file_dirs)


def parse(document, source='<topology>', gpus_file_dirs=()):
    """Validate a topology document already parsed into Python data.

    ``gpus_file`` paths are relative to the directory of ``source`` and,
    symbolic links resolved, must stay inside it or inside one of
    ``gpus_file_dirs``: a topology from elsewhere cannot make the tool
    read (and quote) any file it can read.
    """
    if (isinstance(document, dict) and 'hosts' not in document and
            document.get('format') == 'nvlink-placement-snapshot'):
        raise errors.TopologyError([(source, (
            'a Placement snapshot, not a topology file (version 1 with '
            '"hosts"); give the snapshot to --snapshot'))])
    found = schema_check.problems(document, schema.TOPOLOGY)
    problems = [('%s: %s' % (source, documents.keypath(parts))
                 if parts else source, message)
                for parts, message, _ in found]
    if found:
        document = schema_check.accepted_part(document, found)
        if document is None:
            raise errors.TopologyError(problems)
    checker = _Checker(source, gpus_file_dirs)
    topology = checker.build(document)
    if problems or checker.problems:
        raise errors.TopologyError(problems + checker.problems)
    return topology


class _Checker(object):
    """Semantic checks; collects problems instead of stopping at one."""

    def __init__(self, source, gpus_file_dirs=()):
        self.source = source
        self.gpus_file_dirs = tuple(gpus_file_dirs)
        self.problems = []
        self.warnings = []

    def problem(self, parts, message, source=None):
        where = documents.keypath(parts)
        src = source or self.source
        self.problems.append(('%s: %s' % (src, where) if where else src,
                              message))

    def build(self, document):
        prefix = document.get('group_trait_prefix',
                              model.DEFAULT_TRAIT_PREFIX)
        self.trait_prefix(prefix)
        boards = self.boards(document.get('boards', {}))
        hosts = {}
        for name, spec in document['hosts'].items():
            host = self.host(name, spec, boards, prefix)
            if host is not None:
                hosts[name] = host
        self.trait_lengths(hosts.values(), prefix)
        return model.Topology(self.source, prefix, hosts, self.warnings)

    def trait_prefix(self, prefix):
        """A prefix must make traits that read back one way only.

        Size traits are ``<prefix><size>`` and member traits
        ``<prefix><size>_MEMBER<index>`` (:mod:`.members`): after a prefix
        ending in a digit, ``CUSTOM_NVL2`` + 4 is ``CUSTOM_NVL24``, which
        is also ``CUSTOM_NVL`` + 24, and ``CUSTOM_NVL22_MEMBER0`` reads as
        size 22. A prefix holding ``_MEMBER`` makes size traits that read
        as member traits.
        """
        if prefix[-1:].isdigit():
            self.problem(['group_trait_prefix'], (
                '%s ends in a digit, so its traits read two ways (%s + 4 = '
                '%s4, also a trait of size %s4; member trait %s2_MEMBER0 '
                'reads as size %s2): end it with a letter or "_", e.g. %s_'
                % (prefix, prefix, prefix, prefix[-1], prefix, prefix[-1],
                   prefix)))
        elif members.SEPARATOR in prefix:
            self.problem(['group_trait_prefix'], (
                '%s holds %s, which separates size and index in member '
                'traits (%s2%s0): choose a prefix without it'
                % (prefix, members.SEPARATOR, prefix, members.SEPARATOR)))

    def trait_lengths(self, hosts, prefix):
        """Every trait the topology makes fits Placement's 255 characters.

        The group (size) traits and the member traits of every host, the
        largest size and index included; the longest is named. nova-compute
        writes the member traits from ``[pci] device_spec``: one too long
        fails every provider update of that host.
        """
        longest, where = '', None
        for host in hosts:
            made = [t for g in host.groups for t in g.traits]
            made += [t for ts in members.traits(host, prefix).values()
                     for t in ts]
            for trait in made:
                if (len(trait), trait) > (len(longest), longest):
                    longest, where = trait, host.name
        if len(longest) > model.MAX_TRAIT_NAME:
            self.problem(['group_trait_prefix'], (
                'host %s makes trait %s, %d characters; Placement allows %d: '
                'shorten the prefix to at most %d characters' % (
                    where, longest if len(longest) <= 2 * model.MAX_TRAIT_NAME
                    else documents.short(longest), len(longest),
                    model.MAX_TRAIT_NAME,
                    len(prefix) - len(longest) + model.MAX_TRAIT_NAME)))

    def boards(self, specs):
        result = {}
        for name, spec in specs.items():
            at = ['boards', name]
            gpus = spec['gpus']
            if len(set(gpus)) != len(gpus):
                self.problem(at + ['gpus'], 'module ids repeat')
            groups, meshes = [], []
            for i, group in enumerate(spec['groups']):
                mesh = isinstance(group, dict) and group.get('mesh', False)
                group = group['members'] if isinstance(group, dict) else group
                unknown = sorted(set(group) - set(gpus))
                if unknown:
                    self.problem(at + ['groups', i],
                                 'module ids %s are not in gpus' % unknown)
                if len(set(group)) != len(group):
                    self.problem(at + ['groups', i], 'module ids repeat')
                groups.append(tuple(sorted(set(group))))
                if mesh:
                    meshes.append(groups[-1])
            self.check_family(at + ['groups'], groups,
                              [g in meshes for g in groups], list)
            result[name] = catalog.Board(name, tuple(gpus), tuple(groups),
                                         (), (), tuple(meshes))
        return result

    def check_family(self, at, sets, meshes, show):
        """Groups are laminar and no mesh holds another group."""
        for i, j in laminar.conflicts(sets):
            self.problem(at + [j], 'group %s crosses group %d %s: NVLink '
                         'groups must be disjoint or nested'
                         % (show(sets[j]), i, show(sets[i])))
        for i, outer in enumerate(sets):
            for j, inner in enumerate(sets):
                if meshes[i] and i != j and set(inner) < set(outer):
                    self.problem(at + [j], 'group %s lies inside mesh %d %s,'
                                 ' which already makes any %d of its GPUs '
                                 'an NVLink domain: drop the group'
                                 % (show(inner), i, show(outer),
                                    len(inner)))

    def board(self, name, boards, at):
        if name in boards:
            return boards[name]
        try:
            return catalog.get(name)
        except KeyError:
            known = sorted(boards) + catalog.names()
            close = difflib.get_close_matches(str(name), known, n=3,
                                              cutoff=0.6)
            self.problem(at, 'unknown board %s; %s' % (
                documents.short(name),
                'did you mean %s?' % ' or '.join(close) if close else
                'boards defined in the file: %s; built-in: %s' % (
                    ', '.join(sorted(boards)) or 'none',
                    ', '.join(catalog.names()))))
            return None

    def gpus(self, name, spec):
        at = ['hosts', name]
        entries = []  # (raw key, value, key path parts, source file)
        if 'gpus' in spec and 'gpus_file' in spec:
            self.problem(at, 'give either gpus or gpus_file, not both')
        if 'gpus' in spec:
            entries = [(k, v, at + ['gpus', k], None)
                       for k, v in spec['gpus'].items()]
        elif 'gpus_file' in spec:
            entries = self.mapping_file(spec['gpus_file'], at + ['gpus_file'])
        gpus = {}
        self.where = {}
        for raw, value, parts, src in entries:
            try:
                address = pci.normalize_address(raw)
            except ValueError as exc:
                self.problem(parts, str(exc), src)
                continue
            if address in gpus:
                self.problem(parts, 'address %s appears twice on this host'
                             % address, src)
                continue
            details = dict(value) if isinstance(value, dict) else {}
            details.pop('module_id', None)
            for key in ('vendor_id', 'device_id'):
                if isinstance(details.get(key), str):
                    try:
                        details[key] = pci.normalize_id(details[key])
                    except ValueError as exc:
                        self.problem(parts + [key], str(exc), src)
            gpus[address] = model.Gpu(address, _module_id(value), details)
            self.where[address] = (parts, src)
        return gpus

    def gpus_file(self, relpath, parts):
        """The path of a ``gpus_file``, or None when it is not allowed."""
        base = os.path.dirname(os.path.abspath(self.source))
        if '\0' in relpath or len(relpath) > MAX_PATH or any(
                len(name) > MAX_NAME for name in relpath.split(os.sep)):
            self.problem(parts, '%s is not a file name'
                         % documents.short(relpath))
            return None
        path, allowed = resolve_gpus_file(base, relpath, self.gpus_file_dirs)
        if allowed:
            return path
        self.problem(parts, '%s is outside %s, the directory of the topology '
                     'file: move it there, or allow its directory with %s'
                     % (show_path(relpath), base, gpus_file_dir_hint(path)))
        return None

    def mapping_file(self, relpath, parts):
        path = self.gpus_file(relpath, parts)
        if path is None:
            return []
        try:
            document = read_document(path)
        except errors.TopologyError as exc:
            for loc, msg in exc.problems:
                self.problem(parts, '%s: %s' % (loc, msg))
            return []
        # Never quote a file that is no GPU map at all: it may be anything.
        if not isinstance(document, dict):
            self.problems.append((path, 'expected a mapping of PCI address '
                                  'to module id, got %s'
                                  % documents.kind(document)))
            return []
        if document and not any(map(_is_address, document)):
            self.problems.append((path, 'expected a mapping of PCI address '
                                  'to module id; none of its %d keys is a '
                                  'PCI address' % len(document)))
            return []
        found = schema_check.located(document, schema.MODULE_MAPPING)
        for where, msg in found:
            self.problems.append(('%s: %s' % (path, where) if where else path,
                                  msg))
        if found:
            return []
        return [(k, v, [k], path) for k, v in document.items()]

    def host(self, name, spec, boards, prefix):
        at = ['hosts', name]
        known_problems = len(self.problems)
        gpus = self.gpus(name, spec)
        domains = []
        board = None
        if 'board' in spec:
            board = self.board(spec['board'], boards, at + ['board'])
            if board is not None:
                domains = self.board_domains(name, spec, board, gpus)
        if 'groups' in spec:
            explicit = self.explicit_domains(name, spec['groups'], gpus)
            if board is not None and 'groups' in spec:
                self.agree(name, board, domains, explicit, gpus)
            domains = explicit
        excluded = {a for a, gpu in gpus.items() if gpu.excluded}
        # Excluded GPUs leave their domains; names and sizes stay nominal.
        domains = [d._replace(members=tuple(
            a for a in d.members if a not in excluded)) for d in domains]
        groups = model.build_groups(name, domains, gpus, prefix)
        for group in groups:
            if len(group.name) > model.MAX_PROVIDER_NAME:
                self.problem(at, 'resource provider name %s is %d '
                             'characters; Placement allows %d'
                             % (documents.short(group.name), len(group.name),
                                model.MAX_PROVIDER_NAME))
                break
        for address in gpus:
            rp_name = pci.nova_provider_name(name, address)
            if len(rp_name) > model.MAX_PROVIDER_NAME:
                self.problem(at + ['gpus', address],
                             'Nova resource provider name %s is over %d '
                             'characters' % (documents.short(rp_name),
                                             model.MAX_PROVIDER_NAME))
        if not gpus and len(self.problems) == known_problems:
            self.no_gpus(name, spec)
        if len(self.problems) == known_problems:
            self.warnings.extend(
                (name, message) for message in coverage.host_warnings(
                    board, gpus, groups, spec.get('nvswitches', ())))
        return model.Host(name, board.name if board else None, gpus, groups)

    def no_gpus(self, name, spec):
        """A host with no GPUs at all is an error, never a silent flatten.

        Reshaping it would move every GPU back under the compute node and
        delete its groups: ``flatten --host`` says that on purpose.
        """
        at = ['hosts', name]
        if 'gpus_file' in spec:
            at.append('gpus_file')
            what = '%s holds no GPUs' % os.path.join(
                os.path.dirname(os.path.abspath(self.source)),
                spec['gpus_file'])
        elif 'gpus' in spec:
            at.append('gpus')
            what = 'the GPU mapping is empty'
        else:
            what = 'no GPUs (give gpus, gpus_file or groups)'
        self.problem(at, '%s: reshape would move every GPU of %s back under '
                     'the compute node and delete its NVLink groups. To do '
                     'that on purpose run "openstack nvlink flatten --host '
                     '%s"' % (what, name, name))

    def board_domains(self, name, spec, board, gpus):
        if not gpus:
            if 'gpus' not in spec and 'gpus_file' not in spec:
                self.problem(['hosts', name], 'a host with a board needs '
                             'gpus or gpus_file (PCI address -> module id)')
            return []
        by_module = {}
        for address, gpu in gpus.items():
            parts, src = self.where[address]
            if gpu.module_id is None:
                self.problem(parts, 'no module id; board %s groups GPUs by '
                             'module id' % board.name, src)
            elif gpu.module_id not in board.gpus:
                self.problem(parts, 'module id %d is not on board %s (module '
                             'ids %s)' % (gpu.module_id, board.name,
                                          ', '.join(map(str, board.gpus))),
                             src)
            elif gpu.module_id in by_module:
                self.problem(parts, 'module id %d is also given to %s'
                             % (gpu.module_id, by_module[gpu.module_id]),
                             src)
            else:
                by_module[gpu.module_id] = address
        return [model.Domain(tuple(by_module[m] for m in group
                                   if m in by_module),
                             len(group), 'board', (0, min(group)),
                             group in board.meshes)
                for group in board.groups]

    def explicit_domains(self, name, groups, gpus):
        at = ['hosts', name, 'groups']
        domains = []
        implicit = not gpus
        for i, group in enumerate(groups):
            source, mesh = 'file', False
            if isinstance(group, dict):
                source = group.get('source', 'file')
                mesh = group.get('mesh', False)
                members_at = at + [i, 'members']
                group = group['members']
            else:
                members_at = at + [i]
            members = []
            for j, raw in enumerate(group):
                try:
                    address = pci.normalize_address(raw)
                except ValueError as exc:
                    self.problem(members_at + [j], str(exc))
                    continue
                if address in members:
                    self.problem(members_at + [j], 'address %s repeats in '
                                 'this group' % address)
                    continue
                if address not in gpus:
                    if not implicit:
                        self.problem(members_at + [j], 'address %s is not '
                                     'in this host\'s gpus' % address)
                        continue
                    gpus[address] = model.Gpu(address)
                members.append(address)
            modules = [gpus[a].module_id for a in members]
            if members and None not in modules:
                order = (0, min(modules))
            else:
                order = (1, min((pci.address_sort_key(a) for a in members),
                                default=()))
            domains.append(model.Domain(tuple(members), len(group), source,
                                        order, mesh))
        self.check_family(at, [frozenset(d.members) for d in domains],
                          [d.mesh for d in domains],
                          lambda s: sorted(s, key=pci.address_sort_key))
        return domains

    def agree(self, name, board, board_domains, explicit, gpus):
        def family(domains):
            return {(frozenset(d.members), d.mesh) for d in domains
                    if 1 < len(d.members) and (d.mesh or
                                               len(d.members) < len(gpus))}
        if family(board_domains) != family(explicit):
            self.problem(['hosts', name, 'groups'],
                         'groups disagree with board %s mapped through the '
                         'module ids; fix the mapping or drop one of them'
                         % board.name)
