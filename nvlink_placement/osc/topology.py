"""``openstack nvlink topology validate|show``."""

import yaml

from nvlink_placement import errors
from nvlink_placement.osc import common
from nvlink_placement.topology import loader
from nvlink_placement.topology import merge

SHOW_COLUMNS = ('host', 'group', 'size', 'trait', 'members', 'modules')


class ValidateTopology(common.Command):
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
        topology = common.load_topology(self.app, parsed_args.topology)
        groups = sum(len(h.groups) for h in topology.hosts.values())
        gpus = sum(len(h.gpus) for h in topology.hosts.values())
        self.app.stdout.write('%s: valid: %d hosts, %d GPUs, %d groups\n' % (
            parsed_args.topology, len(topology.hosts), gpus, groups))


class ShowTopology(common.Lister):
    """Show the NVLink groups a topology file defines, one row per group.

    ``members`` are normalized PCI addresses; ``modules`` the module ids
    in the same order (empty where unknown). ``trait`` lists every size
    trait the group provider carries (several for a mesh: any N of its
    GPUs are linked). Groups that hold every GPU of a host (unless they are
    meshes), and single GPUs, create no provider and are not listed.
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
        topology = common.load_topology(self.app, parsed_args.topology)
        rows = []
        for host in select_hosts(topology, parsed_args.host):
            for group in host.groups:
                rows.append((host.name, group.name, group.size,
                             ','.join(group.traits),
                             common.InOrder(group.members),
                             common.InOrder(
                                 [m for m in group.modules if m is not None])))
        return SHOW_COLUMNS, rows


class MergeTopology(common.Command):
    """Merge topology fragments (from host inspect) into one topology file.

    A host in two fragments is an error unless both are identical. The
    merged document is validated before it is written: nothing is written
    when anything is wrong.
    """

    auth_required = False

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('fragments', metavar='FRAGMENT', nargs='+',
                            help='Topology files or fragments (YAML/JSON).')
        parser.add_argument('-o', '--output', metavar='FILE', required=True,
                            help='Merged topology file to write (YAML).')
        return parser

    def take_action(self, parsed_args):
        document = merge.merge(parsed_args.fragments, parsed_args.output)
        topology = loader.parse(document, parsed_args.output,
                                common.gpus_file_dirs(self.app))
        text = yaml.safe_dump(document, sort_keys=False,
                              default_flow_style=False)
        try:
            with open(parsed_args.output, 'w', encoding='utf-8') as f:
                f.write(text)
        except OSError as exc:
            raise errors.NvlinkError('%s: %s' % (parsed_args.output,
                                                 exc.strerror or exc))
        self.app.stdout.write('%s: %d hosts from %d fragments\n' % (
            parsed_args.output, len(topology.hosts),
            len(parsed_args.fragments)))


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
