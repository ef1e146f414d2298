"""OpenStackClient plugin hooks for ``openstack nvlink ...``.

Registered in ``setup.cfg`` under ``openstack.cli.extension`` as
``nvlink``; commands live in the ``openstack.nvlink.v1`` group. The
commands talk to Placement through the OSC session themselves (see
:mod:`nvlink_placement.osc.live`), so the client made here only carries
that session.

Importing it also masks secrets in osc_lib's log lines (the command line,
its options and auth parameters; :mod:`.logmask`): OSC imports plugins
before it logs.
"""

from nvlink_placement.osc import logmask

logmask.install()

API_NAME = 'nvlink'
API_VERSION_OPTION = 'os_nvlink_api_version'
API_VERSIONS = {'1': 'nvlink_placement.osc.plugin.Client'}


class Client(object):
    """Holds the OSC session and endpoint filter for Placement."""

    def __init__(self, session, region_name=None, interface=None):
        self.session = session
        self.region_name = region_name
        self.interface = interface


def make_client(instance):
    """Return a :class:`Client` for the OSC ``ClientManager``."""
    return Client(instance.session, instance.region_name, instance.interface)


def build_option_parser(parser):
    """Add ``--os-nvlink-api-version`` (OSC needs one per plugin)."""
    parser.add_argument(
        '--os-nvlink-api-version', metavar='<nvlink-api-version>',
        default='1', choices=sorted(API_VERSIONS),
        help='nvlink command set version (only 1).')
    parser.add_argument(
        '--os-nvlink-gpus-file-dir', metavar='<dir>', action='append',
        default=[],
        help='A directory from which a topology\'s gpus_file may be read '
             'besides the topology file\'s own directory and its '
             'subdirectories (repeatable). Without it a gpus_file that '
             'leads elsewhere (.., an absolute path, a symbolic link) is '
             'an error.')
    return parser
