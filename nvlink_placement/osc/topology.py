"""``openstack nvlink topology validate|show``."""

import yaml

from nvlink_placement import documents
from nvlink_placement import errors
from nvlink_placement import hostnames
from nvlink_placement.osc import commands
from nvlink_placement.osc import display
from nvlink_placement.topology import loader
from nvlink_placement.topology import merge
from nvlink_placement.topology import passthrough

SHOW_COLUMNS = ('host', 'group', 'size', 'trait', 'members', 'modules',
                'mesh')
VALIDATE_FIELDS = ('file', 'valid', 'hosts', 'gpus', 'groups', 'problems',
                   'warnings')
TOPOLOGY_HELP = 'Topology file (YAML or JSON, version 1).'
STRICT_HELP = ('Treat the coverage warnings (a host listing fewer GPUs than '
               'its board, or none of the NVLink groups its board has) as '
               'problems: exit 1%s.')


def add_strict_argument(parser, what=''):
    parser.add_argument('--strict', action='store_true',
                        help=STRICT_HELP % what)


def coverage_lines(topology, where):
    """The topology's warnings as ``FILE: hosts.NAME: message`` lines.

    :param where: function host name -> the file to name for it.
    """
    return ['%s: %s: %s' % (where(name), documents.keypath(['hosts', name]),
                            message)
            for name, message in topology.warnings]


def warn(stderr, lines):
    for line in lines:
        stderr.write('warning: %s\n' % line)


def gpus_file_dirs(app):
    """The directories of ``--os-nvlink-gpus-file-dir`` (see :mod:`.plugin`).

    A topology's ``gpus_file`` may come from them besides the topology
    file's own directory.
    """
    return getattr(app.options, 'os_nvlink_gpus_file_dir', None) or ()


def load_topology(app, path):
    """Load the topology file ``path`` (:func:`loader.load`)."""
    return loader.load(path, gpus_file_dirs(app))


def add_topology_file_argument(parser):
    """The topology file: positional FILE or ``--topology FILE``.

    ``--topology`` as every other command takes it; the positional form
    stays for the commands that always had it.
    """
    parser.add_argument('topology_file', metavar='FILE', nargs='?',
                        help=TOPOLOGY_HELP + ' Or --topology FILE.')
    parser.add_argument('--topology', metavar='FILE',
                        help='The same as FILE.')


def topology_path(parsed_args):
    """The topology file given as FILE or ``--topology``.

    :raises NvlinkError: none given, or two different ones.
    """
    positional, option = parsed_args.topology_file, parsed_args.topology
    if positional and option and positional != option:
        raise errors.UsageError('two topology files: FILE %s and '
                                '--topology %s; give one'
                                % (positional, option))
    if not (positional or option):
        raise errors.UsageError('no topology file: give FILE or '
                                '--topology FILE')
    return positional or option


class ValidateTopology(commands.TextByDefault, commands.ShowOne):
    """Validate a topology file and report every problem with its location.

    Exits 0 and prints a one-line summary when the file is valid; exits 1
    listing each problem as ``FILE: key.path: message`` otherwise. With
    ``-f json`` (or yaml...): file, valid, hosts, gpus, groups, problems
    (a list of those lines; also on standard error) and warnings.

    A GPU Nova cannot pass through (a PCI domain above 0xffff, behind
    Intel VMD; Nova 34's address limits) is a problem unless it is marked
    excluded.

    A valid file can still leave GPUs out of their NVLink domains: a host
    of a board that lists fewer GPUs than the board, a host of a board with
    NVLink domains that gets none, a host with NVSwitches but no groups and
    no board (host inspection without Fabric Manager or --board). Each is
    a warning on standard error (``warning: FILE: hosts.NAME: ...``); the
    exit status stays 0 unless --strict.
    """

    auth_required = False
    exit_code = 0

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        add_topology_file_argument(parser)
        add_strict_argument(parser)
        return parser

    def run(self, parsed_args):
        super().run(parsed_args)
        return self.exit_code

    def take_action(self, parsed_args):
        path = topology_path(parsed_args)
        try:
            topology = load_topology(self.app, path)
            passthrough.check(topology.hosts.values(), path)
        except errors.TopologyError as exc:
            if self.as_text:
                raise
            self.app.stderr.write('%s\n' % exc)
            self.exit_code = 1
            return VALIDATE_FIELDS, (path, False, None, None, None,
                                     str(exc).splitlines(), [])
        warnings = coverage_lines(topology, lambda name: path)
        if warnings and parsed_args.strict:
            exc = errors.TopologyError([
                ('%s: %s' % (path, documents.keypath(['hosts', name])),
                 message) for name, message in topology.warnings])
            if self.as_text:
                raise exc
            self.app.stderr.write('%s\n' % exc)
            self.exit_code = 1
            return VALIDATE_FIELDS, (path, False, None, None, None,
                                     warnings, [])
        warn(self.app.stderr, warnings)
        groups = sum(len(h.groups) for h in topology.hosts.values())
        gpus = sum(len(h.gpus) for h in topology.hosts.values())
        self.summary = '%s: valid: %s, %s, %s\n' % (
            path, display.plural(len(topology.hosts), 'host'),
            display.plural(gpus, 'GPU'), display.plural(groups, 'group'))
        return VALIDATE_FIELDS, (path, True, len(topology.hosts), gpus,
                                 groups, [], warnings)

    def produce_output(self, parsed_args, column_names, data):
        if self.as_text:
            self.app.stdout.write(self.summary)
            return 0
        return super().produce_output(parsed_args, column_names, data)


class ShowTopology(commands.Lister):
    """Show the NVLink groups a topology file defines, one row per group.

    ``members`` are normalized PCI addresses; ``modules`` the module ids
    in the same order (empty where unknown). ``trait`` lists every size
    trait the group provider carries (several for a mesh: any N of its
    GPUs are linked), a list in JSON and YAML like ``members``; ``mesh``
    says whether the group is a mesh. Groups that hold every GPU of a host
    (unless they are meshes), and single GPUs, create no provider and are
    not listed.
    """

    auth_required = False

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        add_topology_file_argument(parser)
        parser.add_argument('--host', metavar='HOST', action='append',
                            default=[], help='Only this host (repeatable).')
        return parser

    def take_action(self, parsed_args):
        topology = load_topology(self.app, topology_path(parsed_args))
        rows = []
        for host in select_hosts(topology, parsed_args.host):
            for group in host.groups:
                rows.append((host.name, group.name, group.size,
                             display.InOrder(group.traits),
                             display.InOrder(group.members),
                             display.InOrder(
                                 [m for m in group.modules if m is not None]),
                             bool(group.mesh)))
        return SHOW_COLUMNS, rows


class MergeTopology(commands.Command):
    """Merge topology fragments (from host inspect) into one topology file.

    A host in two fragments is an error naming both files, identical or
    not (where they differ the error shows both values): two hosts that
    report the same name would otherwise become one. The same file given
    twice is read once. The merged document is validated before it is
    written: nothing is written when anything is wrong. Without -o (or
    with -o -) it goes to standard output, the summary line to standard
    error (with -o FILE too). Hosts that cover less than their board (see
    topology validate) are warnings on standard error, naming the
    fragment; with --strict they are errors and nothing is written.
    """

    auth_required = False

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('fragments', metavar='FRAGMENT', nargs='+',
                            help='Topology files or fragments (YAML/JSON).')
        parser.add_argument('-o', '--output', metavar='FILE', default='-',
                            help='Merged topology file to write (YAML; '
                                 'default -, standard output).')
        add_strict_argument(parser, ' and write nothing')
        return parser

    def take_action(self, parsed_args):
        output = parsed_args.output
        to_stdout = output == '-'
        # gpus_file paths are made relative to where the file will be.
        target = '<stdout>' if to_stdout else output
        origins = {}
        document = merge.merge(parsed_args.fragments,
                               'merged.yaml' if to_stdout else output,
                               gpus_file_dirs(self.app),
                               shown='on standard output' if to_stdout
                               else None, origins=origins)
        try:
            topology = loader.parse(document, target,
                                    gpus_file_dirs(self.app))
        except errors.TopologyError as exc:
            raise errors.TopologyError(
                [(_in_fragment(where, target, origins), message)
                 for where, message in exc.problems])
        if topology.warnings and parsed_args.strict:
            raise errors.TopologyError([
                ('%s: %s' % (origins[name], documents.keypath(
                    ['hosts', name])), message)
                for name, message in topology.warnings])
        warn(self.app.stderr, coverage_lines(topology, origins.get))
        text = yaml.safe_dump(document, sort_keys=False,
                              default_flow_style=False)
        summary = '%s: %s from %s\n' % (
            target, display.plural(len(topology.hosts), 'host'),
            display.plural(len(parsed_args.fragments), 'fragment'))
        if to_stdout:
            self.app.stdout.write(text)
            self.app.stderr.write(summary)
            return
        try:
            with open(output, 'w', encoding='utf-8') as f:
                f.write(text)
        except OSError as exc:
            raise errors.NvlinkError('%s: %s' % (output,
                                                 exc.strerror or exc))
        self.app.stderr.write(summary)


def _in_fragment(where, target, origins):
    """``where`` in the merged file ``target`` as in its host's fragment.

    A host's problem (``TARGET: hosts.NAME...``) is the fragment's that
    brought it (``origins``: host name -> fragment path); anything else
    stays as it is.
    """
    for name, fragment in origins.items():
        host = '%s: %s' % (target, documents.keypath(['hosts', name]))
        if where.startswith(host) and where[len(host):][:1] in (
                '', '.', '['):
            return fragment + where[len(target):]
    return where


def select_hosts(topology, names):
    """Hosts of ``topology`` named in ``names`` (all when empty).

    :raises NvlinkError: for a host the topology does not have.
    """
    try:
        return topology.select(names)
    except KeyError as exc:
        name = exc.args[0]
        raise errors.NvlinkError('%s: no host %r in the topology%s' % (
            topology.source, name,
            hostnames.known_hint(name, topology.hosts)))
