"""``openstack nvlink reshape`` and ``openstack nvlink check``."""

import logging

from osc_lib.command import command

from nvlink_placement.osc import common
from nvlink_placement.osc import topology as topology_cmd
from nvlink_placement.plan import actions as act
from nvlink_placement.plan import desired
from nvlink_placement.plan import run
from nvlink_placement.topology import loader

LOG = logging.getLogger(__name__)
DEFAULT_WORKERS = 8


def add_common_arguments(parser):
    parser.add_argument('--topology', metavar='FILE', required=True,
                        help='Topology file (YAML or JSON, version 1).')
    parser.add_argument('--host', metavar='HOST', action='append',
                        default=[],
                        help='Only this compute host (repeatable; default: '
                             'every host of the topology).')


def desired_hosts(parsed_args):
    topology = loader.load(parsed_args.topology)
    hosts = topology_cmd.select_hosts(topology, parsed_args.host)
    return [desired.from_topology(h) for h in hosts]


class _PlanCommand(command.Lister):
    auth_required = False
    exit_code = 0

    def run(self, parsed_args):
        super().run(parsed_args)
        return self.exit_code


class Reshape(_PlanCommand):
    """Reshape Nova's PCI resource providers into NVLink group subtrees.

    Plans the tree of every host in the topology (group providers with
    CUSTOM_PCI_GROUP<N> traits, GPUs moved under their smallest group),
    validates the whole plan, then applies it in this order per host:
    create-trait, create-provider, set-traits, move-provider,
    delete-provider. Allocations stay where they are. Rows list the
    actions; a second run prints none. With --dry-run nothing is written.
    A host that fails does not stop the others; the command then exits 1.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        add_common_arguments(parser)
        parser.add_argument('--dry-run', action='store_true',
                            help='Print the actions, write nothing.')
        parser.add_argument('--workers', type=int, default=DEFAULT_WORKERS,
                            metavar='N',
                            help='Hosts applied in parallel (default %d).'
                                 % DEFAULT_WORKERS)
        common.add_placement_arguments(parser)
        return parser

    def take_action(self, parsed_args):
        hosts = desired_hosts(parsed_args)
        with common.placement(self.app, parsed_args) as client:
            bar = None
            tracker = _Tracker()
            if not parsed_args.dry_run:
                bar = common.progress(len(hosts), 'reshape')
                tracker.bar = bar
            try:
                result = run.run(client, hosts,
                                 apply=not parsed_args.dry_run,
                                 workers=max(1, parsed_args.workers),
                                 on_action=tracker.action,
                                 on_host=tracker.host)
            finally:
                if bar is not None:
                    bar.close()
        shown = result.written() if result.applied else result.actions
        rows = [a.row() for a in shown]
        if result.failures:
            for failure in result.failures:
                LOG.error('%s: failed after %d writes: %s', failure.host,
                          failure.done, failure.error)
            LOG.error('%d of %d hosts failed; run the command again once '
                      'fixed: it continues from where it stopped',
                      len(result.failures), len(hosts))
            self.exit_code = 1
        return act.COLUMNS, rows


class Check(_PlanCommand):
    """Compare Placement with the topology; exit 2 when they differ.

    Prints the actions reshape would take (nothing is written) and exits 0
    when Placement is in sync, 2 when it is not: for CI and monitoring.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        add_common_arguments(parser)
        common.add_placement_arguments(parser, save=False)
        return parser

    def take_action(self, parsed_args):
        hosts = desired_hosts(parsed_args)
        with common.placement(self.app, parsed_args) as client:
            result = run.run(client, hosts, apply=False)
        self.exit_code = 2 if result.actions else 0
        return act.COLUMNS, [a.row() for a in result.actions]


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
            LOG.warning('%s: %s', host, failure.error)
        if self.bar is not None:
            self.bar.set_postfix(writes=self.writes, failed=self.failures,
                                 refresh=False)
            self.bar.update(1)
        else:
            LOG.info('%s: %s', host, 'failed' if failure else 'done')
