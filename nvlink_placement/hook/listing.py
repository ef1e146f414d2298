"""This host's partitions as ``host partitions`` lists them (I/O).

Fabric Manager's answer (:mod:`nvlink_placement.fabric.access`), or a
saved ``fmpm -l`` JSON file, placed on this host's GPU addresses through
the mapping file (:func:`partitions.place`).
"""

import os

from nvlink_placement.discovery import fm_partitions
from nvlink_placement.discovery import module_ids
from nvlink_placement import errors
from nvlink_placement.fabric import access
from nvlink_placement.fabric import client
from nvlink_placement.hook import partitions


def list_partitions(mapping=None, fm_address=None, fm_socket=None,
                    fm_library=None,
                    fm_timeout=client.DEFAULT_TIMEOUT_MS / 1000.0,
                    fmpm_json=None, fm_deadline=access.DEFAULT_DEADLINE):
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
        report = fm_partitions.read_fmpm_json(fmpm_json)
    else:
        report = access.read_partitions(fm_library, fm_address, fm_socket,
                                        fm_timeout, fm_deadline)
    return partitions.place(report.partitions, ids.ids, ids.source)
