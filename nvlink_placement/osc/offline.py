"""Running against a snapshot file: ``--snapshot``, ``--save-snapshot``.

:func:`placement` gives a command its Placement: an embedded one loaded
from ``--snapshot`` (:func:`offline`), else the live cloud
(:func:`.live.live_client`).
"""

import contextlib
import os

from nvlink_placement import errors
from nvlink_placement import heap
from nvlink_placement.osc import display
from nvlink_placement.osc import live
from nvlink_placement.placement import snapshot


def add_placement_arguments(parser, save=True, exclusive=None):
    """Add ``--snapshot`` (and ``--save-snapshot``) to ``parser``.

    :param exclusive: a mutually exclusive group (``--dry-run``'s) to put
        ``--save-snapshot`` in: a dry run has no state worth saving.
    """
    parser.add_argument(
        '--snapshot', metavar='FILE',
        help='Run against an embedded Placement (openstack-placement in '
             'process, SQLite in memory) loaded from this snapshot file '
             'instead of the cloud; needs no credentials.')
    if save:
        (exclusive or parser).add_argument(
            '--save-snapshot', metavar='OUT',
            help='With --snapshot: write the resulting Placement state to '
                 'OUT (same format)%s.'
                 % ('; not with --dry-run' if exclusive else ''))


@contextlib.contextmanager
def placement(app, parsed_args, stop=None):
    """Yield a :class:`PlacementClient`: embedded or live.

    With ``--snapshot`` the file is checked, then loaded into a fresh
    embedded Placement (in bulk, see
    :mod:`nvlink_placement.placement.snapshot_db`), and on success the
    state is written to ``--save-snapshot`` when given.

    :param stop: a ``threading.Event`` (SIGINT, SIGTERM) the client
        checks before each request; once set, no ``--save-snapshot`` file
        is written (:class:`errors.Interrupted` is raised instead).
    """
    path = getattr(parsed_args, 'snapshot', None)
    save = getattr(parsed_args, 'save_snapshot', None)
    if save and not path:
        raise errors.UsageError('--save-snapshot needs --snapshot (a live '
                                'cloud is exported with "openstack nvlink '
                                'snapshot")')
    if save and os.path.exists(save) and os.path.exists(path) and \
            os.path.samefile(save, path):
        raise errors.UsageError(
            '--save-snapshot %s is the --snapshot input: give another file, '
            'so that the input stays what was read' % save)
    if not path:
        client = live.live_client(app, parsed_args)
        client.stop = stop
        yield client
        return
    with offline(path, save, stop) as embedded_placement:
        embedded_placement.client.stop = stop
        yield embedded_placement.client
    if save:
        app.stderr.write(snapshot_written(save, embedded_placement.saved))


def tables(client):
    """The embedded Placement whose tables commands use directly, or None.

    The one behind ``client`` (``--snapshot``); None for a live cloud, or
    a schema revision :mod:`nvlink_placement.placement.snapshot_db` does
    not know (then everything goes through the API).
    """
    embedded_placement = getattr(client, 'placement', None)
    if embedded_placement is not None and embedded_placement.writes_tables:
        return embedded_placement
    return None


def snapshot_written(path, document):
    """The line saying a snapshot file was written, and what it holds."""
    return '%s: %s, %s\n' % (
        path, display.plural(len(document['resource_providers']),
                             'resource provider'),
        display.plural(len(document['allocations']), 'consumer'))


@contextlib.contextmanager
def offline(path, save=None, stop=None):
    """Yield an entered :class:`EmbeddedPlacement` loaded from ``path``.

    On success the resulting state is written to ``save`` when given, and
    kept as the placement's ``saved`` attribute.

    :param stop: a ``threading.Event``; when it is set, ``save`` is not
        written (nor left half-written): :class:`errors.Interrupted`.
    """
    from nvlink_placement.placement import embedded
    embedded_placement = embedded.EmbeddedPlacement(snapshot.read_file(path))
    with embedded_placement, heap.frozen():
        embedded_placement.client.requests.clear()
        yield embedded_placement
        if save:
            if stop is not None and stop.is_set():
                raise errors.Interrupted()
            embedded_placement.saved = embedded_placement.export()
            snapshot.write_file(embedded_placement.saved, save, stop)
