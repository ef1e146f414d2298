"""Apply planned actions straight to an embedded Placement's tables.

``reshape --snapshot`` (and ``flatten --snapshot``) used to send its
writes through the embedded Placement's WSGI stack one request at a time,
about 20 a host: minutes for a 1000-host cloud. Here the same writes are
made in one transaction: the rows they touch are read once, each host's
actions are applied in plan order to an in-memory copy by Placement's own
rules, and the difference is written with a handful of multi-row
statements. A live cloud is always written through the REST API
(:mod:`nvlink_placement.plan.executor`).

Placement's rules, as ``openstack-placement`` 16.0.0 applies them
(``placement/objects/resource_provider.py``), and the executor's
requests they stand for:

- ``create-trait``: ``PUT /traits/{name}`` adds the trait when missing.
- ``create-provider``: ``POST /resource_providers`` with a new uuid:
  generation 0, ``root_provider_id`` that of the parent, which must
  exist; a name that exists is refused (409) unless it is the provider
  asked for, under the same parent (the executor accepts that one).
- ``set-traits``: ``PUT .../traits`` of the provider's traits plus those
  added, less those removed, made only when that changes them
  (``_set_traits``: the generation goes up by one); an unknown trait is
  refused.
- ``move-provider``: ``PUT /resource_providers/{uuid}`` with the new
  parent (``_update_in_db``): the generation stays, the subtree takes the
  parent's root, a parent inside the subtree (a loop) is refused.
- ``set-reserved``: the marker trait on its group (as ``set-traits``),
  then ``PUT .../inventories`` with ``reserved`` = ``total`` (or 0) in
  every inventory, made only when one differs (``_set_inventory``: the
  generation goes up by one); releasing drops the marker after.
- ``delete-provider``: refused while it has children or allocations
  (``_delete``); its inventories, traits and aggregate links go with it;
  one that is gone already is a success.

A host stops at its first refused action, its earlier writes kept, and
the other hosts go on (:class:`executor.HostFailure`), as with the
executor. New providers get the ids SQLite would give them one by one
(the largest id in use plus one), so even the listing order is the one
the REST path gives with ``--workers 1``.
``tests/functional/test_bulk_differential.py`` proves the result equal to
the REST path's.
"""

import collections
import datetime
import itertools
import logging
import uuid as uuid_mod

import sqlalchemy as sa

from nvlink_placement import errors
from nvlink_placement.plan import actions as act
from nvlink_placement.plan import executor

LOG = logging.getLogger(__name__)


def apply(placement, actions, state, on_action=None, on_host=None):
    """Apply ``actions`` to the tables of ``placement``.

    :param placement: an entered
        :class:`nvlink_placement.placement.embedded.EmbeddedPlacement`
        whose ``writes_tables`` is True.
    :param actions: from :func:`nvlink_placement.plan.planner.plan`, in
        order.
    :param state: the :class:`State` the plan was made from (for uuids).
    :param on_action: callable(action) after each applied action.
    :param on_host: callable(host, failure or None) when a host is done.
    :returns: list of :class:`executor.HostFailure`.
    """
    on_action = on_action or (lambda action: None)
    on_host = on_host or (lambda host, failure: None)
    from placement.db.sqlalchemy import models
    with placement.client.lock, placement.engine.begin() as conn:
        tables = _Tables(conn, models)
        for action in actions:
            if action.action == act.CREATE_TRAIT:
                tables.create_trait(action.provider)
                on_action(action)
        uuids = {p.name: p.uuid for p in state.by_uuid.values()}
        failures = []
        host_actions = [a for a in actions if a.action != act.CREATE_TRAIT]
        for host, items in itertools.groupby(host_actions,
                                             key=lambda a: a.host):
            # Names a host creates are its own (the executor's copy).
            runner = _HostRunner(tables, collections.ChainMap({}, uuids))
            done = 0
            failure = None
            for action in items:
                try:
                    runner.apply(action)
                except errors.NvlinkError as exc:
                    failure = executor.HostFailure(host, str(exc), done)
                    break
                done += 1
                on_action(action)
            if failure is not None:
                failures.append(failure)
            on_host(host, failure)
        LOG.info('wrote the plan to the embedded Placement\'s tables in one '
                 'transaction: %s', tables.write())
    return failures


class _Provider(object):
    __slots__ = ('id', 'uuid', 'name', 'parent_id', 'root_id', 'generation',
                 'traits', 'inventories', 'allocations')

    def __init__(self, id, uuid, name, parent_id, root_id, generation):
        self.id = id
        self.uuid = uuid
        self.name = name
        self.parent_id = parent_id
        self.root_id = root_id
        self.generation = generation
        self.traits = set()
        #: dict resource class id -> [total, reserved]
        self.inventories = {}
        self.allocations = 0


class _Tables(object):
    """The providers of one Placement database, changed in memory."""

    def __init__(self, conn, models):
        self.conn = conn
        self.m = models
        rp = models.ResourceProvider
        self.by_id = {}
        for row in conn.execute(sa.select(
                rp.id, rp.uuid, rp.name, rp.parent_provider_id,
                rp.root_provider_id, rp.generation)):
            self.by_id[row[0]] = _Provider(*row)
        self.by_uuid = {p.uuid: p for p in self.by_id.values()}
        self.max_id = max(self.by_id, default=0)
        self.by_name = {p.name: p for p in self.by_id.values()}
        self.children = {}
        for p in self.by_id.values():
            if p.parent_id is not None:
                self.children.setdefault(p.parent_id, set()).add(p.id)
        trait = models.Trait
        self.trait_ids = dict(conn.execute(sa.select(trait.name,
                                                     trait.id)).all())
        self.trait_names_by_id = {i: n for n, i in self.trait_ids.items()}
        self.new_traits = []
        rpt = models.ResourceProviderTrait
        for rp_id, trait_id in conn.execute(sa.select(
                rpt.resource_provider_id, rpt.trait_id)):
            self.by_id[rp_id].traits.add(trait_id)
        inv = models.Inventory
        for rp_id, rc_id, total, reserved in conn.execute(sa.select(
                inv.resource_provider_id, inv.resource_class_id, inv.total,
                inv.reserved)):
            self.by_id[rp_id].inventories[rc_id] = [total, reserved]
        alloc = models.Allocation
        for rp_id, count in conn.execute(sa.select(
                alloc.resource_provider_id, sa.func.count()).group_by(
                alloc.resource_provider_id)):
            if rp_id in self.by_id:
                self.by_id[rp_id].allocations = count
        self.original = {p.id: (p.parent_id, p.root_id, p.generation,
                                frozenset(p.traits),
                                {rc: tuple(v)
                                 for rc, v in p.inventories.items()})
                         for p in self.by_id.values()}
        self.deleted = set()

    # -- what the API does -------------------------------------------------

    def create_trait(self, name):
        if name not in self.trait_ids:
            # Its id comes with the INSERT (:meth:`write`); the name
            # stands for it until then.
            self.trait_ids[name] = name
            self.trait_names_by_id[name] = name
            self.new_traits.append(name)

    def trait_id(self, name):
        if name not in self.trait_ids:
            raise errors.PlacementError('No such trait(s): %s.' % name,
                                        status=400)
        return self.trait_ids[name]

    def provider(self, uuid):
        found = self.by_uuid.get(uuid)
        if found is None:
            raise errors.PlacementError('No resource provider with uuid %s '
                                        'found' % uuid, status=404)
        return found

    def create(self, uuid, name, parent_uuid):
        parent = self.by_uuid.get(parent_uuid)
        if parent is None:
            raise errors.PlacementError(
                'cannot create %s: parent provider UUID does not exist'
                % name, status=400)
        taken = self.by_name.get(name)
        if taken is not None:
            if taken.parent_id == parent.id:
                return taken
            raise errors.PlacementError(
                'cannot create %s: a provider of that name exists (%s) '
                'under another parent; the provider there is not the one '
                'this tool meant to create' % (name, taken.uuid),
                status=409)
        # SQLite gives a new row the largest id in use plus one.
        new_id = self.max_id + 1
        self.max_id = new_id
        rp = _Provider(new_id, uuid, name, parent.id, parent.root_id, 0)
        self.by_id[new_id] = rp
        self.by_uuid[uuid] = rp
        self.by_name[name] = rp
        self.children.setdefault(parent.id, set()).add(new_id)
        return rp

    def set_traits(self, rp, names):
        wanted = {self.trait_id(n) for n in names}
        if wanted != rp.traits:
            rp.traits = wanted
            rp.generation += 1

    def trait_names(self, rp):
        return {self.trait_names_by_id[i] for i in rp.traits}

    def reserve(self, rp, reserve):
        wanted = {rc: (inv[0] if reserve else 0)
                  for rc, inv in rp.inventories.items()}
        if all(inv[1] == wanted[rc] for rc, inv in rp.inventories.items()):
            return
        for rc, inv in rp.inventories.items():
            inv[1] = wanted[rc]
        rp.generation += 1

    def move(self, rp, name, parent):
        if name != rp.name and name in self.by_name:
            raise errors.PlacementError(
                'cannot rename %s to %s: the name is taken' % (rp.name, name),
                status=409)
        subtree = self._subtree(rp)
        if parent.id in subtree:
            raise errors.PlacementError(
                'cannot move %s under %s: creating loop in the provider '
                'tree is not allowed' % (rp.name, parent.name), status=400)
        if rp.parent_id is not None:
            self.children[rp.parent_id].discard(rp.id)
        self.children.setdefault(parent.id, set()).add(rp.id)
        del self.by_name[rp.name]
        rp.name = name
        self.by_name[name] = rp
        rp.parent_id = parent.id
        for member in subtree:
            self.by_id[member].root_id = parent.root_id

    def _subtree(self, rp):
        found, todo = set(), [rp.id]
        while todo:
            current = todo.pop()
            found.add(current)
            todo.extend(self.children.get(current, ()))
        return found

    def delete(self, rp):
        if self.children.get(rp.id):
            raise errors.PlacementError(
                'Unable to delete parent resource provider %s: It has child '
                'resource providers.' % rp.uuid, status=409)
        if rp.allocations:
            raise errors.PlacementError(
                'Unable to delete resource provider %s: Resource provider '
                'has allocations.' % rp.uuid, status=409)
        del self.by_id[rp.id]
        del self.by_uuid[rp.uuid]
        del self.by_name[rp.name]
        if rp.parent_id is not None:
            self.children[rp.parent_id].discard(rp.id)
        self.deleted.add(rp.id)
        if rp.id == self.max_id:
            self.max_id = max(self.by_id, default=0)

    # -- the difference, written ------------------------------------------

    def write(self):
        """Write what changed; a line saying how much."""
        m = self.m
        conn = self.conn
        now = datetime.datetime.now(datetime.timezone.utc).replace(
            tzinfo=None)
        if self.new_traits:
            conn.execute(sa.insert(m.Trait.__table__), [
                {'name': n, 'created_at': now} for n in self.new_traits])
            self.trait_ids = dict(conn.execute(sa.select(m.Trait.name,
                                                         m.Trait.id)).all())
        gone = sorted(i for i in self.deleted if i in self.original)
        for model in (m.Inventory, m.ResourceProviderAggregate,
                      m.ResourceProviderTrait):
            for chunk in _chunks(gone):
                conn.execute(sa.delete(model.__table__).where(
                    model.__table__.c.resource_provider_id.in_(chunk)))
        for chunk in _chunks(gone):
            conn.execute(sa.delete(m.ResourceProvider.__table__).where(
                m.ResourceProvider.__table__.c.id.in_(chunk)))
        created = [p for i, p in sorted(self.by_id.items())
                   if i not in self.original]
        if created:
            conn.execute(sa.insert(m.ResourceProvider.__table__), [
                {'id': p.id, 'uuid': p.uuid, 'name': p.name,
                 'generation': p.generation, 'parent_provider_id': p.parent_id,
                 'root_provider_id': p.root_id, 'created_at': now,
                 'updated_at': now if p.generation else None}
                for p in created])
        changed = []
        traits_added, traits_removed, reserved = [], [], []
        for p in self.by_id.values():
            old = self.original.get(p.id)
            if old is None:
                traits_added.extend((p.id, t) for t in p.traits)
                continue
            parent, root, generation, traits, inventories = old
            if (p.parent_id, p.root_id, p.generation) != (parent, root,
                                                          generation):
                changed.append({'_id': p.id, 'parent': p.parent_id,
                                'root': p.root_id,
                                'generation': p.generation, 'now': now})
            traits_added.extend((p.id, t) for t in p.traits - traits)
            traits_removed.extend((p.id, t) for t in traits - p.traits)
            reserved.extend({'_rp': p.id, '_rc': rc, 'reserved': inv[1],
                             'now': now}
                            for rc, inv in p.inventories.items()
                            if inv[1] != inventories[rc][1])
        # Traits created above had no id while the actions ran.
        new_ids = {n: self.trait_ids[n] for n in self.new_traits}

        def trait(t):
            return new_ids[t] if isinstance(t, str) else t
        rp_table = m.ResourceProvider.__table__
        if changed:
            conn.execute(rp_table.update().where(
                rp_table.c.id == sa.bindparam('_id')).values(
                parent_provider_id=sa.bindparam('parent'),
                root_provider_id=sa.bindparam('root'),
                generation=sa.bindparam('generation'),
                updated_at=sa.bindparam('now')), changed)
        rpt = m.ResourceProviderTrait.__table__
        if traits_removed:
            conn.execute(rpt.delete().where(sa.and_(
                rpt.c.resource_provider_id == sa.bindparam('_rp'),
                rpt.c.trait_id == sa.bindparam('_trait'))), [
                {'_rp': rp, '_trait': trait(t)} for rp, t in traits_removed])
        if traits_added:
            conn.execute(sa.insert(rpt), [
                {'resource_provider_id': rp, 'trait_id': trait(t),
                 'created_at': now} for rp, t in traits_added])
        inv = m.Inventory.__table__
        if reserved:
            conn.execute(inv.update().where(sa.and_(
                inv.c.resource_provider_id == sa.bindparam('_rp'),
                inv.c.resource_class_id == sa.bindparam('_rc'))).values(
                reserved=sa.bindparam('reserved'),
                updated_at=sa.bindparam('now')), reserved)
        return ('%d providers created, %d changed, %d deleted; traits %d '
                'added, %d removed; %d inventories changed'
                % (len(created), len(changed), len(gone), len(traits_added),
                   len(traits_removed), len(reserved)))


def _chunks(ids, size=500):
    for start in range(0, len(ids), size):
        yield ids[start:start + size]


class _HostRunner(object):
    """One host's actions on :class:`_Tables` (the executor's requests)."""

    def __init__(self, tables, uuids):
        self.tables = tables
        self.uuids = uuids

    def apply(self, action):
        getattr(self, '_' + action.action.replace('-', '_'))(action)

    def _uuid(self, name):
        if name not in self.uuids:
            raise errors.PlacementError('no provider %s' % name, status=404)
        return self.uuids[name]

    def _create_provider(self, action):
        rp = self.tables.create(str(uuid_mod.uuid4()), action.provider,
                                self._uuid(action.parent))
        self.uuids[action.provider] = rp.uuid

    def _set_traits(self, action):
        self._change_traits(action.uuid or self._uuid(action.provider),
                            action.add_traits, action.remove_traits)

    def _change_traits(self, uuid, add, remove):
        rp = self.tables.provider(uuid)
        self.tables.set_traits(rp, (self.tables.trait_names(rp) | set(add)) -
                               set(remove))

    def _set_reserved(self, action):
        uuid = action.uuid or self._uuid(action.provider)
        carrier = self._uuid(action.marker_provider)
        if action.reserve:
            self._change_traits(carrier, (action.marker,), ())
        self.tables.reserve(self.tables.provider(uuid), action.reserve)
        if not action.reserve:
            self._change_traits(carrier, (), (action.marker,))

    def _move_provider(self, action):
        rp = self.tables.provider(action.uuid or self._uuid(action.provider))
        parent = self.tables.provider(self._uuid(action.parent))
        self.tables.move(rp, action.provider, parent)

    def _delete_provider(self, action):
        rp = self.tables.by_uuid.get(action.uuid or
                                     self.uuids.get(action.provider))
        if rp is not None:
            self.tables.delete(rp)
