"""Apply planned actions to Placement.

Trait creations run first; then each host's actions run in plan order, hosts
in parallel (``workers``). A host that fails stops at its failing write and
the others go on; the plan is re-derived from Placement on the next run, so
a crash between any two writes converges.

Every write is safe to repeat when its answer was lost (the client resends
a request that timed out or lost its connection, and the first try may have
been committed):

- ``create-trait``: ``PUT /traits/{name}`` answers 204 when it exists.
- ``create-provider``: the uuid is chosen here; a ``409`` "already exists"
  is accepted when the provider with that uuid, or that name, has the name
  and parent we asked for (our own earlier try, or the same group created by
  a concurrent run), and refused otherwise.
- ``set-traits`` and ``set-reserved``: generation-checked; a conflict
  re-reads, and a provider that already has the wanted traits or
  ``reserved`` is left alone.
- ``move-provider``: ``PUT`` of the same parent again is a success.
  Placement takes no generation for a re-parent, so a move overwrites
  whatever parent another run gave the provider meanwhile; the run finds
  that out when it reads its hosts again
  (:func:`nvlink_placement.plan.run.changed_under`).
- ``delete-provider``: 404 means it is gone already.
"""

import concurrent.futures
import itertools
import logging
import urllib.parse
import uuid as uuid_mod

from nvlink_placement import errors
from nvlink_placement.placement import client as pc
from nvlink_placement.placement import state as state_mod
from nvlink_placement.plan import actions as act

LOG = logging.getLogger(__name__)


class HostFailure(object):
    """A host whose apply stopped: ``host`` name and ``error`` message."""

    def __init__(self, host, error, done):
        self.host = host
        self.error = error
        self.done = done


def apply(client, actions, state, workers=1, on_action=None,
          on_host=None):
    """Apply ``actions`` (from :func:`nvlink_placement.plan.planner.plan`).

    :param client: :class:`PlacementClient` (the server must speak 1.37:
        :func:`nvlink_placement.plan.run.read_and_plan` checks it).
    :param state: the :class:`State` the plan was made from (for uuids).
    :param workers: hosts applied in parallel.
    :param on_action: callable(action) after each successful write.
    :param on_host: callable(host, failure or None) when a host is done.
    :returns: list of :class:`HostFailure` (empty when all went well).
    :raises PlacementError: when a trait cannot be created (every host
        needs it, so nothing else is attempted).
    """
    on_action = on_action or (lambda action: None)
    on_host = on_host or (lambda host, failure: None)
    for action in actions:
        if action.action == act.CREATE_TRAIT:
            client.request('PUT', '/traits/%s' % action.provider,
                           version=pc.WRITE_VERSION, expect=(201, 204))
            on_action(action)
    host_actions = [a for a in actions if a.action != act.CREATE_TRAIT]
    by_host = [(host, list(group)) for host, group in itertools.groupby(
        host_actions, key=lambda a: a.host)]
    uuids = {p.name: p.uuid for p in state.by_uuid.values()}

    def run(host, items):
        runner = _HostRunner(client, dict(uuids), on_action)
        done = 0
        try:
            for action in items:
                runner.apply(action)
                done += 1
        except errors.NvlinkError as exc:
            failure = HostFailure(host, str(exc), done)
        else:
            failure = None
        on_host(host, failure)
        return failure

    if workers <= 1 or len(by_host) <= 1:
        results = [run(h, items) for h, items in by_host]
    else:
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(lambda hi: run(*hi), by_host))
    return [r for r in results if r is not None]


class _HostRunner(object):
    """Applies one host's actions, tracking uuids and fresh generations."""

    def __init__(self, client, uuids, on_action):
        self.client = client
        self.uuids = uuids
        self.generations = {}
        self.on_action = on_action

    def apply(self, action):
        getattr(self, '_' + action.action.replace('-', '_'))(action)
        self.on_action(action)

    def _create_provider(self, action):
        # The uuid is chosen here: a resent POST whose first try was
        # committed then finds its own provider (and every write of a run
        # can be recorded and replayed, benchmarks/reshape_scale.py).
        body = {'uuid': str(uuid_mod.uuid4()), 'name': action.provider,
                'parent_provider_uuid': self.uuids[action.parent]}
        try:
            rp = self.client.request('POST', '/resource_providers',
                                     body=body, version=pc.WRITE_VERSION,
                                     expect=(200,))
        except errors.PlacementError as exc:
            if exc.code != pc.DUPLICATE_NAME:
                raise
            rp = self._created_already(body, exc)
            self.uuids[action.provider] = rp['uuid']
            return
        self.uuids[action.provider] = rp['uuid']
        # A new RP has no traits: its generation is all set-traits needs.
        self.generations[rp['uuid']] = (set(), rp['generation'])

    def _created_already(self, body, conflict):
        """The provider ``body`` describes, when it exists already.

        Our own earlier try whose answer was lost has the same uuid; a
        concurrent run of this tool made one of the same name in the same
        place (the planner adopts such a group too). Anything else is a
        provider that is not ours.

        :raises PlacementError: the name or uuid belongs to another provider.
        """
        rp = self.client.request(
            'GET', '/resource_providers/%s' % body['uuid'],
            version=pc.WRITE_VERSION, tolerate=(404,))
        if rp is None:
            found = self.client.get('/resource_providers?' +
                                    urllib.parse.urlencode(
                                        {'name': body['name']}),
                                    version=pc.WRITE_VERSION)
            rp = (found['resource_providers'] or [None])[0]
        if (rp is not None and rp['name'] == body['name'] and
                rp['parent_provider_uuid'] == body['parent_provider_uuid']):
            LOG.info('%s exists already (%s): carrying on', body['name'],
                     rp['uuid'])
            return rp
        raise errors.PlacementError(
            'cannot create %s: %s; the provider there is not the one this '
            'tool meant to create' % (body['name'], conflict),
            status=conflict.status, code=conflict.code)

    def _set_traits(self, action):
        self._change_traits(action.uuid or self.uuids[action.provider],
                            action.add_traits, action.remove_traits)

    def _change_traits(self, uuid, add, remove):
        known = self.generations.pop(uuid, None)

        def write():
            nonlocal known
            traits, generation = known or state_mod.provider_traits(
                self.client, uuid)
            known = None
            wanted = (traits | set(add)) - set(remove)
            if wanted == traits:
                return
            self.client.request(
                'PUT', '/resource_providers/%s/traits' % uuid,
                body={'traits': sorted(wanted),
                      'resource_provider_generation': generation},
                version=pc.WRITE_VERSION)

        pc.retry_on_conflict(write)

    def _set_reserved(self, action):
        """Reserve or release one GPU, keeping the marker consistent.

        Reserve: marker first, then reserved = total. Release: reserved = 0
        first, then drop the marker. A crash in between leaves a state the
        next plan finishes (see placement/naming.py).
        """
        uuid = action.uuid or self.uuids[action.provider]
        carrier = self.uuids[action.marker_provider]
        if action.reserve:
            self._change_traits(carrier, (action.marker,), ())
        self._reserve(uuid, action.reserve)
        if not action.reserve:
            self._change_traits(carrier, (), (action.marker,))

    def _reserve(self, uuid, reserve):
        def write():
            body = self.client.get('/resource_providers/%s/inventories'
                                   % uuid)
            inventories = body['inventories']
            wanted = {rc: inv['total'] if reserve else 0
                      for rc, inv in inventories.items()}
            if all(inv['reserved'] == wanted[rc]
                   for rc, inv in inventories.items()):
                return
            for rc, inv in inventories.items():
                inv['reserved'] = wanted[rc]
            self.client.request(
                'PUT', '/resource_providers/%s/inventories' % uuid,
                body={'inventories': inventories,
                      'resource_provider_generation':
                          body['resource_provider_generation']},
                version=pc.WRITE_VERSION)

        pc.retry_on_conflict(write)

    def _move_provider(self, action):
        uuid = action.uuid or self.uuids[action.provider]
        self.client.request(
            'PUT', '/resource_providers/%s' % uuid,
            body={'name': action.provider,
                  'parent_provider_uuid': self.uuids[action.parent]},
            version=pc.WRITE_VERSION)

    def _delete_provider(self, action):
        uuid = action.uuid or self.uuids[action.provider]
        self.client.request('DELETE', '/resource_providers/%s' % uuid,
                            version=pc.WRITE_VERSION, expect=(204,),
                            tolerate=(404,))
