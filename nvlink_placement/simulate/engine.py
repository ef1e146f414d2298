"""Replay a workload against a real (embedded) Placement as Nova would.

For one *layout* (a tree and its flavors) in a fresh embedded Placement
loaded with the starting snapshot:

1. the tree is brought to the layout with the same plan and executor code
   as ``reshape`` (the ``reshaped`` layout) or ``flatten`` (``flat``);
2. every boot sends the flavor's ``GET /allocation_candidates`` exactly as
   Nova builds it (:func:`nvlink_placement.flavors.request.build`, as
   ``flavor verify`` does), filters and picks host and GPUs with Nova's
   rule (:mod:`.choice`, :mod:`.numa`), then claims them as Nova's
   scheduler does: one
   consumer per server, ``PUT /allocations/{server}`` with the allocation
   request Placement returned (VCPU, MEMORY_MB, DISK_GB on the compute
   node and one unit on each GPU provider);
3. every delete sends ``DELETE /allocations/{server}``.

What is counted per flavor size: requested, placed, NoValidHost and why
(:func:`refusal`: *fragmentation* while some host had at least that many
free GPUs of the class, *no capacity* otherwise), and placements whose
GPUs are not one NVLink domain of the topology, fixed group or any GPUs of
one mesh (:func:`spans`). Over time, after each
event: GPUs in use and the free NVLink domains per size, counted on the
topology's domains whatever the tree (so layouts compare on the same
hardware truth).
"""

import dataclasses
import random
import uuid

from nvlink_placement import errors
from nvlink_placement.flavors import generate
from nvlink_placement.flavors import request as request_mod
from nvlink_placement.placement import state as state_mod
from nvlink_placement.plan import desired
from nvlink_placement.plan import run as run_mod
from nvlink_placement.simulate import choice
from nvlink_placement.simulate import numa as numa_mod
from nvlink_placement.simulate import workload as workload_mod

FLAT = 'flat'
FLAT_NUMA = 'flat-numa'
RESHAPED = 'reshaped'
LAYOUTS = (FLAT, FLAT_NUMA, RESHAPED)
#: Why a boot got NoValidHost (:func:`refusal`).
FRAGMENTATION = 'fragmentation'
NO_CAPACITY = 'no capacity'
#: Owner of the simulated servers' allocations.
PROJECT_ID = 'a0a0a0a0-0000-4000-8000-000000000001'
USER_ID = 'a0a0a0a0-0000-4000-8000-000000000002'
_CONSUMERS = uuid.UUID('6a1c6e4e-5d0b-4d55-9a57-6a3c0de5e7a1')


@dataclasses.dataclass
class Counts:
    """What happened to the boots of one flavor size.

    ``no_valid_host`` is ``fragmentation_loss`` + ``no_capacity``.
    """
    requested: int = 0
    placed: int = 0
    no_valid_host: int = 0
    fragmentation_loss: int = 0
    no_capacity: int = 0
    spanning: int = 0


@dataclasses.dataclass(frozen=True)
class Pick:
    """One placed boot: server number, host, GPU addresses (sorted)."""
    index: int
    host: str
    gpus: tuple


@dataclasses.dataclass
class Result:
    """One layout's run.

    :ivar flavors: dict size -> flavor name.
    :ivar counts: dict size -> :class:`Counts`.
    :ivar timeline: list of ``(time, gpus in use, {size: free domains})``
        after each event.
    :ivar picks: list of :class:`Pick` in boot order.
    :ivar total_gpus: GPUs of the simulated hosts.
    :ivar seed: the workload seed of the run.
    """
    layout: str
    flavors: dict
    counts: dict
    timeline: list
    picks: list
    total_gpus: int
    seed: int = 0


def consumer_uuid(seed, index):
    """The server (consumer) uuid of boot ``index``: reproducible."""
    return str(uuid.uuid5(_CONSUMERS, '%d/%d' % (seed, index)))


def upstream_flavors(flavors, alias, numa=None):
    """What an unmodified cloud would run for each size: ``alias:N`` only.

    Upstream Nova cannot keep an alias' GPUs in one domain (``flavor
    generate --dialect upstream`` refuses such sizes): its flavors carry
    ``pci_passthrough:alias = A:N``, with the same vCPUs, RAM and disk as
    ours, and Nova gives them whatever N GPUs Placement lists first.

    :param flavors: dict size -> flavor dict
        (:func:`inputs.flavor_from_dict`).
    :param numa: optional dict size -> NUMA extra specs to add
        (:func:`numa.extra_specs`).
    :returns: dict size -> flavor dict named ``<name>.upstream`` (or
        ``<name>.upstream-numa`` with ``numa``).
    """
    out = {}
    for size, flavor in flavors.items():
        specs = {generate.ALIAS_KEY: '%s:%d' % (alias, size)}
        specs.update((numa or {}).get(size, {}))
        out[size] = dict(flavor, name='%s.upstream%s' % (
            flavor['name'], '-numa' if numa is not None else ''),
            extra_specs=specs)
    return out


def flavors_by_size(flavors, aliases, nova, workload, source):
    """The flavor of each size of the workload mix.

    :returns: dict size -> ``(flavor dict, Request)``.
    :raises NvlinkError: a size of the mix with no flavor, or with two.
    """
    found = {}
    for flavor in flavors:
        query = request_mod.build(flavor, aliases, nova=nova)
        if query.size in found:
            raise errors.NvlinkError(
                '%s: flavors %s and %s both ask for %d GPUs; the simulator '
                'needs one flavor per size' % (
                    source, found[query.size][0]['name'], flavor['name'],
                    query.size))
        found[query.size] = (flavor, query)
    missing = [s for s in workload.sizes if s not in found]
    if missing:
        raise errors.NvlinkError(
            '%s: flavors: the mix asks for %s GPUs, but %s has flavors for '
            '%s only' % (workload.source, ', '.join(map(str, missing)),
                         source, ', '.join(map(str, sorted(found))) or
                         'no size'))
    return {s: found[s] for s in workload.sizes}


def prepare(client, hosts, layout):
    """Bring the embedded tree to ``layout`` with reshape's or flatten's plan.

    :raises NvlinkError: when a host fails.
    """
    if layout == RESHAPED:
        targets = [desired.from_topology(h) for h in hosts]
    else:
        targets = [desired.flat(h.name) for h in hosts]
    result = run_mod.run(client, targets)
    if result.failures:
        failure = result.failures[0]
        raise errors.NvlinkError('%s layout: %s failed: %s'
                                 % (layout, failure.host, failure.error))


class _Mirror(object):
    """Free GPUs per host, kept in step with the claims and deletes.

    Counts free NVLink domains per size on the topology's domains.
    """

    def __init__(self, hosts, sizes, providers, free):
        self.hosts = {h.name: h for h in hosts}
        self.gpu_of = {}        # RP uuid -> (host name, address)
        self.free = {}
        for host in hosts:
            self.free[host.name] = set()
            for address in host.usable():
                rp = providers.get(host.gpu_provider_name(address))
                if rp is None:
                    continue
                self.gpu_of[rp] = (host.name, address)
                if rp in free:
                    self.free[host.name].add(address)
        self.total = len(self.gpu_of)
        self.nodes = {providers[h.name] for h in hosts if h.name in providers}
        self.sizes = [s for s in sizes if s > 1]
        self.fixed = {h.name: {s: list(h.fixed_domains(s)) for s in
                               self.sizes} for h in hosts}
        self.mesh = {h.name: {s: list(h.meshes(s)) for s in self.sizes}
                     for h in hosts}
        self.domains = {name: self._count(name) for name in self.hosts}

    def _count(self, name):
        free = self.free[name]
        counts = {}
        for size in self.sizes:
            count = sum(1 for d in self.fixed[name][size] if d <= free)
            count += sum(len(m & free) // size for m in self.mesh[name][size])
            counts[size] = count
        return counts

    def take(self, name, addresses):
        self.free[name].difference_update(addresses)
        self.domains[name] = self._count(name)

    def give(self, name, addresses):
        self.free[name].update(addresses)
        self.domains[name] = self._count(name)

    def in_use(self):
        return self.total - sum(len(f) for f in self.free.values())

    def free_domains(self):
        return {s: sum(d[s] for d in self.domains.values())
                for s in self.sizes}

    def most_free(self):
        return max((len(f) for f in self.free.values()), default=0)


def spans(host, addresses):
    """Whether a server's GPUs on ``host`` are not one NVLink domain.

    One domain: a fixed domain of that many GPUs (a group, one GPU, the
    whole board) or any GPUs of one mesh (:meth:`Host.domain_label`).
    """
    return len(addresses) > 1 and host.domain_label(
        addresses, len(addresses)) is None


def refusal(mirror, size):
    """Why a boot of ``size`` GPUs got NoValidHost.

    :returns: :data:`FRAGMENTATION` when some host had at least ``size``
        free GPUs of the class (the GPUs were there, no acceptable set of
        them was), else :data:`NO_CAPACITY`.
    """
    return FRAGMENTATION if mirror.most_free() >= size else NO_CAPACITY


def simulate(client, hosts, layout, workload, flavors, rc, progress=None,
             shuffle=False, numa_sizes=(), events=None):
    """Run ``workload`` on the embedded Placement behind ``client``.

    :param hosts: topology hosts (the ones simulated: candidates on other
        compute nodes of the snapshot are left out, as if those hosts were
        not there).
    :param flavors: dict size -> ``(flavor dict, Request)`` of the layout.
    :param rc: the GPUs' resource class.
    :param progress: optional callable() after each event.
    :param shuffle: Nova's ``shuffle_best_same_weighed_hosts`` (see
        :func:`choice.rank`), drawn from the workload's seed.
    :param numa_sizes: sizes whose flavors NUMATopologyFilter keeps on one
        NUMA node (:mod:`.numa`).
    :param events: the events to replay instead of the workload's.
    :returns: :class:`Result`.
    """
    prepare(client, hosts, layout)
    listing = client.get('/resource_providers')['resource_providers']
    providers = {rp['name']: rp['uuid'] for rp in listing}
    mirror = _Mirror(hosts, workload.sizes, providers,
                     state_mod.free_gpus(client))
    names = {providers[h.name]: h.name for h in hosts if h.name in providers}
    counts = {s: Counts() for s in workload.sizes}
    timeline, picks, placed = [], [], {}
    rules = _Rules(names, random.Random('%d/shuffle/%s' % (
        workload.seed, layout)) if shuffle else None, set(numa_sizes), rc)
    if events is None:
        events = workload_mod.events(workload)
    for event in events:
        if event.kind == workload_mod.BOOT:
            placement = _boot(client, event, flavors[event.gpus][1], mirror,
                              workload.seed, rules, counts[event.gpus])
            if placement is not None:
                placed[event.index] = placement
                picks.append(placement)
        elif event.index in placed:
            gone = placed.pop(event.index)
            client.request('DELETE', '/allocations/%s' % consumer_uuid(
                workload.seed, event.index), version=request_mod.MICROVERSION,
                expect=(204,))
            mirror.give(gone.host, gone.gpus)
        timeline.append((event.time, mirror.in_use(), mirror.free_domains()))
        if progress is not None:
            progress()
    return Result(layout, {s: f[0]['name'] for s, f in flavors.items()},
                  counts, timeline, picks, mirror.total, workload.seed)


@dataclasses.dataclass(frozen=True)
class _Rules:
    names: dict         # compute node uuid -> name
    shuffle: object     # random.Random, or None
    numa_sizes: set
    rc: str


def _gpus(candidate, mirror, rc):
    """``[(host, address)]`` of a candidate's GPUs (None for unknown RPs)."""
    return [mirror.gpu_of.get(u) for u, a in candidate['allocations'].items()
            if rc in a['resources']]


def _boot(client, event, query, mirror, seed, rules, counts):
    counts.requested += 1
    body = client.get(query.url, version=request_mod.MICROVERSION)
    server = consumer_uuid(seed, event.index)
    hosts = [h for h in choice.by_host(body) if h.uuid in mirror.nodes]
    if event.gpus in rules.numa_sizes:
        def accept(candidate):
            gpus = _gpus(candidate, mirror, rules.rc)
            return None not in gpus and numa_mod.accepts(
                mirror.hosts[gpus[0][0]], [a for _, a in gpus])
        hosts = choice.keep(hosts, accept)
    for host, _ in choice.rank(hosts, rules.names, rules.shuffle):
        candidate = host.candidates[0]
        claimed = client.request(
            'PUT', '/allocations/%s' % server,
            body=choice.claim_body(candidate, PROJECT_ID, USER_ID),
            version=request_mod.MICROVERSION, expect=(204,), tolerate=(409,))
        if claimed is None:
            continue
        gpus = _gpus(candidate, mirror, rules.rc)
        if None in gpus or len({name for name, _ in gpus}) != 1:
            raise errors.NvlinkError(
                'server %d got GPU providers the topology does not list: '
                '%s' % (event.index, sorted(candidate['allocations'])))
        name = gpus[0][0]
        addresses = tuple(sorted(a for _, a in gpus))
        mirror.take(name, addresses)
        counts.placed += 1
        if spans(mirror.hosts[name], addresses):
            counts.spanning += 1
        return Pick(event.index, name, addresses)
    counts.no_valid_host += 1
    if refusal(mirror, event.gpus) == FRAGMENTATION:
        counts.fragmentation_loss += 1
    else:
        counts.no_capacity += 1
    return None
