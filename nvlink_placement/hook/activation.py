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

Everything that talks to FM runs under the host lock (:mod:`.lock`) in a
child process with a deadline (:mod:`.deadline`): read the partitions,
decide (:mod:`.partitions`), act, disconnect. The files it trusts are
checked first (:mod:`.trust`).
"""

import functools
import os

from nvlink_placement.discovery import fabric_manager
from nvlink_placement.discovery import module_ids
from nvlink_placement.discovery import sysfs
from nvlink_placement import errors
from nvlink_placement.hook import deadline
from nvlink_placement.hook import fabric
from nvlink_placement.hook import lock
from nvlink_placement.hook import partitions
from nvlink_placement.hook import trust

START = 'start'
STOP = 'stop'
_PLANS = {START: partitions.plan_start, STOP: partitions.plan_stop}
# action: (past tense, the FM code meaning "already so", the state).
_DONE = {'activate': ('activated', 'FM_ST_IN_USE', 'already active'),
         'deactivate': ('deactivated', 'FM_ST_UNINITIALIZED', 'not active')}
_DOING = {'activate': 'activating partition %d (fmActivateFabricPartition)',
          'deactivate':
              'deactivating partition %d (fmDeactivateFabricPartition)'}


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


def _act(client, step):
    """Do ``step``; returns the message to log."""
    call = (client.activate_partition if step.action == 'activate' else
            client.deactivate_partition)
    done, name, state = _DONE[step.action]
    try:
        call(step.partition.id)
    except fabric_manager.FabricManagerError as exc:
        if exc.name != name:
            raise
        return ('%s: Fabric Manager says it is %s (%s)'
                % (step.detail, state, name))
    return '%s %s' % (done, step.detail)


def _talk_to_fm(settings, action, name, gpus, mapping, step):
    """The Fabric Manager part, run in the child process.

    :returns: list of messages to log (INFO).
    """
    messages = []
    step('connecting (fm_library %s)' % (settings.fm_library or 'libnvfm'))
    with fabric.client(settings.fm_library, settings.fm_address,
                       settings.fm_socket, settings.fm_timeout) as fm:
        step('reading the partitions (fmGetSupportedFabricPartitions)')
        table = partitions.place(fm.supported_partitions(), mapping.ids,
                                 mapping.source)
        vm = partitions.vm_gpus(name, gpus, table, mapping.source)
        if vm.ignored:
            messages.append('VM %s: GPU %s is in no Fabric Manager partition '
                            '(not a baseboard GPU): ignored'
                            % (name, ', '.join(vm.ignored)))
        if vm.addresses:
            plan = _PLANS[action](table, vm, mapping.ids)
            if plan.action is None:
                messages.append(plan.detail)
            else:
                step(_DOING[plan.action] % plan.partition.id)
                messages.append(_act(fm, plan))
        step('disconnecting (fmDisconnect)')
    return messages


def _run(settings, action, domain, log):
    gpus = nvidia_gpus(domain.pci_addresses, settings.sysfs_root)
    if not gpus:
        log.info('VM %s passes through no NVIDIA GPU (%s): nothing to do'
                 % (domain.name, ', '.join(domain.pci_addresses)))
        return
    trust.check(settings.mapping, 'mapping file')
    if settings.fm_library:
        trust.check(settings.fm_library, 'fm_library')
    mapping = module_ids.read_mapping(settings.mapping)
    with lock.HostLock(settings.lock_dir, settings.lock_timeout):
        messages = deadline.run(
            functools.partial(_talk_to_fm, settings, action, domain.name,
                              sorted(gpus), mapping),
            settings.fm_deadline, 'Fabric Manager')
    for message in messages:
        log.info(message)


def failed(settings, action, name, problem, log):
    """Log ``problem`` as the policy says; returns the exit status.

    :param problem: an exception or a message; logged on one line.
    :returns: 1 with policy ``refuse``, else 0.
    """
    problem = ' '.join(str(problem).split())
    if action == STOP:
        message = ('VM %s stopped, its partition was not deactivated: %s'
                   % (name, problem))
    elif settings.policy == 'refuse':
        message = ('refusing to start VM %s (policy refuse): %s'
                   % (name, problem))
    else:
        message = ('VM %s starts without NVLink between its GPUs '
                   '(policy allow): %s' % (name, problem))
    if settings.policy == 'refuse':
        log.error(message)
        return 1
    log.warning(message)
    return 0


def run(settings, action, domain, log):
    """Do what ``action`` needs for ``domain``, applying the policy.

    Every failure takes the policy path with a one-line message: a user
    or host problem (``NvlinkError``) as it is, anything else (a bug) as
    ``unexpected <type>: <message>``.

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
        return failed(settings, action, domain.name, exc, log)
    except Exception as exc:
        return failed(settings, action, domain.name, 'unexpected %s: %s'
                      % (type(exc).__name__, exc), log)
    return 0
