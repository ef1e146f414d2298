"""Generated legal snapshots, for the differential tests.

:func:`generate` makes a random, seeded snapshot that Placement holds as
it is: nested trees up to four levels, sharing providers
(``MISC_SHARES_VIA_AGGREGATE``), aggregates on any provider (one spelled
in upper case, which Placement keeps verbatim), several resource classes,
standard and custom, inventory fields left out or set to unusual values
(reserved = total, min_unit above max_unit, fractional allocation ratios),
provider uuids in every spelling Placement accepts, names beyond ASCII,
and every kind of consumer: untyped (no key or ``"unknown"``), INSTANCE,
MIGRATION, a custom type, generations 0, 1 and more, allocations across
trees and over capacity. :func:`expected` is what an export of it must
give back.
"""

import random
import uuid as uuid_lib

from nvlink_placement.placement import snapshot
from nvlink_placement.placement import snapshot_capacity

CLASSES = ('VCPU', 'MEMORY_MB', 'DISK_GB', 'CUSTOM_PCI_10DE_2330',
           'CUSTOM_BANDWIDTH_X', 'NET_BW_EGR_KILOBIT_PER_SEC', 'PCI_DEVICE')
TRAITS = ('COMPUTE_NODE', 'OWNER_NOVA', 'COMPUTE_MANAGED_PCI_DEVICE',
          'HW_CPU_X86_AVX2', 'CUSTOM_NVLINK_X', 'CUSTOM_PHYSNET_DATA',
          'STORAGE_DISK_SSD')
RATIOS = (0.3, 0.5, 1.0, 1.5, 4.0, 16.0)
KINDS = (None, 'unknown', 'INSTANCE', 'MIGRATION', 'CUSTOM_BACKUP')
NAME_PARTS = ('compute', 'nœud', 'GPU 0000:4C:00.0', 'pool/ssd', '计算',
              'agent:br-data', '\U0001f680', 'x' * 40)


def _spelled(rng, value):
    """``value`` in one of the spellings Placement accepts for a uuid."""
    form = rng.randrange(6)
    if form == 0:
        return value.upper()
    if form == 1:
        return value.replace('-', '')
    if form == 2:
        return '{%s}' % value
    if form == 3:
        return 'urn:uuid:' + value
    return value


def generate(seed, roots=3):
    """A legal snapshot, the same for the same ``seed``."""
    rng = random.Random(seed)

    def new_uuid():
        return str(uuid_lib.UUID(int=rng.getrandbits(128), version=4))

    aggregates = [new_uuid() for _ in range(3)]
    aggregates.append(new_uuid().upper())           # kept as written
    providers = []
    names = set()

    def name():
        while True:
            text = '%s-%d' % (rng.choice(NAME_PARTS), rng.randrange(10000))
            if text not in names:
                names.add(text)
                return text

    def provider(parent, sharing=False):
        uuid = new_uuid()
        inventories = {}
        for rc in rng.sample(CLASSES, rng.randint(0 if parent else 1, 3)):
            total = rng.choice((1, 2, 8, 64, 1000, snapshot_capacity.MAX_INT))
            inv = {'total': total}
            if rng.random() < 0.5:
                inv['reserved'] = rng.choice((0, total, total // 2))
            if rng.random() < 0.4:
                inv['min_unit'] = rng.choice((1, 2, 4))
            if rng.random() < 0.4:
                inv['max_unit'] = rng.choice((1, total, 3))
            if rng.random() < 0.4:
                inv['step_size'] = rng.choice((1, 2, 1000))
            if rng.random() < 0.5:
                inv['allocation_ratio'] = rng.choice(RATIOS)
            inventories[rc] = inv
        if sharing:
            inventories['DISK_GB'] = {'total': 100000, 'max_unit': 100000}
        traits = set(rng.sample(TRAITS, rng.randint(0, 3)))
        if sharing:
            traits.add('MISC_SHARES_VIA_AGGREGATE')
        rp = {'uuid': _spelled(rng, uuid), 'name': name(),
              'parent_provider_uuid':
                  None if parent is None else _spelled(rng, parent)}
        if inventories or rng.random() < 0.5:
            rp['inventories'] = inventories
        if traits or rng.random() < 0.5:
            rp['traits'] = sorted(traits)
        if sharing or rng.random() < 0.3:
            rp['aggregates'] = rng.sample(aggregates, rng.randint(1, 2))
        providers.append(rp)
        return uuid

    def tree(parent, depth):
        node = provider(parent)
        if depth < 3:
            for _ in range(rng.randint(0, 2)):
                tree(node, depth + 1)

    for _ in range(roots):
        tree(None, 0)
    provider(None, sharing=True)
    rng.shuffle(providers)
    document = {'format': snapshot.FORMAT, 'version': snapshot.VERSION,
                'resource_providers': providers,
                'allocations': _consumers(rng, providers, new_uuid)}
    snapshot.validate(document, 'seed %d' % seed)
    return document


def _consumers(rng, providers, new_uuid):
    offered = [(rp['uuid'], rc, inv)
               for rp in providers
               for rc, inv in rp.get('inventories', {}).items()]
    consumers = {}
    for _ in range(rng.randint(3, 10)):
        chosen = {}
        for rp_uuid, rc, inv in rng.sample(offered, rng.randint(1, 4)):
            # Amounts fit, break the inventory's units or exceed it.
            chosen.setdefault(snapshot.provider_uuid(rp_uuid), {})[rc] = \
                rng.choice((1, 2, min(inv['total'], 10 ** 6), 3000))
        allocations = {_spelled(rng, rp_uuid): {'resources': resources}
                       for rp_uuid, resources in chosen.items()}
        entry = {'project_id': rng.choice(('p', 'proj ø', 'x' * 255)),
                 'user_id': rng.choice(('u', 'user-%d' % rng.randrange(9))),
                 'allocations': allocations}
        kind = rng.choice(KINDS)
        if kind:
            entry['consumer_type'] = kind
        generation = rng.choice((None, 0, 1, 7))
        if generation is not None:
            entry['consumer_generation'] = generation
        consumer = new_uuid()
        consumers[consumer.upper() if rng.random() < 0.2 else consumer] = \
            entry
    return consumers


def expected(document, generations=True):
    """The export of ``document`` loaded: canonical uuids, every field.

    :param generations: False for a load through the API, where every
        consumer gets Placement's generation 1.
    """
    document = snapshot.canonical(document)
    providers = [snapshot.provider_entry(
        rp['uuid'], rp['name'], rp.get('parent_provider_uuid'),
        {rc: dict(snapshot_capacity.INVENTORY_DEFAULTS, **inv)
         for rc, inv in rp.get('inventories', {}).items()},
        rp.get('traits', ()), rp.get('aggregates', ()))
        for rp in document['resource_providers']]
    consumers = {}
    for consumer, entry in document.get('allocations', {}).items():
        consumers[consumer] = snapshot.consumer_entry(
            entry['project_id'], entry['user_id'],
            {rp: alloc['resources']
             for rp, alloc in entry['allocations'].items()},
            entry.get('consumer_generation', snapshot.FIRST_GENERATION)
            if generations else None,
            entry.get('consumer_type'))
    return snapshot.document(providers, consumers)
