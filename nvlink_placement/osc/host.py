"""``openstack nvlink host inspect|partitions``: host-side commands.

No logic here: the options and the work of ``inspect`` live in
:mod:`nvlink_placement.discovery.options`, the partition table in
:mod:`nvlink_placement.hook.listing` and :mod:`nvlink_placement.hook.
partitions`.
"""


from nvlink_placement.discovery import options
from nvlink_placement.hook import listing
from nvlink_placement.hook import partitions
from nvlink_placement.osc import commands
from nvlink_placement.osc import display


class HostInspect(commands.Command):
    """Print this host's topology fragment (GPUs, NVLink domains, health).

    Runs on the compute host; needs no cloud credentials.
    """

    auth_required = False

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        return options.add_arguments(parser)

    def take_action(self, parsed_args):
        options.execute(parsed_args, self.app.stdout, self.app.stderr)


class HostPartitions(commands.Lister):
    """List this host's Fabric Manager partitions: active or not, and GPUs.

    Runs on the compute host; needs no cloud credentials. One row per
    supported partition: its id, whether it is active (in use by a VM, see
    nvlink-partition-hook), its GPUs' FM physical ids (the module ids on
    HGX H100 and later) and their PCI addresses (``unknown`` when neither
    Fabric Manager nor the mapping file gives one).
    """

    auth_required = False

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        options.add_fm_arguments(parser, no_fm=False)
        return parser

    def take_action(self, parsed_args):
        table = listing.list_partitions(
            mapping=parsed_args.mapping, fm_address=parsed_args.fm_address,
            fm_socket=parsed_args.fm_socket,
            fm_library=parsed_args.fm_library,
            fm_timeout=parsed_args.fm_timeout,
            fmpm_json=parsed_args.fmpm_json,
            fm_deadline=parsed_args.fm_deadline)
        return partitions.LISTING_COLUMNS, [
            (pid, active, count, display.InOrder(ids),
             display.InOrder(addresses))
            for pid, active, count, ids, addresses
            in partitions.listing(table)]
