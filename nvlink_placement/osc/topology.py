"""``openstack nvlink topology validate|show``."""

import yaml

from nvlink_placement import errors
from nvlink_placement import hostnames
from nvlink_placement.osc import common
from nvlink_placement.topology import loader
from nvlink_placement.topology import merge

SHOW_COLUMNS = ('host', 'group', 'size', 'trait', 'members', 'modules',
                'mesh')
VALIDATE_FIELDS = ('file', 'valid', 'hosts', 'gpus', 'groups', 'problems')
TOPOLOGY_HELP = 'Topology file (YAML or JSON, version 1).'


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


class ValidateTopology(common.TextByDefault, common.ShowOne):
    """Validate a topology file and report every problem with its location.

    Exits 0 and prints a one-line summary when the file is valid; exits 1
    listing each problem as ``FILE: key.path: message`` otherwise. With
    ``-f json`` (or yaml...): file, valid, hosts, gpus, groups and
    problems (a list of those lines; also on standard error).
    """

    auth_required = False
    exit_code = 0

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        add_topology_file_argument(parser)
        return parser

    def run(self, parsed_args):
        super().run(parsed_args)
        return self.exit_code

    def take_action(self, parsed_args):
        path = topology_path(parsed_args)
        try:
            topology = common.load_topology(self.app, path)
        except errors.TopologyError as exc:
            if self.as_text:
                raise
            self.app.stderr.write('%s\n' % exc)
            self.exit_code = 1
            return VALIDATE_FIELDS, (path, False, None, None, None,
                                     str(exc).splitlines())
        for line in partial_boards(topology):
            self.app.stderr.write(line + '\n')
        groups = sum(len(h.groups) for h in topology.hosts.values())
        gpus = sum(len(h.gpus) for h in topology.hosts.values())
        self.summary = '%s: valid: %s, %s, %s\n' % (
            path, common.plural(len(topology.hosts), 'host'),
            common.plural(gpus, 'GPU'), common.plural(groups, 'group'))
        return VALIDATE_FIELDS, (path, True, len(topology.hosts), gpus,
                                 groups, [])

    def produce_output(self, parsed_args, column_names, data):
        if self.as_text:
            self.app.stdout.write(self.summary)
            return 0
        return super().produce_output(parsed_args, column_names, data)


def partial_boards(topology):
    """Notes for hosts that list only some GPUs of their catalogue board.

    Such a file is valid (host inspection may miss a GPU: ``check`` then
    reports the GPU Nova has as ``unknown-gpu``), but worth a word.
    """
    from nvlink_placement.topology import boards
    lines = []
    for host in topology.hosts.values():
        if host.board is None or host.board not in boards.names():
            continue
        board = boards.get(host.board)
        listed = {g.module_id for g in host.gpus.values()}
        missing = [m for m in board.gpus if m not in listed]
        if missing and listed:
            lines.append(
                '%s: host %s lists %d of the %d GPUs of board %s (modules %s '
                'missing): their domains are partial, and a GPU Nova reports '
                'there that the file does not list is drift (unknown-gpu)'
                % (topology.source, host.name, len(board.gpus) -
                   len(missing), len(board.gpus), board.name,
                   ', '.join(map(str, missing))))
    return lines


class ShowTopology(common.Lister):
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
        topology = common.load_topology(self.app, topology_path(parsed_args))
        rows = []
        for host in select_hosts(topology, parsed_args.host):
            for group in host.groups:
                rows.append((host.name, group.name, group.size,
                             common.InOrder(group.traits),
                             common.InOrder(group.members),
                             common.InOrder(
                                 [m for m in group.modules if m is not None]),
                             bool(group.mesh)))
        return SHOW_COLUMNS, rows


class MergeTopology(common.Command):
    """Merge topology fragments (from host inspect) into one topology file.

    A host in two fragments is an error unless both are identical; the
    error shows both values and the files they come from. The merged
    document is validated before it is written: nothing is written when
    anything is wrong. Without -o (or with -o -) it goes to standard
    output, the summary line to standard error.
    """

    auth_required = False

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('fragments', metavar='FRAGMENT', nargs='+',
                            help='Topology files or fragments (YAML/JSON).')
        parser.add_argument('-o', '--output', metavar='FILE', default='-',
                            help='Merged topology file to write (YAML; '
                                 'default -, standard output).')
        return parser

    def take_action(self, parsed_args):
        output = parsed_args.output
        to_stdout = output == '-'
        # gpus_file paths are made relative to where the file will be.
        target = '<stdout>' if to_stdout else output
        document = merge.merge(parsed_args.fragments,
                               'merged.yaml' if to_stdout else output,
                               common.gpus_file_dirs(self.app),
                               shown='on standard output' if to_stdout
                               else None)
        topology = loader.parse(document, target,
                                common.gpus_file_dirs(self.app))
        text = yaml.safe_dump(document, sort_keys=False,
                              default_flow_style=False)
        summary = '%s: %s from %s\n' % (
            target, common.plural(len(topology.hosts), 'host'),
            common.plural(len(parsed_args.fragments), 'fragment'))
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
        self.app.stdout.write(summary)


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
