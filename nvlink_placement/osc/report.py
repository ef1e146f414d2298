"""``openstack nvlink capacity`` and ``openstack nvlink tree``."""

import logging

from cliff import columns


from nvlink_placement.osc import commands
from nvlink_placement.osc import display
from nvlink_placement.osc import live
from nvlink_placement.osc import offline
from nvlink_placement.osc import topology as topology_cmd
from nvlink_placement.placement import naming
from nvlink_placement.placement import state as state_mod
from nvlink_placement.placement import usage
from nvlink_placement.report import capacity
from nvlink_placement.report import tree
from nvlink_placement.topology import model

LOG = logging.getLogger(__name__)


def _read(client, hosts, prefix):
    """Read the selected trees and the usage of their GPUs.

    All trees holding PCI RPs are selected when ``hosts`` is empty.
    """
    state = state_mod.read(client, [naming.OWNER_TRAIT, naming.PCI_TRAIT],
                           trait_prefixes=[prefix,
                                           naming.MARKER_PREFIX])
    roots = state.select_roots(hosts)
    if not roots:
        LOG.warning('no GPU compute nodes in Placement (no tree holds a '
                    'Nova PCI provider, trait %s): nothing to show',
                    naming.PCI_TRAIT)
    return state, roots, usage.read(client, state, roots)


def _add_common(parser):
    parser.add_argument('--topology', metavar='FILE',
                        help='Topology file: NVLink domains and module ids '
                             'from it (default: from the group providers '
                             'in Placement).')
    parser.add_argument('--host', metavar='HOST', action='append',
                        default=[],
                        help='Compute host (repeatable; default: every tree '
                             'holding Nova PCI providers).')
    offline.add_placement_arguments(parser, save=False)
    live.add_retry_arguments(parser)


RESHAPED = 'reshaped'
NOT_RESHAPED = 'not reshaped'


def _topology(app, parsed_args):
    if not parsed_args.topology:
        return None, model.DEFAULT_TRAIT_PREFIX
    topology = topology_cmd.load_topology(app, parsed_args.topology)
    return topology, topology.trait_prefix


class Capacity(commands.Lister):
    """How many more instances of each size fit, per host and in total.

    One row per host and size (1, every NVLink domain size, the whole
    host): fits = fully free domains of that size (a mesh, where any N GPUs
    are linked, holds free // N), GPUs free / used / reserved, and
    broken_domains = domains of that size partly taken by smaller instances
    (fragmentation), stranded_gpus = free GPUs no instance of that size
    can use (free_gpus - size x fits), resource_class = the GPUs' model
    in Placement, and state: "reshaped", or "not reshaped" for a host
    whose GPUs Placement sees flat (no NVLink group providers: only sizes
    1 and whole-host can be counted there). In a fleet of several GPU
    models each host and size has one row per resource class (a host with
    two models gets rows for each, counting that model's GPUs and domains
    only), and rows with host "total" sum the cloud per resource class and
    size; their state counts the hosts not reshaped. Exit status 2 when
    any host is not reshaped. Costs two GETs per GPU.
    """

    auth_required = False
    exit_code = 0

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        _add_common(parser)
        return parser

    def run(self, parsed_args):
        super().run(parsed_args)
        return self.exit_code

    def take_action(self, parsed_args):
        topology, prefix = _topology(self.app, parsed_args)
        with offline.placement(self.app, parsed_args) as client:
            state, roots, uses = _read(client, parsed_args.host, prefix)
        hosts = capacity.hosts_from_state(state, uses, roots, topology,
                                          prefix)
        flat = capacity.not_reshaped(state, uses, roots)
        if flat:
            LOG.warning(
                '%s not reshaped (%s): no NVLink groups in Placement, so %s; '
                'run "openstack nvlink reshape"',
                display.plural(len(flat), 'host', 'hosts'), ', '.join(flat),
                'only sizes 1 and whole-host are listed' if topology is None
                else 'the domain sizes (from --topology) find no candidates '
                     'yet')
            self.exit_code = 2
        total = ('%d %s not reshaped' % (len(flat), 'host' if len(flat) == 1
                                         else 'hosts')
                 if flat else RESHAPED)
        return capacity.COLUMNS + ('state',), [
            row + ((total if row[0] == 'total' else NOT_RESHAPED
                    if row[0] in flat else RESHAPED),)
            for row in capacity.rows(hosts)]

    def produce_output(self, parsed_args, column_names, data):
        if not data and parsed_args.formatter == 'table':
            return 0    # no blank line: the warning said why
        return super().produce_output(parsed_args, column_names, data)


class _Blank(columns.FormattableColumn):
    """A value that may be None: empty in a table, null in JSON/YAML."""

    def human_readable(self):
        return '' if self._value is None else str(self._value)

    def machine_readable(self):
        return self._value


class Tree(commands.OwnOutput, commands.TextByDefault, commands.Lister):
    """Show the resource provider tree of each host, with GPU usage.

    Text: one line per provider with its group traits, module id (with
    --topology) and free / USED / RESERVED for GPUs. --dot prints Graphviz
    DOT instead; render it with "dot -Tsvg -o tree.svg". -f json|yaml|csv|
    value|table: one row per provider (host, provider, parent, depth,
    traits, module, status), in the order the text draws them.
    """

    auth_required = False
    own_output = {'dot': 'Graphviz DOT'}

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        _add_common(parser)
        parser.add_argument('--dot', action='store_true',
                            help='Print Graphviz DOT instead of text (not '
                                 'with -f or -c).')
        return parser

    def take_action(self, parsed_args):
        topology, prefix = _topology(self.app, parsed_args)
        with offline.placement(self.app, parsed_args) as client:
            state, roots, uses = _read(client, parsed_args.host, prefix)
        modules = {}
        for host in (topology.hosts.values() if topology else ()):
            for address, gpu in host.gpus.items():
                if gpu.module_id is not None:
                    modules[host.gpu_provider_name(address)] = gpu.module_id
        draw = tree.dot if parsed_args.dot else tree.text
        self.drawing = draw(state, roots, uses, modules)
        return tree.COLUMNS, [
            row[:2] + (_Blank(row[2]), row[3], display.InOrder(row[4])) +
            tuple(_Blank(v) for v in row[5:])
            for row in tree.rows(state, roots, uses, modules)]

    def produce_output(self, parsed_args, column_names, data):
        if self.as_text or parsed_args.dot:
            self.app.stdout.write(self.drawing)
            return 0
        return super().produce_output(parsed_args, column_names, data)
