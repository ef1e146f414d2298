"""Plan and (optionally) apply: the job behind reshape, check and flatten."""

import dataclasses
import logging

from nvlink_placement import errors
from nvlink_placement.placement import client as pc
from nvlink_placement.placement import naming
from nvlink_placement.placement import reads
from nvlink_placement.placement import state as state_mod
from nvlink_placement.plan import executor
from nvlink_placement.plan import planner
from nvlink_placement.topology import pci

LOG = logging.getLogger(__name__)
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
    :ivar state: the :class:`nvlink_placement.placement.state.State` read
        before any write (its ``free`` filled when asked, see
        :func:`read_and_plan`).
    :ivar changed: names of the hosts this run wrote whose trees, read
        again once it was done, no longer match its desired trees: another
        writer changed them meanwhile (:func:`changed_under`). Sorted;
        empty for dry runs and ``--snapshot``.
    """
    actions: list
    findings: list
    failures: list
    applied: bool
    state: object = None
    changed: list = dataclasses.field(default_factory=list)

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
                  members=False, servers=None, free=False, tables=None):
    """Read Placement (constant requests plus a few inventories) and plan.

    :param more_hosts: optional callable(state, names) returning more
        :class:`DesiredHost` objects once the state is known (``--all``).
    :param allocations: :data:`ALL_HOSTS` or :data:`CHANGED_HOSTS` to add
        ``split-allocation`` findings for those hosts (reads: see
        :func:`load_gpu_allocations`); None for none.
    :param members: read the GPUs' member traits and add ``member-traits``
        findings (``check``).
    :param servers: optional Nova server list for the allocation reads
        (see :func:`load_gpu_allocations`).
    :param free: fill ``state.free`` (dict GPU RP uuid -> resource class
        of the GPUs with a free unit, :func:`state.free_gpu_classes`) even
        when no allocation is read; the allocation reads use the same
        listing, so it costs nothing more when they run (``check``'s
        capacity metrics).
    :param tables: an entered ``EmbeddedPlacement`` whose tables the
        providers, their traits and the allocations are read from in a
        few queries (``--snapshot``), or None.
    :returns: ``(state, plan)``.
    :raises PlacementError: server older than microversion 1.37.
    :raises PlanError: the plan is invalid; nothing was written.
    """
    traits = planner.traits_to_query(desired_hosts, members)
    if tables is not None:
        current = tables.state(traits, trait_prefixes=[naming.MARKER_PREFIX])
    else:
        current = state_mod.read(client, traits,
                                 trait_prefixes=[naming.MARKER_PREFIX],
                                 version=pc.WRITE_VERSION)
    if more_hosts is not None:
        desired_hosts = desired_hosts + more_hosts(
            current, {h.name for h in desired_hosts})
    state_mod.load_inventories(
        client, current, planner.inventories_needed(current, desired_hosts))
    plan = planner.plan(current, desired_hosts, members)
    current.free = state_mod.free_gpu_classes(client) if free else None
    if allocations:
        hosts = [h for h in desired_hosts if h.known and h.groups]
        if allocations == CHANGED_HOSTS:
            changed = {a.host for a in plan.actions}
            hosts = [h for h in hosts if h.name in changed]
        load_gpu_allocations(client, current, hosts, servers,
                             free=current.free, tables=tables)
        plan.findings.extend(planner.split_allocations(current, hosts))
    return current, plan


#: Reads of allocations in flight at once (what a small Placement serves).
READ_WORKERS = 4


def load_gpu_allocations(client, state, hosts, servers=None, free=None,
                         tables=None):
    """Load the allocations of the GPUs in use on ``hosts``.

    Only hosts with two GPUs in use or more can hold a split allocation,
    and only consumers of two GPUs or more can be split. First
    :func:`state.free_gpus` (two requests for one GPU resource class).
    Then, with ``servers`` (Nova's server list, see
    :mod:`nvlink_placement.flavors.servers`), one ``GET /allocations/
    {consumer}`` per server on those hosts whose flavor asks for two PCI
    devices or more (or an unknown number); a host whose GPUs in use are
    more than those servers hold plus one per 1-GPU server there (a
    consumer Nova does not list: a migration, a reservation) is read as
    without ``servers``. A 1-device server counts as a 1-GPU server only
    when its alias gives GPUs: the server list names aliases, not resource
    classes, so each alias is learnt from the allocations of one of its
    servers (a multi-GPU server already read, else one read of a 1-device
    server of that alias): an alias whose server holds a unit of one of
    the topology's GPUs gives GPUs; one of a NIC VF does not, and its
    servers account for no GPU. Without them, per host one read of the compute
    node's allocations (every instance holds VCPU or memory there) and
    one ``GET /allocations/{consumer}`` per consumer found; a GPU in use
    that none of them holds (reserved, or held by a consumer without
    resources on the node) gets one read of its own. Reads run
    :data:`READ_WORKERS` at a time.

    :param servers: optional ``{node name: [server]}``, each server with
        ``uuid`` and ``devices`` (PCI devices of its flavor, None when not
        known).
    :param free: the free GPUs already listed (uuids), or None: listed
        here.
    :param tables: an entered ``EmbeddedPlacement`` (``--snapshot``): the
        same allocations are read from its tables in one query instead of
        the reads above.
    """
    if not hosts:
        return
    if free is None:
        free = state_mod.free_gpus(client)
    busy_hosts = []
    from_tables = set()
    for host in hosts:
        busy = {state.by_name[n].uuid for n in host.gpus
                if n in state.by_name and state.by_name[n].uuid not in free}
        node = state.by_name.get(host.name)
        if len(busy) < 2:
            continue
        if tables is not None:
            from_tables |= busy
            continue
        if node is None or node.parent_uuid is not None:
            state_mod.load_allocations(client, state, busy)
            continue
        busy_hosts.append((host.name, node.uuid, busy))
    if tables is not None:
        state.allocations.update(tables.allocations(
            from_tables - set(state.allocations)))
        return
    in_use = set().union(*(b for _, _, b in busy_hosts))
    held = {}
    if servers is not None:
        wanted = sorted({s.uuid for name, _, _ in busy_hosts
                         for s in servers.get(name, ())
                         if s.devices is None or s.devices >= 2})
        held = dict(zip(wanted, _consumer_reads(client, wanted)))
        gpus = {state.by_name[n].uuid for host in hosts for n in host.gpus
                if n in state.by_name}
        gpu_aliases = _gpu_aliases(client, busy_hosts, servers, held, gpus)
        holding = set().union(*(set(a) for a in held.values()))
        busy_hosts = [
            (name, node, busy) for name, node, busy in busy_hosts
            if len(busy - holding) > sum(
                1 for s in servers.get(name, ()) if s.devices == 1 and
                s.uuid not in held and s.aliases and
                set(s.aliases) <= gpu_aliases)]
    found = reads.parallel(lambda h: state_mod.node_consumers(client, h[1]),
                           busy_hosts, READ_WORKERS)
    consumers = sorted(set().union(*found) - set(held))
    held.update(zip(consumers, _consumer_reads(client, consumers)))
    for consumer, allocations in sorted(held.items()):
        for rp_uuid, resources in allocations.items():
            if rp_uuid in in_use:
                state.allocations.setdefault(rp_uuid, {})[
                    consumer] = resources
    unread = set().union(*(b for _, _, b in busy_hosts))
    state_mod.load_allocations(client, state, unread - set(state.allocations))


def _gpu_aliases(client, busy_hosts, servers, held, gpus):
    """The aliases whose servers hold GPUs of ``gpus`` (uuids).

    Learnt from the servers of one alias already in ``held`` (consumer ->
    allocations), then from one read per alias of the 1-device servers on
    ``busy_hosts`` not learnt yet; those reads join ``held``.
    """
    learnt = {}

    def learn(server, allocations):
        if server.aliases and len(server.aliases) == 1:
            alias = server.aliases[0]
            learnt[alias] = learnt.get(alias, False) or bool(
                gpus & set(allocations))

    listed = [s for name, _, _ in busy_hosts for s in servers.get(name, ())]
    for server in listed:
        if server.uuid in held:
            learn(server, held[server.uuid])
    samples = {}
    for server in sorted(listed, key=lambda s: s.uuid):
        if server.devices == 1 and server.aliases and (
                server.aliases[0] not in learnt):
            samples.setdefault(server.aliases[0], server)
    chosen = [samples[a] for a in sorted(samples)]
    for server, allocations in zip(chosen, _consumer_reads(
            client, [s.uuid for s in chosen])):
        held[server.uuid] = allocations
        learn(server, allocations)
    return {alias for alias, gives in learnt.items() if gives}


def _consumer_reads(client, consumers):
    return reads.parallel(
        lambda c: state_mod.consumer_allocations(client, c), consumers,
        READ_WORKERS)


def run(client, desired_hosts, apply=True, workers=1, on_action=None,
        on_host=None, more_hosts=None, allocations=None, members=False,
        servers=None, free=False, tables=None, progress=None):
    """Read Placement, plan, and apply unless ``apply`` is False.

    ``allocations``, ``members``, ``servers``, ``free``: see
    :func:`read_and_plan`. Through the API, once the writes are done the
    hosts written are read and planned again (:func:`changed_under`): a
    run never reports success on a tree another run changed under it.

    :param tables: an entered ``EmbeddedPlacement`` whose tables
        (``writes_tables``) the allocations are read from and the plan is
        written to in one transaction (:mod:`.bulk`; ``--snapshot``), or
        None: through the API (:mod:`.executor`).
    :param progress: an :class:`executor.Progress` the API writes fill.
    :raises Interrupted: the client's ``stop`` was set (see
        :func:`executor.apply`).
    """
    wanted = list(desired_hosts)
    if more_hosts is not None:
        def more(state, names):
            found = more_hosts(state, names)
            wanted.extend(found)
            return found
    current, plan = read_and_plan(client, desired_hosts,
                                  more if more_hosts else None,
                                  allocations, members, servers, free,
                                  tables)
    if not apply or not plan.actions:
        return Result(plan.actions, plan.findings, [], False, current)
    if tables is not None:
        # Imported here: SQLAlchemy costs commands without a snapshot
        # 0.1 s of start-up.
        from nvlink_placement.plan import bulk
        failures = bulk.apply(tables, plan.actions, current,
                              on_action=on_action, on_host=on_host)
        return Result(plan.actions, plan.findings, failures, True, current)
    failures = executor.apply(client, plan.actions, current,
                              workers=workers, on_action=on_action,
                              on_host=on_host, progress=progress)
    result = Result(plan.actions, plan.findings, failures, True, current)
    result.changed = changed_under(client, wanted, result, members)
    return result


def changed_under(client, desired_hosts, result, members=False):
    """The hosts ``result`` wrote that no longer match their desired trees.

    Placement has no lock, and a move is a plain ``PUT`` of the parent: two
    runs with different topologies, started together, can each write part
    of a tree and leave one that matches neither (a group of 2 holding 3
    GPUs). So once a run is done, the hosts it wrote (but for those that
    failed: their run already fails) are read and planned again, at the
    price of one more :func:`read_and_plan` (five reads whatever the
    number of hosts, and the inventories of reserved GPUs). An action left
    means another writer changed the tree after this run read it. The same
    topology run twice at once converges: both runs write the same tree.

    :param desired_hosts: the :class:`DesiredHost` list the run planned.
    :param result: the run's :class:`Result` (applied).
    :returns: sorted host names; empty when every host written matches.
    :raises PlacementError: the reads failed.
    """
    failed = {f.host for f in result.failures}
    written = {a.host for a in result.written() if a.host} - failed
    hosts = [h for h in desired_hosts if h.name in written]
    if not hosts:
        return []
    try:
        _, plan = read_and_plan(client, hosts, members=members)
    except errors.PlanError as exc:
        LOG.error('the trees this run wrote cannot be planned again: %s',
                  '; '.join(exc.problems))
        return sorted(written)
    return sorted({a.host for a in plan.actions if a.host in written})
