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
   returned. Modelled: no filtering.
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
4. ``SchedulerManager._get_sorted_hosts`` sorts by weight, highest first
   (a stable sort), then with ``host_subset_size = 1`` takes the first.
   The hosts come in from ``HostManager._get_host_states``, which yields
   them from a ``set``: hosts of equal weight are in an arbitrary order.
   Modelled: ties broken by a seeded random order (:func:`rank`).
5. ``_schedule``: host by host in that order, claim
   ``host.allocation_candidates[0]``, the host's first allocation request
   in Placement's order. That order is arbitrary: Placement collects the
   requests in Python sets (``placement/objects/allocation_candidate.py``
   ``_merge_candidates``: ``areqs = set()``; ``_alloc_candidates_multiple_
   providers``: ``alloc_requests = set()``), so it changes with the hash
   seed of each Placement process (checked: four ``PYTHONHASHSEED`` values,
   four different first pairs on one H100 host). Modelled
   (:func:`first_candidate`): one of the host's candidates, drawn with the
   seeded generator from the candidates in a fixed order, so a seed gives
   the same run whatever the simulator's own hash seed. The claim
   (``utils.claim_resources`` -> ``SchedulerReportClient.claim_resources``)
   is ``PUT /allocations/{instance uuid}`` with that allocation request,
   its ``mappings``, ``project_id``, ``user_id`` and ``consumer_generation:
   null``, at the microversion of the query; on a failed claim, the next
   host. Nothing looks at which GPUs of the host the request names.
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


def rank(hosts, rng, tie_break=None):
    """Hosts in the order Nova tries them, with their weights.

    :param rng: ``random.Random`` that orders hosts of equal weight.
    :param tie_break: optional callable(list of tied :class:`HostState`)
        returning them in the order to use instead (a test replaying
        Nova's own picks).
    :returns: list of ``(HostState, weight)``, highest weight first.
    """
    weights = weigh(hosts)
    # Placement's summaries come in no fixed order: start from the uuids'.
    order = sorted(zip(hosts, weights), key=lambda hw: hw[0].uuid)
    rng.shuffle(order)
    order.sort(key=lambda hw: hw[1], reverse=True)
    if tie_break is None or not order:
        return order
    best = [hw for hw in order if hw[1] == order[0][1]]
    by_uuid = {h.uuid: w for h, w in best}
    chosen = [(h, by_uuid[h.uuid]) for h in tie_break([h for h, _ in best])]
    return chosen + order[len(best):]


def _candidate_key(candidate):
    return sorted((rp, sorted(a['resources'].items()))
                  for rp, a in candidate['allocations'].items())


def first_candidate(host, rng):
    """The candidate of ``host`` Nova claims, as modelled (module doc, 5)."""
    return rng.choice(sorted(host.candidates, key=_candidate_key))


def claim_body(candidate, project_id, user_id):
    """The ``PUT /allocations/{consumer}`` body Nova sends for a candidate."""
    body = dict(candidate)
    body.update(project_id=project_id, user_id=user_id,
                consumer_generation=None)
    return body
