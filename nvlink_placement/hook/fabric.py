"""Fabric Manager access for the hook and the host commands (I/O).

The connection itself is :class:`fabric_manager.FabricManagerClient`
(libnvfm through ctypes, one reconnection after an FM restart). The host
commands (``host partitions``, ``host inspect``) read the partitions
through :func:`read_partitions`: in a child process given up at a
deadline (:mod:`.deadline`), like the hook, so a Fabric Manager that
never answers cannot hold them either.
"""

import functools
import os

from nvlink_placement.discovery import fabric_manager
from nvlink_placement.discovery import module_ids
from nvlink_placement import errors
from nvlink_placement.hook import deadline
from nvlink_placement.hook import library
from nvlink_placement.hook import partitions

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
    return fabric_manager.FabricManagerClient(
        fabric_manager.load_library(library_path), address=address,
        unix_socket=unix_socket, timeout_ms=int(timeout_s * 1000))


def _query(library_path, address, unix_socket, timeout_s, explicit, step):
    """The child's side of :func:`read_partitions` (JSON-serializable)."""
    step('loading libnvfm (%s)' % (library_path or 'default search path'))
    try:
        fm = client(library_path, address, unix_socket, timeout_s)
    except fabric_manager.LibraryNotFound as exc:
        if explicit:
            raise
        return {'missing': str(exc)}
    try:
        step('connecting to %s (fmConnect)' % fm.description)
        with fm:
            step('reading the partitions (fmGetSupportedFabricPartitions)')
            found = fm.supported_partitions()
    except fabric_manager.FabricManagerError as exc:
        if explicit:
            raise
        raise errors.NvlinkError(
            '%s (libnvfm is installed, so Fabric Manager was asked; pass '
            '--no-fm to skip it)' % exc)
    return {'source': fm.description,
            'partitions': [[p.id, p.active, [list(g) for g in p.gpus]]
                           for p in found]}


def read_partitions(library_path=None, address=None, unix_socket=None,
                    timeout_s=fabric_manager.DEFAULT_TIMEOUT_MS / 1000.0,
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
    :returns: :class:`fabric_manager.FmReport`, or None (see above).
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
    return fabric_manager.FmReport(found['source'], [
        fabric_manager.Partition(pid, active, tuple(
            fabric_manager.PartitionGpu(*gpu) for gpu in gpus))
        for pid, active, gpus in found['partitions']])


def list_partitions(mapping=None, fm_address=None, fm_socket=None,
                    fm_library=None,
                    fm_timeout=fabric_manager.DEFAULT_TIMEOUT_MS / 1000.0,
                    fmpm_json=None, fm_deadline=DEFAULT_DEADLINE):
    """This host's partitions with their state and GPU addresses.

    :param mapping: the mapping file; None: the default one when it
        exists (without one, GPUs FM leaves without ``pciBusId`` get no
        address).
    :param fmpm_json: saved ``fmpm -l`` output instead of asking FM.
    :param fm_deadline: seconds for the whole FM conversation.
    :returns: list of :class:`partitions.FabricPartition`.
    :raises NvlinkError: for unreadable files, Fabric Manager failures,
        and ``fmpm_json`` with ``fm_library``.
    """
    if fmpm_json and fm_library:
        raise errors.NvlinkError('--fmpm-json replaces asking Fabric '
                                 'Manager: do not combine it with '
                                 '--fm-library')
    if mapping is None and os.path.exists(module_ids.DEFAULT_MAPPING_FILE):
        mapping = module_ids.DEFAULT_MAPPING_FILE
    ids = (module_ids.read_mapping(mapping) if mapping else
           module_ids.ModuleIds('no mapping file', {}))
    if fmpm_json:
        report = fabric_manager.read_fmpm_json(fmpm_json)
    else:
        report = read_partitions(fm_library, fm_address, fm_socket,
                                 fm_timeout, fm_deadline)
    return partitions.place(report.partitions, ids.ids, ids.source)
