"""Combine the discovery sources into one host's topology fragment.

:func:`gather` does the I/O (sysfs, files, nvidia-smi, Fabric Manager);
:func:`build_fragment` is pure and turns what was gathered into a topology
v1 document with exactly one host. When several sources speak about the
same thing they must agree; a disagreement is an :class:`NvlinkError`
naming both sources.
"""

import collections
import dataclasses
import os

from nvlink_placement.discovery import files
from nvlink_placement.discovery import fm_partitions
from nvlink_placement.discovery import health
from nvlink_placement.discovery import module_ids
from nvlink_placement.discovery import nvidia_smi
from nvlink_placement.discovery import sysfs
from nvlink_placement.discovery import topo_matrix
from nvlink_placement import errors
from nvlink_placement.fabric import access
from nvlink_placement.fabric import client
from nvlink_placement.topology import boards
from nvlink_placement.topology import pci

SOURCE_FM = 'fm'
SOURCE_TOPO = 'topo-matrix'


@dataclasses.dataclass
class HostSources:
    """Everything gathered about one host (None: source not used).

    :ivar hostname: Nova's hypervisor_hostname for the host.
    :ivar pci: :class:`sysfs.PciInventory` (always present).
    :ivar mapping: :class:`module_ids.ModuleIds` from the mapping file.
    :ivar smi: :class:`nvidia_smi.SmiReport`.
    :ivar topo: :class:`topo_matrix.TopoMatrix`.
    :ivar fm: :class:`client.FmReport`.
    :ivar board_name: the ``--board`` name as given; ``board`` its
        :class:`boards.Board`.
    :ivar notes: notes from gathering (e.g. nvidia-smi timed out).
    """

    hostname: str
    pci: sysfs.PciInventory
    mapping: module_ids.ModuleIds | None = None
    smi: nvidia_smi.SmiReport | None = None
    topo: topo_matrix.TopoMatrix | None = None
    fm: client.FmReport | None = None
    board_name: str | None = None
    board: boards.Board | None = None
    notes: list = dataclasses.field(default_factory=list)


def gather(hostname, sysfs_root='/sys', mapping=None, nvidia_smi_q=None,
           topo_matrix_file=None, use_nvidia_smi=True, fm_address=None,
           fm_socket=None, fm_library=None,
           fm_timeout=client.DEFAULT_TIMEOUT_MS / 1000.0,
           fmpm_json=None, use_fm=True, board=None,
           fm_deadline=access.DEFAULT_DEADLINE):
    """Read every source the options ask for.

    :param mapping: mapping file; None: the default
        ``/run/nvidia-fabricmanager/gpu-pci-module-mapping.json`` when it
        exists.
    :param nvidia_smi_q, topo_matrix_file: captured outputs. When either
        is given nvidia-smi is not run; otherwise, if ``use_nvidia_smi``
        and nvidia-smi is on PATH, ``nvidia-smi -q`` and ``nvidia-smi topo
        -m`` are run (:func:`nvidia_smi.run`, 5 s timeout each).
    :param fm_address, fm_socket, fm_library, fm_timeout, fm_deadline:
        see :func:`nvlink_placement.fabric.access.read_partitions`; FM is
        asked when one of the first three is given (then every failure is
        an error) or, with none, when libnvfm can be loaded (then a missing
        library just means "no FM"); times in seconds.
    :param fmpm_json: ``fmpm -l`` output instead of asking FM.
    :param use_fm: False to never ask Fabric Manager.
    :param board: a built-in board name, or None.
    :returns: :class:`HostSources`.
    :raises NvlinkError: for unreadable or invalid inputs, conflicting
        options, and Fabric Manager failures (see :func:`_live_fm`).
    """
    if fmpm_json and (fm_address or fm_socket or fm_library):
        raise errors.NvlinkError('--fmpm-json replaces asking Fabric '
                                 'Manager: do not combine it with '
                                 '--fm-address, --fm-socket or --fm-library')
    if not use_fm and (fm_address or fm_socket or fm_library or fmpm_json):
        raise errors.NvlinkError('--no-fm contradicts the other Fabric '
                                 'Manager options')
    found = HostSources(hostname, sysfs.scan(sysfs_root))
    if board is not None:
        try:
            found.board = boards.get(board)
        except KeyError:
            raise errors.NvlinkError('unknown board %r; built-in boards: %s'
                                     % (board, ', '.join(boards.names())))
        found.board_name = board
    if mapping is None and os.path.exists(module_ids.DEFAULT_MAPPING_FILE):
        mapping = module_ids.DEFAULT_MAPPING_FILE
    if mapping is not None:
        found.mapping = module_ids.read_mapping(mapping)

    if nvidia_smi_q or topo_matrix_file:
        if nvidia_smi_q:
            found.smi = nvidia_smi.parse_query(
                files.read_text(nvidia_smi_q, 'nvidia-smi -q capture'),
                nvidia_smi_q)
        if topo_matrix_file:
            found.topo = topo_matrix.parse(
                files.read_text(topo_matrix_file,
                                'nvidia-smi topo -m capture'),
                topo_matrix_file)
    elif use_nvidia_smi:
        text, note = nvidia_smi.run(['-q'], keep_failed=True)
        if note:
            found.notes.append(note)
        if text is not None:
            found.smi = nvidia_smi.parse_query(text, '`nvidia-smi -q`')
            text, note = nvidia_smi.run(['topo', '-m'])
            if note:
                found.notes.append(note)
            if text is not None:
                found.topo = topo_matrix.parse(text, '`nvidia-smi topo -m`')

    if fmpm_json:
        found.fm = fm_partitions.read_fmpm_json(fmpm_json)
    elif use_fm:
        found.fm = access.read_partitions(
            fm_library, fm_address, fm_socket, fm_timeout, fm_deadline,
            explicit=bool(fm_address or fm_socket or fm_library))
    return found


def _group_sort_key(members):
    return (pci.address_sort_key(members[0]), -len(members))


def _show(addresses):
    return ', '.join(addresses)


def _check_sources(found):
    """Every GPU that nvidia-smi or the mapping file names is in sysfs."""
    where = 'sysfs (%s)' % found.pci.root
    named = []
    if found.smi is not None:
        named.append((found.smi.source,
                      [g.address for g in found.smi.gpus] +
                      list(found.smi.lost)))
    if found.mapping is not None:
        named.append((found.mapping.source, list(found.mapping.ids)))
    for source, addresses in named:
        unknown = [a for a in addresses if a not in found.pci.gpus]
        if unknown:
            raise errors.NvlinkError(
                '%s lists GPU %s, which %s does not show; they must '
                'describe the same host' % (source, _show(unknown), where))


def _check_within_domains(groups, view, source, topo_source):
    """Each group (``(label, members)``) lies in one NVLink domain."""
    for label, members in groups:
        touched = [d for d in view.domains if d & set(members)]
        if len(touched) > 1:
            raise errors.NvlinkError(
                '%s and %s disagree: %s groups %s, but the matrix has no '
                'NVLink between %s' % (
                    source, topo_source, label, _show(members),
                    ' and '.join('{%s}' % _show(sorted(
                        d & set(members), key=pci.address_sort_key))
                        for d in touched)))


def _check_board(found, ids):
    """Module ids fit the board; FM partitions equal the board's groups."""
    board, name = found.board, found.board_name
    missing = [a for a in found.pci.gpus if a not in ids]
    if missing:
        if found.smi is None:
            hint = 'give --mapping or --nvidia-smi-q'
        else:
            hint = ('%s gives none for them: drivers before the HGX era '
                    'print no Module ID; give --mapping' % found.smi.source)
        raise errors.NvlinkError(
            '--board %s needs the module id of every GPU, missing for %s '
            '(%s)' % (name, _show(missing), hint))
    module_ids.by_module_id(ids, '--board %s' % name)
    alien = ['%s (%d)' % (a, ids[a]) for a in found.pci.gpus
             if ids[a] not in board.gpus]
    if alien:
        raise errors.NvlinkError('module ids of %s are not on board %s '
                                 '(modules %s)' % (
                                     _show(alien), name,
                                     ', '.join(map(str, board.gpus))))
    if found.fm is None:
        return
    table = boards.board_from_partitions(
        name, board.gpus, [(p.id, [g.physical_id for g in p.gpus])
                           for p in sorted(found.fm.partitions,
                                           key=lambda p: p.id)])
    if set(table.groups) != set(board.groups):
        def show(groups):
            return ' '.join('{%s}' % ','.join(map(str, g))
                            for g in sorted(groups)) or 'none'
        raise errors.NvlinkError(
            '%s and board %s disagree on the NVLink domains (by module '
            'id): only FM has %s; only the board has %s' % (
                found.fm.source, name,
                show(set(table.groups) - set(board.groups)),
                show(set(board.groups) - set(table.groups))))


def _smi_findings(found):
    """What ``nvidia-smi -q`` says about GPUs it does not describe.

    :returns: ``(lost, missing, notes)``: dict address -> nvidia-smi's
        message for lost GPUs; dict address -> degraded reason for GPUs
        bound to the nvidia driver that it neither describes nor reports
        lost; notes for the operator.
    """
    smi = found.smi
    if smi is None:
        return {}, {}, []
    lost = {a: message for a, (_, message) in smi.lost.items()}
    described = {g.address for g in smi.gpus} | set(lost)
    missing = {a: 'bound to the nvidia driver, but %s does not describe '
                  'it (%s GPUs attached, %d described)'
               % (smi.source, smi.attached if smi.attached is not None
                  else 'unknown number of', len(smi.gpus))
               for a, gpu in found.pci.gpus.items()
               if gpu.driver == 'nvidia' and a not in described}
    notes = ['%s reports GPU %s lost: %s' % (smi.source, a, message)
             for a, message in sorted(lost.items())]
    notes += ['%s is bound to the nvidia driver but missing from %s'
              % (a, smi.source) for a in sorted(missing)]
    if smi.unaccounted():
        notes.append('%s says %d GPUs are attached, but describes %d%s' % (
            smi.source, smi.attached, len(smi.gpus),
            ' and reports %d lost' % len(lost) if lost else ''))
    return lost, missing, notes


def _affinity_notes(found, addresses, lost):
    """Where the matrix's NUMA/CPU affinity disagrees with sysfs."""
    notes = []
    for address, cells in topo_matrix.affinity(found.topo, addresses,
                                               lost).items():
        gpu = found.pci.gpus[address]
        numa = cells.get('NUMA Affinity')
        nodes = sysfs.parse_list(numa)
        if nodes is not None and gpu.numa_node is not None and (
                gpu.numa_node not in nodes):
            notes.append('%s: %s gives NUMA Affinity %s, sysfs numa_node %d'
                         ' (the fragment keeps sysfs)' % (
                             address, found.topo.source, numa,
                             gpu.numa_node))
        cpu = cells.get('CPU Affinity')
        cpus = sysfs.parse_list(cpu)
        if cpus is not None and gpu.local_cpus is not None and (
                cpus != gpu.local_cpus):
            notes.append('%s: %s gives CPU Affinity %s, sysfs local_cpulist '
                         '%s' % (address, found.topo.source, cpu,
                                 _cpu_list(gpu.local_cpus)))
    return notes


def _cpu_list(cpus):
    """frozenset of ints back to the kernel list form ``0-3,8``."""
    ranges, ordered = [], sorted(cpus)
    for cpu in ordered:
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ','.join(str(a) if a == b else '%d-%d' % (a, b)
                    for a, b in ranges)


def _wiring(found, ids):
    """``(board name, {frozenset of two addresses: NVLinks})`` or None.

    Only for a ``--board`` whose wiring the catalog knows (direct NVLink
    boards); module ids map it onto addresses.
    """
    board = found.board
    if board is None or board.links is None:
        return None
    by_module = {m: a for a, m in ids.items() if a in found.pci.gpus}
    return (found.board_name, {
        frozenset((by_module[a], by_module[b])): n
        for (a, b), n in board.links.items()
        if a in by_module and b in by_module})


def build_fragment(found):
    """Turn gathered sources into a topology v1 document for one host.

    Groups come from Fabric Manager when present (source ``fm``), else
    from ``--board`` (emitted as ``board:`` plus module ids, no
    ``groups``), else, on a host without NVSwitches, from the NVLink
    cliques of the topology matrix (source ``topo-matrix``, ``mesh:
    true``: any N of their GPUs are linked). Groups keep their full
    membership: a GPU in vGPU or MIG use is marked ``excluded`` (with the
    reason, and a note) and the topology loader leaves it out of its groups
    while keeping their nominal sizes and names. Unhealthy GPUs stay, with
    their health; a GPU ``nvidia-smi -q`` reports lost is unhealthy.

    :param found: :class:`HostSources`.
    :returns: dict ``{'version': 1, 'hosts': {hostname: {...}}}`` with the
        keys ``board``, ``gpus``, ``groups``, ``nvswitches``, ``notes``
        (optional ones omitted when empty).
    :raises NvlinkError: when sysfs shows no GPU, sources disagree (the
        message names both), or grouping needs module ids that are
        missing or repeat.
    """
    gpus = found.pci.gpus
    if not gpus:
        raise errors.NvlinkError(
            'no NVIDIA GPU under %s: run it on the compute host, or point '
            '--sysfs-root at a copy of that host\'s sysfs'
            % os.path.join(found.pci.root, 'bus', 'pci', 'devices'))
    _check_sources(found)
    smi = {g.address: g for g in found.smi.gpus} if found.smi else {}
    ids = module_ids.merge([
        found.mapping, found.smi.module_ids() if found.smi else None])
    notes = list(found.notes)
    nvlink_reasons = collections.defaultdict(list)
    lost, missing, smi_notes = _smi_findings(found)
    notes.extend(smi_notes)
    for address, reason in missing.items():
        nvlink_reasons[address].append(reason)

    if found.board is not None:
        _check_board(found, ids)
    view = None
    if found.topo is not None:
        if found.smi is None:
            raise errors.NvlinkError(
                '%s numbers GPUs by NVML index; only `nvidia-smi -q` maps '
                'them to PCI addresses: give --nvidia-smi-q too'
                % found.topo.source)
        addresses = [g.address for g in found.smi.gpus]
        view = topo_matrix.analyse(found.topo, addresses,
                                   bool(found.pci.nvswitches),
                                   _wiring(found, ids), sorted(lost))
        for address, reasons in view.degraded.items():
            nvlink_reasons[address].extend(reasons)
        notes.extend(view.notes)
        notes.extend(_affinity_notes(found, addresses, sorted(lost)))

    groups, source = [], None
    if found.fm is not None:
        fm = fm_partitions.fm_view(found.fm, list(gpus), ids)
        for address, reasons in fm.degraded.items():
            nvlink_reasons[address].extend(reasons)
        if fm.dropped:
            notes.append('FM partitions %s cross others and were left out'
                         % ', '.join(map(str, fm.dropped)))
        if fm.active:
            notes.append('FM partitions active (GPUs in use by VMs): %s'
                         % '; '.join('%d {%s}' % (pid, _show(m))
                                     for pid, m in fm.active))
        if view is not None:
            _check_within_domains(
                [('FM partition %d' % pid, g)
                 for pid, g in zip(fm.group_ids, fm.groups)],
                view, found.fm.source, found.topo.source)
        groups, source = fm.groups, SOURCE_FM
    elif found.board is not None:
        if view is not None:
            by_id = module_ids.by_module_id(ids, '--board')
            _check_within_domains(
                [('board group {%s}' % ','.join(map(str, g)),
                  sorted((by_id[m] for m in g if m in by_id),
                         key=pci.address_sort_key))
                 for g in found.board.groups],
                view, '--board %s' % found.board_name, found.topo.source)
    elif view is not None:
        groups, source = view.groups, SOURCE_TOPO

    if found.fm is None and found.board is None and found.pci.nvswitches:
        notes.append('all GPUs share one NVLink fabric (NVSwitches '
                     'present); its domains come from Fabric Manager '
                     'partitions (libnvfm, --fm-address, --fmpm-json) or '
                     '--board (%s), and neither was used' % ', '.join(
                         sorted(b.name for b in boards.BUILTIN.values()
                                if b.links is None)))

    excluded = {a: health.exclusion(g, smi.get(a)) for a, g in gpus.items()}
    notes.extend('%s will be left out of its NVLink groups: %s'
                 % (address, reason)
                 for address, reason in excluded.items() if reason)

    host = {}
    if found.board_name is not None:
        host['board'] = found.board_name
    host['gpus'] = {}
    for address, gpu in gpus.items():
        entry = {}
        if address in ids:
            entry['module_id'] = ids[address]
        entry.update({
            'vendor_id': gpu.vendor_id,
            'device_id': gpu.device_id,
            'resource_class': gpu.resource_class,
            'numa_node': ('unknown' if gpu.numa_node is None
                          else gpu.numa_node),
            'iommu_group': gpu.iommu_group,
            'driver': gpu.driver,
            'health': health.assess(gpu, smi.get(address),
                                    nvlink_reasons.get(address, ()),
                                    lost.get(address)),
        })
        if excluded[address]:
            entry['excluded'] = excluded[address]
        host['gpus'][address] = entry
    if groups:
        mesh = {'mesh': True} if source == SOURCE_TOPO else {}
        host['groups'] = [dict({'members': list(m), 'source': source}, **mesh)
                          for m in sorted(groups, key=_group_sort_key)]
    if found.pci.nvswitches:
        host['nvswitches'] = list(found.pci.nvswitches)
    if notes:
        host['notes'] = notes
    return {'version': 1, 'hosts': {found.hostname: host}}
