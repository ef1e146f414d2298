"""Nova 34's choice of host and GPUs for one boot, from Placement's answer.

Pure. What nova-scheduler does with one ``GET /allocation_candidates``
answer (nova 34.0.0):

1. ``SchedulerManager.select_destinations`` keys the allocation requests by
   every provider they allocate from (``alloc_reqs_by_rp_uuid``), in
   Placement's order; ``_get_all_host_states`` takes the hosts from the
   ``provider_summaries`` keys, and ``_schedule`` gives each host state the
   requests that allocate from its compute node
   (``hosts_with_alloc_reqs``). Here: :func:`by_host`.
2. Filters (``HostManager.get_filtered_hosts``). The defaults plus
   ``PciPassthroughFilter`` pass every host Placement offered, and the PCI
   filter keeps every candidate whose devices are free in the host's PCI
   tracker, which for Placement-tracked GPUs is every candidate Placement
   returned. Modelled: no filtering, except ``NUMATopologyFilter`` for
   flavors with ``hw:numa_nodes`` (:func:`keep`, :mod:`.numa`).
3. Weighers (``[filter_scheduler] weight_classes = all_weighers``,
   ``nova/weights.py`` ``BaseWeightHandler.get_weighed_objects``): each
   weigher's raw values are normalized over the hosts
   (``nova.weights.normalize``: ``(w - min) / (max - min)``, where RAM,
   CPU, disk and I/O weighers pin ``min`` to 0; all equal gives 0), times
   the multiplier, summed. With the default multipliers only four are not
   zero for a GPU boot (:func:`weigh`):

   - ``RAMWeigher`` (1.0): ``free_ram_mb``;
   - ``CPUWeigher`` (1.0): ``vcpus_total * cpu_allocation_ratio -
     vcpus_used``;
   - ``DiskWeigher`` (1.0): ``free_disk_mb``;
   - ``PCIWeigher`` (1.0, ``nova/scheduler/weights/pci.py``):
     ``100 - min(free PCI devices, 99)``: hosts with *fewer* free devices
     win, so GPU servers stack on hosts already in use.

   Zero by default or for this request: ``IoOpsWeigher`` (-1.0 times the
   builds a host's resource tracker still counts, ``num_io_ops``; zero
   once the compute's periodic resource update has run after a build,
   ``[DEFAULT] update_resources_interval``, while the simulator's events
   are hours apart. Boots in a burst are spread by it, against
   ``PCIWeigher``'s stacking: not modelled. Found by the real-Nova check,
   ``nova_tests/test_simulate_choice.py``), ``NumInstancesWeigher`` (0.0),
   ``BuildFailureWeigher`` (no failed builds), ``MetricsWeigher`` (no
   ``weight_setting``), ``HypervisorVersionWeigher`` (one version
   everywhere), ``ImagePropertiesWeigher`` (0.0), ``CrossCellWeigher`` and
   the server-group weighers (not a move, no group).
   The free amounts are Placement's ``capacity - used`` of the compute
   node's ``MEMORY_MB``, ``VCPU`` and ``DISK_GB`` and the free units on
   its child providers (Nova reads the same numbers from its compute node
   record and PCI tracker; ``free_disk_mb`` there also takes the
   hypervisor's ``disk_available_least``, which is not modelled).
4. ``HostManager._get_host_states`` yields the host states from a ``set``
   of ``(host, nodename)`` keys, built per request in the order of the
   compute node records (``ComputeNodeList.get_all_by_uuids``: ``uuid IN
   (...)`` on the unique uuid index, so in uuid order). Filters keep that
   order. ``SchedulerManager._get_sorted_hosts`` sorts by weight, highest
   first (a stable sort): hosts of equal weight stay in the set's order,
   which is fixed for a given scheduler process (its string hash seed) and
   set of hosts, not drawn per request. With ``[filter_scheduler]
   shuffle_best_same_weighed_hosts = True`` the hosts tied for the best
   weight are shuffled (``random.shuffle``). ``host_subset_size = 1``
   then takes the first. Modelled (:func:`rank`): the same set, of
   ``(name, name)`` for each compute node provider (the service host and
   the hypervisor hostname are the compute node's name), filled in uuid
   order and iterated in this process, so the order comes from this
   process's hash seed as Nova's comes from the scheduler's; the shuffle
   with a seeded generator.
5. ``_schedule``: host by host in that order, claim
   ``host.allocation_candidates[0]``, the host's first allocation request
   in Placement's order. Placement collects the requests in Python sets
   (``placement/objects/allocation_candidate.py`` ``_merge_candidates``:
   ``areqs = set()``; ``AllocationRequest.__hash__`` hashes its resource
   requests, ``(provider id, resource class name, amount)``), so the order
   is fixed for a given Placement process (its string hash seed) and set
   of free providers, and differs between processes (four
   ``PYTHONHASHSEED`` values, four different first GPU pairs on one H100
   host). Modelled: the first candidate of the embedded Placement's
   answer, the simulation running in a process whose hash seed comes from
   the run's seed (:mod:`.layouts`). The claim
   (``utils.claim_resources`` -> ``SchedulerReportClient.claim_resources``)
   is ``PUT /allocations/{instance uuid}`` with that allocation request,
   its ``mappings``, ``project_id``, ``user_id`` and ``consumer_generation:
   null``, at the microversion of the query; on a failed claim, the next
   host. Nothing looks at which GPUs of the host the request names, except
   ``NUMATopologyFilter`` for flavors with a guest NUMA topology
   (:mod:`.numa`), which drops the candidates whose devices do not fit and
   the hosts left with none (``BaseHostFilter.filter_candidates``, in
   Placement's order).
"""

import dataclasses

#: ``nova/scheduler/weights/pci.py`` MAX_DEVS.
PCI_MAX_DEVS = 100
#: Default multipliers (``nova/conf/scheduler.py``).
RAM_MULTIPLIER = CPU_MULTIPLIER = DISK_MULTIPLIER = PCI_MULTIPLIER = 1.0
HOST_RESOURCES = ('VCPU', 'MEMORY_MB', 'DISK_GB')


@dataclasses.dataclass(frozen=True)
class HostState:
    """What the weighers read of one host.

    :ivar uuid: compute node provider uuid.
    :ivar candidates: its allocation requests, in Placement's order.
    """
    uuid: str
    free_ram_mb: float
    free_vcpus: float
    free_disk_mb: float
    free_pci: int
    candidates: tuple


def _free(summary, rc):
    usage = summary.get('resources', {}).get(rc)
    if not usage:
        return 0
    return usage['capacity'] - usage['used']


def by_host(body):
    """Host states of an allocation candidates answer (1.29+ summaries).

    :returns: list of :class:`HostState`, in ``provider_summaries`` order,
        for the compute nodes (root providers) that an allocation request
        allocates from.
    """
    summaries = body.get('provider_summaries', {})
    requests = {}
    for candidate in body.get('allocation_requests', []):
        for rp_uuid in candidate['allocations']:
            summary = summaries.get(rp_uuid, {})
            if summary.get('root_provider_uuid', rp_uuid) == rp_uuid:
                requests.setdefault(rp_uuid, []).append(candidate)
    free_pci = dict.fromkeys(requests, 0)
    for rp_uuid, summary in summaries.items():
        root = summary.get('root_provider_uuid')
        if root in free_pci and root != rp_uuid:
            free_pci[root] += sum(u['capacity'] - u['used'] for u in
                                  summary.get('resources', {}).values())
    hosts = []
    for rp_uuid in summaries:
        if rp_uuid not in requests:
            continue
        summary = summaries[rp_uuid]
        hosts.append(HostState(
            rp_uuid, _free(summary, 'MEMORY_MB'), _free(summary, 'VCPU'),
            _free(summary, 'DISK_GB') * 1024, free_pci[rp_uuid],
            tuple(requests[rp_uuid])))
    return hosts


def _normalized(values, minval=None):
    """``nova.weights.normalize``."""
    if not values:
        return []
    low = min(values) if minval is None else minval
    high = max(values)
    if low == high:
        return [0.0] * len(values)
    return [(v - low) / float(high - low) for v in values]


def weigh(hosts):
    """Nova's total weight of each host (see the module doc).

    :returns: list of floats, in ``hosts`` order.
    """
    if len(hosts) <= 1:
        return [0.0] * len(hosts)
    totals = [0.0] * len(hosts)
    for multiplier, values, minval in (
            (CPU_MULTIPLIER, [h.free_vcpus for h in hosts], 0),
            (DISK_MULTIPLIER, [h.free_disk_mb for h in hosts], 0),
            (PCI_MULTIPLIER, [PCI_MAX_DEVS - min(h.free_pci,
                                                 PCI_MAX_DEVS - 1)
                              for h in hosts], None),
            (RAM_MULTIPLIER, [h.free_ram_mb for h in hosts], 0)):
        for index, weight in enumerate(_normalized(values, minval)):
            totals[index] += multiplier * weight
    return totals


def nova_order(hosts, names):
    """The host states in the order Nova's host manager yields them.

    :param names: dict compute node uuid -> name.
    :returns: ``hosts`` in the iteration order of a set of ``(name,
        name)`` filled in uuid order (module doc, 4): fixed for this
        process's hash seed and these hosts.
    """
    by_key = {(names[h.uuid], names[h.uuid]): h for h in hosts}
    seen = set()
    for host in sorted(hosts, key=lambda h: h.uuid):
        seen.add((names[host.uuid], names[host.uuid]))
    return [by_key[key] for key in seen]


def rank(hosts, names, shuffle=None):
    """Hosts in the order Nova tries them, with their weights.

    :param names: dict compute node uuid -> name (:func:`nova_order`).
    :param shuffle: None (Nova's default), or a ``random.Random`` that
        shuffles the hosts tied for the best weight
        (``shuffle_best_same_weighed_hosts``).
    :returns: list of ``(HostState, weight)``, highest weight first.
    """
    ordered = nova_order(hosts, names)
    order = sorted(zip(ordered, weigh(ordered)), key=lambda hw: hw[1],
                   reverse=True)
    if shuffle is not None and order:
        best = [hw for hw in order if hw[1] == order[0][1]]
        shuffle.shuffle(best)
        order = best + order[len(best):]
    return order


def keep(hosts, accept):
    """What a filter of allocation candidates leaves.

    :param accept: callable(candidate) -> bool.
    :returns: the hosts with their accepted candidates (in Placement's
        order), without those left with none.
    """
    out = []
    for host in hosts:
        kept = tuple(c for c in host.candidates if accept(c))
        if kept:
            out.append(dataclasses.replace(host, candidates=kept))
    return out


def claim_body(candidate, project_id, user_id):
    """The ``PUT /allocations/{consumer}`` body Nova sends for a candidate."""
    body = dict(candidate)
    body.update(project_id=project_id, user_id=user_id,
                consumer_generation=None)
    return body
