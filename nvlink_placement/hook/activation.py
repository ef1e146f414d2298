"""Activate a VM's partition before it starts, deactivate it after.

The order follows the FM User Guide (Shared NVSwitch virtualization model:
activate the partition, then start the guest with its GPUs; after the
guest is gone, deactivate it) and libvirt's qemu hook points
(``docs/hooks.rst``): ``prepare begin`` runs before libvirt touches the
guest's resources and a non-zero exit status aborts the start; ``release
end`` runs after libvirt released them, and its exit status is only
logged.

Libnvfm semantics used (``nv_fm_agent.h``): activating an active
partition answers FM_ST_IN_USE, deactivating an inactive one
FM_ST_UNINITIALIZED; both count as success here (another tool, such as
``fmpm``, may have acted between our read and our call).

Everything runs under the host lock (:mod:`.lock`): read the partitions,
decide (:mod:`.partitions`), act, disconnect.
"""

import os

from nvlink_placement.discovery import fabric_manager
from nvlink_placement.discovery import module_ids
from nvlink_placement.discovery import sysfs
from nvlink_placement import errors
from nvlink_placement.hook import fabric
from nvlink_placement.hook import lock
from nvlink_placement.hook import partitions

START = 'start'
STOP = 'stop'
_PLANS = {START: partitions.plan_start, STOP: partitions.plan_stop}
# action: (past tense, the FM code meaning "already so", the state).
_DONE = {'activate': ('activated', 'FM_ST_IN_USE', 'already active'),
         'deactivate': ('deactivated', 'FM_ST_UNINITIALIZED', 'not active')}


def nvidia_gpus(addresses, sysfs_root):
    """The addresses that sysfs shows as NVIDIA GPUs.

    NVIDIA is vendor 0x10de; GPUs are PCI class 0x0300xx (VGA) or
    0x0302xx (3D controller), as in :mod:`nvlink_placement.discovery.sysfs`.

    :raises NvlinkError: when a device's ``vendor`` or ``class`` cannot be
        read (the device is not on this host).
    """
    found = set()
    for address in addresses:
        values = []
        for name in ('vendor', 'class'):
            path = os.path.join(sysfs_root, 'bus', 'pci', 'devices', address,
                                name)
            try:
                with open(path, encoding='ascii', errors='replace') as handle:
                    values.append(sysfs.parse_hex(handle.read(), path))
            except OSError as exc:
                raise errors.NvlinkError('cannot read %s: %s'
                                         % (path, exc.strerror or exc))
        vendor, pci_class = values
        if (vendor == sysfs.NVIDIA_VENDOR and
                pci_class >> 8 in sysfs.GPU_CLASSES):
            found.add(address)
    return found


def _act(client, step, log):
    call = (client.activate_partition if step.action == 'activate' else
            client.deactivate_partition)
    done, name, state = _DONE[step.action]
    try:
        call(step.partition.id)
    except fabric_manager.FabricManagerError as exc:
        if exc.name != name:
            raise
        log.info('%s: Fabric Manager says it is %s (%s)'
                 % (step.detail, state, name))
        return
    log.info('%s %s' % (done, step.detail))


def _vm_gpus(settings, domain, log):
    """The VM's baseboard GPUs and the mapping, or None when it has none."""
    gpus = nvidia_gpus(domain.pci_addresses, settings.sysfs_root)
    if not gpus:
        log.info('VM %s passes through no NVIDIA GPU (%s): nothing to do'
                 % (domain.name, ', '.join(domain.pci_addresses)))
        return None
    mapping = module_ids.read_mapping(settings.mapping)
    vm = partitions.vm_gpus(domain.name, gpus, mapping.ids)
    if vm.ignored:
        log.info('VM %s: GPU %s not in %s (not a baseboard GPU): ignored'
                 % (domain.name, ', '.join(vm.ignored), mapping.source))
    if not vm.addresses:
        return None
    return vm, mapping


def _run(settings, action, domain, log):
    found = _vm_gpus(settings, domain, log)
    if found is None:
        return
    vm, mapping = found
    with lock.HostLock(settings.lock_dir, settings.lock_timeout):
        with fabric.client(settings.fm_library, settings.fm_address,
                           settings.fm_socket, settings.fm_timeout) as fm:
            table = partitions.place(fm.supported_partitions(), mapping.ids,
                                     mapping.source)
            step = _PLANS[action](table, vm, mapping.ids)
            if step.action is None:
                log.info(step.detail)
            else:
                _act(fm, step, log)


def run(settings, action, domain, log):
    """Do what ``action`` needs for ``domain``, applying the policy.

    :param settings: :class:`config.Settings`.
    :param action: :data:`START` or :data:`STOP`.
    :param domain: :class:`domain.Domain`.
    :param log: a ``logging.Logger``.
    :returns: the exit status: 0, or 1 when something failed and the
        policy is ``refuse``.
    """
    try:
        _run(settings, action, domain, log)
    except errors.NvlinkError as exc:
        if action == STOP:
            message = ('VM %s stopped, its partition was not deactivated: %s'
                       % (domain.name, exc))
        elif settings.policy == 'refuse':
            message = ('refusing to start VM %s (policy refuse): %s'
                       % (domain.name, exc))
        else:
            message = ('VM %s starts without NVLink between its GPUs '
                       '(policy allow): %s' % (domain.name, exc))
        if settings.policy == 'refuse':
            log.error(message)
            return 1
        log.warning(message)
    return 0
