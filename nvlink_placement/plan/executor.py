"""Apply planned actions to Placement.

Trait creations run first; then each host's actions run in plan order, hosts
in parallel (``workers``). A host that fails stops at its failing write and
the others go on; every write is idempotent and the plan is re-derived from
Placement on the next run, so a crash between any two writes converges.
"""

import concurrent.futures
import itertools
import uuid as uuid_mod

from nvlink_placement import errors
from nvlink_placement.placement import client as pc
from nvlink_placement.placement import state as state_mod
from nvlink_placement.plan import actions as act

# Bounded retries of a write that lost a generation race
# (placement.concurrent_update: Nova refreshes its own RPs every <= 300 s).
GENERATION_RETRIES = 5


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
                           version='1.6', expect=(201, 204))
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


def _retry_generation(write):
    """Run ``write`` again (it re-reads) on placement.concurrent_update."""
    for attempt in range(GENERATION_RETRIES):
        try:
            return write()
        except errors.PlacementError as exc:
            if (exc.code != pc.CONCURRENT_UPDATE or
                    attempt == GENERATION_RETRIES - 1):
                raise


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
        # The uuid is chosen here so that every write of a run can be
        # recorded and replayed (benchmarks/reshape_scale.py).
        body = {'uuid': str(uuid_mod.uuid4()), 'name': action.provider,
                'parent_provider_uuid': self.uuids[action.parent]}
        rp = self.client.request('POST', '/resource_providers', body=body,
                                 version='1.20', expect=(200,))
        self.uuids[action.provider] = rp['uuid']
        # A new RP has no traits: its generation is all set-traits needs.
        self.generations[rp['uuid']] = (set(), rp['generation'])

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
                version='1.6')

        _retry_generation(write)

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
            for inv in inventories.values():
                inv['reserved'] = inv['total'] if reserve else 0
            self.client.request(
                'PUT', '/resource_providers/%s/inventories' % uuid,
                body={'inventories': inventories,
                      'resource_provider_generation':
                          body['resource_provider_generation']},
                version='1.26')

        _retry_generation(write)

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
                            version='1.14', expect=(204,), tolerate=(404,))
