"""``openstack nvlink reshape``, ``check`` and ``flatten``."""

import logging
import os
import time

from nvlink_placement import errors
from nvlink_placement.flavors import servers as servers_mod
from nvlink_placement import interrupt
from nvlink_placement.osc import commands
from nvlink_placement.osc import display
from nvlink_placement.osc import live
from nvlink_placement.osc import offline
from nvlink_placement.osc import progress
from nvlink_placement.osc import topology as topology_cmd
from nvlink_placement.osc import usage
from nvlink_placement.plan import actions as act
from nvlink_placement.plan import desired
from nvlink_placement.plan import executor
from nvlink_placement.plan import repair
from nvlink_placement.plan import run
from nvlink_placement.report import capacity
from nvlink_placement.report import metrics
from nvlink_placement import textfile
from nvlink_placement.topology import pci

LOG = logging.getLogger(__name__)
DEFAULT_WORKERS = 8
#: ``check --consumers`` choices.
AUTO, NOVA, PLACEMENT = 'auto', 'nova', 'placement'
CONSUMER_SOURCES = (AUTO, NOVA, PLACEMENT)


def desired_hosts(app, parsed_args, health=True):
    """The selected hosts' desired trees, and every topology host name.

    :returns: ``(list of DesiredHost, frozenset of names, trait prefix)``;
        the names are those of the whole topology, whatever ``--host``
        selects.
    """
    topology = topology_cmd.load_topology(app, parsed_args.topology)
    hosts = topology_cmd.select_hosts(topology, parsed_args.host)
    return ([desired.from_topology(h, health=health,
                                   trait_prefix=topology.trait_prefix)
             for h in hosts], frozenset(topology.hosts),
            topology.trait_prefix)


HOST_HELP = ('Only this compute host (repeatable; default: every host of '
             'the topology).')


def add_host_argument(parser, host_help=HOST_HELP):
    parser.add_argument('--host', metavar='HOST', action='append',
                        default=[], help=host_help)


def add_topology_arguments(parser, no_health_help):
    """``--topology``, ``--host`` and ``--no-health``."""
    parser.add_argument('--topology', metavar='FILE', required=True,
                        help='Topology file (YAML or JSON, version 1).')
    add_host_argument(parser)
    parser.add_argument('--no-health', action='store_true',
                        help=no_health_help)


def add_apply_arguments(parser):
    exclusive = parser.add_mutually_exclusive_group()
    exclusive.add_argument('--dry-run', action='store_true',
                           help='Print the actions, write nothing.')
    parser.add_argument('--workers', type=usage.positive_int,
                        default=DEFAULT_WORKERS,
                        metavar='N',
                        help='Hosts applied in parallel (default %d; '
                             'with --snapshot the whole plan is written '
                             'to the embedded Placement\'s tables in one '
                             'transaction instead).' % DEFAULT_WORKERS)
    offline.add_placement_arguments(parser, exclusive=exclusive)
    live.add_retry_arguments(parser)


class _PlanCommand(commands.Lister):
    auth_required = False
    exit_code = 0
    #: The :class:`interrupt.Stop` of an interrupted run, else None.
    stopped = None

    def run(self, parsed_args):
        try:
            super().run(parsed_args)
        except errors.PlanError as exc:
            # Only a command that would have written says it did not.
            dry_run = getattr(parsed_args, 'dry_run', None)
            note = (None if dry_run is None else
                    'dry run: no changes made' if dry_run else exc.note)
            raise errors.PlanError(exc.problems, note) from None
        if self.stopped is not None:
            self.stopped.exit()
        return self.exit_code

    def apply(self, parsed_args, hosts, more_hosts=None, allocations=None):
        """Plan, apply unless --dry-run, and return the output rows.

        SIGINT or SIGTERM stops the run before its next write
        (:mod:`nvlink_placement.interrupt`): the rows are then the writes
        made, standard error says which hosts are done, interrupted and
        untouched, and the command exits 130 or 143.
        """
        tracker = _Tracker()
        made = executor.Progress()
        with interrupt.handled() as stop:
            try:
                result = self._run(parsed_args, stop, hosts, tracker, made,
                                   more_hosts, allocations)
            except errors.Interrupted:
                result = None
            if stop.requested():
                return self.interrupted(parsed_args, stop, made)
        warn_findings(result.findings)
        shown = result.written() if result.applied else result.actions
        hosts_touched = display.plural(
            len({a.host for a in shown if a.host}), 'host')
        if not result.actions:
            self.app.stderr.write('nothing to do: Placement already matches\n')
        elif parsed_args.dry_run:
            self.app.stderr.write('dry run: %s planned on %s; nothing '
                                  'written\n' % (display.plural(
                                      len(shown), 'write'), hosts_touched))
        else:
            self.app.stderr.write('%s: %s made on %s%s\n' % (
                self.cmd_name.split()[-1], display.plural(len(shown), 'write'),
                hosts_touched, '; %s failed' % display.plural(
                    len(result.failures), 'host')
                if result.failures else ''))
        if (result.actions and parsed_args.snapshot and
                not parsed_args.dry_run and not parsed_args.save_snapshot):
            self.app.stderr.write('applied to the embedded Placement only; '
                                  'add --save-snapshot OUT to keep the '
                                  'result\n')
        for failure in result.failures:
            LOG.error('%s: failed after %d writes: %s', failure.host,
                      failure.done, failure.error)
        if result.failures:
            LOG.error('%s failed; run the command again once fixed: '
                      'it continues from where it stopped',
                      display.plural(len(result.failures), 'host'))
            self.exit_code = 1
        if result.changed:
            LOG.error(changed_message(result.changed))
            self.exit_code = 1
        return act.COLUMNS, [a.row() for a in shown]

    def _run(self, parsed_args, stop, hosts, tracker, made, more_hosts,
             allocations):
        with offline.placement(self.app, parsed_args, stop.event) as client:
            if not parsed_args.dry_run:
                tracker.bar = progress.bar(len(hosts), self.cmd_name)
            try:
                result = stop.call(
                    run.run, client, hosts, apply=not parsed_args.dry_run,
                    workers=max(1, parsed_args.workers),
                    on_action=tracker.action, on_host=tracker.host,
                    more_hosts=more_hosts, allocations=allocations,
                    tables=offline.tables(client), progress=made)
            finally:
                if tracker.bar is not None:
                    tracker.bar.close()
            report_retries(client)
        return result

    def interrupted(self, parsed_args, stop, made):
        """Say how far an interrupted run got; the rows of its writes."""
        name = self.cmd_name.split()[-1]
        if parsed_args.snapshot:
            what = ('nothing written: %s' % (
                '--save-snapshot %s not written' % parsed_args.save_snapshot
                if parsed_args.save_snapshot else
                'the embedded Placement is dropped'))
        elif not made.planned:
            what = 'nothing written'
        else:
            done, failed, cut, untouched = made.hosts()

            def names(listed):
                return ' (%s)' % display.names(listed) if listed else ''
            what = '%s done%s, %s%d interrupted%s, %d untouched%s' % (
                display.plural(len(done), 'host'), names(done),
                '%d failed%s, ' % (len(failed), names(failed))
                if failed else '', len(cut), names([
                    '%s: %d of %d writes%s' % (
                        host, count, planned,
                        ', 1 unanswered' if unanswered else '')
                    for host, count, planned, unanswered in cut]),
                len(untouched), names(untouched))
        self.app.stderr.write(
            'interrupted by %s: %s; rerun `openstack nvlink %s` to finish; '
            '`openstack nvlink check` shows the tree\n'
            % (stop.name, what, name))
        self.exit_code = stop.exit_code
        self.stopped = stop
        return act.COLUMNS, ([] if parsed_args.snapshot else
                             [a.row() for a in made.made])


#: Hosts named in the message of :func:`changed_message`.
SHOWN_HOSTS = 10


def changed_message(hosts):
    """The error for hosts another run changed while this one ran."""
    shown = ', '.join(hosts[:SHOWN_HOSTS]) + (
        ' and %d more' % (len(hosts) - SHOWN_HOSTS)
        if len(hosts) > SHOWN_HOSTS else '')
    return ('another run changed %s while this one ran: read again once '
            'this run was done, %s no longer %s what this run wrote (two '
            'runs with different topologies, or another writer). `openstack '
            'nvlink check` shows the tree; run one command again, alone, to '
            'converge' % (
                display.plural(len(hosts), 'host') + ' (%s)' % shown,
                'its tree' if len(hosts) == 1 else 'their trees',
                'matches' if len(hosts) == 1 else 'match'))


def warn_findings(findings):
    """Warn about the drift the writes leave as it is (check's findings).

    A Nova PCI provider of a topology host that the topology does not list
    stays flat; an instance with GPUs in two NVLink domains keeps them; an
    unhealthy GPU in no group is not reserved.
    """
    for finding in findings:
        if finding.drift == act.UNKNOWN_GPU:
            LOG.warning('%s: Nova PCI provider %s (%s) is not in the '
                        'topology: it stays flat, in no NVLink group (list '
                        'it in the topology, in a group or excluded)',
                        finding.host, finding.provider,
                        pci.address_of_provider(finding.host,
                                                finding.provider))
        else:
            LOG.warning('%s: %s: %s', finding.host, finding.provider,
                        finding.detail)


def report_retries(client):
    """Log the transient failures the client rode out, if any."""
    retried = client.retried
    if retried:
        LOG.warning('rode out %d transient Placement failures (%s)',
                    sum(retried.values()), ', '.join(
                        '%s: %d' % kv for kv in sorted(retried.items())))


class Reshape(_PlanCommand):
    """Reshape Nova's PCI resource providers into NVLink group subtrees.

    Plans the tree of every host in the topology (group providers with
    CUSTOM_PCI_GROUP<N> traits, GPUs moved under their smallest group),
    validates the whole plan, then applies it in this order per host:
    create-trait, create-provider, set-traits, move-provider, set-reserved,
    delete-provider. Allocations stay where they are. Unhealthy GPUs (health
    from host inspection) get reserved = total until they are healthy
    again. Rows list the actions; a second run prints none. With --dry-run
    nothing is written. A host that fails does not stop the others; the
    command then exits 1. Transient Placement failures (no connection, no
    answer, HTTP 5xx) are retried for --retry-window seconds; an interrupted
    run is finished by running it again, or undone by flatten. Ctrl-C
    (SIGINT) or SIGTERM stops it before its next write: it names the hosts
    done, interrupted and untouched and exits 130 or 143. Warns about
    instances whose GPUs end up in different NVLink domains, and names each
    Nova PCI provider of a topology host that the topology does not list
    (it stays flat).
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        add_topology_arguments(
            parser, 'Do not reserve unhealthy GPUs nor release earlier '
                    'reservations.')
        add_apply_arguments(parser)
        return parser

    def take_action(self, parsed_args):
        hosts, _, _ = desired_hosts(self.app, parsed_args,
                                    health=not parsed_args.no_health)
        return self.apply(parsed_args, hosts,
                          allocations=run.CHANGED_HOSTS)


class Flatten(_PlanCommand):
    """Undo reshape: GPUs back under the compute node, groups deleted.

    Moves every Nova PCI provider out of the tool's group providers, back
    under its compute node, releases the reservations this tool made, and
    deletes the group providers bottom-up. The tool's group providers are
    those carrying CUSTOM_OWNER_NVLINK_PLACEMENT, and those an interrupted
    reshape left without it: named <host>_nvlink-group-of-<N>-<letter>
    inside that compute node's tree, under the compute node or another of
    the tool's groups, holding no inventory. Nothing else is deleted.
    Allocations stay. Also undoes a reshape interrupted at any point.
    Ctrl-C (SIGINT) or SIGTERM stops it before its next write (exit 130 or
    143); running it again finishes. Needs --host (repeatable) or --all
    (every tree with a group of the tool).
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        add_host_argument(parser, host_help='A compute host to flatten '
                                            '(repeatable; or --all).')
        parser.add_argument('--all', action='store_true',
                            help='Every compute node tree holding a group '
                                 'provider of this tool.')
        add_apply_arguments(parser)
        return parser

    def take_action(self, parsed_args):
        if not parsed_args.host and not parsed_args.all:
            raise errors.UsageError('name the hosts to flatten with --host '
                                    '(repeatable), or give --all')
        if parsed_args.host and parsed_args.all:
            raise errors.UsageError('--host and --all do not go together: '
                                    '--all flattens every tree holding a '
                                    'group of this tool; give one of them')
        hosts = [desired.flat(name) for name in
                 dict.fromkeys(parsed_args.host)]

        def owned(state, names):
            return [desired.flat(name) for name in
                    run.hosts_with_groups(state)
                    if name not in names]
        return self.apply(parsed_args, hosts,
                          more_hosts=owned if parsed_args.all else None)


class Check(_PlanCommand):
    """Compare Placement with the topology; exit 2 when they differ.

    Prints what reshape would do (nothing is written), one row per action
    with the drift it repairs: missing-group, missing-trait, wrong-parent,
    unexpected-group, missing-reservation, stale-reservation; and rows
    without an action for unknown-gpu (a Nova PCI provider of a topology
    host that the topology does not list) and split-allocation (an
    instance holding GPUs of more than one NVLink domain of its size).
    Every row names its repair: the reshape or flatten command that
    repairs it, or "not automatic: ..." and what to do by hand. Exits 0
    when in sync, 1 on an error, 2 on drift, 3 on a usage error; with
    --prometheus-textfile it also writes the result as metrics for the
    node exporter.

    Split allocations need the consumers holding GPUs: by default from
    the compute API's server list (one read per 1000 servers, then one
    per server of two GPUs or more), else from Placement (one read per
    host with GPUs in use, then one per consumer there); see
    --consumers.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        add_topology_arguments(
            parser, 'Ignore GPU health (no reservation drift).')
        parser.add_argument(
            '--consumers', choices=CONSUMER_SOURCES, default=AUTO,
            help='Where check learns which consumers hold GPUs, to find '
                 'split allocations. nova: the compute API\'s server list '
                 '(admin; one read per 1000 servers), then Placement\'s '
                 'allocations of each server whose flavor asks for two PCI '
                 'devices or more; a host with GPUs in use that those '
                 'servers do not account for (a migration, a reservation) '
                 'is read as with placement. placement: each host with GPUs '
                 'in use: its compute node\'s allocations, then every '
                 'consumer found there. auto (default): nova when the '
                 'compute API answers, else placement (-v says why); '
                 'placement with --snapshot.')
        parser.add_argument('--all', action='store_true',
                            help='Also check the compute node trees that '
                                 'hold group providers of this tool but are '
                                 'not in the topology (a host dropped from '
                                 'it); "flatten --host" repairs them.')
        parser.add_argument(
            '--prometheus-textfile', metavar='PATH',
            help='Also write the result as Prometheus metrics to PATH, '
                 'atomically (node exporter textfile collector; PATH ends '
                 'in .prom): drift rows per kind and per host, hosts '
                 'checked and in sync, success, duration and the time of '
                 'the last successful check, and capacity per resource '
                 'class and instance size (free domains, free and stranded '
                 'GPUs, split instances; no extra read per host). Written '
                 'on error too (success 0, the earlier last-success time '
                 'kept). An existing PATH that is not a metrics file of '
                 'this command is refused (exit 1), left as it is.')
        offline.add_placement_arguments(parser, save=False)
        live.add_retry_arguments(parser)
        return parser

    def take_action(self, parsed_args):
        started = time.monotonic()
        found = {}
        path = parsed_args.prometheus_textfile
        if path:
            # Fail before the check, not after it (nothing else done).
            textfile.check_writable(path)
            if not metrics.written_here(textfile.read(path)):
                raise errors.NvlinkError(
                    '--prometheus-textfile %s: the file is there and is not '
                    'a metrics file written by "openstack nvlink check" (no '
                    '"# HELP %scheck_success" line); it is left as it is: '
                    'name a new file or remove that one' % (
                        path, metrics.PREFIX))
        if path and not path.endswith('.prom'):
            LOG.warning('%s does not end in .prom: the node exporter\'s '
                        'textfile collector will not read it', path)
        try:
            rows = self.check(parsed_args, found)
        except Exception:
            self.write_metrics(parsed_args, started, found, success=False)
            raise
        self.write_metrics(parsed_args, started, found, success=True)
        self.exit_code = 2 if rows else 0
        if not rows:
            self.app.stderr.write('in sync: Placement matches the '
                                  'topology\n')
        return act.CHECK_COLUMNS, rows

    def check(self, parsed_args, found):
        hosts, topology_names, prefix = desired_hosts(
            self.app, parsed_args, health=not parsed_args.no_health)
        names = {h.name for h in hosts}

        def outside(state, _selected):
            # Outside the whole topology, not outside the --host selection.
            with_groups, flat = run.hosts_outside(state, topology_names)
            found['outside'] = with_groups
            found['not_in_topology'] = flat
            if flat:
                LOG.info('not in the topology, flat, not checked: %s',
                         ', '.join(flat))
            return [desired.flat(name, known=False) for name in with_groups]
        servers = self.servers(parsed_args)
        with offline.placement(self.app, parsed_args) as client:
            result = run.run(client, hosts, apply=False,
                             more_hosts=outside if parsed_args.all else None,
                             allocations=run.ALL_HOSTS, members=True,
                             servers=servers,
                             free=bool(parsed_args.prometheus_textfile),
                             tables=offline.tables(client))
            report_retries(client)
        context = repair.Context(
            os.path.abspath(parsed_args.topology), topology_names,
            hosts=tuple(dict.fromkeys(parsed_args.host)),
            reshape_options=('--no-health',) if parsed_args.no_health
            else (),
            global_options=tuple(
                arg for d in topology_cmd.gpus_file_dirs(self.app)
                for arg in ('--os-nvlink-gpus-file-dir', d)),
            snapshot=(os.path.abspath(parsed_args.snapshot)
                      if parsed_args.snapshot else None))
        drift = result.actions + result.findings
        found['hosts'] = sorted(names | set(found.get('outside', ())))
        if parsed_args.prometheus_textfile:
            found['capacity'] = capacity.cloud(result.state, found['hosts'],
                                               drift, prefix)
        # What an operator counts: a missing group is one drift, though it
        # takes two rows (create the provider, set its traits).
        found['rows'] = [(h, d) for h, d, _ in dict.fromkeys(
            (a.host, a.drift, a.provider if a.drift == act.MISSING_GROUP
             else id(a)) for a in drift)]
        return [a.check_row(repair.text(a, context)) for a in drift]

    def servers(self, parsed_args):
        """Nova's servers by node (``--consumers``), or None: Placement's.

        :raises UsageError: ``--consumers nova`` with ``--snapshot``.
        :raises NvlinkError: ``--consumers nova`` and the server list
            cannot be read.
        """
        source = parsed_args.consumers
        if parsed_args.snapshot:
            if source == NOVA:
                raise errors.UsageError(
                    '--consumers nova reads the live compute API; with '
                    '--snapshot the allocations are in the file (use '
                    '--consumers placement or leave it out)')
            return None
        if source == PLACEMENT:
            return None
        try:
            listed, pages = servers_mod.from_compute_api(
                lambda: live.authenticate(self.app,
                                          'compute API').sdk_connection,
                parsed_args.request_timeout, only_named=source == AUTO)
        except servers_mod.NotRead as exc:
            if source == NOVA:
                raise errors.NvlinkError(
                    '--consumers nova: cannot read the compute API\'s server '
                    'list (%s); --consumers placement reads the consumers '
                    'from Placement instead' % exc.detail)
            LOG.info('consumers from Placement (%s)', exc)
            return None
        LOG.info('consumers from the compute API: %s in %s',
                 display.plural(len(listed), 'server'),
                 display.plural(pages, 'read'))
        return servers_mod.by_node(listed)

    def write_metrics(self, parsed_args, started, found, success):
        path = parsed_args.prometheus_textfile
        if not path:
            return
        if success:
            last = time.time()
        else:
            last = metrics.last_success(textfile.read(path))
        not_in_topology = found.get('not_in_topology')
        text = metrics.render(
            success, time.monotonic() - started, last_success=last,
            rows=found.get('rows'), hosts=found.get('hosts'),
            not_in_topology=None if not_in_topology is None
            else len(not_in_topology), capacity=found.get('capacity'))
        try:
            textfile.write(path, text)
        except errors.NvlinkError as exc:
            if success:
                raise
            LOG.error('%s', exc)


class _Tracker(object):
    """Feeds the progress bar: hosts done, writes, failures."""

    def __init__(self):
        self.bar = None
        self.writes = 0
        self.failures = 0

    def action(self, action):
        self.writes += 1

    def host(self, host, failure):
        if failure is not None:
            self.failures += 1
        if self.bar is not None:
            self.bar.set_postfix(writes=self.writes, failed=self.failures,
                                 refresh=False)
            self.bar.update(1)
        else:
            LOG.info('%s: %s', host, 'failed' if failure else 'done')
