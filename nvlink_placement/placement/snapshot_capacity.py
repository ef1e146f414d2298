"""Capacity of a snapshot's inventories against its allocations.

Pure, on a snapshot that :func:`nvlink_placement.placement.snapshot.validate`
accepted. Placement lets an inventory change after the allocations
against it (``_update_inventory_for_provider`` in
``placement/objects/resource_provider.py`` logs "now over-capacity" and
keeps them): a lowered ``cpu_allocation_ratio`` on a busy host, a host
that lost memory, Nova's ``reserved = total`` on an allocated one-time-use
device. Such a snapshot is still loaded; this module finds those
inventories:

- :func:`over_capacity`: usage above ``total * allocation_ratio``, as
  ``(JSON path, what)`` pairs that :mod:`.snapshot` formats;
- :func:`strained`: the inventories Placement would not accept those
  allocations against now, which loading writes relaxed first.

It owns Placement's inventory defaults (:data:`INVENTORY_DEFAULTS`) that
the snapshot schema and loaders share.
"""

#: Placement's integer column limit (placement/db/constants.py MAX_INT).
MAX_INT = 0x7FFFFFFF
#: Inventory fields left out take Placement's defaults
#: (placement/handlers/inventory.py).
INVENTORY_DEFAULTS = {'reserved': 0, 'min_unit': 1, 'max_unit': MAX_INT,
                      'step_size': 1, 'allocation_ratio': 1.0}


def _usage(document):
    """``{(rp uuid, rc): (amount, [consumer, ...])}`` of a valid snapshot."""
    used = {}
    for consumer, alloc in sorted(document.get('allocations', {}).items()):
        for rp_uuid, entry in alloc['allocations'].items():
            for rc, amount in entry['resources'].items():
                total, users = used.get((rp_uuid, rc), (0, []))
                used[(rp_uuid, rc)] = (total + amount, users + [consumer])
    return used


def over_capacity(document):
    """Usage above ``total * allocation_ratio``, one pair per inventory.

    The instances keep running; nothing more fits there until usage
    drops.

    :returns: list of ``(path, what)``, sorted by provider uuid and
        resource class: ``path`` the JSON path (a tuple of keys) of the
        last consumer's allocation there, ``what`` the message.
    """
    providers = {rp['uuid']: rp for rp in document['resource_providers']}
    found = []
    for (rp_uuid, rc), (amount, users) in sorted(_usage(document).items()):
        rp = providers[rp_uuid]
        inv = dict(INVENTORY_DEFAULTS, **rp['inventories'][rc])
        if amount > inv['total'] * inv['allocation_ratio']:
            found.append((
                ('allocations', users[-1], 'allocations', rp_uuid,
                 'resources', rc),
                'over capacity: %d %s allocated on %r (by %s) but its '
                'inventory holds total %d x allocation_ratio %s; Placement '
                'keeps such allocations, nothing more fits there'
                % (amount, rc, rp['name'], ', '.join(users), inv['total'],
                   inv['allocation_ratio'])))
    return found


def strained(document):
    """Inventories that Placement would not accept allocations against now.

    ``{(rp uuid, resource class)}`` where the allocations exceed
    ``(total - reserved) * allocation_ratio`` (this includes
    :func:`over_capacity`) or break ``min_unit``, ``max_unit`` or
    ``step_size``: states a live Placement reaches when an inventory
    changes after the allocation. Loading through the API writes these
    inventories relaxed first and the real values after the allocations.
    """
    inventories = {rp['uuid']: rp.get('inventories', {})
                   for rp in document['resource_providers']}
    found = set()
    for alloc in document.get('allocations', {}).values():
        for rp_uuid, entry in alloc['allocations'].items():
            for rc, amount in entry['resources'].items():
                inv = dict(INVENTORY_DEFAULTS, **inventories[rp_uuid][rc])
                if (amount < inv['min_unit'] or amount > inv['max_unit'] or
                        amount % inv['step_size']):
                    found.add((rp_uuid, rc))
    for (rp_uuid, rc), (amount, _) in _usage(document).items():
        inv = dict(INVENTORY_DEFAULTS, **inventories[rp_uuid][rc])
        if amount > (inv['total'] - inv['reserved']) * inv[
                'allocation_ratio']:
            found.add((rp_uuid, rc))
    return found
