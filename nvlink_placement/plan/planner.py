"""Diff desired trees against Placement and produce ordered actions.

Pure: takes a :class:`nvlink_placement.placement.state.State` and
:class:`nvlink_placement.plan.desired.DesiredHost` objects, returns
:class:`nvlink_placement.plan.actions.Action` lists. The same code serves
``reshape``, ``--dry-run``, ``check`` and ``flatten``. Every problem of
every host is collected first; if there is any, :class:`PlanError` is
raised and nothing may be written.

Safety rules (DESIGN.md section 4): only RPs carrying the owner trait are
deleted; Nova's PCI RPs are moved, never renamed and never leave their
compute node's tree; group RPs never get ``COMPUTE_MANAGED_PCI_DEVICE``.
An RP named like one of our groups, in the right tree, without the owner
trait and without the PCI trait, is adopted (that is what a run
interrupted between ``create-provider`` and ``set-traits`` leaves).
"""

from nvlink_placement import errors
from nvlink_placement.placement import state as state_mod
from nvlink_placement.plan import actions as act
from nvlink_placement.plan import desired as desired_mod

OWNER = desired_mod.OWNER_TRAIT
PCI = state_mod.PCI_TRAIT


def traits_to_query(desired_hosts):
    """Traits whose carriers planning must know."""
    traits = {OWNER, PCI}
    for host in desired_hosts:
        traits |= host.traits
    return traits


def plan(state, desired_hosts):
    """Return the ordered actions that turn ``state`` into the desired trees.

    :param state: :class:`State` read with :func:`traits_to_query`.
    :param desired_hosts: list of :class:`DesiredHost`.
    :returns: list of :class:`Action`: trait creations first, then each
        host's actions in application order.
    :raises PlanError: listing every problem found (nothing may be
        written).
    """
    problems = []
    per_host = []
    needed_traits = set()
    size_traits = set()
    for host in desired_hosts:
        size_traits |= host.traits
    for host in desired_hosts:
        host_actions = _plan_host(state, host, size_traits, problems)
        for action in host_actions:
            needed_traits.update(action.add_traits)
        per_host.append(host_actions)
    if problems:
        raise errors.PlanError(problems)
    result = [act.Action('', act.CREATE_TRAIT, trait, detail='custom trait')
              for trait in sorted(needed_traits - state.known_traits)]
    for host_actions in per_host:
        result.extend(host_actions)
    return result


def _plan_host(state, host, size_traits, problems):
    cn = state.by_name.get(host.name)
    if cn is None:
        problems.append(
            '%s: no compute node resource provider named %r in Placement '
            '(is nova-compute running there with [pci] '
            'report_in_placement = True?)' % (host.name, host.name))
        return []
    if cn.parent_uuid is not None:
        problems.append('%s: resource provider %r is not a root provider'
                        % (host.name, host.name))
        return []
    count = len(problems)
    tree = {p.uuid: p for p in state.tree(cn.uuid)}
    owned = {p.name: p for p in tree.values() if OWNER in p.traits}

    # Groups: existing (adopted or owned) or to create.
    uuid_of = {None: cn.uuid}
    creates, trait_sets, group_moves = [], [], []
    wanted = {g.name for g in host.groups}
    for group in host.groups:
        existing = state.by_name.get(group.name)
        parent_name = group.parent or host.name
        if existing is None:
            uuid_of[group.name] = None
            creates.append(act.Action(host.name, act.CREATE_PROVIDER,
                                      group.name, parent_name, group.detail))
            trait_sets.append(act.Action(
                host.name, act.SET_TRAITS, group.name,
                detail='+%s +%s' % (group.trait, OWNER),
                add_traits=(group.trait, OWNER)))
            continue
        if existing.uuid not in tree:
            problems.append(
                '%s: the name %r is taken by resource provider %s in the '
                'tree of %s' % (host.name, group.name, existing.uuid,
                                _root_name(state, existing)))
            continue
        if PCI in existing.traits:
            problems.append('%s: %r carries %s: it is a Nova PCI provider, '
                            'not a group' % (host.name, group.name, PCI))
            continue
        uuid_of[group.name] = existing.uuid
        add = tuple(t for t in (group.trait, OWNER)
                    if t not in existing.traits)
        remove = tuple(sorted((existing.traits & size_traits) -
                              {group.trait}))
        if add or remove:
            trait_sets.append(act.Action(
                host.name, act.SET_TRAITS, group.name, uuid=existing.uuid,
                detail=' '.join(['+' + t for t in add] +
                                ['-' + t for t in remove]),
                add_traits=add, remove_traits=remove))
    for group in host.groups:
        if group.name not in uuid_of or uuid_of[group.name] is None:
            continue
        target = uuid_of.get(group.parent)
        current = state.by_uuid[uuid_of[group.name]]
        if target is None or current.parent_uuid != target:
            group_moves.append(act.Action(
                host.name, act.MOVE_PROVIDER, group.name,
                group.parent or host.name, group.detail,
                uuid=current.uuid))

    # GPUs: every one must exist as a Nova PCI RP in this tree.
    gpu_moves = []
    for rp_name, (parent, detail) in sorted(host.gpus.items()):
        rp = state.by_name.get(rp_name)
        if rp is None:
            problems.append(
                '%s: no Nova PCI resource provider named %r (check the '
                'address, [pci] device_spec and report_in_placement)'
                % (host.name, rp_name))
            continue
        if rp.uuid not in tree:
            problems.append('%s: %r is outside the tree of compute node %r'
                            ' (its root is %s)' % (
                                host.name, rp_name, host.name,
                                _root_name(state, rp)))
            continue
        target = uuid_of.get(parent) if parent in uuid_of else None
        if target is None or rp.parent_uuid != target:
            gpu_moves.append(act.Action(host.name, act.MOVE_PROVIDER,
                                        rp_name, parent or host.name, detail,
                                        uuid=rp.uuid))

    # Owned groups that are no longer wanted, and what they still hold.
    obsolete = [p for name, p in owned.items() if name not in wanted]
    obsolete_uuids = {p.uuid for p in obsolete}
    for group in obsolete:
        for child in state.children.get(group.uuid, []):
            if child.name in host.gpus or child.name in wanted:
                continue
            if child.uuid in obsolete_uuids:
                continue
            if PCI in child.traits:
                gpu_moves.append(act.Action(
                    host.name, act.MOVE_PROVIDER, child.name, host.name,
                    'not in the topology', uuid=child.uuid))
                continue
            problems.append(
                '%s: cannot delete %r: it holds %r, which this tool does not'
                ' manage' % (host.name, group.name, child.name))
    deletes = [act.Action(host.name, act.DELETE_PROVIDER, p.name,
                          detail='obsolete group', uuid=p.uuid)
               for p in sorted(obsolete, key=lambda p: (-state.depth(p),
                                                        p.name))]
    if len(problems) > count:
        return []
    depth = _desired_depths(host)
    group_moves.sort(key=lambda a: (depth.get(a.provider, 0), a.provider))
    gpu_moves.sort(key=lambda a: a.provider)
    return creates + trait_sets + group_moves + gpu_moves + deletes


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
