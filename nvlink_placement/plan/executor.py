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

A stop (the client's ``stop`` event, set by SIGINT or SIGTERM, see
:mod:`nvlink_placement.interrupt`) is checked before each write: no new
write starts, the hosts not begun stay untouched, and a host cut between
two writes is left in a state the next plan finishes or ``flatten``
undoes (the planner adopts the groups an interrupted run left, see
:func:`nvlink_placement.plan.planner.unowned_groups`). :class:`Progress`
says how far each host got, also while a request hangs.
"""

import concurrent.futures
import itertools
import logging
import threading
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


#: How a host's apply ended (:attr:`Progress.ended`).
DONE, FAILED, INTERRUPTED = 'done', 'failed', 'interrupted'


class Progress(object):
    """How far an apply got, host by host; safe to read while it runs.

    :ivar planned: dict host -> writes planned, in plan order (filled
        when the apply starts).
    :ivar begun: dict host -> writes begun.
    :ivar made: list of the actions applied, in the order made.
    :ivar ended: dict host -> :data:`DONE`, :data:`FAILED` or
        :data:`INTERRUPTED`.
    """

    def __init__(self):
        self.planned = {}
        self.begun = {}
        self.made = []
        self.ended = {}
        self._lock = threading.Lock()

    def begin(self, host):
        with self._lock:
            self.begun[host] = self.begun.get(host, 0) + 1

    def record(self, action):
        with self._lock:
            self.made.append(action)

    def end(self, host, how):
        with self._lock:
            self.ended[host] = how

    def hosts(self):
        """Where each planned host stands, in plan order.

        :returns: ``(done, failed, cut, untouched)``: lists of names, but
            ``cut`` (begun and not ended: interrupted) lists ``(host,
            writes made, writes planned, unanswered)`` with
            ``unanswered`` True when a write begun has no answer yet.
        """
        with self._lock:
            made = {}
            for action in self.made:
                made[action.host] = made.get(action.host, 0) + 1
            hosts = list(self.planned)
            done = [h for h in hosts if self.ended.get(h) == DONE]
            failed = [h for h in hosts if self.ended.get(h) == FAILED]
            cut = [(h, made.get(h, 0), self.planned[h],
                    self.ended.get(h) is None and
                    self.begun[h] > made.get(h, 0))
                   for h in hosts if self.begun.get(h) and
                   self.ended.get(h) not in (DONE, FAILED)]
            untouched = [h for h in hosts if not self.begun.get(h)]
        return done, failed, cut, untouched


def apply(client, actions, state, workers=1, on_action=None,
          on_host=None, progress=None):
    """Apply ``actions`` (from :func:`nvlink_placement.plan.planner.plan`).

    :param client: :class:`PlacementClient` (the server must speak 1.37:
        :func:`nvlink_placement.plan.run.read_and_plan` checks it).
    :param state: the :class:`State` the plan was made from (for uuids).
    :param workers: hosts applied in parallel.
    :param on_action: callable(action) after each successful write.
    :param on_host: callable(host, failure or None) when a host is done.
    :param progress: a :class:`Progress` to fill, or None.
    :returns: list of :class:`HostFailure` (empty when all went well).
    :raises PlacementError: when a trait cannot be created (every host
        needs it, so nothing else is attempted).
    :raises Interrupted: the client's ``stop`` was set; ``progress`` says
        how far the hosts got.
    """
    on_action = on_action or (lambda action: None)
    on_host = on_host or (lambda host, failure: None)
    progress = progress or Progress()
    stop = client.stop or threading.Event()
    host_actions = [a for a in actions if a.action != act.CREATE_TRAIT]
    by_host = [(host, list(group)) for host, group in itertools.groupby(
        host_actions, key=lambda a: a.host)]
    progress.planned.update((host, len(items)) for host, items in by_host)
    for action in actions:
        if action.action == act.CREATE_TRAIT:
            client.request('PUT', '/traits/%s' % action.provider,
                           version=pc.WRITE_VERSION, expect=(201, 204))
            on_action(action)
    uuids = {p.name: p.uuid for p in state.by_uuid.values()}

    def made(action):
        progress.record(action)
        on_action(action)

    def run(host, items):
        runner = _HostRunner(client, dict(uuids), made)
        done = 0
        try:
            for action in items:
                if stop.is_set():
                    raise errors.Interrupted()
                progress.begin(host)
                runner.apply(action)
                done += 1
        except errors.Interrupted:
            if progress.begun.get(host):
                progress.end(host, INTERRUPTED)
            return None
        except errors.NvlinkError as exc:
            failure = HostFailure(host, str(exc), done)
        else:
            failure = None
        progress.end(host, FAILED if failure else DONE)
        on_host(host, failure)
        return failure

    if workers <= 1 or len(by_host) <= 1:
        results = [run(h, items) for h, items in by_host]
    else:
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(lambda hi: run(*hi), by_host))
    if stop.is_set():
        raise errors.Interrupted()
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
