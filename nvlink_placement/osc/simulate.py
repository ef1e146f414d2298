"""``openstack nvlink simulate`` and ``openstack nvlink defrag``."""

import json
import logging
import os

from nvlink_placement import errors
from nvlink_placement.flavors import aliases as aliases_mod
from nvlink_placement.flavors import inputs
from nvlink_placement.flavors import release
from nvlink_placement.flavors import request
from nvlink_placement.flavors import servers as servers_mod
from nvlink_placement.flavors import verify
from nvlink_placement.novaconfig import as_configured
from nvlink_placement.osc import commands
from nvlink_placement.osc import flavor as flavor_cmd
from nvlink_placement.osc import live
from nvlink_placement.osc import offline
from nvlink_placement.osc import progress
from nvlink_placement.osc import topology as topology_cmd
from nvlink_placement.placement import snapshot
from nvlink_placement.placement import snapshot_api
from nvlink_placement.simulate import defrag
from nvlink_placement.simulate import defrag_search
from nvlink_placement.simulate import engine
from nvlink_placement.simulate import estimate
from nvlink_placement.simulate import layouts as layouts_mod
from nvlink_placement.simulate import numa
from nvlink_placement.simulate import report
from nvlink_placement.simulate import workload as workload_mod
from nvlink_placement import textfile

LOG = logging.getLogger(__name__)
#: Runs per layout by default, and at most.
DEFAULT_SEEDS = 20
MAX_SEEDS = 1000


def _aliases(parsed_args, topology, hosts, flavors):
    one_model = len(aliases_mod.classes(hosts)[0]) <= 1
    return aliases_mod.for_flavors(
        flavors, hosts if one_model and not parsed_args.alias
        else list(topology.hosts.values()), parsed_args.alias,
        parsed_args.alias_config, parsed_args.resource_class)


def _of_model(hosts, alias, path):
    """The hosts with GPUs of ``alias``' model, restricted to them.

    A topology of one model (or without ids) is returned whole.
    """
    if len(aliases_mod.classes(hosts)[0]) <= 1:
        return hosts
    kept = [aliases_mod.restrict(h, alias.resource_class) for h in hosts]
    kept = [h for h in kept if any(
        aliases_mod.gpu_class(h.gpus[a]) == alias.resource_class
        for a in h.usable())]
    if not kept:
        raise errors.NvlinkError(
            '%s: alias %s asks for resource class %s, which no selected '
            'host has' % (path, alias.name, alias.resource_class))
    return kept


def _one_alias(aliases, flavors, path):
    names = inputs.alias_names(flavors)
    if len(names) != 1:
        raise errors.NvlinkError(
            '%s: the flavors ask for %s; the simulator runs one GPU alias'
            % (path, ', '.join(names) or 'no PCI alias'))
    if names[0] not in aliases:
        raise errors.NvlinkError(
            '%s: alias %r is not configured (known: %s)'
            % (path, names[0], ', '.join(sorted(aliases)) or 'none'))
    return aliases[names[0]]


def _add_inputs(parser):
    parser.add_argument('--topology', metavar='FILE', required=True,
                        help='Topology file: the hosts, GPUs and NVLink '
                             'domains (YAML or JSON, version 1).')
    parser.add_argument('--host', metavar='HOST', action='append',
                        default=[],
                        help='Only this topology host (repeatable; default: '
                             'every host).')
    parser.add_argument('--flavors', metavar='FILE', required=True,
                        help='Flavors as "flavor generate -f json" prints '
                             'them, one per GPU count.')
    parser.add_argument('--alias-config', metavar='FILE',
                        help='Nova\'s [pci] alias values (default: from the '
                             'topology).')
    parser.add_argument('--resource-class', metavar='RC',
                        help='The GPUs\' resource class when the topology '
                             'has none (e.g. CUSTOM_PCI_10DE_2330).')
    flavor_cmd.add_alias_argument(
        parser, required=False,
        help='In a fleet of several GPU models, the --alias options given '
             'to flavor generate (NAME or NAME=VENDOR:PRODUCT, '
             'repeatable), telling which model the flavors\' alias is; '
             'the simulation then runs on the hosts of that model, on '
             'their GPUs of that model.')


class Simulate(commands.Lister):
    """Replay a GPU workload as Nova places it; compare tree layouts.

    Offline: each run (a layout and a seed) has its own process and its
    own embedded, real Placement loaded with the starting state
    (--snapshot FILE, or --from-topology: the flat trees Nova reports for
    the topology), the runs at once up to the CPUs. Layouts: "flat" is an
    unmodified cloud (the flat tree, upstream flavors:
    pci_passthrough:alias=A:N only, the flavors file's vCPUs, RAM and
    disk); "flat-numa"
    adds nova-config's NUMA extra specs (hw:numa_nodes=1 and
    hw:pci_numa_affinity_policy=required where the domains sit on one NUMA
    node; NUMATopologyFilter then keeps a server's GPUs on one node; needs
    numa_node in the topology); "reshaped" is reshape's tree with the
    flavors file's flavors. Every boot sends the flavor's
    GET /allocation_candidates as Nova 34 builds it, filters and weighs
    the hosts as Nova does (RAM, CPU, disk, PCI weighers; hosts of equal
    weight in the order of Nova's host set, or shuffled), and claims the
    best host's first candidate in Placement's order with
    PUT /allocations/{server}; a delete drops the server's allocations.

    Seeds: --seeds N runs the workload's seed and the N-1 next ones; a seed
    gives its own events and its own Placement and scheduler order (the
    runs' hash seed). The table gives, per layout, the mean over the seeds
    and its 95 % confidence interval: share of N-GPU servers whose GPUs are
    one NVLink domain, boots refused for no capacity (no host had N free
    GPUs) and for fragmentation (some host had them, in no acceptable
    set), GPU-hours served and mean GPUs busy. --per-seed gives the counts
    of every run instead. --timeline, --svg and --save-state describe the
    first seed's runs.
    """

    auth_required = False

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        _add_inputs(parser)
        parser.add_argument('--workload', metavar='FILE', required=True,
                            help='Workload file (YAML or JSON; see "Sizing '
                                 'a GPU cloud" in the docs).')
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument('--snapshot', metavar='FILE',
                            help='Start from this Placement snapshot.')
        source.add_argument('--from-topology', action='store_true',
                            help='Start from the flat trees Nova reports for '
                                 'the topology\'s hosts (empty hosts). A '
                                 'flag: the topology is --topology\'s file '
                                 '(snapshot --from-topology takes the file '
                                 'itself).')
        parser.add_argument('--layout', action='append',
                            choices=engine.LAYOUTS, default=[],
                            help='flat (upstream flavors on the flat tree), '
                                 'flat-numa (the same with nova-config\'s '
                                 'NUMA extra specs) or reshaped (the '
                                 'flavors file on the reshaped tree); '
                                 'repeatable (default: all three side by '
                                 'side, flat-numa only when the topology '
                                 'has the GPUs\' NUMA nodes).')
        parser.add_argument('--seeds', metavar='N', type=int,
                            default=DEFAULT_SEEDS,
                            help='Runs per layout: the workload\'s seed and '
                                 'the next N-1 (default: %d; 1 to %d).'
                                 % (DEFAULT_SEEDS, MAX_SEEDS))
        parser.add_argument('--shuffle-best-same-weighed-hosts',
                            action='store_true',
                            help='As Nova with [filter_scheduler] '
                                 'shuffle_best_same_weighed_hosts = True: '
                                 'hosts tied for the best weight in a '
                                 'random order (default: Nova\'s default, '
                                 'the order of its host set, fixed per '
                                 'scheduler process).')
        parser.add_argument('--processes', metavar='N', type=int,
                            help='Runs at once, one process each (default: '
                                 'the CPUs).')
        parser.add_argument('--per-seed', action='store_true',
                            help='One row per seed, layout and size '
                                 'instead: requested, placed, NoValidHost, '
                                 'fragmentation_loss, no_capacity, '
                                 'spanning_domains.')
        parser.add_argument('--timeline', metavar='OUT',
                            help='Write the first seed\'s timelines as JSON: '
                                 'per layout, after each event, time '
                                 '(hours), GPUs in use and free domains per '
                                 'size.')
        parser.add_argument('--svg', metavar='OUT',
                            help='Write a picture of the first seed\'s '
                                 'timelines (SVG).')
        parser.add_argument('--save-state', metavar='DIR',
                            help='Write each layout\'s end state of the '
                                 'first seed as a snapshot DIR/<layout>.json '
                                 '(e.g. for "openstack nvlink defrag '
                                 '--snapshot").')
        return parser

    def take_action(self, parsed_args):
        if not 1 <= parsed_args.seeds <= MAX_SEEDS:
            raise errors.UsageError('--seeds: expected 1 to %d, got %d'
                                    % (MAX_SEEDS, parsed_args.seeds))
        if parsed_args.processes is not None and parsed_args.processes < 1:
            raise errors.UsageError('--processes: expected at least 1, got '
                                    '%d' % parsed_args.processes)
        topology = topology_cmd.load_topology(self.app, parsed_args.topology)
        hosts = topology_cmd.select_hosts(topology, parsed_args.host)
        workload = workload_mod.load(parsed_args.workload)
        flavors = inputs.read_flavors(parsed_args.flavors)
        aliases = _aliases(parsed_args, topology, hosts, flavors)
        alias = _one_alias(aliases, flavors, parsed_args.flavors)
        hosts = _of_model(hosts, alias, parsed_args.flavors)
        nova = release.choose(None, release.AUTO)
        ours = engine.flavors_by_size(flavors, aliases, nova, workload,
                                      parsed_args.flavors)
        layouts = list(dict.fromkeys(parsed_args.layout))
        runs, numa_sizes = {engine.RESHAPED: ours}, {}
        own = {s: f for s, (f, _) in ours.items()}
        try:
            specs = numa.extra_specs(hosts, workload.sizes)
        except errors.NvlinkError as exc:
            if engine.FLAT_NUMA in layouts:
                raise
            if not layouts:
                LOG.warning('simulate: no flat-numa layout: %s', exc)
            specs = None
        layouts = layouts or [layout for layout in engine.LAYOUTS
                              if layout != engine.FLAT_NUMA or specs]
        for layout, extra in ((engine.FLAT, None), (engine.FLAT_NUMA, specs)):
            if layout in layouts:
                runs[layout] = engine.flavors_by_size(
                    list(engine.upstream_flavors(own, alias.name,
                                                 extra).values()),
                    aliases, nova, workload, parsed_args.flavors)
        if engine.FLAT_NUMA in layouts:
            numa_sizes[engine.FLAT_NUMA] = [
                s for s in workload.sizes if numa.required(specs[s])]
        if parsed_args.snapshot:
            document = snapshot.read_file(parsed_args.snapshot)
        else:
            document = as_configured.from_topology(
                topology, parsed_args.host,
                resource_class=alias.resource_class)
        estimate.warn(workload, parsed_args.seeds * len(layouts), len(hosts))
        self._check_outputs(parsed_args)
        done = self._run(hosts, layouts, runs, workload, document,
                         alias.resource_class, parsed_args, numa_sizes)
        results = [[result for result, _ in seed] for seed in done]
        self._write_outputs(parsed_args, done[0], workload)
        if parsed_args.per_seed:
            return report.COLUMNS, report.rows(results)
        return report.figures(results)

    @staticmethod
    def _check_outputs(parsed_args):
        """Refuse an output that cannot be written, before any work."""
        for option, path in (('--timeline', parsed_args.timeline),
                             ('--svg', parsed_args.svg)):
            if path:
                try:
                    textfile.check_writable(path)
                except errors.NvlinkError as exc:
                    raise errors.NvlinkError('%s: %s' % (option, exc))
        directory = parsed_args.save_state
        if directory:
            where = directory if os.path.isdir(directory) else (
                os.path.dirname(os.path.abspath(directory)))
            if os.path.exists(directory) and not os.path.isdir(directory):
                problem = 'it exists and is not a directory'
            elif not os.path.isdir(where):
                problem = 'directory %s does not exist' % where
            elif not os.access(where, os.W_OK | os.X_OK):
                problem = 'directory %s is not writable' % where
            else:
                return
            raise errors.NvlinkError('--save-state: cannot write %s: %s'
                                     % (directory, problem))

    def _write_outputs(self, parsed_args, first, workload):
        """Write the first seed's outputs.

        :param first: list of ``(Result, end state or None)``.
        """
        runs = [result for result, _ in first]
        if parsed_args.timeline:
            textfile.write(parsed_args.timeline, json.dumps(
                report.timeline_document(runs), indent=1, sort_keys=True,
                allow_nan=False))
        if parsed_args.svg:
            textfile.write(parsed_args.svg, report.svg(
                runs, 'nvlink simulate: %s, %d events, seed %d' % (
                    os.path.basename(parsed_args.workload), workload.events,
                    workload.seed)))
        if parsed_args.save_state:
            os.makedirs(parsed_args.save_state, exist_ok=True)
            for result, state in first:
                path = os.path.join(parsed_args.save_state,
                                    '%s.json' % result.layout)
                snapshot.write_file(state, path)
                self.app.stderr.write(offline.snapshot_written(path, state))

    def _run(self, hosts, layouts, runs, workload, document, rc, parsed_args,
             numa_sizes):
        seeds = parsed_args.seeds
        bar = progress.bar(workload.events * len(layouts) * seeds,
                           'simulate')
        if bar is not None:
            bar.unit = 'event'
        try:
            done = layouts_mod.run(
                document, hosts, layouts, runs, workload, rc, seeds=seeds,
                save=bool(parsed_args.save_state),
                progress=bar.update if bar else None,
                shuffle=parsed_args.shuffle_best_same_weighed_hosts,
                numa_sizes=numa_sizes, processes=parsed_args.processes)
        finally:
            if bar is not None:
                bar.close()
        return done


class Defrag(commands.OwnOutput, commands.Lister):
    """Advise the cold migrations that free K NVLink domains of N GPUs.

    Reads the current state (live, or --snapshot FILE): which servers
    (consumers) hold which GPUs. A cold migration frees all of a server's
    GPUs on its host, so a domain is freed by moving every server holding
    one of its GPUs (a server spanning two domains moves once for both).
    A server's flavor is its flavor in Nova (live, when the compute API's
    server list can be read) or the flavor of --flavors whose resources
    its allocation shows (without DISK_GB: booted from a volume; PCPU for
    VCPU: pinned); a server of no flavor there is not moved, and named.
    Each move goes to another host where every allocation candidate Nova
    may claim (openstack server migrate --host takes the first in
    Placement's order, which is arbitrary) keeps out of the domains being
    freed; no server moves twice. The plan has the fewest moves of all
    such plans, proven by an exact search when it ends within
    --search-steps steps (a few seconds; proving that K domains cannot be
    freed is what takes long); past that, a heuristic plan, and a warning
    says it is not proven the fewest. Plans that move servers holding no
    GPU of the domains freed (to make room) are not considered. Every
    move is checked again against Placement's own candidates as it is
    applied to a copy of the state, and the N-GPU flavor's query must then
    offer each freed domain.
    Rows: the moves in order, with the openstack server migrate command to
    run. Nothing is run or written (--snapshot with --save-snapshot writes
    the state after the moves, for review). Exits 1 when K domains cannot
    be freed.
    """

    auth_required = False
    exit_code = 0
    own_output = {'commands': 'the openstack server migrate commands'}

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        _add_inputs(parser)
        parser.add_argument('--size', metavar='N', type=int, required=True,
                            help='GPUs per NVLink domain to free.')
        parser.add_argument('--count', metavar='K', type=int, required=True,
                            help='Free N-GPU domains wanted in total.')
        parser.add_argument('--upstream', action='store_true',
                            help='The servers run upstream flavors (a flat '
                                 'tree): pci_passthrough:alias=A:N with the '
                                 'vCPUs, RAM and disk of the flavors file\'s '
                                 'flavor of each size, as simulate\'s flat '
                                 'layout.')
        parser.add_argument('--search-steps', metavar='STEPS', type=int,
                            default=defrag_search.SEARCH_STEPS,
                            help='Moves the exact search may try before it '
                                 'gives a heuristic plan, not proven the '
                                 'fewest (default %d).'
                                 % defrag_search.SEARCH_STEPS)
        parser.add_argument('--commands', action='store_true',
                            help='Print only the commands (not with -f or '
                                 '-c).')
        offline.add_placement_arguments(parser)
        live.add_retry_arguments(parser)
        return parser

    def run(self, parsed_args):
        super().run(parsed_args)
        return self.exit_code

    def take_action(self, parsed_args):
        if parsed_args.size < 1 or parsed_args.count < 1:
            raise errors.UsageError('--size and --count must be at least 1')
        if parsed_args.search_steps < 1:
            raise errors.UsageError('--search-steps must be at least 1')
        topology = topology_cmd.load_topology(self.app, parsed_args.topology)
        hosts = topology_cmd.select_hosts(topology, parsed_args.host)
        flavors = inputs.read_flavors(parsed_args.flavors)
        aliases = _aliases(parsed_args, topology, hosts, flavors)
        if len(inputs.alias_names(flavors)) == 1:
            hosts = _of_model(hosts, _one_alias(
                aliases, flavors, parsed_args.flavors), parsed_args.flavors)
        nova = release.choose(None, release.AUTO)
        if parsed_args.upstream:
            alias = _one_alias(aliases, flavors, parsed_args.flavors)
            flavors = list(engine.upstream_flavors(
                {request.build(f, aliases).size: f for f in flavors},
                alias.name).values())
        queries = [request.build(f, aliases, nova=nova) for f in flavors]

        def detected(client):
            # The owner filter as nova-scheduler applies it: off when a
            # compute node provider lacks OWNER_NOVA (Nova 33 and older,
            # or a cloud mid-upgrade); see release.choose.
            found = release.choose(None, release.AUTO, nodes_without_owner=(
                verify.compute_nodes_without_owner(client)))
            return [request.build(f, aliases, nova=found) for f in flavors]
        if not any(q.size == parsed_args.size for q in queries):
            raise errors.NvlinkError(
                '%s: no flavor of %d GPUs (sizes: %s): the freed domains are '
                'proven with its query' % (
                    parsed_args.flavors, parsed_args.size, ', '.join(
                        str(q.size) for q in queries)))
        plan = dict(limit=parsed_args.search_steps)
        if parsed_args.snapshot:
            with offline.placement(self.app, parsed_args) as client:
                advice = defrag.advise(client, hosts, detected(client),
                                       parsed_args.size, parsed_args.count,
                                       **plan)
        else:
            if parsed_args.save_snapshot:
                raise errors.UsageError(
                    '--save-snapshot needs --snapshot (the live cloud is '
                    'never written)')
            cloud = live.live_client(self.app, parsed_args)
            document = snapshot_api.export(cloud, [h.name for h in hosts])
            plan['nova_flavors'] = self.nova_flavors(parsed_args)
            from nvlink_placement.placement import embedded
            with embedded.EmbeddedPlacement(document) as client:
                advice = defrag.advise(client, hosts, detected(client),
                                       parsed_args.size, parsed_args.count,
                                       **plan)
        for line in advice.notes:
            LOG.warning('%s', line)
        if not advice.reached:
            LOG.error('%s', advice.shortfall())
            self.exit_code = 1
        self.app.stderr.write(advice.describe() + '\n')
        self.moves = advice.moves
        return defrag.COLUMNS, [m.row() for m in advice.moves]

    def nova_flavors(self, parsed_args):
        """Server uuid -> flavor name from the compute API, or None.

        As ``check --consumers auto``: None (servers matched by their
        resources) when the cloud names no compute API or its server list
        cannot be read (-v says why).
        """
        try:
            listed, pages = servers_mod.from_compute_api(
                lambda: live.authenticate(self.app,
                                          'compute API').sdk_connection,
                parsed_args.request_timeout)
        except servers_mod.NotRead as exc:
            LOG.info('flavors matched by resources (%s)', exc)
            return None
        LOG.info('flavors from the compute API: %d server(s) in %d read(s)',
                 len(listed), pages)
        return {s.uuid: s.flavor for s in listed if s.flavor}

    def produce_output(self, parsed_args, column_names, data):
        if not parsed_args.commands:
            return super().produce_output(parsed_args, column_names, data)
        for move in self.moves:
            self.app.stdout.write(move.command + '\n')
        return 0
