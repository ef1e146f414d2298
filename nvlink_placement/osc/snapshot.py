"""``openstack nvlink snapshot``: export Placement state (read only), or
write the flat tree Nova would report for a topology."""

import argparse
import logging
import re

import os_resource_classes

from nvlink_placement import errors
from nvlink_placement import interrupt
from nvlink_placement.novaconfig import as_configured
from nvlink_placement.osc import commands
from nvlink_placement.osc import display
from nvlink_placement.osc import live
from nvlink_placement.osc import offline
from nvlink_placement.osc import progress
from nvlink_placement.osc import topology as topology_cmd
from nvlink_placement.osc import usage
from nvlink_placement.placement import nova_tree
from nvlink_placement.placement import snapshot
from nvlink_placement.placement import snapshot_api

LOG = logging.getLogger(__name__)

DEFAULT_WORKERS = 8
#: Options that only --from-topology reads.
_FROM_TOPOLOGY_ONLY = ('--resource-class', '--vcpus', '--memory-mb',
                       '--disk-gb')


def nova_resource_class(name):
    """Normalize a resource class as Nova does for ``[pci] device_spec``.

    Upper case; a name neither standard nor ``CUSTOM_`` gets the prefix
    and its other characters replaced (``nova/compute/
    pci_placement_translator.py``): ``pci_10de_2330`` ->
    ``CUSTOM_PCI_10DE_2330``.
    """
    name = name.upper()
    if (name in os_resource_classes.STANDARDS or
            os_resource_classes.is_custom(name)):
        return name
    return os_resource_classes.normalize_name(name)


#: What to do without a cloud: a snapshot of a snapshot is rarely meant.
FROM_HINT = ('to write the trees Nova would report for a topology without '
             'a cloud, give --from-topology FILE; --snapshot FILE exports '
             'from a snapshot file')
_RC_NAME = re.compile(r'^CUSTOM_[A-Z0-9_]+$')


def resource_class_option(text):
    """argparse type of ``--resource-class``: a name Nova can report.

    The value is kept as given; it must give a resource class once Nova
    normalizes it (:func:`nova_resource_class`): ``custom_x y`` stays
    ``CUSTOM_X Y``, which Placement refuses, and ``CUSTOM_`` is no name.
    A bad value is a usage error naming the option, not problems in a
    file.
    """
    name = nova_resource_class(text) if text.strip() else ''
    if name in os_resource_classes.STANDARDS or _RC_NAME.match(name):
        return text
    raise argparse.ArgumentTypeError(
        '%r is not a resource class: Nova makes it %r; give a standard one '
        'or CUSTOM_ and then A-Z, 0-9, _ (e.g. CUSTOM_PCI_10DE_2330)'
        % (text, name))


def _progress(total, unit):
    """A progress bar counting ``unit`` reads, on a terminal only."""
    bar = progress.bar(total, 'snapshot')
    if bar is not None:
        bar.unit = unit
    return bar


class Snapshot(commands.Command):
    """Export compute node trees from Placement into a snapshot file.

    Read only. Exports the trees of the given hosts, or of every tree that
    holds a Nova PCI provider (any provider with the trait
    COMPUTE_MANAGED_PCI_DEVICE; from --snapshot: every tree), with
    inventories, traits, aggregates and the allocations on them; the trees
    left out, and consumers that lose allocations on them, are named on
    standard error. The file feeds --snapshot of the other
    commands. Reads run in parallel (--workers), a constant number of
    requests per provider and per consumer.

    With --from-topology no cloud is read: the file holds the flat trees
    that Nova would report for the topology's hosts (compute node with
    VCPU, MEMORY_MB, DISK_GB and its traits; one PCI provider per GPU named
    <host>_<ADDRESS> with COMPUTE_MANAGED_PCI_DEVICE and OWNER_NOVA), with
    reproducible uuids, to plan, verify flavors and size capacity before
    the hosts exist.

    With --as-configured TOPOLOGY the exported trees are written as Nova
    will report them once each nova-compute of the topology runs the [pci]
    device_spec entries "openstack nvlink nova-config --host HOST" prints:
    each GPU provider gets exactly the traits of the first entry its
    device matches (the member traits the multi-GPU flavors require), and
    nothing else changes. Standard error says per host what was added; a
    GPU provider no entry matches (a GPU the topology excludes) is named
    and left as it is. CI verifies flavors on the result before the
    rollout.
    """

    auth_required = False

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--host', metavar='HOST', action='append',
                            default=[], help='Compute host (repeatable).')
        parser.add_argument('-o', '--output', metavar='FILE', required=True,
                            help='Snapshot file to write (JSON); - writes '
                                 'it to standard output (the summary line '
                                 'goes to standard error either way).')
        parser.add_argument('--workers', type=usage.positive_int,
                            default=DEFAULT_WORKERS,
                            metavar='N',
                            help='Reads in flight at once against a live '
                                 'cloud (default %d). About what Placement '
                                 'serves at once (its worker processes x '
                                 'threads): more only queue there and cost '
                                 'its CPU.' % DEFAULT_WORKERS)
        live.add_retry_arguments(parser)
        source = parser.add_mutually_exclusive_group()
        source.add_argument(
            '--snapshot', metavar='FILE',
            help='Export from an embedded Placement loaded from this '
                 'snapshot file (e.g. to select --host trees).')
        source.add_argument(
            '--from-topology', metavar='FILE',
            help='Write the flat trees Nova would report for the hosts of '
                 'this topology file instead of reading Placement. Here it '
                 'takes the file; simulate --from-topology is a flag that '
                 'uses the file of its --topology.')
        parser.add_argument(
            '--as-configured', metavar='TOPOLOGY',
            help='Write the trees as Nova reports them once restarted with '
                 'the [pci] device_spec entries nova-config prints for this '
                 'topology file: each GPU provider gets the traits of the '
                 'entry its device matches (not with --from-topology, '
                 'which gives them already).')
        group = parser.add_argument_group('with --from-topology')
        group.add_argument(
            '--resource-class', metavar='RC', type=resource_class_option,
            help="Resource class of GPUs whose topology entry has no "
                 "'resource_class' (nor vendor_id and device_id), "
                 "normalized as Nova does, e.g. CUSTOM_PCI_10DE_2330.")
        for option, default, what in (
                ('--vcpus', nova_tree.VCPUS, 'VCPU'),
                ('--memory-mb', nova_tree.MEMORY_MB, 'MEMORY_MB'),
                ('--disk-gb', nova_tree.DISK_GB, 'DISK_GB')):
            group.add_argument(option, type=int, metavar='N',
                               help='%s total of each compute node '
                                    '(default %d).' % (what, default))
        return parser

    def take_action(self, parsed_args):
        given = [option for option in _FROM_TOPOLOGY_ONLY
                 if getattr(parsed_args, option[2:].replace('-', '_'))
                 is not None]
        if given and not parsed_args.from_topology:
            raise errors.UsageError(
                '%s only go%s with --from-topology (a snapshot of Placement '
                'copies what is there)' % (' and '.join(given),
                                           'es' if len(given) == 1 else ''))
        if parsed_args.as_configured and parsed_args.from_topology:
            raise errors.UsageError(
                '--as-configured goes with --snapshot or a live cloud: '
                '--from-topology already writes the traits of nova-config\'s '
                'device_spec entries')
        configured = None
        if parsed_args.as_configured:
            # Read before the export: a bad file costs no Placement reads.
            configured = topology_cmd.load_topology(
                self.app, parsed_args.as_configured)
        with interrupt.handled() as stop:
            try:
                # Once the file is written, a signal changes nothing.
                return self._export(parsed_args, configured, stop)
            except errors.Interrupted:
                pass
            output = parsed_args.output
            self.app.stderr.write(
                'interrupted by %s: no snapshot written (%s); run the '
                'command again\n' % (stop.name, 'nothing on standard output'
                                     if output == '-' else
                                     '%s not written' % output))
            stop.exit()
            return stop.exit_code

    def _export(self, parsed_args, configured, stop):
        """Export and write the file; stops on ``stop`` before the write.

        :raises Interrupted: a stop was requested; nothing was written.
        """
        left_out = {}
        if parsed_args.from_topology:
            document = self._from_topology(parsed_args)
        elif parsed_args.snapshot:
            with offline.offline(parsed_args.snapshot) as embedded:
                document = embedded.export(parsed_args.host, left_out)
        else:
            client = live.live_client(self.app, parsed_args, FROM_HINT)
            client.stop = stop.event
            document = stop.call(
                snapshot_api.export, client, parsed_args.host,
                workers=max(1, parsed_args.workers), progress=_progress,
                left_out=left_out)
        if configured is not None:
            document = self._as_configured(document, configured,
                                           parsed_args.host)
        output = parsed_args.output
        if output == '-':
            if stop.requested():
                raise errors.Interrupted()
            # As topology merge -o -: the data alone on standard output.
            self.app.stdout.write(snapshot.dumps(document))
            output = '<stdout>'
        else:
            snapshot.write_file(document, output, stop.event)
        why = ('not named by --host' if parsed_args.host else
               'without a Nova PCI provider (--host names trees to export)')
        for line in snapshot.left_out_lines(output, left_out, why):
            self.app.stderr.write(line + '\n')
        if not parsed_args.from_topology and not parsed_args.snapshot:
            for line in snapshot.over_capacity(document, output):
                LOG.warning('%s', line)
        # On standard error, as reshape and flatten say --save-snapshot.
        self.app.stderr.write(offline.snapshot_written(output, document))
        return 0

    def _as_configured(self, document, topology, names):
        hosts = [n for n in names if n in topology.hosts] if names else [
            n for n in topology.hosts]
        document, reports, messages = as_configured.apply(
            document, topology, hosts)
        snapshot.validate(document, topology.source)
        for report in reports:
            self.app.stderr.write('as configured: %s\n' % report.line())
        for message in messages:
            LOG.warning('%s', message)
        unmatched = sum(len(r.unmatched) for r in reports)
        if unmatched:
            LOG.warning('%d GPU provider(s) match no device_spec entry of '
                        'nova-config: the topology excludes or does not list '
                        'them, so Nova will delete them (or refuse while '
                        'they are allocated); left as they are', unmatched)
        self.app.stderr.write(
            'as configured: %d host(s), %d of %d GPU provider(s) given '
            'traits, %d unmatched\n' % (
                len(reports), sum(len(r.added) for r in reports),
                sum(r.providers for r in reports), unmatched))
        return document

    def _from_topology(self, parsed_args):
        sizes = {}
        for name, default in (('vcpus', nova_tree.VCPUS),
                              ('memory_mb', nova_tree.MEMORY_MB),
                              ('disk_gb', nova_tree.DISK_GB)):
            value = getattr(parsed_args, name)
            sizes[name] = default if value is None else value
            if sizes[name] < 1:
                raise errors.UsageError('--%s must be at least 1'
                                        % name.replace('_', '-'))
        topology = topology_cmd.load_topology(self.app,
                                              parsed_args.from_topology)
        rc = parsed_args.resource_class
        return as_configured.from_topology(
            topology, parsed_args.host,
            resource_class=nova_resource_class(rc) if rc else None,
            **sizes)


class SnapshotLoad(commands.Command):
    """Load a snapshot file into a live, empty Placement.

    Writes through Placement's REST API what the file holds: resource
    providers with their inventories, traits and aggregates, then the
    consumers' allocations (custom resource classes and traits first).
    For a Placement on a laptop (see "Trying live mode on a laptop" in the
    operator guide) and for staging clouds built from a production
    snapshot. The whole file is checked before the first write: a bad
    file writes nothing. A Placement that holds resource providers
    already is refused unless --allow-existing is given; then the
    snapshot's providers (by uuid and name) and consumers must not be
    there yet. --dry-run checks all that and writes nothing. Provider
    uuids, names and consumer uuids are kept, so "snapshot -o" of the
    loaded Placement gives the file back (consumer generations are
    Placement's own: 1).
    """

    auth_required = False

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('file', metavar='FILE',
                            help='Snapshot file (JSON, as "openstack nvlink '
                                 'snapshot -o FILE" writes it).')
        parser.add_argument('--allow-existing', action='store_true',
                            help='Load into a Placement that holds other '
                                 'resource providers already (none of the '
                                 'snapshot\'s may be there).')
        parser.add_argument('--dry-run', action='store_true',
                            help='Check the file and Placement, write '
                                 'nothing.')
        live.add_retry_arguments(parser)
        return parser

    def take_action(self, parsed_args):
        document = snapshot.read_file(parsed_args.file)
        client = live.live_client(
            self.app, parsed_args,
            'snapshot load writes into a live Placement: give its endpoint '
            'and credentials (--os-endpoint URL --os-auth-type admin_token '
            '--os-token TOKEN, or --os-cloud NAME)')
        held, clashes = snapshot_api.in_the_way(client, document)
        if held and not parsed_args.allow_existing:
            raise errors.NvlinkError(
                'Placement holds %s already; snapshot load fills an empty '
                'one (a laptop, a staging cloud). --allow-existing loads '
                'next to them' % display.plural(held, 'resource provider'))
        if clashes:
            shown = clashes[:10] + (['... and %d more' % (len(clashes) - 10)]
                                    if len(clashes) > 10 else [])
            raise errors.NvlinkError(
                'Placement already has what %s holds; nothing written:\n  %s'
                % (parsed_args.file, '\n  '.join(shown)))
        what = '%s, %s' % (
            display.plural(len(document['resource_providers']),
                           'resource provider'),
            display.plural(len(document.get('allocations', {})),
                           'consumer'))
        if parsed_args.dry_run:
            self.app.stderr.write('%s: dry run: would load %s; nothing '
                                  'written\n' % (parsed_args.file, what))
            return
        with interrupt.handled() as stop:
            client.stop = stop.event
            try:
                stop.call(snapshot_api.load, client, document,
                          progress=_load_progress)
            except errors.Interrupted:
                pass
            if stop.requested():
                writes = sum(client.requests[m]
                             for m in ('POST', 'PUT', 'DELETE'))
                self.app.stderr.write(
                    'interrupted by %s: %s of %s loaded (%s sent); '
                    'Placement holds part of the file: a second load is '
                    'refused while any of it is there, so load into an '
                    'empty Placement again\n' % (
                        stop.name, 'nothing' if not writes else 'part',
                        parsed_args.file, display.plural(writes, 'write')))
                stop.exit()
                return stop.exit_code
        self.app.stderr.write('%s: loaded %s into Placement\n'
                              % (parsed_args.file, what))


def _load_progress(total, unit):
    """A progress bar counting providers written, on a terminal only."""
    bar = progress.bar(total, 'snapshot load')
    if bar is not None:
        bar.unit = unit
    return bar
