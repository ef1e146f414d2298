"""Per-GPU usage: how each Nova PCI RP's inventory is used or reserved."""

import dataclasses

from nvlink_placement.placement import naming
from nvlink_placement.placement import reads

FREE = 'free'
USED = 'used'
RESERVED = 'reserved'


@dataclasses.dataclass(frozen=True)
class GpuUse:
    """Inventory and usage of one PCI RP, summed over its resource classes.

    :ivar total: units in inventory; :ivar reserved: units reserved;
    :ivar used: units allocated to consumers.
    :ivar resource_classes: sorted tuple of the inventory's classes.
    """
    total: int
    reserved: int
    used: int
    resource_classes: tuple = ()

    @property
    def status(self):
        """One of ``used``, ``reserved`` or ``free``.

        ``used`` when anything is allocated, ``reserved`` when no unit is
        left otherwise, else ``free``.
        """
        if self.used:
            return USED
        if self.reserved >= self.total:
            return RESERVED
        return FREE


def read(client, state, root_uuids, workers=1):
    """Usage of every PCI RP in the trees of ``root_uuids``.

    Requests: one GET of inventories per PCI RP (Placement has no bulk
    read), the listings of :func:`nvlink_placement.placement.reads.unused`
    that prove most GPUs have nothing allocated, and one GET of usages for
    each of the others; ``workers`` in flight at once.

    :returns: dict RP uuid -> :class:`GpuUse`.
    """
    gpus = [rp.uuid for root in root_uuids for rp in state.tree(root)
            if naming.PCI_TRAIT in rp.traits]
    inventories = dict(zip(gpus, reads.parallel(
        lambda uuid: client.get('/resource_providers/%s/inventories'
                                % uuid)['inventories'], gpus, workers)))
    free = reads.unused(client, inventories, reads.listing_cost(state))
    busy = [uuid for uuid in gpus if uuid not in free]
    usages = dict(zip(busy, reads.parallel(
        lambda uuid: client.get('/resource_providers/%s/usages'
                                % uuid)['usages'], busy, workers)))
    return {uuid: GpuUse(
        total=sum(i['total'] for i in inv.values()),
        reserved=sum(min(i['reserved'], i['total']) for i in inv.values()),
        used=sum(usages.get(uuid, {}).values()),
        resource_classes=tuple(sorted(inv)))
        for uuid, inv in inventories.items()}
