"""What the commands share: Placement access, progress, output rows.

Commands that can run with no cloud (``--snapshot``) set
``auth_required = False``; OSC decides about authentication before it
parses a command's arguments, so when such a command does need the cloud
it authenticates itself the way ``osc_lib.shell.prepare_to_run_command``
does.
"""

import contextlib
import sys

from cliff import columns
from keystoneauth1 import adapter as ks_adapter

from nvlink_placement import errors
from nvlink_placement.placement import client as pc
from nvlink_placement.placement import snapshot

# keystoneauth retries (connection errors and these statuses), with its
# exponential back-off.
CONNECT_RETRIES = 3
STATUS_RETRIES = 3
RETRIABLE_STATUSES = (502, 503, 504)


def add_placement_arguments(parser, save=True):
    """Add ``--snapshot`` (and ``--save-snapshot``) to ``parser``."""
    parser.add_argument(
        '--snapshot', metavar='FILE',
        help='Run against an embedded Placement (openstack-placement in '
             'process, SQLite in memory) loaded from this snapshot file '
             'instead of the cloud; needs no credentials.')
    if save:
        parser.add_argument(
            '--save-snapshot', metavar='OUT',
            help='With --snapshot: write the resulting Placement state to '
                 'OUT (same format).')


def authenticate(app):
    """Authenticate through OSC; return its ``ClientManager``.

    What ``osc_lib.shell.prepare_to_run_command`` does for commands with
    ``auth_required = True``; ours set it False because they also run
    offline, and call this when they do need the cloud.
    """
    manager = app.client_manager
    manager._auth_required = True
    manager._cli_options = app.cloud_config.get_one(
        cloud=app.options.cloud, argparse=app.options, validate=True,
        app_name=manager._app_name, app_version=manager._app_version)
    manager.setup_auth()
    return manager


def live_client(app):
    """Authenticate through OSC and return a :class:`PlacementClient`."""
    manager = authenticate(app)
    adapter = ks_adapter.Adapter(
        session=manager.session, service_type='placement',
        interface=manager.interface, region_name=manager.region_name,
        connect_retries=CONNECT_RETRIES, status_code_retries=STATUS_RETRIES,
        retriable_status_codes=list(RETRIABLE_STATUSES))
    return pc.PlacementClient(adapter, description='Placement')


@contextlib.contextmanager
def placement(app, parsed_args):
    """Yield a :class:`PlacementClient`: embedded or live.

    With ``--snapshot`` the file is checked, then loaded into a fresh
    embedded Placement (in bulk, see
    :mod:`nvlink_placement.placement.snapshot_db`), and on success the
    state is written to ``--save-snapshot`` when given.
    """
    path = getattr(parsed_args, 'snapshot', None)
    save = getattr(parsed_args, 'save_snapshot', None)
    if save and not path:
        raise errors.NvlinkError('--save-snapshot needs --snapshot (a live '
                                 'cloud is exported with "openstack nvlink '
                                 'snapshot")')
    if not path:
        yield live_client(app)
        return
    with offline(path, save) as embedded_placement:
        yield embedded_placement.client


@contextlib.contextmanager
def offline(path, save=None):
    """Yield an entered :class:`EmbeddedPlacement` loaded from ``path``.

    On success the resulting state is written to ``save`` when given.
    """
    from nvlink_placement.placement import embedded
    embedded_placement = embedded.EmbeddedPlacement(snapshot.read_file(path))
    with embedded_placement:
        embedded_placement.client.requests.clear()
        yield embedded_placement
        if save:
            snapshot.write_file(embedded_placement.export(), save)


def progress(total, description, enabled=None):
    """A tqdm progress bar on a terminal (stderr), or None."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled or total <= 1:
        return None
    import tqdm
    return tqdm.tqdm(total=total, desc=description, unit='host',
                     file=sys.stderr, leave=False)


class InOrder(columns.FormattableColumn):
    """A list shown in its own order, not sorted like osc_lib's ListColumn.

    Keeps physical ids and addresses aligned; JSON and YAML get the list.
    """

    def human_readable(self):
        return ', '.join(str(item) for item in self._value)

    def machine_readable(self):
        return list(self._value)
