"""Diff desired trees against Placement and produce ordered actions.

Pure: takes a :class:`nvlink_placement.placement.state.State` and
:class:`nvlink_placement.plan.desired.DesiredHost` objects, returns a
:class:`Plan`. The same code serves ``reshape``, ``--dry-run``, ``check``
and ``flatten``. Every problem of every host is collected first; if there
is any, :class:`PlanError` is raised and nothing may be written.

Safety rules (design.rst s4): Nova's PCI RPs are moved, never
renamed and never leave their compute node's tree; group RPs never get
``COMPUTE_MANAGED_PCI_DEVICE``; only *our* group RPs are deleted, and only
when they hold nothing but GPUs and other groups of ours.

Our group RPs (the adoption rule): those carrying the owner trait, and
those without it whose name is a group name of the compute node
(``<host>_nvlink-group-of-<N>-<letter>``), whose parent is the compute node
or a group of ours, and which hold no inventory. A run interrupted between
``create-provider`` and ``set-traits`` leaves such RPs; ``reshape`` adopts
the ones it wants and, like ``flatten``, removes the others. An RP outside
the compute node's tree or one holding inventory is never ours.
"""

import dataclasses

from nvlink_placement import errors
from nvlink_placement import hostnames
from nvlink_placement.placement import naming
from nvlink_placement.plan import actions as act
from nvlink_placement.topology import model
from nvlink_placement.topology import pci

OWNER = naming.OWNER_TRAIT


@dataclasses.dataclass
class Plan:
    """A plan.

    :ivar actions: writes in order.
    :ivar findings: drift that no write repairs (``action`` is '').
    """
    actions: list
    findings: list


def traits_to_query(desired_hosts, members=False):
    """Traits whose carriers planning must know.

    Nova's PCI RPs are recognised by name (``<host>_<ADDRESS>``), so the
    PCI trait is not queried: a no-op reshape stays at five requests.

    :param members: also the member traits of the GPUs (``check``: one
        listing per member trait of the layout, whatever the host count).
    """
    traits = {OWNER}
    for host in desired_hosts:
        traits |= host.traits
        if members:
            traits |= host.member_traits
    return traits


def markers(state):
    """Tool reservations: dict Nova PCI RP name -> carrier group uuid.

    A marker trait on a group RP names a PCI address; the PCI RP is the one
    of that address in the group's compute node tree.
    """
    found = {}
    for provider in state.by_uuid.values():
        if OWNER not in provider.traits:
            continue
        root = state.by_uuid.get(provider.root_uuid)
        for trait in provider.traits:
            address = naming.address_of(trait)
            if address and root is not None:
                found['%s_%s' % (root.name, address.upper())] = provider.uuid
    return found


def unowned_groups(state, root_names):
    """RPs named like a group of their root, without the owner trait.

    :param root_names: compute node names to look in (None: all).
    :returns: list of :class:`Provider`; usually empty (only an interrupted
        run leaves such RPs).
    """
    found = []
    for provider in state.by_uuid.values():
        root = state.by_uuid.get(provider.root_uuid)
        if (OWNER not in provider.traits and root is not None and
                (root_names is None or root.name in root_names) and
                model.is_group_name(root.name, provider.name)):
            found.append(provider)
    return found


def inventories_needed(state, desired_hosts):
    """UUIDs of the RPs whose inventories the plan needs.

    Unhealthy or tool-reserved GPUs, and group-named RPs without the owner
    trait (:func:`unowned_groups`): usually none.
    """
    marked = markers(state)
    needed = {p.uuid for p in unowned_groups(
        state, {h.name for h in desired_hosts})}
    for host in desired_hosts:
        for name, gpu in host.gpus.items():
            rp = state.by_name.get(name)
            if rp is not None and (gpu.reserve or name in marked):
                needed.add(rp.uuid)
        cn = state.by_name.get(host.name)
        if cn is not None:
            needed |= {state.by_name[n].uuid for n in marked
                       if n in state.by_name and n not in host.gpus and
                       state.by_name[n].root_uuid == cn.uuid}
    return needed


def split_allocations(state, desired_hosts):
    """Consumers whose GPUs span more than one NVLink domain of their size.

    A consumer holding N GPUs of a host that has N-GPU domains should hold
    one whole domain (a flavor of N GPUs asks for one, design.rst
   s6); one that holds GPUs of two of them (placed before the reshape, or
    by a flavor without the NVLink keys) keeps running without NVLink
    between its GPUs. N without domains of its own size is judged by the
    smallest domains that can hold N (3 GPUs: the quads). Judged on the
    desired tree, so ``reshape`` can warn before it moves anything.

    :param state: :class:`State` with ``allocations`` loaded for the GPUs
        in use (GPUs without an entry count as free).
    :returns: finding :class:`Action` list (drift ``split-allocation``),
        one per consumer and host: ``provider`` lists its GPUs.
    """
    findings = []
    for host in desired_hosts:
        held = {}
        for name in host.gpus:
            rp = state.by_name.get(name)
            for consumer in state.allocations.get(rp.uuid if rp else None,
                                                  ()):
                held.setdefault(consumer, set()).add(name)
        domains = host.domains()
        sizes = sorted({n for g, _ in domains for n in g.sizes})
        for consumer, gpus in sorted(held.items()):
            # The smallest domains that can hold them (3 GPUs: a quad).
            size = next((n for n in sizes if n >= len(gpus)), None)
            same_size = [(g, members) for g, members in domains
                         if size in g.sizes]
            if len(gpus) < 2 or not same_size or any(
                    gpus <= members for _, members in same_size):
                continue
            touched = [g.name for g, members in same_size if gpus & members]
            findings.append(act.Action(
                host.name, '', ', '.join(sorted(gpus)),
                detail='consumer %s holds %d GPUs that share no NVLink '
                       'domain of size %d (they are in %s): the instance '
                       'keeps running without NVLink between them; resize '
                       'or migrate it to repair' % (
                           consumer, len(gpus), size, ', '.join(touched)),
                drift=act.SPLIT_ALLOCATION, consumer=consumer))
    return findings


def plan(state, desired_hosts, members=False):
    """Return the :class:`Plan` that turns ``state`` into the desired trees.

    :param state: :class:`State` read with :func:`traits_to_query` and the
        reservation marker prefix, with the inventories of
        :func:`inventories_needed` loaded.
    :param desired_hosts: list of :class:`DesiredHost`.
    :param members: the state holds the member traits (read with
        ``traits_to_query(..., members=True)``): add ``member-traits``
        findings.
    :raises PlanError: listing every problem found (nothing may be
        written).
    """
    problems, per_host, findings = [], [], []
    size_traits, member_traits = set(), set()
    for host in desired_hosts:
        size_traits |= host.traits
        member_traits |= host.member_traits
    marked = markers(state)
    roots = hostnames.Names(state.root_names())
    for host in desired_hosts:
        planner = _HostPlanner(state, host, size_traits, marked, roots,
                               member_traits if members else None)
        per_host.append(planner.plan())
        problems.extend(planner.problems)
        findings.extend(planner.findings)
    if problems:
        raise errors.PlanError(problems)
    needed = set()
    for host_actions in per_host:
        for action in host_actions:
            needed.update(action.add_traits)
            if action.reserve:
                needed.add(action.marker)
    result = [act.Action('', act.CREATE_TRAIT, trait, detail='custom trait',
                         drift=act.MISSING_TRAIT)
              for trait in sorted(needed - state.known_traits)]
    for host_actions in per_host:
        result.extend(host_actions)
    return Plan(result, findings)


class _HostPlanner(object):

    def __init__(self, state, host, size_traits, marked, roots,
                 member_traits=None):
        self.state = state
        self.member_traits = member_traits
        self.roots = roots      # hostnames.Names of the root providers
        self.host = host
        self.size_traits = size_traits
        self.marked = marked
        self.problems = []
        self.findings = []

    def is_gpu(self, provider):
        """A Nova PCI RP of this host (by name, see traits_to_query)."""
        return pci.address_of_provider(self.host.name,
                                       provider.name) is not None

    def problem(self, message):
        self.problems.append('%s: %s' % (self.host.name, message))

    def action(self, kind, provider, parent='', detail='', **kw):
        return act.Action(self.host.name, kind, provider, parent, detail,
                          **kw)

    def plan(self):
        state, host = self.state, self.host
        cn = state.by_name.get(host.name)
        if cn is None:
            hint = self.roots.did_you_mean(host.name)
            self.problem('no compute node resource provider named %r in '
                         'Placement%s' % (host.name, hint or (
                             ' (is nova-compute running there with [pci] '
                             'report_in_placement = True?)')))
            return []
        if cn.parent_uuid is not None:
            self.problem('resource provider %r is not a root provider'
                         % host.name)
            return []
        self.cn = cn
        self.tree = {p.uuid: p for p in state.tree(cn.uuid)}
        self.ours = self.owned()
        self.uuid_of = {None: cn.uuid}
        creates, trait_sets, group_moves = self.groups()
        gpu_moves, reservations = self.gpus()
        extra_moves, deletes = self.obsolete()
        if self.problems:
            return []
        depth = _desired_depths(host)
        group_moves.sort(key=lambda a: (depth.get(a.provider, 0), a.provider))
        gpu_moves = sorted(gpu_moves + extra_moves, key=lambda a: a.provider)
        return (creates + trait_sets + group_moves + gpu_moves +
                reservations + deletes)

    def owned(self):
        """UUIDs of the group RPs in this tree that are ours (module doc)."""
        ours = set()
        for rp in sorted(self.tree.values(), key=self.state.depth):
            if OWNER in rp.traits:
                ours.add(rp.uuid)
            elif (model.is_group_name(self.host.name, rp.name) and
                  (rp.parent_uuid == self.cn.uuid or
                   rp.parent_uuid in ours) and
                  self.state.inventories.get(rp.uuid, (None, None))[1] ==
                  {}):
                ours.add(rp.uuid)
        return ours

    def groups(self):
        state, host = self.state, self.host
        creates, trait_sets, moves = [], [], []
        for group in host.groups:
            existing = state.by_name.get(group.name)
            parent_name = group.parent or host.name
            if existing is None:
                self.uuid_of[group.name] = None
                creates.append(self.action(
                    act.CREATE_PROVIDER, group.name, parent_name,
                    group.detail, drift=act.MISSING_GROUP))
                trait_sets.append(self.action(
                    act.SET_TRAITS, group.name,
                    detail=' '.join('+' + t for t in group.traits + (OWNER,)),
                    drift=act.MISSING_GROUP,
                    add_traits=group.traits + (OWNER,)))
                continue
            if existing.uuid not in self.tree:
                self.problem('the name %r is taken by resource provider %s in'
                             ' the tree of %s' % (group.name, existing.uuid,
                                                  _root_name(state, existing)))
                continue
            if state.inventories.get(existing.uuid, (None, {}))[1]:
                self.problem('the name %r is taken by resource provider %s, '
                             'which holds inventory' % (group.name,
                                                        existing.uuid))
                continue
            self.uuid_of[group.name] = existing.uuid
            add = tuple(t for t in group.traits + (OWNER,)
                        if t not in existing.traits)
            remove = tuple(sorted((existing.traits & self.size_traits) -
                                  set(group.traits)))
            if add or remove:
                trait_sets.append(self.action(
                    act.SET_TRAITS, group.name, uuid=existing.uuid,
                    detail=' '.join(['+' + t for t in add] +
                                    ['-' + t for t in remove]),
                    drift=act.MISSING_TRAIT, add_traits=add,
                    remove_traits=remove))
        for group in host.groups:
            uuid = self.uuid_of.get(group.name)
            if uuid is None:
                continue
            target = self.uuid_of.get(group.parent)
            if target is None or state.by_uuid[uuid].parent_uuid != target:
                moves.append(self.action(
                    act.MOVE_PROVIDER, group.name, group.parent or host.name,
                    group.detail, uuid=uuid, drift=act.WRONG_PARENT))
        return creates, trait_sets, moves

    def gpus(self):
        state, host = self.state, self.host
        moves, reservations = [], []
        for rp_name, gpu in sorted(host.gpus.items()):
            rp = state.by_name.get(rp_name)
            if rp is None:
                self.problem('no Nova PCI resource provider named %r (check '
                             'the address, [pci] device_spec and '
                             'report_in_placement)' % rp_name)
                continue
            if rp.uuid not in self.tree:
                self.problem('%r is outside the tree of compute node %r (its '
                             'root is %s)' % (rp_name, host.name,
                                              _root_name(state, rp)))
                continue
            target = self.uuid_of.get(gpu.parent)
            if target is None or rp.parent_uuid != target:
                moves.append(self.action(
                    act.MOVE_PROVIDER, rp_name, gpu.parent or host.name,
                    gpu.detail, uuid=rp.uuid, drift=act.WRONG_PARENT))
            reservations.extend(self.reservation(rp, gpu))
            self.member_finding(rp, gpu)
        for rp in self.tree.values():
            if rp.name in host.gpus or not self.is_gpu(rp):
                continue
            if rp.name in self.marked:
                reservations.extend(self.reservation(rp, None))
            if rp.name in host.ignored:
                self.findings.append(self.action(
                    '', rp.name, detail='PCI provider of a GPU the topology '
                    'excludes (vGPU or MIG): a [pci] device_spec entry of '
                    'nova-compute matches it, so a flavor can be given it',
                    drift=act.EXCLUDED_GPU))
            elif host.gpus or host.ignored:
                self.findings.append(self.action(
                    '', rp.name, detail='PCI provider not in the topology',
                    drift=act.UNKNOWN_GPU))
        return moves, reservations

    def member_finding(self, rp, gpu):
        """A ``member-traits`` finding when ``rp``'s differ from ``gpu``'s.

        Only the member traits of this plan are read (the others stay
        unknown); Nova writes them from ``[pci] device_spec``, so no
        Placement write of this tool repairs them.
        """
        if self.member_traits is None:
            return
        have = rp.traits & self.member_traits
        want = set(gpu.member_traits)
        if have == want:
            return
        self.findings.append(self.action(
            '', rp.name, detail='member traits %s (from nova-compute\'s '
            '[pci] device_spec)' % ' '.join(
                ['+' + t for t in sorted(want - have)] +
                ['-' + t for t in sorted(have - want)]),
            drift=act.MEMBER_TRAITS))

    def reservation(self, rp, gpu):
        """set-reserved actions for one PCI RP (``gpu`` None: unknown)."""
        if not self.host.health:
            return []    # --no-health: reservations stay as they are
        generation, inventories = self.state.inventories.get(
            rp.uuid, (None, {}))
        full = bool(inventories) and all(
            inv['reserved'] >= inv['total'] for inv in inventories.values())
        carrier = self.marked.get(rp.name)
        address = gpu.address if gpu else None
        if gpu is not None and gpu.reserve:
            if full and carrier is None:
                return []    # reserved by someone else: leave it alone
            if gpu.parent is None:
                self.findings.append(self.action(
                    '', rp.name, detail='unhealthy, but in no NVLink group: '
                    'reserve it by hand', drift=act.MISSING_RESERVATION))
                return []
            if full and carrier is not None:
                return []
            marker = naming.marker(address)
            holder = (self.state.by_uuid[carrier].name if carrier
                      else gpu.parent)
            return [self.action(
                act.SET_RESERVED, rp.name, detail='reserve (GPU unhealthy)',
                uuid=rp.uuid, drift=act.MISSING_RESERVATION, reserve=True,
                marker=marker, marker_provider=holder)]
        if carrier is None:
            return []
        if address is None:
            address = pci.address_of_provider(self.host.name, rp.name)
        return [self.action(
            act.SET_RESERVED, rp.name,
            detail='release (reserved by this tool, GPU no longer unhealthy)'
            if gpu is not None else 'release (reserved by this tool)',
            uuid=rp.uuid, drift=act.STALE_RESERVATION, reserve=False,
            marker=naming.marker(address),
            marker_provider=self.state.by_uuid[carrier].name)]

    def obsolete(self):
        """Owned groups no longer wanted, and what they still hold."""
        state, host = self.state, self.host
        wanted = {g.name for g in host.groups}
        obsolete = [p for p in self.tree.values()
                    if p.uuid in self.ours and p.name not in wanted]
        obsolete_uuids = {p.uuid for p in obsolete}
        moves = []
        for group in obsolete:
            for child in state.children.get(group.uuid, []):
                if (child.name in host.gpus or child.name in wanted or
                        child.uuid in obsolete_uuids):
                    continue
                if self.is_gpu(child):
                    moves.append(self.action(
                        act.MOVE_PROVIDER, child.name, host.name,
                        'not in the topology' if host.groups or not
                        host.known else 'flatten', uuid=child.uuid,
                        drift=act.WRONG_PARENT))
                    continue
                self.problem('cannot delete %r: it holds %r, which this tool '
                             'does not manage' % (group.name, child.name))
        deletes = [self.action(act.DELETE_PROVIDER, p.name,
                               detail='obsolete group', uuid=p.uuid,
                               drift=act.UNEXPECTED_GROUP)
                   for p in sorted(obsolete, key=lambda p: (-state.depth(p),
                                                            p.name))]
        return moves, deletes


def _desired_depths(host):
    parents = {g.name: g.parent for g in host.groups}
    depth = {}
    for name in parents:
        d, cur = 0, name
        while parents.get(cur):
            d, cur = d + 1, parents[cur]
        depth[name] = d
    return depth


def _root_name(state, provider):
    root = state.by_uuid.get(provider.root_uuid)
    return root.name if root else provider.root_uuid
