"""``openstack nvlink host inspect``: the OSC face of nvlink-host-inspect.

No logic here: the options and the work live in
:mod:`nvlink_placement.cmd.host_inspect`.
"""

from osc_lib.command import command

from nvlink_placement.cmd import host_inspect


class HostInspect(command.Command):
    """Print this host's topology fragment (GPUs, NVLink domains, health).

    Runs on the compute host; needs no cloud credentials.
    """

    auth_required = False

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        return host_inspect.add_arguments(parser)

    def take_action(self, parsed_args):
        host_inspect.execute(parsed_args, self.app.stdout)
