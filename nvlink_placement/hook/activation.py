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
child process with a deadline (:mod:`nvlink_placement.fabric.deadline`):
read the partitions, decide (:mod:`.partitions`), act, disconnect.
``fm_deadline`` bounds the whole hook, from when it has the domain XML:
the lock wait counts against it and the child gets what is left. The
files it trusts are checked first (:mod:`nvlink_placement.fabric.trust`),
and the mapping's addresses must be NVIDIA GPUs of this host
(:func:`host_mapping`).
"""

import functools
import os

from nvlink_placement.discovery import module_ids
from nvlink_placement.discovery import sysfs
from nvlink_placement import errors
from nvlink_placement.fabric import access
from nvlink_placement.fabric import client as fm_client
from nvlink_placement.fabric import deadline
from nvlink_placement.fabric import trust
from nvlink_placement.hook import lock
from nvlink_placement.hook import partitions
from nvlink_placement.topology import pci

START = 'start'
STOP = 'stop'
_PLANS = {START: partitions.plan_start, STOP: partitions.plan_stop}
# action: (past tense, the FM code meaning "already so", the state).
_DONE = {'activate': ('activated', 'FM_ST_IN_USE', 'already active'),
         'deactivate': ('deactivated', 'FM_ST_UNINITIALIZED', 'not active')}
_DOING = {'activate': 'activating partition %d (fmActivateFabricPartition)',
          'deactivate':
              'deactivating partition %d (fmDeactivateFabricPartition)'}


# Unknown mapping addresses named in a message; the others are counted.
MAX_NAMED = 8


class UnknownMapping(errors.NvlinkError):
    """The mapping file names devices that are not GPUs of this host."""


def describe(problem):
    """One line for a failure: an exception, or a message.

    An ``NvlinkError`` (or a message) as it is, any other exception (a
    bug) as ``unexpected <type>: <message>``.
    """
    if isinstance(problem, BaseException) and not isinstance(
            problem, errors.NvlinkError):
        problem = 'unexpected %s: %s' % (type(problem).__name__, problem)
    return ' '.join(str(problem).split())


def pci_ids(address, sysfs_root, missing_ok=False):
    """``(vendor, device, class)`` of a PCI device as sysfs shows it.

    :param missing_ok: return None, not raise, when sysfs has no device at
        ``address``.
    :raises NvlinkError: when ``vendor``, ``device`` or ``class`` cannot
        be read (the device is not on this host, unless ``missing_ok``).
    """
    directory = os.path.join(sysfs_root, 'bus', 'pci', 'devices', address)
    values = []
    for name in ('vendor', 'device', 'class'):
        path = os.path.join(directory, name)
        try:
            with open(path, encoding='ascii', errors='replace') as handle:
                values.append(sysfs.parse_hex(handle.read(), path))
        except OSError as exc:
            if missing_ok and not os.path.lexists(directory):
                return None
            raise errors.NvlinkError('cannot read %s: %s'
                                     % (path, exc.strerror or exc))
    return tuple(values)


def gpu_model(ids):
    """``'10de:2330'`` for the ids of an NVIDIA GPU, else None.

    NVIDIA is vendor 0x10de; GPUs are PCI class 0x0300xx (VGA) or
    0x0302xx (3D controller), as in :mod:`nvlink_placement.discovery.sysfs`.
    """
    if ids is None:
        return None
    vendor, device, pci_class = ids
    if vendor == sysfs.NVIDIA_VENDOR and pci_class >> 8 in sysfs.GPU_CLASSES:
        return '%04x:%04x' % (vendor, device)
    return None


def nvidia_gpus(addresses, sysfs_root):
    """The addresses that sysfs shows as NVIDIA GPUs, with their model.

    :returns: dict ``{address: model}`` (``'10de:2330'``).
    :raises NvlinkError: when a device's ``vendor``, ``device`` or
        ``class`` cannot be read (the device is not on this host).
    """
    found = {}
    for address in addresses:
        model = gpu_model(pci_ids(address, sysfs_root))
        if model:
            found[address] = model
    return found


def host_mapping(mapping, sysfs_root):
    """Check that the mapping's addresses are NVIDIA GPUs of this host.

    A mapping written on another host, or before a GPU swap or a BIOS
    update moved the PCI addresses, would place Fabric Manager's GPUs on
    the wrong devices: a VM's baseboard GPU would then look like a GPU no
    partition holds.

    :param mapping: :class:`module_ids.ModuleIds`.
    :returns: dict ``{address: model}`` of the mapping's GPUs.
    :raises UnknownMapping: naming the file and the addresses that are not
        this host's NVIDIA GPUs (no such device, or the device's ids).
    """
    models, unknown = {}, []
    for address in sorted(mapping.ids, key=pci.address_sort_key):
        ids = pci_ids(address, sysfs_root, missing_ok=True)
        model = gpu_model(ids)
        if model:
            models[address] = model
        elif ids is None:
            unknown.append('%s (no such device)' % address)
        else:
            unknown.append('%s (%04x:%04x, class 0x%06x)'
                           % ((address,) + ids))
    if unknown:
        more = len(unknown) - MAX_NAMED
        raise UnknownMapping(
            'mapping file %s names PCI addresses that are not NVIDIA GPUs of '
            'this host: %s%s; it was written on another host or before the '
            'addresses changed: write it again on this host from nvidia-smi '
            '-q' % (mapping.source, ', '.join(unknown[:MAX_NAMED]),
                    ' and %d more' % more if more > 0 else ''))
    return models


def _act(client, step):
    """Do ``step``; returns the message to log."""
    call = (client.activate_partition if step.action == 'activate' else
            client.deactivate_partition)
    done, name, state = _DONE[step.action]
    try:
        call(step.partition.id)
    except fm_client.FabricManagerError as exc:
        if exc.name != name:
            raise
        return ('%s: Fabric Manager says it is %s (%s)'
                % (step.detail, state, name))
    return '%s %s' % (done, step.detail)


def _talk_to_fm(settings, action, name, gpus, mapping, models, step):
    """The Fabric Manager part, run in the child process.

    :param gpus: the VM's NVIDIA GPUs (addresses).
    :param models: dict ``{address: model}`` of the VM's and the
        mapping's GPUs; the partitions' other GPUs (a ``pciBusId`` from
        FM) are looked up here.
    :returns: list of messages to log (INFO).
    """
    messages = []
    step('connecting (fm_library %s)' % (settings.fm_library or 'libnvfm'))
    with access.client(settings.fm_library, settings.fm_address,
                       settings.fm_socket, settings.fm_timeout) as fm:
        step('reading the partitions (fmGetSupportedFabricPartitions)')
        table = partitions.place(fm.supported_partitions(), mapping.ids,
                                 mapping.source)
        models = dict(models)
        for address in sorted(set().union(*(p.addresses for p in table)) -
                              set(models), key=pci.address_sort_key):
            models[address] = gpu_model(pci_ids(address, settings.sysfs_root,
                                                missing_ok=True))
        vm = partitions.vm_gpus(name, gpus, table, mapping.source, models)
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


def _run(settings, action, domain, log, until):
    gpus = nvidia_gpus(domain.pci_addresses, settings.sysfs_root)
    if not gpus:
        log.info('VM %s passes through no NVIDIA GPU (%s): nothing to do'
                 % (domain.name, ', '.join(domain.pci_addresses)))
        return
    trust.check(settings.mapping, 'mapping file')
    if settings.fm_library:
        trust.check(settings.fm_library, 'fm_library')
    mapping = module_ids.read_mapping(settings.mapping)
    models = host_mapping(mapping, settings.sysfs_root)
    models.update(gpus)
    with lock.HostLock(settings.lock_dir, settings.lock_timeout,
                       deadline=until) as held:
        messages = deadline.run(
            functools.partial(_talk_to_fm, settings, action, domain.name,
                              sorted(gpus), mapping, models),
            settings.fm_deadline, 'Fabric Manager', until=until,
            waited=held.waited)
    for message in messages:
        log.info(message)


def failed(settings, action, name, problem, log):
    """Log ``problem`` as the policy says; returns the exit status.

    :param problem: an exception of any type, or a message; logged on
        one line (:func:`describe`).
    :returns: 1 with policy ``refuse``, else 0.
    """
    problem = describe(problem)
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


def run(settings, action, domain, log, started=None):
    """Do what ``action`` needs for ``domain``, applying the policy.

    Every failure takes the policy path with a one-line message: a user
    or host problem (``NvlinkError``) as it is, anything else (a bug) as
    ``unexpected <type>: <message>``. Nothing here outlasts
    ``settings.fm_deadline`` seconds from ``started``: the wait for the
    host lock counts against it, and Fabric Manager gets what is left.

    :param settings: :class:`config.Settings`.
    :param action: :data:`START` or :data:`STOP`.
    :param domain: :class:`domain.Domain`.
    :param log: a ``logging.Logger``.
    :param started: when the hook had read the domain XML
        (``time.monotonic()``); None: now.
    :returns: the exit status: 0, or 1 when something failed and the
        policy is ``refuse``.
    """
    until = deadline.Deadline.start(settings.fm_deadline, started)
    try:
        _run(settings, action, domain, log, until)
    except Exception as exc:
        return failed(settings, action, domain.name, exc, log)
    return 0
