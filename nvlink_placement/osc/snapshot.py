"""``openstack nvlink snapshot``: export Placement state (read only), or
write the flat tree Nova would report for a topology."""

import logging

import os_resource_classes

from nvlink_placement import errors
from nvlink_placement.osc import commands
from nvlink_placement.osc import live
from nvlink_placement.osc import offline
from nvlink_placement.osc import progress
from nvlink_placement.osc import topology as topology_cmd
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
    COMPUTE_MANAGED_PCI_DEVICE), with inventories, traits, aggregates and
    the allocations on them. The file feeds --snapshot of the other
    commands. Reads run in parallel (--workers), a constant number of
    requests per provider and per consumer.

    With --from-topology no cloud is read: the file holds the flat trees
    that Nova would report for the topology's hosts (compute node with
    VCPU, MEMORY_MB, DISK_GB and its traits; one PCI provider per GPU named
    <host>_<ADDRESS> with COMPUTE_MANAGED_PCI_DEVICE and OWNER_NOVA), with
    reproducible uuids, to plan, verify flavors and size capacity before
    the hosts exist.
    """

    auth_required = False

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--host', metavar='HOST', action='append',
                            default=[], help='Compute host (repeatable).')
        parser.add_argument('-o', '--output', metavar='FILE', required=True,
                            help='Snapshot file to write (JSON).')
        parser.add_argument('--workers', type=int, default=DEFAULT_WORKERS,
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
                 'this topology file instead of reading Placement.')
        group = parser.add_argument_group('with --from-topology')
        group.add_argument(
            '--resource-class', metavar='RC',
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
        if parsed_args.from_topology:
            document = self._from_topology(parsed_args)
        elif parsed_args.snapshot:
            with offline.offline(parsed_args.snapshot) as embedded:
                document = embedded.export(parsed_args.host)
        else:
            client = live.live_client(self.app, parsed_args)
            document = snapshot_api.export(
                client, parsed_args.host, workers=max(1, parsed_args.workers),
                progress=_progress)
        snapshot.write_file(document, parsed_args.output)
        if not parsed_args.from_topology and not parsed_args.snapshot:
            for line in snapshot.over_capacity(document, parsed_args.output):
                LOG.warning('%s', line)
        self.app.stdout.write(offline.snapshot_written(parsed_args.output,
                                                       document))

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
        return nova_tree.from_topology(
            topology, parsed_args.host,
            resource_class=nova_resource_class(rc) if rc else None,
            **sizes)
