"""Which Fabric Manager partition serves a VM's GPUs (pure logic).

Facts (``reference/fabric-manager.md``; FM User Guide, "Shared NVSwitch
Virtualization Model"):

- A VM's GPUs have NVLink between them only while the partition made of
  exactly those GPUs is active; a VM with one GPU uses the single-GPU
  partition of that GPU (every default table has one per GPU).
- FM names a partition's GPUs by physical id, which on HGX H100 and later
  equals the nvidia-smi module id, and leaves their ``pciBusId`` empty; on
  HGX A100 it fills ``pciBusId`` and the physical id is a different
  number. A GPU is therefore placed by ``pciBusId`` when FM gives one, else
  by its physical id through the BDF -> module id mapping.
- Two active partitions never share a GPU: FM refuses the activation.
- SXM GPU modules only sit on NVSwitch baseboards, and a model's PCI
  device id differs between its SXM and PCIe forms (H100: 10de:2330 and
  10de:2331): a GPU of the partitions' model that no partition holds is a
  baseboard GPU, not a PCIe card.

Nothing here does I/O: the functions take the partitions read from FM,
the module id map and the GPU models sysfs shows, and return what to do,
or raise an error that names the VM's GPUs (address and module id) and
the partitions involved.
"""

import collections

from nvlink_placement.discovery import module_ids
from nvlink_placement import errors
from nvlink_placement.topology import pci

Member = collections.namedtuple('Member', 'physical_id address')
Member.__doc__ = """A GPU of a partition: FM's ``physical_id`` and its PCI
``address`` (sysfs form; None when neither FM nor the mapping gives it)."""


class FabricPartition(collections.namedtuple(
        'FabricPartition', 'id active members')):
    """A partition with its GPUs placed on this host.

    :ivar id: FM partition id; :ivar active: bool;
    :ivar members: tuple of :class:`Member` in physical id order.
    """

    __slots__ = ()

    @property
    def addresses(self):
        """frozenset of the members' addresses that are known."""
        return frozenset(m.address for m in self.members if m.address)

    @property
    def placed(self):
        """True when every member has an address."""
        return all(m.address for m in self.members)


VmGpus = collections.namedtuple('VmGpus', 'name addresses ignored')
VmGpus.__doc__ = """The GPUs of a VM that Fabric Manager partitions hold.

:ivar name: the libvirt domain name.
:ivar addresses: frozenset of the VM's GPUs that partitions hold.
:ivar ignored: its other GPUs (known not to be baseboard GPUs: PCIe
    cards of another model), in address order.
"""

Step = collections.namedtuple('Step', 'action partition detail')
Step.__doc__ = """What the hook does: ``action`` is ``'activate'``,
``'deactivate'`` or None (nothing to do); ``partition`` the
:class:`FabricPartition` concerned (None when there is none). ``detail``
is for the log: with an action, the partition and the VM (``partition 3
{...} of VM x``); without, a sentence saying why."""


class NoExactPartition(errors.NvlinkError):
    """No partition is made of exactly the VM's GPUs."""


class OverlappingPartition(errors.NvlinkError):
    """An active partition holds some of the VM's GPUs but is not its own."""


class UnknownGpu(errors.NvlinkError):
    """A VM's GPU may be a baseboard GPU the mapping leaves out."""


class UnplacedGpu(errors.NvlinkError):
    """A VM's GPU is of the baseboard's model but in no partition."""


def place(partitions, ids, source):
    """Give each partition GPU its PCI address.

    :param partitions: :class:`nvlink_placement.fabric.client.Partition`
        list from FM.
    :param ids: dict ``{address: module id}`` (the mapping file).
    :param source: where ``ids`` came from, for messages.
    :returns: list of :class:`FabricPartition` in partition id order. A
        GPU with no ``pciBusId`` whose physical id is no module id of the
        mapping gets address None (its partition then matches no VM).
    :raises NvlinkError: when the mapping gives one module id to several
        GPUs and FM left ``pciBusId`` empty.
    """
    need_ids = any(g.pci_bus_id is None for p in partitions for g in p.gpus)
    inverse = (module_ids.by_module_id(
        ids, 'Fabric Manager partitions (module ids from %s)' % source)
        if need_ids else {})
    placed = []
    for partition in sorted(partitions, key=lambda p: p.id):
        members = tuple(sorted(
            Member(g.physical_id, g.pci_bus_id or inverse.get(g.physical_id))
            for g in partition.gpus))
        placed.append(FabricPartition(partition.id, partition.active,
                                      members))
    return placed


def vm_gpus(name, addresses, partitions, source, models):
    """Split a VM's NVIDIA GPUs into baseboard GPUs and the rest.

    A GPU is on the NVSwitch baseboard when a partition holds it. One
    that no partition holds is known not to be (a PCIe card) only when
    every GPU of every partition has an address and is a GPU of this host
    of known model, and this GPU is of another model. Otherwise it is an
    error, since starting the VM would give that GPU no NVLink:

    - a partition GPU without an address: the mapping file leaves out a
      baseboard GPU, and it may be this one (:class:`UnknownGpu`);
    - no partition GPU at all, or one whose model is unknown: nothing to
      compare with (:class:`UnknownGpu`);
    - the same model (PCI vendor and device id) as a partition GPU: an
      SXM module sits on a baseboard only, so this is a baseboard GPU
      that the mapping places elsewhere or that Fabric Manager left out
      of its partitions (:class:`UnplacedGpu`).

    :param addresses: the VM's NVIDIA GPUs.
    :param partitions: :class:`FabricPartition` list (see :func:`place`).
    :param source: the mapping file, for messages.
    :param models: dict ``{address: model}`` (``'10de:2330'``, or None
        when sysfs does not show an NVIDIA GPU there) for the VM's GPUs
        and the partitions' GPUs; a missing address counts as None.
    :returns: :class:`VmGpus`.
    :raises UnknownGpu: for a GPU that may be a baseboard GPU.
    :raises UnplacedGpu: for a GPU of the partition GPUs' model.
    """
    board = frozenset().union(*(p.addresses for p in partitions))
    others = tuple(sorted((a for a in addresses if a not in board),
                          key=pci.address_sort_key))
    if others:
        _check_not_on_board(name, others, partitions, board, source, models)
    return VmGpus(name, frozenset(a for a in addresses if a in board),
                  others)


def _check_not_on_board(name, others, partitions, board, source, models):
    """Raise unless ``others`` are known not to be baseboard GPUs."""
    def cannot_tell(why):
        return UnknownGpu(
            'cannot tell whether GPU %s of VM %s is on the NVSwitch '
            'baseboard: no Fabric Manager partition holds it, but %s'
            % (', '.join(others), name, why))
    unplaced = sorted({m.physical_id for p in partitions for m in p.members
                       if not m.address})
    if unplaced:
        raise cannot_tell(
            '%s gives no address to physical id %s of Fabric Manager\'s '
            'partitions; write the mapping again from nvidia-smi -q (it must '
            'list every baseboard GPU)' % (source,
                                           ', '.join(map(str, unplaced))))
    if not board:
        raise cannot_tell('Fabric Manager lists no partition GPU to compare '
                          'it with')
    unknown = sorted((a for a in board if not models.get(a)),
                     key=pci.address_sort_key)
    if unknown:
        raise cannot_tell(
            'sysfs does not show partition GPU %s as an NVIDIA GPU of this '
            'host, so its model is unknown' % ', '.join(unknown))
    board_models = {models[a] for a in board}
    alike = [a for a in others if models.get(a) in board_models]
    if not alike:
        return
    one = len(alike) == 1
    raise UnplacedGpu(
        'GPU%s %s of VM %s %s like those of Fabric Manager\'s partitions, but '
        'no partition holds %s: %s that %s does not place, or that Fabric '
        'Manager left out; write the mapping again from nvidia-smi -q and '
        'compare it with `openstack nvlink host partitions`' % (
            '' if one else 's', ', '.join(alike), name,
            'is a %s GPU' % models[alike[0]] if one else
            'are %s GPUs' % ', '.join(sorted({models[a] for a in alike})),
            'it' if one else 'them',
            'a baseboard GPU' if one else 'baseboard GPUs', source))


def describe_gpus(addresses, ids):
    """``0000:3a:00.0 (module 1), 0000:18:00.0 (module 2)``.

    Ordered by module id, then address (GPUs without one come last).
    """
    def key(address):
        module_id = ids.get(address)
        return (module_id is None, module_id or 0,
                pci.address_sort_key(address))
    return ', '.join(
        address if ids.get(address) is None else
        '%s (module %d)' % (address, ids[address])
        for address in sorted(addresses, key=key))


def describe_partition(partition, ids):
    """``partition 3 {0000:3a:00.0 (module 1), 0000:5d:00.0 (module 3)}``.

    A GPU without an address shows as ``physical id N (unknown address)``.
    """
    parts = [describe_gpus(partition.addresses, ids)] if (
        partition.addresses) else []
    parts.extend('physical id %d (unknown address)' % m.physical_id
                 for m in partition.members if not m.address)
    return 'partition %d {%s}' % (partition.id, ', '.join(parts))


def exact(partitions, gpus):
    """The partition made of exactly ``gpus`` (addresses), or None."""
    for partition in partitions:
        if partition.placed and partition.addresses == gpus:
            return partition
    return None


def nearest(partitions, gpus):
    """Partitions to suggest when none is made of exactly ``gpus``.

    The smallest partitions that contain all of them, and the partitions
    of the same size that share a GPU with them; when there are none of
    either, the partitions sharing the most GPUs with them.

    :returns: list of :class:`FabricPartition` in id order.
    """
    containing = [p for p in partitions if gpus <= p.addresses]
    smallest = min((len(p.members) for p in containing), default=None)
    chosen = {p.id for p in containing if len(p.members) == smallest}
    chosen.update(p.id for p in partitions
                  if len(p.members) == len(gpus) and p.addresses & gpus)
    if not chosen:
        most = max((len(p.addresses & gpus) for p in partitions), default=0)
        chosen = {p.id for p in partitions
                  if most and len(p.addresses & gpus) == most}
    return [p for p in partitions if p.id in chosen]


def _vm(vm, ids):
    return 'VM %s (GPUs %s)' % (vm.name, describe_gpus(vm.addresses, ids))


def _no_exact(vm, partitions, ids):
    near = nearest(partitions, vm.addresses)
    return NoExactPartition(
        'no Fabric Manager partition is made of exactly the GPUs of %s; '
        'nearest: %s' % (_vm(vm, ids), ', '.join(
            describe_partition(p, ids) for p in near) or 'none'))


def _others_active(partitions, vm, own):
    return [p for p in partitions if p.active and p is not own and
            p.addresses & vm.addresses]


def _overlap(doing, vm, others, ids):
    held = '; '.join('active %s holds %s' % (
        describe_partition(p, ids), describe_gpus(p.addresses & vm.addresses,
                                                  ids)) for p in others)
    return OverlappingPartition(
        '%s: %s; an active partition is never deactivated automatically: '
        'if no running VM uses it, deactivate it (%s)' % (
            doing, held, ', '.join('`fmpm -d %d`' % p.id for p in others)))


def plan_start(partitions, vm, ids):
    """What to do before ``vm`` starts.

    :param partitions: :class:`FabricPartition` list (see :func:`place`).
    :param vm: :class:`VmGpus` with at least one GPU.
    :param ids: dict ``{address: module id}``, for messages.
    :returns: :class:`Step`: activate its partition, or nothing when that
        is already active.
    :raises NoExactPartition: naming the nearest partitions.
    :raises OverlappingPartition: when another active partition holds
        some of the VM's GPUs (FM would refuse the activation).
    """
    own = exact(partitions, vm.addresses)
    if own is None:
        raise _no_exact(vm, partitions, ids)
    if own.active:
        return Step(None, own, '%s of VM %s is already active'
                    % (describe_partition(own, ids), vm.name))
    others = _others_active(partitions, vm, own)
    if others:
        raise _overlap('cannot activate %s for %s' % (
            describe_partition(own, ids), _vm(vm, ids)), vm, others, ids)
    return Step('activate', own, '%s of VM %s'
                % (describe_partition(own, ids), vm.name))


def plan_stop(partitions, vm, ids):
    """What to do after ``vm`` has been released.

    :returns: :class:`Step`: deactivate its partition, or nothing when it
        is not active or there is none made of exactly its GPUs.
    :raises OverlappingPartition: when its own partition is not active but
        another active one holds some of its GPUs: that one may serve
        another VM, so it is named, never deactivated.
    """
    own = exact(partitions, vm.addresses)
    if own is not None and own.active:
        return Step('deactivate', own, '%s of VM %s'
                    % (describe_partition(own, ids), vm.name))
    others = _others_active(partitions, vm, own)
    if others:
        raise _overlap('%s released, and %s' % (
            _vm(vm, ids), 'no partition is made of exactly its GPUs'
            if own is None else 'its partition %d is not active' % own.id),
            vm, others, ids)
    if own is None:
        return Step(None, None, 'no Fabric Manager partition is made of '
                    'exactly the GPUs of %s: nothing to deactivate'
                    % _vm(vm, ids))
    return Step(None, own, '%s of VM %s is not active: nothing to '
                'deactivate' % (describe_partition(own, ids), vm.name))


LISTING_COLUMNS = ('partition_id', 'active', 'num_gpus', 'physical_ids',
                   'addresses')


def listing(partitions):
    """Rows for ``openstack nvlink host partitions``.

    :param partitions: :class:`FabricPartition` list.
    :returns: list of tuples in :data:`LISTING_COLUMNS` order: id, active
        (bool), GPU count, physical ids (list), addresses (list in the
        same order; ``unknown`` where there is none).
    """
    return [(p.id, p.active, len(p.members),
             [m.physical_id for m in p.members],
             [m.address or 'unknown' for m in p.members])
            for p in partitions]
