"""``openstack nvlink snapshot``: export Placement state (read only)."""

from osc_lib.command import command

from nvlink_placement.osc import common
from nvlink_placement.placement import snapshot


class Snapshot(command.Command):
    """Export compute node trees from Placement into a snapshot file.

    Read only. Exports the trees of the given hosts, or of every tree that
    holds a Nova PCI provider (any provider with the trait
    COMPUTE_MANAGED_PCI_DEVICE), with
    inventories, traits and the allocations on them. The file feeds
    --snapshot of the other commands.
    """

    auth_required = False

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--host', metavar='HOST', action='append',
                            default=[], help='Compute host (repeatable).')
        parser.add_argument('-o', '--output', metavar='FILE', required=True,
                            help='Snapshot file to write (JSON).')
        common.add_placement_arguments(parser, save=False)
        return parser

    def take_action(self, parsed_args):
        with common.placement(self.app, parsed_args) as client:
            document = snapshot.export(client, parsed_args.host)
        snapshot.write_file(document, parsed_args.output)
        self.app.stdout.write('%s: %d resource providers, %d consumers\n' % (
            parsed_args.output, len(document['resource_providers']),
            len(document['allocations'])))
