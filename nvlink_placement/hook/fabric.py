"""Fabric Manager access for the hook and the partition listing (I/O).

The connection itself is :class:`fabric_manager.FabricManagerClient`
(libnvfm through ctypes, one reconnection after an FM restart).
"""

import os

from nvlink_placement.discovery import fabric_manager
from nvlink_placement.discovery import module_ids
from nvlink_placement import errors
from nvlink_placement.hook import library
from nvlink_placement.hook import partitions


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


def list_partitions(mapping=None, fm_address=None, fm_socket=None,
                    fm_library=None,
                    fm_timeout=fabric_manager.DEFAULT_TIMEOUT_MS / 1000.0,
                    fmpm_json=None):
    """This host's partitions with their state and GPU addresses.

    :param mapping: the mapping file; None: the default one when it
        exists (without one, GPUs FM leaves without ``pciBusId`` get no
        address).
    :param fmpm_json: saved ``fmpm -l`` output instead of asking FM.
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
        with client(fm_library, fm_address, fm_socket, fm_timeout) as fm:
            report = fabric_manager.FmReport(fm.description,
                                             fm.supported_partitions())
    return partitions.place(report.partitions, ids.ids, ids.source)
