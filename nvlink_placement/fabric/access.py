"""Fabric Manager access for the hook and the host commands (I/O).

The connection itself is :class:`.client.FabricManagerClient`
(libnvfm through ctypes, one reconnection after an FM restart). The host
commands (``host partitions``, ``host inspect``) read the partitions
through :func:`read_partitions`: in a child process given up at a
deadline (:mod:`.deadline`), like the hook, so a Fabric Manager that
never answers cannot hold them either.
"""

import functools

from nvlink_placement import errors
from nvlink_placement.fabric import client as fm_client
from nvlink_placement.fabric import deadline
from nvlink_placement.fabric import library

# Seconds the host commands wait for the whole Fabric Manager
# conversation (the hook's fm_deadline default).
DEFAULT_DEADLINE = 30.0


def client(library_path, address, unix_socket, timeout_s):
    """A not yet opened client; use it as a context manager.

    A ``library_path`` is checked to be libnvfm before it is loaded
    (:func:`library.check`).

    :raises NotLibnvfm: when ``library_path`` is not libnvfm.
    :raises LibraryNotFound: when libnvfm cannot be loaded.
    :raises NvlinkError: for an invalid address.
    """
    if library_path:
        library.check(library_path)
    return fm_client.FabricManagerClient(
        fm_client.load_library(library_path), address=address,
        unix_socket=unix_socket, timeout_ms=int(timeout_s * 1000))


def _query(library_path, address, unix_socket, timeout_s, explicit, step):
    """The child's side of :func:`read_partitions` (JSON-serializable)."""
    step('loading libnvfm (%s)' % (library_path or 'default search path'))
    try:
        fm = client(library_path, address, unix_socket, timeout_s)
    except fm_client.LibraryNotFound as exc:
        if explicit:
            raise
        return {'missing': str(exc)}
    try:
        step('connecting to %s (fmConnect)' % fm.description)
        with fm:
            step('reading the partitions (fmGetSupportedFabricPartitions)')
            found = fm.supported_partitions()
    except fm_client.FabricManagerError as exc:
        if explicit:
            raise
        raise errors.NvlinkError(
            '%s (libnvfm is installed, so Fabric Manager was asked; pass '
            '--no-fm to skip it)' % exc)
    return {'source': fm.description,
            'partitions': [[p.id, p.active, [list(g) for g in p.gpus]]
                           for p in found]}


def read_partitions(library_path=None, address=None, unix_socket=None,
                    timeout_s=fm_client.DEFAULT_TIMEOUT_MS / 1000.0,
                    deadline_s=DEFAULT_DEADLINE, explicit=True):
    """Ask Fabric Manager for its supported partitions, within a deadline.

    libnvfm is loaded and called in a child process that is killed at
    ``deadline_s`` (:func:`deadline.run`); a ``library_path`` is checked
    to be libnvfm before the child loads it (:func:`library.check`).

    :param timeout_s: libnvfm's own connection timeout, in seconds.
    :param deadline_s: seconds for the whole conversation.
    :param explicit: False when FM is asked only because libnvfm may be
        installed: then a missing libnvfm returns None, and a failing FM
        is an error that says how to skip it.
    :returns: :class:`.client.FmReport`, or None (see above).
    :raises DeadlineExceeded: when FM did not answer in time.
    :raises NvlinkError: for a failed call, a missing or wrong library,
        an invalid address.
    """
    found = deadline.run(
        functools.partial(_query, library_path, address, unix_socket,
                          timeout_s, explicit),
        deadline_s, 'Fabric Manager')
    if 'missing' in found:
        return None
    return fm_client.FmReport(found['source'], [
        fm_client.Partition(pid, active, tuple(
            fm_client.PartitionGpu(*gpu) for gpu in gpus))
        for pid, active, gpus in found['partitions']])
