"""Generated clouds to reshape: a topology and a production snapshot.

:func:`generate` makes, for ``n`` hosts and a seed, what a CI job of the
operator guide starts from: a topology and the snapshot of a cloud that
Nova runs, with its member traits configured (``[pci] device_spec`` from
``nova-config``, so every GPU provider carries them: the hand-written
:data:`tests.novalike.BOARD_MEMBERS`), most hosts flat,
some reshaped already, some left half-way by an interrupted reshape, a
few with each kind of drift, and about a third of the GPUs in use.

Trees are not written by hand: for each board (and each variant) one
template host is reshaped by the tool itself in an embedded Placement
(or only its first writes are made, for an interrupted reshape), and its
tree is copied to every host of that variant under the host's names.

What a cloud holds (``boards='mixed'`` adds the mesh and 16-GPU boards):

- variants: ``flat``, ``reshaped``, ``partial`` (the first writes of a
  reshape), and on a reshaped tree each drift kind of ``check``:
  ``missing-group``, ``missing-trait``, ``wrong-parent``,
  ``unexpected-group``, ``missing-reservation`` (the topology says a GPU
  is unhealthy), ``stale-reservation`` (reserved for a GPU that is
  healthy again), ``unknown-gpu`` (a PCI provider the topology does not
  list), ``member-traits`` (a GPU without its member trait);
- load: instances of 1, 2, 4 and 8 GPUs (16 on 16-GPU boards) with VCPU,
  memory and disk on the compute node or on a sharing provider, inside one
  NVLink domain, some split across two; consumers of every type (typed
  INSTANCE and MIGRATION, a custom type, untyped); GPUs that Nova reserved
  (``reserved = total``); unhealthy GPUs in the topology;
- sharing providers (``MISC_SHARES_VIA_AGGREGATE``) whose aggregates the
  compute nodes and some nested GPU providers are members of.

:func:`generate` returns plain documents; nothing is asserted about them
here (the differential test and ``benchmarks/ci_pipeline.py`` use them).
"""

import copy
import random
import uuid as uuid_lib

from nvlink_placement.placement import embedded
from nvlink_placement.placement import nova_tree
from nvlink_placement.placement import snapshot
from nvlink_placement.plan import desired
from nvlink_placement.plan import executor
from nvlink_placement.plan import run
from nvlink_placement.topology import loader
from nvlink_placement.topology import members
from nvlink_placement.topology import pci
from tests import novalike

RC = novalike.GPU_RC
TEMPLATE = 'template-host'
NAMESPACE = uuid_lib.UUID('6b1f0c1e-5d7a-4c3e-9f2a-1c0e5b7d9a31')

FLAT, RESHAPED, PARTIAL = 'flat', 'reshaped', 'partial'
DRIFTS = ('missing-group', 'missing-trait', 'wrong-parent',
          'unexpected-group', 'missing-reservation', 'stale-reservation',
          'unknown-gpu', 'member-traits')
VARIANTS = (FLAT, RESHAPED, PARTIAL) + DRIFTS


def _synthetic(count, bus0=0x10):
    """``count`` PCI addresses with module ids 1..count."""
    return {'0000:%02x:00.0' % (bus0 + 0x10 * i): i + 1
            for i in range(count)}


#: Board -> its GPU map(s) (address -> module id).
BOARDS = {
    'hgx-h100-8gpu': (novalike.BOARD1, novalike.BOARD2),
    'hgx-a100-16gpu': (_synthetic(16, 0x05),),
    'hgx-h100-4gpu': (_synthetic(4),),
    'dgx-1-v100': (_synthetic(8, 0x06),),
}
H100_ONLY = ('hgx-h100-8gpu',)
MIXED = tuple(BOARDS)
#: Instance sizes per host, one tuple drawn per host (by board size):
#: about a third of the GPUs in use on average.
LOADS = {
    4: ((), (1,), (2,), (1, 2), (4,)),
    8: ((), (), (1,), (2,), (1, 2), (4,), (2, 2), (1, 1, 4), (8,)),
    16: ((), (1,), (2, 4), (8,), (1, 2, 4), (16,), (2, 2, 1)),
}
CONSUMER_TYPES = ('INSTANCE',) * 6 + ('MIGRATION', None, 'unknown',
                                      'CUSTOM_BACKUP')


def _host_doc(board, gpus, sick=()):
    entry = {}
    for address, module in gpus.items():
        if address in sick:
            entry[address] = {'module_id': module, 'health': {
                'status': 'unhealthy', 'reasons': ['XID 79']}}
        else:
            entry[address] = module
    return {'board': board, 'gpus': entry}


def _parse(hosts):
    return loader.parse({'version': 1, 'hosts': hosts}, '<cloud corpus>')


def _flat_document(topology, names):
    providers = []
    for name in names:
        host = topology.hosts[name]
        providers.extend(nova_tree.host_providers(
            name, {a: RC for a in host.usable()},
            traits=novalike.member_traits(
                {a: g.module_id for a, g in host.gpus.items()},
                host.board)))
    return snapshot.document(providers, {})


def _reshape(board, gpus, sick=(), writes=None):
    """The template host's tree, reshaped (or its first ``writes``)."""
    topology = _parse({TEMPLATE: _host_doc(board, gpus, sick)})
    hosts = [desired.from_topology(h) for h in topology.hosts.values()]
    with embedded.EmbeddedPlacement(
            _flat_document(topology, [TEMPLATE])) as client:
        if writes is None:
            result = run.run(client, hosts)
            assert not result.failures, result.failures
        else:
            current, plan = run.read_and_plan(client, hosts)
            executor.apply(client, plan.actions[:writes], current)
        return client.placement.export()['resource_providers']


_CACHE = {}


def _templates(board, gpus):
    """Provider lists of the template host per variant (kept per process).

    The interrupted reshape made its first 3 writes (5 on 16-GPU boards).
    """
    key = (board, tuple(sorted(gpus.items())))
    if key not in _CACHE:
        _CACHE[key] = _make_templates(board, gpus, 3 if len(gpus) < 16
                                      else 5)
    return _CACHE[key]


def _make_templates(board, gpus, partial_writes):
    topology = _parse({TEMPLATE: _host_doc(board, gpus)})
    flat = _flat_document(topology, [TEMPLATE])['resource_providers']
    reshaped = _reshape(board, gpus)
    first = sorted(gpus)[0]
    found = {FLAT: flat, RESHAPED: reshaped,
             PARTIAL: _reshape(board, gpus, writes=partial_writes),
             'stale-reservation': _reshape(board, gpus, sick=(first,))}
    by_name = {rp['name']: rp for rp in reshaped}
    node = by_name[TEMPLATE]
    groups = [rp for rp in reshaped if '_nvlink-group-of-' in rp['name']]
    gpu_rps = [rp for rp in reshaped
               if rp['parent_provider_uuid'] != node['uuid'] and
               '_nvlink-group-of-' not in rp['name']]
    leaves = [g for g in groups
              if not any(c['parent_provider_uuid'] == g['uuid'] and
                         '_nvlink-group-of-' in c['name'] for c in reshaped)]

    def variant(edit):
        providers = copy.deepcopy(reshaped)
        edit({rp['name']: rp for rp in providers}, providers)
        return providers

    def missing_group(named, providers):
        leaf = named[leaves[0]['name']]
        for rp in providers:
            if rp['parent_provider_uuid'] == leaf['uuid']:
                rp['parent_provider_uuid'] = leaf['parent_provider_uuid']
        providers.remove(leaf)

    def missing_trait(named, providers):
        group = named[groups[-1]['name']]
        group['traits'] = [t for t in group['traits']
                           if not t.startswith('CUSTOM_PCI_GROUP') or
                           members.SEPARATOR in t]

    def wrong_parent(named, providers):
        named[gpu_rps[-1]['name']]['parent_provider_uuid'] = node['uuid']

    def unexpected_group(named, providers):
        extra = copy.deepcopy(leaves[0])
        extra['name'] = TEMPLATE + '_nvlink-group-of-2-z'
        extra['uuid'] = str(uuid_lib.uuid5(NAMESPACE, extra['name']))
        providers.append(extra)

    def unknown_gpu(named, providers):
        address = '0000:ee:00.0'
        providers.append(snapshot.provider_entry(
            nova_tree.pci_uuid(node['uuid'], address),
            pci.nova_provider_name(TEMPLATE, address), node['uuid'],
            {RC: {'total': 1, 'reserved': 0, 'min_unit': 1, 'max_unit': 1,
                  'step_size': 1, 'allocation_ratio': 1.0}},
            nova_tree.PCI_TRAITS))

    def member_traits(named, providers):
        gpu = named[gpu_rps[0]['name']]
        gpu['traits'] = [t for t in gpu['traits']
                         if members.SEPARATOR not in t]

    found.update({
        'missing-group': variant(missing_group),
        'missing-trait': variant(missing_trait),
        'wrong-parent': variant(wrong_parent),
        'unexpected-group': variant(unexpected_group),
        'missing-reservation': reshaped,
        'unknown-gpu': variant(unknown_gpu),
        'member-traits': variant(member_traits)})
    return found


def _clone(providers, host):
    """The template's providers renamed for ``host``, with fresh uuids."""
    def new_uuid(name):
        if name == host:
            return nova_tree.node_uuid(host)
        return str(uuid_lib.uuid5(NAMESPACE, name))
    old = {rp['uuid']: host + rp['name'][len(TEMPLATE):] for rp in providers}
    result = []
    for rp in providers:
        rp = copy.deepcopy(rp)
        rp['name'] = old[rp['uuid']]
        parent = rp['parent_provider_uuid']
        rp['uuid'] = new_uuid(rp['name'])
        rp['parent_provider_uuid'] = new_uuid(old[parent]) if parent else None
        result.append(rp)
    return result


def _variant_counts(n, rng, drift_hosts):
    """Variant of each of ``n`` hosts: flat but for a few of each kind."""
    chosen = []
    for kind in (RESHAPED, PARTIAL) + DRIFTS:
        chosen.extend([kind] * drift_hosts)
    chosen = chosen[:n]
    chosen += [FLAT] * (n - len(chosen))
    rng.shuffle(chosen)
    return chosen


def generate(n, seed=0, boards=H100_ONLY, drift_hosts=2, split=0.05,
             sharing_every=100):
    """A topology and a production snapshot for ``n`` hosts.

    :param boards: board names to draw from (:data:`H100_ONLY`,
        :data:`MIXED`).
    :param drift_hosts: hosts of each variant other than flat (reshaped,
        partial, each drift kind); the others are flat.
    :param split: share of the 2- and 4-GPU instances split across two
        domains.
    :param sharing_every: one sharing provider per this many hosts (None:
        no sharing providers).
    :returns: ``(topology dict, snapshot dict, info)``; ``info`` maps
        ``'variants'`` to host -> variant and counts what was made.
    """
    rng = random.Random(seed)
    hosts_doc = {}
    variants = {}
    providers = []
    kinds = _variant_counts(n, rng, drift_hosts)
    for i in range(n):
        name = 'cn-%05d' % i
        board = rng.choice(boards)
        gpu_map = rng.choice(BOARDS[board])
        kind = kinds[i]
        sick = ()
        if kind == 'missing-reservation' or (
                kind == FLAT and rng.random() < 0.01):
            sick = (sorted(gpu_map)[-1],)
        hosts_doc[name] = _host_doc(board, gpu_map, sick)
        variants[name] = kind
        providers.extend(_clone(_templates(board, gpu_map)[kind],
                                name))
    topology = _parse(hosts_doc)
    aggregates = _sharing(providers, n, rng, sharing_every)
    consumers, counts = _load(topology, providers, rng, split, aggregates)
    document = snapshot.document(providers, consumers)
    snapshot.validate(document, 'cloud corpus seed %d' % seed)
    counts['variants'] = variants
    return {'version': 1, 'hosts': hosts_doc}, document, counts


def _sharing(providers, n, rng, every):
    """Sharing providers; compute nodes and some GPUs join their aggregate.

    :returns: dict aggregate uuid -> sharing provider uuid.
    """
    if not every:
        return {}
    roots = [rp for rp in providers if rp['parent_provider_uuid'] is None]
    shared = {}
    for j in range(max(1, n // every)):
        aggregate = str(uuid_lib.UUID(int=rng.getrandbits(128), version=4))
        name = 'shared-storage-%03d' % j
        rp = snapshot.provider_entry(
            str(uuid_lib.uuid5(NAMESPACE, name)), name, None,
            {'DISK_GB': {'total': 1000000, 'reserved': 0, 'min_unit': 1,
                         'max_unit': 100000, 'step_size': 1,
                         'allocation_ratio': 1.0}},
            ('MISC_SHARES_VIA_AGGREGATE',), (aggregate,))
        shared[aggregate] = rp['uuid']
        providers.append(rp)
    aggregates = sorted(shared)
    for k, root in enumerate(roots):
        root['aggregates'] = [aggregates[k % len(aggregates)]]
    for rp in providers:
        if (rp['parent_provider_uuid'] is not None and RC in
                rp.get('inventories', {}) and rng.random() < 0.02):
            rp['aggregates'] = [rng.choice(aggregates)]
    return shared


def _load(topology, providers, rng, split, shared):
    """Consumers on the hosts: about a third of the GPUs in use."""
    by_name = {rp['name']: rp for rp in providers}
    consumers = {}
    counts = {'gpus': 0, 'gpus_used': 0, 'instances': 0, 'split': 0,
              'nova_reserved': 0}
    for name, host in sorted(topology.hosts.items()):
        usable = sorted(a for a in host.usable()
                        if host.gpu_provider_name(a) in by_name)
        counts['gpus'] += len(usable)
        free = set(usable)
        node = by_name[name]
        for size in rng.choice(LOADS[len(host.gpus)]):
            gpus = _place(host, size, free, rng, split)
            if gpus is None:
                continue
            if len(gpus) == size and size in (2, 4) and host.domain_label(
                    gpus, size) is None:
                counts['split'] += 1
            free -= set(gpus)
            counts['instances'] += 1
            counts['gpus_used'] += size
            alloc = {node['uuid']: {'VCPU': 8 * size,
                                    'MEMORY_MB': 65536 * size}}
            aggregate = node.get('aggregates', [None])[0]
            if aggregate in shared and rng.random() < 0.3:
                alloc[shared[aggregate]] = {'DISK_GB': 100}
            else:
                alloc[node['uuid']]['DISK_GB'] = 100
            for address in gpus:
                gpu = by_name[host.gpu_provider_name(address)]
                alloc[gpu['uuid']] = {RC: 1}
                if rng.random() < 0.03:
                    # Nova's one-time-use device: reserved = total.
                    gpu['inventories'][RC]['reserved'] = 1
                    counts['nova_reserved'] += 1
            consumer = str(uuid_lib.UUID(int=rng.getrandbits(128),
                                         version=4))
            consumers[consumer] = snapshot.consumer_entry(
                'project-%d' % rng.randrange(20),
                'user-%d' % rng.randrange(50), alloc,
                rng.choice((1, 1, 1, 2, 5)), rng.choice(CONSUMER_TYPES))
    return consumers, counts


def _place(host, size, free, rng, split):
    """GPUs for one instance of ``size``: a free domain, or a split one."""
    if size == 1:
        return [rng.choice(sorted(free))] if free else None
    if size in (2, 4) and rng.random() < split:
        # Across two domains: one GPU from each of two halves of the host.
        domains = [sorted(d) for d in host.fixed_domains(size)]
        if len(domains) >= 2:
            a, b = rng.sample(domains, 2)
            picked = [x for x in a if x in free][:size // 2] + \
                [x for x in b if x in free][:size - size // 2]
            if len(picked) == size:
                return picked
    options = [sorted(d) for d in host.fixed_domains(size)
               if set(d) <= free]
    for mesh in host.meshes(size):
        idle = sorted(set(mesh) & free)
        if len(idle) >= size:
            options.append(idle[:size])
    return rng.choice(options) if options else None
