"""Per-GPU usage: how each Nova PCI RP's inventory is used or reserved."""

import dataclasses

from nvlink_placement.placement import naming

FREE = 'free'
USED = 'used'
RESERVED = 'reserved'


@dataclasses.dataclass(frozen=True)
class GpuUse:
    """Inventory and usage of one PCI RP, summed over its resource classes.

    :ivar total: units in inventory; :ivar reserved: units reserved;
    :ivar used: units allocated to consumers.
    """
    total: int
    reserved: int
    used: int

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


def read(client, state, root_uuids):
    """Usage of every PCI RP in the trees of ``root_uuids``.

    Costs two GETs per PCI RP (inventories and usages): Placement has no
    bulk usage listing per provider.

    :returns: dict RP uuid -> :class:`GpuUse`.
    """
    result = {}
    for root in root_uuids:
        for rp in state.tree(root):
            if naming.PCI_TRAIT not in rp.traits:
                continue
            inv = client.get('/resource_providers/%s/inventories'
                             % rp.uuid)['inventories']
            used = client.get('/resource_providers/%s/usages'
                              % rp.uuid)['usages']
            result[rp.uuid] = GpuUse(
                total=sum(i['total'] for i in inv.values()),
                reserved=sum(min(i['reserved'], i['total'])
                             for i in inv.values()),
                used=sum(used.values()))
    return result
