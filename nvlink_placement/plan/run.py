"""Plan and (optionally) apply: the job behind reshape, check and flatten."""

import dataclasses

from nvlink_placement.placement import client as pc
from nvlink_placement.placement import naming
from nvlink_placement.placement import state as state_mod
from nvlink_placement.plan import executor
from nvlink_placement.plan import planner
from nvlink_placement.topology import pci

#: ``allocations`` modes of :func:`read_and_plan`: look for split
#: allocations on every known host (``check``), or on the hosts the plan
#: changes (``reshape``).
ALL_HOSTS = 'all'
CHANGED_HOSTS = 'changed'


@dataclasses.dataclass
class Result:
    """What a run planned and what happened.

    :ivar actions: planned :class:`Action` list, in application order.
    :ivar findings: drift that no action repairs (for ``check``).
    :ivar failures: :class:`HostFailure` list (empty for dry runs).
    :ivar applied: True when writes were attempted.
    """
    actions: list
    findings: list
    failures: list
    applied: bool

    def written(self):
        """The actions that were applied (all but failed hosts' tails)."""
        if not self.applied:
            return []
        stopped = {f.host: f.done for f in self.failures}
        seen = {}
        done = []
        for action in self.actions:
            if action.host in stopped:
                seen[action.host] = seen.get(action.host, 0) + 1
                if seen[action.host] > stopped[action.host]:
                    continue
            done.append(action)
        return done


def hosts_with_groups(state):
    """Names of the root providers whose tree holds a group of ours.

    Groups with the owner trait, and RPs named like a group of their root
    without it (what an interrupted run leaves, see the planner's adoption
    rule).
    """
    roots = set(state.roots_with(naming.OWNER_TRAIT))
    roots.update(p.root_uuid for p in planner.unowned_groups(state, None))
    return sorted(state.by_uuid[u].name for u in roots)


def hosts_with_gpus(state):
    """Names of the root providers with a Nova PCI RP (found by name)."""
    names = set()
    for provider in state.by_uuid.values():
        root = state.by_uuid.get(provider.root_uuid)
        if root is not None and pci.address_of_provider(root.name,
                                                        provider.name):
            names.add(root.name)
    return sorted(names)


def hosts_outside(state, names):
    """Compute nodes the topology (``names``) does not list.

    :returns: ``(with_groups, flat)``: the names of those whose tree holds
        a group of the tool (:func:`hosts_with_groups`: ``check --all``
        reports them, ``flatten`` repairs them), and of the other ones
        holding Nova PCI RPs (not drift).
    """
    with_groups = [n for n in hosts_with_groups(state) if n not in names]
    flat = [n for n in hosts_with_gpus(state)
            if n not in names and n not in with_groups]
    return with_groups, flat


def read_and_plan(client, desired_hosts, more_hosts=None, allocations=None,
                  members=False):
    """Read Placement (constant requests plus a few inventories) and plan.

    :param more_hosts: optional callable(state, names) returning more
        :class:`DesiredHost` objects once the state is known (``--all``).
    :param allocations: :data:`ALL_HOSTS` or :data:`CHANGED_HOSTS` to add
        ``split-allocation`` findings for those hosts (reads: see
        :func:`load_gpu_allocations`); None for none.
    :param members: read the GPUs' member traits and add ``member-traits``
        findings (``check``).
    :returns: ``(state, plan)``.
    :raises PlacementError: server older than microversion 1.37.
    :raises PlanError: the plan is invalid; nothing was written.
    """
    current = state_mod.read(
        client, planner.traits_to_query(desired_hosts, members),
        trait_prefixes=[naming.MARKER_PREFIX], version=pc.WRITE_VERSION)
    if more_hosts is not None:
        desired_hosts = desired_hosts + more_hosts(
            current, {h.name for h in desired_hosts})
    state_mod.load_inventories(
        client, current, planner.inventories_needed(current, desired_hosts))
    plan = planner.plan(current, desired_hosts, members)
    if allocations:
        hosts = [h for h in desired_hosts if h.known and h.groups]
        if allocations == CHANGED_HOSTS:
            changed = {a.host for a in plan.actions}
            hosts = [h for h in hosts if h.name in changed]
        load_gpu_allocations(client, current, hosts)
        plan.findings.extend(planner.split_allocations(current, hosts))
    return current, plan


def load_gpu_allocations(client, state, hosts):
    """Load the allocations of the GPUs in use on ``hosts``.

    Only hosts with two GPUs in use or more can hold a split allocation.
    Reads: none without hosts; else :func:`state.free_gpus` (two requests
    for one GPU resource class) plus one per GPU in use on such hosts.
    """
    if not hosts:
        return
    free = state_mod.free_gpus(client)
    needed = []
    for host in hosts:
        busy = [state.by_name[n].uuid for n in host.gpus
                if n in state.by_name and state.by_name[n].uuid not in free]
        if len(busy) >= 2:
            needed.extend(busy)
    state_mod.load_allocations(client, state, needed)


def run(client, desired_hosts, apply=True, workers=1, on_action=None,
        on_host=None, more_hosts=None, allocations=None, members=False):
    """Read Placement, plan, and apply unless ``apply`` is False.

    ``allocations``, ``members``: see :func:`read_and_plan`.
    """
    current, plan = read_and_plan(client, desired_hosts, more_hosts,
                                  allocations, members)
    if not apply or not plan.actions:
        return Result(plan.actions, plan.findings, [], False)
    failures = executor.apply(client, plan.actions, current, workers=workers,
                              on_action=on_action, on_host=on_host)
    return Result(plan.actions, plan.findings, failures, True)
