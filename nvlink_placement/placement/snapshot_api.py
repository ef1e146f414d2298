"""Snapshots through Placement's REST API: live export and load.

:func:`export` reads a snapshot from any Placement (a live cloud) with
parallel reads and a constant number of requests per provider and per
consumer. :func:`load` recreates one request by request: ``snapshot
load`` into a live Placement (after :func:`in_the_way`), and the
fallback of :mod:`nvlink_placement.placement.snapshot_db` for an embedded
Placement whose tables that module does not know.

Microversions (Placement API reference): 1.6 traits, 1.19 aggregates with
the provider generation, 1.20 POST returns the provider, 1.26 reserved may
equal total, 1.28 consumer generations, 1.38 consumer types.
"""

import urllib.parse

from nvlink_placement import errors
from nvlink_placement.placement import naming
from nvlink_placement.placement import reads
from nvlink_placement.placement import snapshot
from nvlink_placement.placement import snapshot_capacity
from nvlink_placement.placement import state as state_mod

#: Tried in order for GET /allocations/{consumer}; a server answers 406 to
#: a microversion newer than it speaks.
CONSUMER_VERSIONS = ('1.38', '1.28', '1.12')


# -- export ----------------------------------------------------------------

def export(client, hosts=None, workers=1, progress=None, every_tree=False,
           left_out=None):
    """Read the trees of ``hosts`` (default: those with a Nova PCI RP).

    With ``every_tree`` and no ``hosts``: every tree.

    Read only, in parallel, never more than a constant number of requests
    per provider and per consumer:

    * the provider listing (one request) and the trees to export (two);
    * traits: one ``GET /resource_providers?required=<trait>`` per trait
      in use (``GET /traits?associated=true``), or one GET per provider
      when that costs less (a listing of the cloud costs about one GET per
      :data:`reads.ENTRIES_PER_GET` providers);
    * one GET of inventories per provider;
    * allocations: one ``GET /resource_providers?resources=<rc>:<n>`` per
      distinct resource class and capacity where that costs less: a
      provider listed for its whole capacity has nothing allocated
      (Placement's capacity filter, ``used + n <= (total - reserved) *
      allocation_ratio``); only the others get a GET of their
      allocations;
    * aggregates: one GET per provider (Nova puts host aggregates on the
      root, but any provider may be a member of aggregates, and
      ``member_of`` answers depend on it);
    * one ``GET /allocations/{uuid}`` per consumer (project, user,
      generation and type). A consumer's allocations on providers outside
      the exported trees are left out.

    A live cloud changes while it is read: the export is not atomic (a
    consumer deleted meanwhile is left out).

    :param hosts: compute node names; each must be a root provider.
    :param workers: requests in flight at once.
    :param progress: optional callable ``(total, unit)`` returning a
        tqdm-like bar (``update``, ``close``) or None.
    :param left_out: optional dict, filled as :func:`snapshot.left_out`
        describes with what the export did not hold.
    :returns: snapshot dict in the canonical form of
        :func:`nvlink_placement.placement.snapshot.document`.
    :raises NvlinkError: for an unknown host.
    :raises PlacementError: when a read fails.
    """
    current = state_mod.read(client, [naming.PCI_TRAIT])
    roots = set(current.select_roots(hosts, every_tree))
    selected = [p for p in current.by_uuid.values() if p.root_uuid in roots]
    listing = reads.listing_cost(current)
    traits = _traits(client, selected, listing, workers, progress)
    inventories = dict(zip((p.uuid for p in selected), reads.parallel(
        lambda p: client.get('/resource_providers/%s/inventories'
                             % p.uuid)['inventories'],
        selected, workers, progress, 'inventory')))
    unused = reads.unused(client, inventories, listing)
    used = [p for p in selected if p.uuid not in unused]
    allocations = {}
    for p, listed in zip(used, reads.parallel(
            lambda p: client.get('/resource_providers/%s/allocations'
                                 % p.uuid)['allocations'],
            used, workers, progress, 'allocation')):
        for consumer, alloc in listed.items():
            allocations.setdefault(consumer, {})[p.uuid] = alloc['resources']
    aggregates = dict(zip((p.uuid for p in selected), reads.parallel(
        lambda p: client.get('/resource_providers/%s/aggregates' % p.uuid,
                             version='1.19')['aggregates'],
        selected, workers, progress, 'aggregate set')))
    providers = [snapshot.provider_entry(
        p.uuid, p.name, p.parent_uuid, inventories[p.uuid],
        traits.get(p.uuid, ()), aggregates.get(p.uuid, ()))
        for p in selected]
    cut = {}
    consumers = _consumers(client, allocations, workers, progress, cut)
    if left_out is not None:
        left_out.update(snapshot.left_out(
            [p.name for p in current.by_uuid.values()
             if p.parent_uuid is None and p.uuid not in roots], cut))
    return snapshot.document(providers, consumers)


def _traits(client, providers, listing, workers, progress):
    """dict RP uuid -> trait list, by trait listings or per provider.

    :param listing: what a listing of the cloud costs, in GETs.
    """
    in_use = client.get('/traits?associated=true', version='1.6')['traits']
    if len(in_use) * listing >= len(providers):
        return dict(zip((p.uuid for p in providers), reads.parallel(
            lambda p: client.get('/resource_providers/%s/traits' % p.uuid,
                                 version='1.6')['traits'],
            providers, workers, progress, 'trait set')))
    wanted = {p.uuid for p in providers}
    found = {}
    for trait, listed in zip(in_use, reads.parallel(
            lambda t: client.get('/resource_providers?' + urllib.parse.
                                 urlencode({'required': t}),
                                 version='1.18')['resource_providers'],
            in_use, workers, progress, 'trait')):
        for rp in listed:
            if rp['uuid'] in wanted:
                found.setdefault(rp['uuid'], []).append(trait)
    return found


def _consumers(client, allocations, workers, progress, cut):
    """dict consumer uuid -> snapshot entry, one GET each.

    :param cut: dict filled with consumer uuid -> number of its providers
        outside ``allocations`` (outside the exported trees).
    """
    consumers = sorted(allocations)
    versions = list(CONSUMER_VERSIONS)

    def read(consumer):
        url = '/allocations/%s' % urllib.parse.quote(consumer)
        while True:
            try:
                body = client.get(url, version=versions[0])
            except errors.PlacementError as exc:
                if exc.status != 406 or len(versions) == 1:
                    raise
                versions.pop(0)
                continue
            if not body.get('allocations'):
                return None     # deleted since its providers were read
            outside = set(body['allocations']) - set(allocations[consumer])
            if outside:
                cut[consumer] = len(outside)
            return snapshot.consumer_entry(
                body['project_id'], body['user_id'], allocations[consumer],
                body.get('consumer_generation'), body.get('consumer_type'))

    # The first answer settles the microversion for the parallel rest.
    entries = [read(c) for c in consumers[:1]]
    entries += reads.parallel(read, consumers[1:], workers, progress,
                              'consumer')
    return {c: e for c, e in zip(consumers, entries) if e is not None}


# -- load (fallback) -------------------------------------------------------

def in_the_way(client, document):
    """What of ``document`` Placement already holds (read only).

    Requests: the provider listing; when it is not empty, one ``GET
    /allocations/{consumer}`` per consumer of ``document``.

    :returns: ``(providers, clashes)``: the number of providers Placement
        holds, and messages naming each provider of the snapshot whose
        uuid or name is taken and each consumer that holds allocations
        already (loading would fail on those half way).
    """
    listed = client.get('/resource_providers')['resource_providers']
    if not listed:
        return 0, []
    uuids = {rp['uuid']: rp['name'] for rp in listed}
    names = {rp['name']: rp['uuid'] for rp in listed}
    clashes = []
    for rp in document['resource_providers']:
        if rp['uuid'] in uuids:
            clashes.append('resource provider %s (%s): Placement has that '
                           'uuid (%s)' % (rp['name'], rp['uuid'],
                                          uuids[rp['uuid']]))
        elif rp['name'] in names:
            clashes.append('resource provider %s: Placement has that name '
                           '(%s)' % (rp['name'], names[rp['name']]))
    for consumer in sorted(document.get('allocations', {})):
        if state_mod.consumer_allocations(client, consumer):
            clashes.append('consumer %s holds allocations already'
                           % consumer)
    return len(listed), clashes


def load(client, document, progress=None):
    """Recreate a validated snapshot in Placement, request by request.

    Requests: one PUT per custom resource class and trait; per provider one
    POST and a PUT each for its traits, inventories and aggregates when it
    has them; one ``POST /allocations`` for the untyped consumers (1.28)
    and one for the typed (1.38). Inventories that the allocations strain
    (:func:`nvlink_placement.placement.snapshot_capacity.strained`) are written
    relaxed first and as given after the allocations. Consumer generations
    are Placement's own (1 for a new consumer), not the document's.

    Provider uuids are sent in Placement's form
    (:func:`nvlink_placement.placement.snapshot.canonical`).

    :param progress: optional callable ``(total, unit)`` returning a
        tqdm-like bar, advanced once per provider written.
    :raises PlacementError: when Placement refuses a write.
    """
    document = snapshot.canonical(document)
    providers = snapshot.parents_first(document['resource_providers'])
    bar = progress(len(providers), 'provider') if progress else None
    for rc in sorted({rc for rp in providers for rc in rp.get(
            'inventories', {}) if rc.startswith('CUSTOM_')}):
        client.request('PUT', '/resource_classes/%s' % rc, version='1.7',
                       expect=(201, 204))
    for trait in sorted({t for rp in providers for t in rp.get(
            'traits', ()) if t.startswith('CUSTOM_')}):
        client.request('PUT', '/traits/%s' % trait, version='1.6',
                       expect=(201, 204))
    strained = snapshot_capacity.strained(document)
    try:
        for rp in providers:
            inventories = {
                rc: (_relaxed(inv) if (rp['uuid'], rc) in strained else inv)
                for rc, inv in rp.get('inventories', {}).items()}
            _create_provider(client, rp, inventories)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    post_allocations(client, document.get('allocations', {}))
    for rp_uuid in sorted({rp_uuid for rp_uuid, _ in strained}):
        rp = next(p for p in providers if p['uuid'] == rp_uuid)
        url = '/resource_providers/%s/inventories' % rp_uuid
        generation = client.get(url)['resource_provider_generation']
        client.request('PUT', url, version='1.26',
                       body={'inventories': rp['inventories'],
                             'resource_provider_generation': generation})


def _relaxed(inventory):
    """``inventory`` that any allocation of a valid snapshot fits into."""
    return dict(inventory, reserved=0, min_unit=1,
                max_unit=snapshot_capacity.MAX_INT, step_size=1,
                total=snapshot_capacity.MAX_INT, allocation_ratio=1.0)


def _create_provider(client, rp, inventories):
    url = '/resource_providers/%s/' % rp['uuid']
    body = client.request('POST', '/resource_providers', version='1.20',
                          body={'uuid': rp['uuid'], 'name': rp['name'],
                                'parent_provider_uuid':
                                    rp.get('parent_provider_uuid')})
    generation = body['generation']
    if rp.get('traits'):
        generation = client.request(
            'PUT', url + 'traits', version='1.6',
            body={'traits': sorted(rp['traits']),
                  'resource_provider_generation': generation}
        )['resource_provider_generation']
    if inventories:
        generation = client.request(
            'PUT', url + 'inventories', version='1.26',
            body={'inventories': inventories,
                  'resource_provider_generation': generation}
        )['resource_provider_generation']
    if rp.get('aggregates'):
        client.request('PUT', url + 'aggregates', version='1.19',
                       body={'aggregates': sorted(rp['aggregates']),
                             'resource_provider_generation': generation})


def post_allocations(client, allocations):
    """Write snapshot ``allocations`` (new consumers): one POST per kind."""
    typed, untyped = {}, {}
    for consumer, alloc in allocations.items():
        entry = {'allocations': alloc['allocations'],
                 'project_id': alloc['project_id'],
                 'user_id': alloc['user_id'],
                 'consumer_generation': None}
        kind = alloc.get('consumer_type', snapshot.UNTYPED)
        if kind == snapshot.UNTYPED:
            untyped[consumer] = entry
        else:
            typed[consumer] = dict(entry, consumer_type=kind)
    for version, batch in (('1.28', untyped), ('1.38', typed)):
        if batch:
            client.request('POST', '/allocations', body=batch,
                           version=version, expect=(204,))
