"""``openstack nvlink topology validate|show``."""

from osc_lib.cli import format_columns
from osc_lib.command import command

from nvlink_placement import errors
from nvlink_placement.topology import loader

SHOW_COLUMNS = ('host', 'group', 'size', 'trait', 'members', 'modules')


class ValidateTopology(command.Command):
    """Validate a topology file and report every problem with its location.

    Exits 0 and prints a one-line summary when the file is valid; exits 1
    listing each problem as ``FILE: key.path: message`` otherwise.
    """

    auth_required = False

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('topology', metavar='FILE',
                            help='Topology file (YAML or JSON, version 1).')
        return parser

    def take_action(self, parsed_args):
        topology = loader.load(parsed_args.topology)
        groups = sum(len(h.groups) for h in topology.hosts.values())
        gpus = sum(len(h.gpus) for h in topology.hosts.values())
        self.app.stdout.write('%s: valid: %d hosts, %d GPUs, %d groups\n' % (
            parsed_args.topology, len(topology.hosts), gpus, groups))


class ShowTopology(command.Lister):
    """Show the NVLink groups a topology file defines, one row per group.

    ``members`` are normalized PCI addresses; ``modules`` the module ids
    in the same order (empty where unknown). Groups that hold every GPU of
    a host, and single GPUs, create no provider and are not listed.
    """

    auth_required = False

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('topology', metavar='FILE',
                            help='Topology file (YAML or JSON, version 1).')
        parser.add_argument('--host', metavar='HOST', action='append',
                            default=[], help='Only this host (repeatable).')
        return parser

    def take_action(self, parsed_args):
        topology = loader.load(parsed_args.topology)
        rows = []
        for host in select_hosts(topology, parsed_args.host):
            for group in host.groups:
                rows.append((host.name, group.name, group.size, group.trait,
                             format_columns.ListColumn(group.members),
                             format_columns.ListColumn(
                                 [m for m in group.modules if m is not None])))
        return SHOW_COLUMNS, rows


def select_hosts(topology, names):
    """Hosts of ``topology`` named in ``names`` (all when empty).

    :raises NvlinkError: for a host the topology does not have.
    """
    try:
        return topology.select(names)
    except KeyError as exc:
        raise errors.NvlinkError('%s: no host %s in the topology (hosts: %s)'
                                 % (topology.source, exc,
                                    ', '.join(topology.hosts) or 'none'))
