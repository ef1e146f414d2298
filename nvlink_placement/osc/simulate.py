"""``openstack nvlink simulate`` and ``openstack nvlink defrag``."""

import json
import logging
import os

from keystoneauth1 import exceptions as ks_exc
from openstack import exceptions as sdk_exc

from nvlink_placement import errors
from nvlink_placement.flavors import as_configured
from nvlink_placement.flavors import release
from nvlink_placement.flavors import request
from nvlink_placement.flavors import servers as servers_mod
from nvlink_placement.osc import commands
from nvlink_placement.osc import live
from nvlink_placement.osc import offline
from nvlink_placement.osc import progress
from nvlink_placement.osc import reshape as reshape_cmd
from nvlink_placement.osc import topology as topology_cmd
from nvlink_placement.placement import snapshot
from nvlink_placement.placement import snapshot_api
from nvlink_placement.simulate import defrag
from nvlink_placement.simulate import defrag_search
from nvlink_placement.simulate import engine
from nvlink_placement.simulate import layouts as layouts_mod
from nvlink_placement.simulate import report
from nvlink_placement.simulate import workload as workload_mod

LOG = logging.getLogger(__name__)


def _aliases(parsed_args, hosts, flavors):
    return request.aliases_for(flavors, hosts, parsed_args.alias_config,
                               parsed_args.resource_class)


def _one_alias(aliases, flavors, path):
    names = request.alias_names(flavors)
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


class Simulate(commands.Lister):
    """Replay a GPU workload as Nova places it; compare tree layouts.

    Offline: each layout runs in its own process (at once, up to the
    CPUs) with its own embedded, real Placement loaded with the starting
    state (--snapshot FILE, or --from-topology: the flat
    trees Nova reports for the topology). The "flat" layout is an
    unmodified cloud: the flat tree (flatten's plan) and upstream flavors
    (pci_passthrough:alias=A:N only, same vCPUs, RAM and disk as the
    flavors file's). The "reshaped" layout is reshape's tree with the
    flavors file's flavors. Every boot sends the flavor's
    GET /allocation_candidates as Nova 34 builds it (the query of flavor
    verify), picks the host with Nova's default weighers (RAM, CPU, disk,
    PCI) and claims that host's first candidate with
    PUT /allocations/{server}; a delete drops the server's allocations.
    The workload file (--workload) gives the flavor mix by GPU count,
    arrival and lifetime distributions, the event count and the seed: a
    seed gives the same results on every run.

    Rows per layout and size: requested, placed, NoValidHost,
    fragmentation_loss (NoValidHost while some host had that many free
    GPUs) and spanning_domains (servers whose GPUs are not one NVLink
    domain of the topology). --timeline and --svg write GPUs in use and
    free NVLink domains per size after each event.
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
                            help='flat (upstream flavors on the flat tree) '
                                 'or reshaped (the flavors file on the '
                                 'reshaped tree); repeatable (default: '
                                 'both, side by side).')
        parser.add_argument('--timeline', metavar='OUT',
                            help='Write the timelines as JSON: per layout, '
                                 'after each event, time (hours), GPUs in '
                                 'use and free domains per size.')
        parser.add_argument('--svg', metavar='OUT',
                            help='Write a picture of the timelines (SVG).')
        parser.add_argument('--save-state', metavar='DIR',
                            help='Write each layout\'s end state as a '
                                 'snapshot DIR/<layout>.json (e.g. for '
                                 '"openstack nvlink defrag --snapshot").')
        parser.add_argument('--summary', action='store_true',
                            help='One row per layout instead: events, GPUs, '
                                 'mean and peak GPUs in use, free domains '
                                 'at the end.')
        return parser

    def take_action(self, parsed_args):
        topology = topology_cmd.load_topology(self.app, parsed_args.topology)
        hosts = topology_cmd.select_hosts(topology, parsed_args.host)
        workload = workload_mod.load(parsed_args.workload)
        flavors = request.read_flavors(parsed_args.flavors)
        aliases = _aliases(parsed_args, hosts, flavors)
        alias = _one_alias(aliases, flavors, parsed_args.flavors)
        nova = release.choose(None, release.AUTO)
        ours = engine.flavors_by_size(flavors, aliases, nova, workload,
                                      parsed_args.flavors)
        layouts = list(dict.fromkeys(parsed_args.layout)) or list(
            engine.LAYOUTS)
        runs = {engine.RESHAPED: ours}
        if engine.FLAT in layouts:
            upstream = engine.upstream_flavors(
                {s: f for s, (f, _) in ours.items()}, alias.name)
            runs[engine.FLAT] = engine.flavors_by_size(
                list(upstream.values()), aliases, nova, workload,
                parsed_args.flavors)
        if parsed_args.snapshot:
            document = snapshot.read_file(parsed_args.snapshot)
        else:
            document = as_configured.from_topology(
                topology, parsed_args.host,
                resource_class=alias.resource_class)
        if parsed_args.save_state:
            os.makedirs(parsed_args.save_state, exist_ok=True)
        results = self._run(hosts, layouts, runs, workload, document,
                            alias.resource_class, parsed_args.save_state)
        if parsed_args.timeline:
            with open(parsed_args.timeline, 'w') as f:
                json.dump(report.timeline_document(results), f, indent=1,
                          sort_keys=True)
        if parsed_args.svg:
            with open(parsed_args.svg, 'w') as f:
                f.write(report.svg(results, 'nvlink simulate: %s, %d '
                                   'events' % (os.path.basename(
                                       parsed_args.workload),
                                       workload.events)))
        if parsed_args.summary:
            return report.SUMMARY_COLUMNS, report.summary(results)
        return report.COLUMNS, report.rows(results)

    def _run(self, hosts, layouts, runs, workload, document, rc, save):
        bar = progress.bar(workload.events * len(layouts), 'simulate')
        if bar is not None:
            bar.unit = 'event'
        try:
            done = layouts_mod.run(document, hosts, layouts, runs, workload,
                                   rc, save=bool(save),
                                   progress=bar.update if bar else None)
        finally:
            if bar is not None:
                bar.close()
        if save:
            for layout, (_, state) in zip(layouts, done):
                path = os.path.join(save, '%s.json' % layout)
                snapshot.write_file(state, path)
                self.app.stderr.write(offline.snapshot_written(path, state))
        return [result for result, _ in done]


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
        flavors = request.read_flavors(parsed_args.flavors)
        aliases = _aliases(parsed_args, hosts, flavors)
        nova = release.choose(None, release.AUTO)
        if parsed_args.upstream:
            alias = _one_alias(aliases, flavors, parsed_args.flavors)
            flavors = list(engine.upstream_flavors(
                {request.build(f, aliases).size: f for f in flavors},
                alias.name).values())
        queries = [request.build(f, aliases, nova=nova) for f in flavors]
        if not any(q.size == parsed_args.size for q in queries):
            raise errors.NvlinkError(
                '%s: no flavor of %d GPUs (sizes: %s): the freed domains are '
                'proven with its query' % (
                    parsed_args.flavors, parsed_args.size, ', '.join(
                        str(q.size) for q in queries)))
        plan = dict(limit=parsed_args.search_steps)
        if parsed_args.snapshot:
            with offline.placement(self.app, parsed_args) as client:
                advice = defrag.advise(client, hosts, queries,
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
                advice = defrag.advise(client, hosts, queries,
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
            sdk = live.authenticate(self.app, 'compute API').sdk_connection
            if not reshape_cmd.has_compute_endpoint(sdk.config):
                LOG.info('flavors matched by resources (no compute API: '
                         'auth type %s has no service catalog and no '
                         'compute_endpoint_override is set)',
                         sdk.config.config.get('auth_type'))
                return None
            with servers_mod.bounded(sdk.session,
                                     parsed_args.request_timeout):
                listed, pages = servers_mod.read(sdk.compute)
        except (ks_exc.ClientException, sdk_exc.SDKException,
                errors.NvlinkError) as exc:
            LOG.info('flavors matched by resources (the compute API\'s '
                     'server list was not read: %s)', live.one_line(exc))
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
