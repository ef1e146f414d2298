"""Snapshots straight on Placement's own tables: bulk load and export.

Loading a snapshot through the REST API costs a request per provider,
trait set, inventory and consumer (tens of milliseconds each in process);
a 1000-host cloud took minutes. Here the same state is written with a
handful of multi-row ``INSERT`` statements on the tables of
``openstack-placement`` (``placement/db/sqlalchemy/models.py``), and read
back with a handful of ``SELECT`` statements in the exact form of the API
export (:mod:`nvlink_placement.placement.snapshot`). The result is a real
Placement database: commands talk to it through the API, except that
``check`` and ``reshape`` read their planning state and the GPUs'
allocations here (:func:`state`, :func:`allocations`: what the API
answers, in a few queries) and ``reshape`` writes its plan with
:mod:`nvlink_placement.plan.bulk`.

Placement's rules are kept by checking the document first
(:func:`nvlink_placement.placement.snapshot.validate`) and by writing rows
the way Placement's own code does: standard resource classes get their
os-resource-classes index as id and custom ones ids from 10000
(``placement/objects/resource_class.py``), every provider gets its
``root_provider_id``, every allocation a consumer row with project and user
(alembic revisions 611cd6dffd7b and b5c396305c25), an untyped consumer a
NULL ``consumer_type_id`` (which the API reports as ``unknown``).

Only SQLite is written (ids are given explicitly, which SQLite's rowid
allocation follows and server databases' sequences would not), and only at
a schema revision listed in :data:`KNOWN_REVISIONS`; :func:`unsupported`
says why not otherwise, and callers fall back to the API.
"""

import datetime
import os

import sqlalchemy as sa
from sqlalchemy import orm

from nvlink_placement import errors
from nvlink_placement.placement import naming
from nvlink_placement.placement import snapshot
from nvlink_placement.placement import snapshot_capacity
from nvlink_placement.placement import state as state_mod

#: Placement's alembic revisions, oldest first
#: (placement/db/sqlalchemy/alembic/versions, openstack-placement 16.0.0).
HISTORY = ('b4ed3a175331', '611cd6dffd7b', 'b5c396305c25', '422ece571366',
           'a082b8bb98d0')
#: Revisions whose tables this module writes: consumer_types exists from
#: 422ece571366; a082b8bb98d0 only dropped redundant indexes.
KNOWN_REVISIONS = frozenset(HISTORY[3:])
#: First id Placement gives a custom resource class.
MIN_CUSTOM_RC_ID = 10000


def _models():
    from placement.db.sqlalchemy import models
    return models


def installed_revision():
    """Head revision of the installed openstack-placement's migrations.

    What a schema created from its models (``create_schema``, as
    :class:`EmbeddedPlacement` does) corresponds to; None when a migration
    file is not in :data:`HISTORY` (a newer Placement).
    """
    from placement.db.sqlalchemy import migration
    versions = os.path.join(os.path.dirname(migration.__file__), 'alembic',
                            'versions')
    found = {name.split('_')[0] for name in os.listdir(versions)
             if name.endswith('.py') and not name.startswith('_')}
    if found - set(HISTORY):
        return None
    return [rev for rev in HISTORY if rev in found][-1]


def revision(engine):
    """Schema revision of the database behind ``engine``.

    Its ``alembic_version`` row, or the installed package's head for a
    schema created from the models.
    """
    if sa.inspect(engine).has_table('alembic_version'):
        with engine.connect() as conn:
            return conn.execute(sa.text(
                'SELECT version_num FROM alembic_version')).scalar()
    return installed_revision()


def unsupported(engine):
    """Why the tables of ``engine`` cannot be written here, or None."""
    if engine.dialect.name != 'sqlite':
        return ('bulk loading writes SQLite only, not %s'
                % engine.dialect.name)
    found = revision(engine)
    if found not in KNOWN_REVISIONS:
        return ('Placement database schema revision %s is not one this '
                'version of nvlink-placement knows (%s)'
                % (found or 'unknown', ', '.join(sorted(KNOWN_REVISIONS))))
    return None


# -- load ------------------------------------------------------------------

def load(engine, document):
    """Write a validated snapshot into Placement's tables, in one transaction.

    The database may already hold other providers and consumers, but none
    of the document's provider uuids or names nor consumer uuids.

    :param engine: SQLAlchemy engine of a Placement database for which
        :func:`unsupported` is None.
    :param document: snapshot dict checked by :func:`snapshot.validate`;
        provider uuids are written in Placement's form
        (:func:`snapshot.canonical`).
    :returns: dict of rows written per table.
    :raises NvlinkError: a provider or consumer exists already.
    """
    reason = unsupported(engine)
    if reason:
        raise errors.NvlinkError(reason)
    m = _models()
    document = snapshot.canonical(document)
    providers = snapshot.parents_first(document['resource_providers'])
    consumers = document.get('allocations', {})
    with engine.begin() as conn:
        insert = _Writer(conn)
        _refuse_existing(conn, m, providers, consumers)
        rc_ids = _resource_classes(conn, m, {
            rc for rp in providers for rc in rp.get('inventories', {})},
            insert)
        trait_ids = _named_ids(conn, m.Trait, {
            t for rp in providers for t in rp.get('traits', ())}, insert)
        next_id = (conn.execute(sa.select(sa.func.max(
            m.ResourceProvider.id))).scalar() or 0) + 1
        rp_ids = {rp['uuid']: next_id + i for i, rp in enumerate(providers)}
        roots = {}
        rp_rows = []
        for rp in providers:
            parent = rp.get('parent_provider_uuid')
            roots[rp['uuid']] = roots[parent] if parent else rp_ids[rp['uuid']]
            rp_rows.append({'id': rp_ids[rp['uuid']], 'uuid': rp['uuid'],
                            'name': rp['name'], 'generation': 0,
                            'parent_provider_id': rp_ids.get(parent),
                            'root_provider_id': roots[rp['uuid']]})
        insert(m.ResourceProvider, rp_rows)
        insert(m.Inventory, [
            dict(snapshot_capacity.INVENTORY_DEFAULTS, **inv,
                 resource_provider_id=rp_ids[rp['uuid']],
                 resource_class_id=rc_ids[rc])
            for rp in providers
            for rc, inv in rp.get('inventories', {}).items()])
        insert(m.ResourceProviderTrait, [
            {'resource_provider_id': rp_ids[rp['uuid']],
             'trait_id': trait_ids[t]}
            for rp in providers for t in rp.get('traits', ())])
        aggregate_ids = _uuid_ids(conn, m.PlacementAggregate, {
            a for rp in providers for a in rp.get('aggregates', ())}, insert)
        insert(m.ResourceProviderAggregate, [
            {'resource_provider_id': rp_ids[rp['uuid']],
             'aggregate_id': aggregate_ids[a]}
            for rp in providers for a in rp.get('aggregates', ())])
        _load_consumers(conn, m, consumers, rp_ids, rc_ids, insert)
    return insert.rows


class _Writer(object):
    """Multi-row INSERTs on one connection; ``rows`` counts per table.

    The rows go to the driver's ``executemany`` as they are
    (``exec_driver_sql``; database errors still surface as oslo.db's), the
    one ``created_at`` stamp rendered once by the dialect's ``DateTime``
    processor: a Core ``insert()`` runs every parameter of every row
    through its type processors, a third of a 1000-host load. Every row
    of one call has the keys of the first, ``created_at`` not among them.
    """

    def __init__(self, conn):
        self.conn = conn
        self.rows = {}
        now = datetime.datetime.now(
            datetime.timezone.utc).replace(tzinfo=None)
        dialect = conn.dialect
        self.now = sa.DateTime().dialect_impl(dialect).bind_processor(
            dialect)(now)

    def __call__(self, model, values):
        table = model.__table__
        if values:
            columns = list(values[0])
            quote = self.conn.dialect.identifier_preparer.quote
            sql = 'INSERT INTO %s (%s) VALUES (%s)' % (
                quote(table.name),
                ', '.join(quote(c) for c in columns + ['created_at']),
                ', '.join('?' * (len(columns) + 1)))
            self.conn.exec_driver_sql(sql, [
                tuple(row[c] for c in columns) + (self.now,)
                for row in values])
        self.rows[table.name] = self.rows.get(table.name, 0) + len(values)


def _load_consumers(conn, m, consumers, rp_ids, rc_ids, insert):
    projects = _external_ids(conn, m.Project, {
        c['project_id'] for c in consumers.values()}, insert)
    users = _external_ids(conn, m.User, {
        c['user_id'] for c in consumers.values()}, insert)
    types = _named_ids(conn, m.ConsumerType, {
        c['consumer_type'] for c in consumers.values()
        if c.get('consumer_type', snapshot.UNTYPED) != snapshot.UNTYPED},
        insert)
    insert(m.Consumer, [
        {'uuid': uuid, 'project_id': projects[c['project_id']],
         'user_id': users[c['user_id']],
         'generation': c.get('consumer_generation',
                             snapshot.FIRST_GENERATION),
         'consumer_type_id': types.get(c.get('consumer_type'))}
        for uuid, c in consumers.items()])
    insert(m.Allocation, [
        {'consumer_id': uuid, 'resource_provider_id': rp_ids[rp_uuid],
         'resource_class_id': rc_ids[rc], 'used': used}
        for uuid, c in consumers.items()
        for rp_uuid, entry in c['allocations'].items()
        for rc, used in entry['resources'].items()])


def _refuse_existing(conn, m, providers, consumers):
    rp = m.ResourceProvider
    taken = conn.execute(sa.select(rp.uuid, rp.name)).all()
    uuids = {u for u, _ in taken}
    names = {n for _, n in taken}
    clash = ['provider %s (%s)' % (p['uuid'], p['name']) for p in providers
             if p['uuid'] in uuids or p['name'] in names]
    existing = set(conn.execute(sa.select(m.Consumer.uuid)).scalars())
    clash += ['consumer %s' % c for c in sorted(set(consumers) & existing)]
    if clash:
        raise errors.NvlinkError(
            'cannot load the snapshot: Placement already has %s%s'
            % (', '.join(clash[:5]),
               ' and %d more' % (len(clash) - 5) if len(clash) > 5 else ''))


def _resource_classes(conn, m, names, insert):
    """Ids of resource classes ``names``, creating the missing ones."""
    import os_resource_classes
    table = m.ResourceClass
    ids = dict(conn.execute(sa.select(table.name, table.id)).all())
    next_id = max([MIN_CUSTOM_RC_ID - 1] + list(ids.values())) + 1
    new = []
    for name in sorted(names - set(ids)):
        if name in os_resource_classes.STANDARDS:
            ids[name] = os_resource_classes.STANDARDS.index(name)
        else:
            ids[name] = next_id
            next_id += 1
        new.append({'id': ids[name], 'name': name})
    insert(table, new)
    return ids


def _named_ids(conn, model, names, insert, column='name'):
    """Ids of rows of ``model`` by ``column``, inserting the missing ones."""
    col = getattr(model, column)
    missing = names - set(conn.execute(sa.select(col)).scalars())
    insert(model, [{column: n} for n in sorted(missing)])
    return dict(conn.execute(sa.select(col, model.id)).all())


def _external_ids(conn, model, names, insert):
    return _named_ids(conn, model, names, insert, column='external_id')


def _uuid_ids(conn, model, names, insert):
    return _named_ids(conn, model, names, insert, column='uuid')


# -- reads ---------------------------------------------------------------

def state(engine, traits, trait_prefixes=()):
    """The :class:`State` that :func:`state.read` reads, from the tables.

    The same providers (in id order, as Placement lists them), each with
    the subset of the asked traits it carries, and the same
    ``known_traits`` (every custom trait, the standard ones asked for),
    in three ``SELECT`` statements instead of a listing per trait.

    :param traits: trait names to resolve per provider.
    :param trait_prefixes: also resolve every custom trait starting with
        one of these.
    """
    m = _models()
    rp, rpt, trait = m.ResourceProvider, m.ResourceProviderTrait, m.Trait
    with engine.connect() as conn:
        listed = conn.execute(sa.select(
            rp.id, rp.uuid, rp.name, rp.parent_provider_id,
            rp.root_provider_id, rp.generation).order_by(rp.id)).all()
        names = set(conn.execute(sa.select(trait.name)).scalars())
        custom = {t for t in names if t.startswith('CUSTOM_')}
        wanted = {t for t in traits
                  if not t.startswith('CUSTOM_') or t in custom}
        wanted |= {t for t in custom for p in trait_prefixes
                   if t.startswith(p)}
        carried = {}
        for rp_id, name in conn.execute(
                sa.select(rpt.resource_provider_id, trait.name).join(
                    trait, trait.id == rpt.trait_id)):
            if name in wanted:
                carried.setdefault(rp_id, set()).add(name)
    uuid_of = {row.id: row.uuid for row in listed}
    return state_mod.State([state_mod.Provider(
        uuid=row.uuid, name=row.name,
        parent_uuid=uuid_of.get(row.parent_provider_id),
        root_uuid=uuid_of[row.root_provider_id],
        generation=row.generation, traits=carried.get(row.id, set()))
        for row in listed], custom | wanted)


def provider_roots(engine):
    """Each provider's name and root, from the tables.

    What ``GET /resource_providers`` lists of them, in one ``SELECT``.

    :returns: dict provider uuid -> ``(name, root provider uuid)``.
    """
    rp = _models().ResourceProvider
    root = orm.aliased(rp)
    with engine.connect() as conn:
        return {uuid: (name, root_uuid) for uuid, name, root_uuid in
                conn.execute(sa.select(rp.uuid, rp.name, root.uuid).join(
                    root, root.id == rp.root_provider_id))}


def trait_carriers(engine, traits):
    """The providers that carry each of ``traits``, from the tables.

    What ``GET /resource_providers?required=TRAIT`` lists for each, in one
    ``SELECT``.

    :returns: dict trait -> set of provider uuids (empty for a trait no
        provider carries or Placement does not know).
    """
    m = _models()
    rp, rpt, trait = m.ResourceProvider, m.ResourceProviderTrait, m.Trait
    found = {name: set() for name in traits}
    if not found:
        return found
    with engine.connect() as conn:
        for name, uuid in conn.execute(
                sa.select(trait.name, rp.uuid)
                .join(rpt, rpt.trait_id == trait.id)
                .join(rp, rp.id == rpt.resource_provider_id)
                .where(trait.name.in_(sorted(found)))):
            found[name].add(uuid)
    return found


def allocations(engine, uuids):
    """The allocations on providers ``uuids``, from the tables.

    What ``GET /resource_providers/{uuid}/allocations`` answers for each,
    in one ``SELECT``.

    :returns: dict provider uuid -> {consumer uuid: {rc: used}} (empty for
        a provider without allocations).
    """
    m = _models()
    a, rp, rc = m.Allocation, m.ResourceProvider, m.ResourceClass
    wanted = set(uuids)
    found = {uuid: {} for uuid in wanted}
    with engine.connect() as conn:
        for consumer, rp_uuid, name, used in conn.execute(sa.select(
                a.consumer_id, rp.uuid, rc.name, a.used).join(
                rp, rp.id == a.resource_provider_id).join(
                rc, rc.id == a.resource_class_id)):
            if rp_uuid in wanted:
                found[rp_uuid].setdefault(consumer, {})[name] = used
    return found


# -- export ----------------------------------------------------------------

def export(engine, hosts=None, every_tree=False, left_out=None):
    """Read the snapshot of ``hosts`` (default: trees with a Nova PCI RP).

    With ``every_tree`` and no ``hosts``: every tree.

    The same document, byte for byte, as the export through the API
    (:func:`nvlink_placement.placement.snapshot_api.export`), in a handful
    of ``SELECT`` statements; ``left_out`` is filled the same way.

    :raises NvlinkError: for a host that is not a root provider.
    """
    m = _models()
    rp, rpt, trait = m.ResourceProvider, m.ResourceProviderTrait, m.Trait
    with engine.connect() as conn:
        listed = conn.execute(sa.select(
            rp.id, rp.uuid, rp.name, rp.parent_provider_id,
            rp.root_provider_id, rp.generation)).all()
        uuid_of = {row.id: row.uuid for row in listed}
        traits = {}
        for rp_id, name in conn.execute(
                sa.select(rpt.resource_provider_id, trait.name).join(
                    trait, trait.id == rpt.trait_id)):
            traits.setdefault(rp_id, []).append(name)
        current = state_mod.State([state_mod.Provider(
            uuid=row.uuid, name=row.name,
            parent_uuid=uuid_of.get(row.parent_provider_id),
            root_uuid=uuid_of[row.root_provider_id],
            generation=row.generation,
            traits={naming.PCI_TRAIT} & set(traits.get(row.id, ())))
            for row in listed], [naming.PCI_TRAIT])
        roots = set(current.select_roots(hosts, every_tree))
        selected = {row.id: row for row in listed
                    if uuid_of[row.root_provider_id] in roots}
        inventories = _inventories(conn, m, selected)
        aggregates = {}
        for rp_id, uuid in conn.execute(sa.select(
                m.ResourceProviderAggregate.resource_provider_id,
                m.PlacementAggregate.uuid).join(
                m.PlacementAggregate, m.PlacementAggregate.id ==
                m.ResourceProviderAggregate.aggregate_id)):
            aggregates.setdefault(rp_id, []).append(uuid)
        cut = {}
        consumers = _consumers(conn, m, selected, uuid_of, cut)
    providers = [snapshot.provider_entry(
        row.uuid, row.name, uuid_of.get(row.parent_provider_id),
        inventories.get(rp_id, {}), traits.get(rp_id, ()),
        aggregates.get(rp_id, ()))
        for rp_id, row in selected.items()]
    if left_out is not None:
        left_out.update(snapshot.left_out(
            [row.name for row in listed if row.parent_provider_id is None and
             row.uuid not in roots], cut))
    return snapshot.document(providers, consumers)


def _inventories(conn, m, selected):
    inv, rc = m.Inventory, m.ResourceClass
    fields = ('total', 'reserved', 'min_unit', 'max_unit', 'step_size',
              'allocation_ratio')
    result = {}
    for row in conn.execute(sa.select(
            inv.resource_provider_id, rc.name,
            *(getattr(inv, f) for f in fields)).join(
            rc, rc.id == inv.resource_class_id)):
        if row[0] in selected:
            result.setdefault(row[0], {})[row[1]] = dict(zip(fields,
                                                             row[2:]))
    return result


def _consumers(conn, m, selected, uuid_of, cut):
    """Consumer entries of the allocations on ``selected`` providers.

    :param cut: dict filled with consumer uuid -> number of its providers
        outside ``selected``.
    """
    a, c = m.Allocation, m.Consumer
    query = sa.select(
        a.consumer_id, a.resource_provider_id, m.ResourceClass.name, a.used,
        m.Project.external_id, m.User.external_id, c.generation,
        m.ConsumerType.name).join(
        c, c.uuid == a.consumer_id).join(
        m.ResourceClass, m.ResourceClass.id == a.resource_class_id).join(
        m.Project, m.Project.id == c.project_id).join(
        m.User, m.User.id == c.user_id).outerjoin(
        m.ConsumerType, m.ConsumerType.id == c.consumer_type_id)
    found = {}
    outside = {}
    for (consumer, rp_id, rc, used, project, user, generation,
         ctype) in conn.execute(query):
        if rp_id not in selected:
            outside.setdefault(consumer, set()).add(rp_id)
            continue
        entry = found.setdefault(consumer, (project, user, generation,
                                            ctype, {}))
        entry[4].setdefault(uuid_of[rp_id], {})[rc] = used
    cut.update((consumer, len(rps)) for consumer, rps in outside.items()
               if consumer in found)
    return {consumer: snapshot.consumer_entry(
        project, user, allocations, generation, ctype)
        for consumer, (project, user, generation, ctype, allocations)
        in found.items()}
