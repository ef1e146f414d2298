"""Fabric Manager partitions for discovery: ``fmpm -l`` JSON, NVLink groups.

``fmpm -l`` prints what libnvfm's ``fmGetSupportedFabricPartitions``
returns (:mod:`nvlink_placement.fabric.client`), as JSON: a saved copy
stands in for asking Fabric Manager (``--fmpm-json``). :func:`fm_view`
turns the partitions into the NVLink groups of one host.
"""

import dataclasses
import json

from nvlink_placement.discovery import files
from nvlink_placement.discovery import module_ids
from nvlink_placement import errors
from nvlink_placement.fabric import client
from nvlink_placement.topology import boards
from nvlink_placement.topology import pci


def _field(obj, key, kinds, where, required=True):
    if not isinstance(obj, dict):
        raise errors.NvlinkError('%s: expected a JSON object' % where)
    if key not in obj:
        if required:
            raise errors.NvlinkError('%s: missing "%s"' % (where, key))
        return None
    value = obj[key]
    if not isinstance(value, kinds):
        raise errors.NvlinkError('%s.%s: unexpected value %s'
                                 % (where, key, json.dumps(value)))
    return value


def parse_fmpm_json(text, source):
    """Parse ``fmpm -l`` output (JSON; keys in any order).

    Top level ``partitionInfo[]`` (and ``numPartitions``); each partition
    ``partitionId``, ``isActive`` (integer 0/1), ``numGpus``,
    ``gpuInfo[]``; each GPU ``physicalId``, ``pciBusId``,
    ``numNvLinksAvailable``, ``maxNumNvLinks`` (unknown keys ignored).

    :returns: :class:`client.FmReport`.
    :raises NvlinkError: invalid JSON (line and column) or a missing or
        mistyped key (key path), or counts that do not match the lists.
    """
    document = files.parse_json(text, source)
    infos = _field(document, 'partitionInfo', list, source)
    count = _field(document, 'numPartitions', int, source, required=False)
    if count is not None and count != len(infos):
        raise errors.NvlinkError('%s: numPartitions is %d but partitionInfo '
                                 'lists %d' % (source, count, len(infos)))
    partitions = []
    for i, info in enumerate(infos):
        where = '%s: partitionInfo[%d]' % (source, i)
        pid = _field(info, 'partitionId', int, where)
        active = _field(info, 'isActive', int, where)
        if active not in (0, 1):
            raise errors.NvlinkError('%s.isActive: expected 0 or 1, got %s'
                                     % (where, active))
        gpus = _field(info, 'gpuInfo', list, where)
        num = _field(info, 'numGpus', int, where, required=False)
        if num is not None and num != len(gpus):
            raise errors.NvlinkError('%s: numGpus is %d but gpuInfo lists '
                                     '%d' % (where, num, len(gpus)))
        members = []
        for j, gpu in enumerate(gpus):
            at = '%s.gpuInfo[%d]' % (where, j)
            members.append(client.PartitionGpu(
                _field(gpu, 'physicalId', int, at),
                client.usable_pci_bus_id(_field(gpu, 'pciBusId', str, at,
                                                required=False), at),
                _field(gpu, 'numNvLinksAvailable', int, at, required=False),
                _field(gpu, 'maxNumNvLinks', int, at, required=False)))
        partitions.append(client.Partition(pid, bool(active),
                                           tuple(members)))
    return client.FmReport(source, partitions)


def read_fmpm_json(path):
    """Read an ``fmpm -l`` JSON file; see :func:`parse_fmpm_json`."""
    return parse_fmpm_json(files.read_text(path, 'fmpm JSON file'), path)


@dataclasses.dataclass
class FmView:
    """Fabric partitions as NVLink groups of one host.

    :ivar groups: list of address tuples (each in address order), in
        partition id order: partitions with more than one GPU and fewer
        than all of the host's, reduced to the largest laminar family.
    :ivar group_ids: the partition id of each group.
    :ivar dropped: partition ids left out because they cross others.
    :ivar degraded: dict ``{address: [reason]}`` for GPUs with fewer
        NVLinks available than their maximum.
    :ivar active: ``(partition id, addresses in address order)`` of each
        active partition (in use by a VM), in id order.
    """

    groups: list
    group_ids: list
    dropped: list
    degraded: dict
    active: list = dataclasses.field(default_factory=list)


def fm_view(report, host_addresses, known_module_ids):
    """Turn FM partitions into NVLink groups of this host's GPUs.

    A GPU is identified by FM's ``pciBusId`` when that is usable, else by
    its physical id = module id through ``known_module_ids``.

    :param report: :class:`client.FmReport`.
    :param host_addresses: the host's GPU addresses (from sysfs).
    :param known_module_ids: dict ``{address: module id}``.
    :returns: :class:`FmView`.
    :raises NvlinkError: when module ids are needed but repeat, or a
        partition names a GPU the host does not have.
    """
    need_ids = any(g.pci_bus_id is None
                   for p in report.partitions for g in p.gpus)
    inverse = (module_ids.by_module_id(
        known_module_ids, 'Fabric Manager partitions (%s)' % report.source)
        if need_ids else {})
    members = []
    links = {}
    for partition in sorted(report.partitions, key=lambda p: p.id):
        addresses = []
        for gpu in partition.gpus:
            address = gpu.pci_bus_id or inverse.get(gpu.physical_id)
            if address is None:
                raise errors.NvlinkError(
                    '%s: partition %d lists physical id %d, but no GPU of '
                    'this host has that module id (known: %s)'
                    % (report.source, partition.id, gpu.physical_id,
                       ', '.join('%d=%s' % item for item in sorted(
                           inverse.items())) or 'none; give --mapping or '
                       '--nvidia-smi-q'))
            if address not in host_addresses:
                raise errors.NvlinkError(
                    '%s: partition %d lists GPU %s, which sysfs does not '
                    'show on this host' % (report.source, partition.id,
                                           address))
            addresses.append(address)
            if gpu.nvlinks_available is not None and gpu.max_nvlinks:
                links.setdefault(address, (gpu.nvlinks_available,
                                           gpu.max_nvlinks))
        members.append((partition.id, addresses))
    table = boards.board_from_partitions('fm', host_addresses, members)
    ids = {tuple(sorted(m, key=pci.address_sort_key)): pid
           for pid, m in members}
    groups = [tuple(sorted(g, key=pci.address_sort_key))
              for g in table.groups]
    degraded = {a: ['%d of %d NVLinks available (%s)'
                    % (n, m, report.source)]
                for a, (n, m) in sorted(links.items()) if n < m}
    active = {p.id for p in report.partitions if p.active}
    return FmView(groups, [ids[g] for g in groups],
                  [pid for pid, _ in table.dropped], degraded,
                  [(pid, tuple(sorted(m, key=pci.address_sort_key)))
                   for pid, m in members if pid in active])
