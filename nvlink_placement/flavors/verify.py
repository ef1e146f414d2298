"""Prove a flavor against Placement: the reads behind :mod:`.judge`.

:func:`verify` sends a flavor's query (:mod:`.request`) and reads, in a
constant number of requests, what the judge needs: the providers
(:func:`read_providers`), the free GPUs of the alias' class and traits,
the compute nodes with room for the unsuffixed group, the providers
with the traits Nova requires of the root, the idle GPUs
(:func:`nvlink_placement.placement.state.free_gpus`) and, for a flavor
with member traits, the free GPUs carrying each; then
:func:`nvlink_placement.flavors.judge.check` (pure) judges the answer.
:func:`prefetch` asks the listings flavors share once for a run;
:func:`with_timeout` bounds each request of a live Placement
(the wide-tree trap, :data:`WIDE_TREE_HINT`).
"""

import urllib.parse

from keystoneauth1 import exceptions as ks_exc

from nvlink_placement import errors
from nvlink_placement.flavors import judge
from nvlink_placement.flavors import release
from nvlink_placement.flavors import request as request_mod
from nvlink_placement.placement import client as pc
from nvlink_placement.placement import state as state_mod

LIST_VERSION = '1.22'          # forbidden traits in GET /resource_providers
DEFAULT_TIMEOUT = 60           # seconds, live Placement only
_IDLE = 'idle GPUs'            # the listings key of state.free_gpus
WIDE_TREE_HINT = (
    'Placement enumerates every permutation of identical GPUs when a flavor '
    'asks for several separate GPU groups (Launchpad bugs 2070257, '
    '2126751). Set in placement.conf: [placement] max_allocation_candidates '
    '= 1000, [placement] allocation_candidates_generation_strategy = '
    'breadth-first, [workarounds] optimize_for_wide_provider_trees = True '
    '(see "openstack nvlink nova-config").')


def read_providers(client):
    """dict RP uuid -> ``(name, root uuid)`` (one request)."""
    body = client.get('/resource_providers')
    return {rp['uuid']: (rp['name'], rp['root_provider_uuid'])
            for rp in body['resource_providers']}


def _listing_url(resources, required):
    query = {}
    if resources:
        query['resources'] = ','.join('%s:%d' % kv
                                      for kv in sorted(resources.items()))
    if required:
        query['required'] = required
    return '/resource_providers?' + urllib.parse.urlencode(query)


def _listed(client, resources, required, listings=None):
    url = _listing_url(resources, required)
    if listings is not None and url in listings:
        return listings[url]
    body = client.get(url, version=LIST_VERSION)
    found = {rp['uuid'] for rp in body['resource_providers']}
    if listings is not None:
        listings[url] = found
    return found


def _free(client, request, listings):
    """The GPUs of the alias' class and traits with a free unit."""
    alias = request.alias
    return _listed(client, {alias.resource_class: 1},
                   ','.join(alias.traits), listings)


def _member_query(request, trait):
    """``(resources, required)`` of the free GPUs with member ``trait``."""
    alias = request.alias
    return {alias.resource_class: 1}, ','.join(alias.traits + (trait,))


def _owners(client, request, listings):
    """The providers with the traits Nova requires of the root, or None."""
    nova = request.nova
    return (_listed(client, {}, ','.join(nova.root_required), listings)
            if nova.root_required else None)


def _idle_gpus(client, listings):
    """:func:`state.free_gpus`, asked once per ``listings``."""
    if listings is not None and _IDLE in listings:
        return listings[_IDLE]
    idle = state_mod.free_gpus(client)
    if listings is not None:
        listings[_IDLE] = idle
    return idle


def prefetch(client, requests, listings, carriers=None):
    """Fill ``listings`` with what the flavors of ``requests`` share.

    The free GPUs of each alias, the providers with the owner traits and
    the idle GPUs, before :func:`verify` runs the flavors in forked
    processes (:mod:`nvlink_placement.forkmap`), each of which would ask
    for them again. A listing Placement refuses is left out (the flavor's
    :func:`verify` reports it).

    :param carriers: optional callable, a set of trait names -> dict trait
        -> set of the uuids of the providers that carry it (an embedded
        Placement's tables, :meth:`EmbeddedPlacement.trait_carriers`).
        The free GPUs with each member trait a flavor requires are then
        the alias' free GPUs that carry it: the set Placement lists for
        the alias' traits plus that one (a provider listed for
        ``required`` has every trait named), without a listing per trait.
    :raises PlacementError: on transport errors and 5xx.
    """
    try:
        for request in requests:
            free = _free(client, request, listings)
            _owners(client, request, listings)
            if carriers is None:
                continue
            traits = {t for t, _, _ in
                      judge.member_indexes(request).values()}
            found = carriers(traits) if traits else {}
            for trait in traits:
                listings[_listing_url(*_member_query(request, trait))] = \
                    free & found.get(trait, set())
        _idle_gpus(client, listings)
    except errors.PlacementError as exc:
        if exc.status is None or exc.status >= 500:
            raise


def verify(client, request, hosts, providers=None, only=False, others=(),
           listings=None):
    """Run ``request`` and :func:`.judge.check` the answer.

    Free GPUs are listed with the alias' traits and compute nodes with the
    unsuffixed group's traits and the root's forbidden ones (a disabled
    host is rightly left out). Traits the query requires of the root and
    of every GPU (Nova 34's ``OWNER_NOVA``) are not: a topology host or
    GPU without them is a problem of its own, named, on top of the
    domains no candidate offers.

    :param client: :class:`PlacementClient`.
    :param providers: from :func:`read_providers` (read when None).
    :param only: ``others``: see :func:`.judge.check`.
    :param listings: optional dict shared by the flavors of one run: a
        provider listing asked again (the free GPUs of an alias, the
        providers with the owner trait, the idle GPUs) is answered from
        it, not sent again (at 1000 hosts each costs Placement about half
        a second; nothing writes in between). :func:`prefetch` fills it.
    :returns: :class:`.judge.FlavorResult`; a query Placement refuses (HTTP
        4xx: an unknown trait or resource class, a bad same_subtree) gives
        a result with that problem.
    :raises PlacementError: on transport errors and 5xx.
    """
    nova = request.nova
    try:
        body = client.get(request.url, version=request_mod.MICROVERSION)
        if providers is None:
            providers = read_providers(client)
        params = dict(request.params)
        free = _free(client, request, listings)
        resources = {rc: int(n) for rc, n in (
            item.split(':') for item in params['resources'].split(','))
        } if 'resources' in params else {}
        required = [t for t in params.get('required', '').split(',') if t]
        required += ['!' + t for t in nova.root_forbidden]
        eligible = _listed(client, resources, ','.join(
            required), listings) if resources else None
        owners = _owners(client, request, listings)
        idle_gpus = _idle_gpus(client, listings)
        wanted = set(judge.member_indexes(request).values())
        configured = set() if wanted else None
        for trait, _, i in wanted:
            configured |= {(uuid, i) for uuid in _listed(
                client, *_member_query(request, trait), listings=listings)}
    except errors.PlacementError as exc:
        if exc.status is None or exc.status >= 500:
            raise
        return judge.refused(request, hosts, exc)
    result = judge.check(request, hosts, body, providers, free, eligible,
                         only, configured, idle_gpus, others)
    if owners is not None:
        by_host = {h.host: h for h in result.hosts}
        targets = [h for h in hosts if not by_host[h.name].other_class]
        for host, problem in judge.without_owner(request, targets,
                                                 providers, owners):
            result.problems.append(problem)
            by_host[host].problems.append(problem)
    return result


def compute_nodes_without_owner(client):
    """Names of compute node providers without ``OWNER_NOVA`` (one GET).

    A Nova 34 nova-compute writes both ``COMPUTE_NODE`` and ``OWNER_NOVA``
    on its compute node provider; one without ``OWNER_NOVA`` belongs to an
    older nova-compute (see :mod:`.release`).
    """
    body = client.get('/resource_providers?' + urllib.parse.urlencode({
        'required': 'COMPUTE_NODE,!' + release.OWNER_TRAIT}),
        version=LIST_VERSION)
    return sorted(rp['name'] for rp in body['resource_providers'])


class _TimeoutAdapter(object):
    """A keystoneauth adapter whose requests time out, without retries."""

    def __init__(self, adapter, seconds):
        self._adapter = adapter
        self._seconds = seconds

    def request(self, url, method, **kwargs):
        kwargs.setdefault('timeout', self._seconds)
        kwargs['connect_retries'] = 0
        try:
            return self._adapter.request(url, method, **kwargs)
        except ks_exc.ConnectTimeout:
            raise errors.NvlinkError(
                'Placement did not answer %s %s within %g s. %s'
                % (method, url.split('?')[0], self._seconds, WIDE_TREE_HINT))


def with_timeout(client, seconds=DEFAULT_TIMEOUT):
    """A :class:`PlacementClient` on ``client``'s adapter with a timeout.

    Each request gives up after ``seconds`` (not resent: a query that slow
    is the wide-tree trap, not a passing fault) with a message pointing at
    the wide-tree settings; other failures are retried for
    ``client.retry_window`` as usual.
    """
    return pc.PlacementClient(_TimeoutAdapter(client.adapter, seconds),
                              description=client.description,
                              retry_window=client.retry_window)
