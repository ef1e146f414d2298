"""Defragmentation advice: the fewest cold migrations that free K domains.

A cold migration (``openstack server migrate --host``) moves a server to
another host and, once confirmed, frees every GPU it held on its source
host. To get K free NVLink domains of N GPUs (a fixed N-GPU domain of the
topology, or N more free GPUs of a mesh):

1. Read the state from Placement (an export of the hosts' trees): who
   holds which GPU, and everything each consumer holds (:class:`_Reader`).
   A server's flavor is its flavor in Nova when the compute API was read
   (``nova_flavors``: the name, looked up in the flavors file), else the
   flavor of the flavors file with its GPU count whose resources the
   server's can be: the flavor's own, or without ``DISK_GB`` (booted from
   a volume: Nova asks for no root disk), or with ``PCPU`` for ``VCPU``
   (``hw:cpu_policy=dedicated``). The query for moving it is the flavor's
   query with the server's own resources (what Nova asks for when it
   migrates that server).
2. Each flavor's candidates on each host with nothing allocated: the
   same query with ``in_tree`` on that host and no ``limit``, sent while
   every allocation is taken out of the (embedded) Placement, then
   written back (Placement's structural answer; in a state, a candidate
   is open when its amounts fit the capacities). Written back, each
   consumer is at generation 1.
3. :func:`.defrag_search.search` finds the plan: the domains to free and
   the moves, each server once, each destination safe for every candidate
   Nova may be given there (none touches a GPU of a domain the plan
   frees). The fewest moves, proven, when the exact search ends within its
   bound (see that module); otherwise a heuristic plan, and a note says so.
4. The plan is replayed in the Placement read (an embedded copy: nothing
   is written to a cloud): at each move Placement's own candidates on the
   destination are checked again (every one outside the domains being
   freed) and the move is written (``PUT /allocations/{server}``).
5. Proof: the N-GPU flavor's query, sent at the end, on each host with a
   freed domain; each freed domain is counted once as offered when one of
   its candidates is that domain (within it, for a mesh).
"""

import dataclasses
import urllib.parse

from nvlink_placement import errors
from nvlink_placement.flavors import request as request_mod
from nvlink_placement.placement import snapshot_api
from nvlink_placement.placement import state as state_mod
from nvlink_placement.simulate import defrag_search as search_mod

COLUMNS = ('step', 'server', 'flavor', 'source', 'destination', 'frees',
           'command')
MIGRATE_MICROVERSION = '2.56'     # compute API: cold migrate with --host
CONSUMER_VERSION = '1.28'         # consumer generations in /allocations


@dataclasses.dataclass(frozen=True)
class Move:
    step: int
    server: str
    flavor: str
    source: str
    destination: str
    frees: str

    @property
    def command(self):
        """The command to run (then ``openstack server migrate confirm``)."""
        return ('openstack --os-compute-api-version %s server migrate '
                '--host %s %s' % (MIGRATE_MICROVERSION, self.destination,
                                  self.server))

    def row(self):
        return (self.step, self.server, self.flavor, self.source,
                self.destination, self.frees, self.command)


@dataclasses.dataclass
class Advice:
    """The moves, and what they achieve.

    :ivar free_before: / :ivar free_after: free N-GPU domains.
    :ivar freed: labels of the domains the moves free (each once; a mesh
        label as often as it gains domains).
    :ivar offered: labels of freed domains the N-GPU flavor's candidates
        include after the moves (all of them, unless a note says why).
    :ivar exact: True when the moves are proven the fewest.
    :ivar unmatched: servers holding GPUs that match no flavor (not moved).
    """
    size: int
    count: int
    moves: list
    free_before: int
    free_after: int
    freed: list
    offered: list
    notes: list
    exact: bool = True
    unmatched: int = 0

    @property
    def reached(self):
        return self.free_after >= self.count

    def describe(self):
        return ('defrag: %d free %d-GPU domain(s) before, %d after %d '
                'move(s) (%s); freed %s; offered by the %d-GPU flavor '
                'afterwards: %d of %d' % (
                    self.free_before, self.size, self.free_after,
                    len(self.moves), 'the fewest: proven by exact search'
                    if self.exact else 'heuristic: not proven the fewest',
                    ', '.join(self.freed) or 'none', self.size,
                    len(self.offered), len(self.freed)))

    def shortfall(self):
        if not self.exact:
            return ('only %d free %d-GPU domain(s) found, %d wanted: a '
                    'heuristic plan (the exact search stopped at its '
                    'bound; a larger --search-steps may find more)'
                    % (self.free_after, self.size, self.count))
        if self.unmatched:
            why = ('hold servers whose flavor is not in the flavors file '
                   '(%d server(s): see the warnings), or servers that no '
                   'other host can take' % self.unmatched)
        else:
            why = 'hold servers that no other host can take'
        return ('only %d free %d-GPU domain(s) reachable, %d wanted: the '
                'other domains %s' % (self.free_after, self.size,
                                      self.count, why))


def _candidates(client, url, flavor):
    """Placement's answer to ``url`` (flavor ``flavor``'s query).

    :raises NvlinkError: when Placement refuses the query (flavors of
        another tree: the reshaped layout's flavors on a flat tree).
    """
    try:
        return client.get(url, version=request_mod.MICROVERSION)
    except errors.PlacementError as exc:
        if exc.status is None or exc.status >= 500:
            raise
        raise errors.NvlinkError(
            'flavor %s: Placement refused its query (%s): give the flavors '
            'this tree serves (on a flat tree: defrag --upstream, which '
            'asks as the upstream flavors of the same sizes do)'
            % (flavor, str(exc).split('): ', 1)[-1]))


def _unsuffixed(params):
    return {rc: int(n) for rc, n in (
        item.split(':') for item in dict(params).get('resources', '').split(
            ',') if item)}


def _produces(flavor, held):
    """Whether a server of ``flavor``'s resources can hold ``held``.

    Its own resources; without ``DISK_GB`` (boot from volume); ``PCPU``
    for ``VCPU`` (dedicated CPUs).
    """
    want = dict(flavor)
    if 'PCPU' in held and 'VCPU' in want and 'PCPU' not in want:
        want['PCPU'] = want.pop('VCPU')
    if 'DISK_GB' not in held:
        want.pop('DISK_GB', None)
    return want == held


@dataclasses.dataclass(frozen=True)
class _Query:
    """The query moving a server: its flavor's, with its own resources."""
    flavor: str
    params: tuple

    def url(self, node=None):
        """The query; with ``node``, on that tree only, unlimited."""
        params = list(self.params)
        if node is not None:
            params = [kv for kv in params if kv[0] != 'limit']
            suffixes = sorted({k[len('resources'):] for k, _ in params
                               if k.startswith('resources')})
            params += [('in_tree' + s, node) for s in suffixes]
        return '/allocation_candidates?' + urllib.parse.urlencode(params)


class _Reader(object):
    """The state of Placement as a :class:`defrag_search.Problem`."""

    def __init__(self, client, hosts, queries, size, nova_flavors):
        self.client = client
        self.size = size
        self.queries = queries
        self.nova_flavors = nova_flavors
        self.notes = []
        self.unmatched = 0
        listing = client.get('/resource_providers')['resource_providers']
        uuid_of = {rp['name']: rp['uuid'] for rp in listing}
        self.hosts = [h for h in hosts if h.name in uuid_of]
        self.node = {h.name: uuid_of[h.name] for h in self.hosts}
        self.document = snapshot_api.export(
            client, [h.name for h in self.hosts])
        parent = {p['uuid']: p['parent_provider_uuid']
                  for p in self.document['resource_providers']}
        host_of_node = {u: n for n, u in self.node.items()}
        self.host_of = {}
        for uuid in parent:
            root = uuid
            while parent.get(root):
                root = parent[root]
            self.host_of[uuid] = host_of_node.get(root)
        self.gpu_of = {}
        for host in self.hosts:
            for address in host.usable():
                rp = uuid_of.get(host.gpu_provider_name(address))
                if rp is not None:
                    self.gpu_of[rp] = (host.name, address)
        self._not_flat(parent)

    def _not_flat(self, parent):
        """Refuse domain flavors on hosts whose GPUs are all flat.

        :raises NvlinkError: naming ``--upstream``.
        """
        flat = sorted({host for rp, (host, _) in self.gpu_of.items()
                       if self.node[host] == parent.get(rp)})
        nested = {host for rp, (host, _) in self.gpu_of.items()
                  if self.node[host] != parent.get(rp)}
        if flat and not nested and any(
                dict(q.params).get('same_subtree') for q in self.queries):
            raise errors.NvlinkError(
                '%s: the GPUs are on the flat tree (not reshaped), and the '
                'flavors file\'s flavors ask for NVLink domains: the '
                'servers there run upstream flavors: run defrag with '
                '--upstream (it asks as pci_passthrough:alias=A:N flavors '
                'of the same sizes do)' % ', '.join(flat))

    def problem(self):
        capacity = {}
        for rp in self.document['resource_providers']:
            for rc, inv in rp['inventories'].items():
                capacity[(rp['uuid'], rc)] = (
                    (inv['total'] - inv['reserved']) *
                    inv['allocation_ratio'])
        used = {}
        servers = []
        holding = set()
        for consumer, entry in self.document['allocations'].items():
            amounts = []
            for rp, alloc in entry['allocations'].items():
                for rc, amount in alloc['resources'].items():
                    used[(rp, rc)] = used.get((rp, rc), 0) + amount
                    amounts.append(((rp, rc), amount))
            gpus = frozenset(rp for rp in entry['allocations']
                             if rp in self.gpu_of)
            if gpus:
                holding |= gpus
                servers.append(self._server(consumer, entry, gpus,
                                            tuple(sorted(amounts))))
        domains = []
        for host in self.hosts:
            rps = {a: rp for rp, (h, a) in self.gpu_of.items()
                   if h == host.name}
            for members, label in sorted(
                    host.fixed_domains(self.size).items(),
                    key=lambda kv: kv[1]):
                if all(a in rps for a in members):
                    domains.append(search_mod.Domain(
                        host.name, label, frozenset(rps[a] for a in members)))
            for members, label in sorted(host.meshes(self.size).items(),
                                         key=lambda kv: kv[1]):
                domains.append(search_mod.Domain(
                    host.name, label, frozenset(rps[a] for a in members
                                                if a in rps), mesh=True))
        self.free = frozenset(state_mod.free_gpus(self.client)) & \
            frozenset(self.gpu_of)
        stuck = frozenset(self.gpu_of) - self.free - holding
        self.problem_ = search_mod.Problem(
            self.size, [h.name for h in self.hosts], domains, servers,
            capacity, used, self._universe(servers), stuck)
        return self.problem_

    def _server(self, consumer, entry, gpus, amounts):
        hosts = {self.gpu_of[rp][0] for rp in gpus}
        host = sorted(hosts)[0]
        node = {}
        for rp, alloc in entry['allocations'].items():
            if rp not in self.gpu_of and self.host_of.get(rp) == host:
                for rc, amount in alloc['resources'].items():
                    node[rc] = node.get(rc, 0) + amount
        flavor = None
        held = ', '.join('%s=%d' % kv for kv in sorted(node.items()))
        if len(hosts) > 1:
            self._unmatched('server %s holds GPUs of %s (a migration in '
                            'flight?): it is not moved'
                            % (consumer, ', '.join(sorted(hosts))))
        else:
            flavor = self._flavor(consumer, len(gpus), host, node, held)
        query = None
        if flavor is not None:
            params = tuple(
                (k, ','.join('%s:%d' % kv for kv in sorted(node.items())))
                if k == 'resources' else (k, v) for k, v in flavor.params)
            query = _Query(flavor.flavor, params)
        return search_mod.Server(consumer, host, gpus, amounts, query)

    def _flavor(self, consumer, count, host, node, held):
        """The :class:`Request` of ``consumer``'s flavor, or None."""
        sized = [q for q in self.queries if q.size == count]
        named = (self.nova_flavors or {}).get(consumer)
        if named is not None:
            found = next((q for q in sized if q.flavor == named), None)
            if found is not None:
                return found
        found = next((q for q in sized
                      if _produces(_unsuffixed(q.params), node)), None)
        if found is not None:
            return found
        if named is not None:
            self._unmatched(
                'server %s (%d GPU(s) on %s) runs flavor %s (compute API), '
                'which the flavors file does not have %s, and no flavor '
                'there asks for its %s: it is not moved' % (
                    consumer, count, host, named,
                    'with %d GPU(s)' % count if any(
                        q.flavor == named for q in self.queries) else
                    'at all', held or 'resources'))
        elif not sized:
            self._unmatched(
                'server %s holds %d GPU(s) on %s; the flavors file has no '
                'flavor of %d GPU(s) (sizes: %s): it is not moved' % (
                    consumer, count, host, count, ', '.join(
                        str(s) for s in sorted({q.size for q in
                                                self.queries}))))
        else:
            self._unmatched(
                'server %s (%d GPU(s) on %s) holds %s; the %d-GPU flavors '
                'of the flavors file ask for %s (with no DISK_GB when '
                'booted from a volume, PCPU for VCPU when pinned): no '
                'flavor matches, it is not moved' % (
                    consumer, count, host, held or 'no other resource',
                    count, '; '.join(
                        '%s: %s' % (q.flavor, ', '.join(
                            '%s=%d' % kv for kv in sorted(
                                _unsuffixed(q.params).items())))
                        for q in sized)))
        return None

    def _unmatched(self, note):
        self.unmatched += 1
        self.notes.append(note)

    def _universe(self, servers):
        """Each query's candidates per host with nothing allocated."""
        queries = sorted({s.flavor for s in servers if s.flavor},
                         key=lambda q: (q.flavor, q.params))
        out = {}
        if not queries:
            return out
        # Placement's answer with nothing allocated: every allocation is
        # taken out of this (embedded) Placement for the queries, then
        # written back as it was.
        held = self.document['allocations']
        if held:
            self.client.request('POST', '/allocations', body={
                consumer: {'allocations': {},
                           'project_id': entry['project_id'],
                           'user_id': entry['user_id'],
                           'consumer_generation': entry.get(
                               'consumer_generation', 1)}
                for consumer, entry in held.items()},
                version=CONSUMER_VERSION, expect=(204,))
        try:
            for query in queries:
                for host in self.hosts:
                    out[(query, host.name)] = [
                        self._candidate(c) for c in _candidates(
                            self.client, query.url(self.node[host.name]),
                            query.flavor)['allocation_requests']]
        finally:
            snapshot_api.post_allocations(self.client, held)
        return out

    def _candidate(self, request):
        amounts = tuple(sorted(
            ((rp, rc), n) for rp, alloc in request['allocations'].items()
            for rc, n in alloc['resources'].items()))
        return search_mod.Candidate(
            frozenset(rp for rp in request['allocations']
                      if rp in self.gpu_of), amounts)

    # -- the plan, in Placement -----------------------------------------

    def replay(self, plan):
        """Write ``plan``'s moves, checking each; returns :class:`Move`."""
        protected = frozenset(g for d, _ in plan.targets for g in d.gpus)
        moves = []
        for step, move in enumerate(plan.moves, 1):
            server, host = move.server, move.host
            body = _candidates(self.client,
                               server.flavor.url(self.node[host]),
                               server.flavor.flavor)
            real = [self._candidate(c) for c in body['allocation_requests']]
            if move.candidate not in real or any(
                    c.gpus & protected for c in real):
                raise errors.NvlinkError(
                    'defrag: move %d (server %s to %s) does not replay in '
                    'Placement as planned (a bug: please report it with '
                    'the snapshot)' % (step, server.name, host))
            current = self.client.get('/allocations/%s' % server.name,
                                      version=CONSUMER_VERSION)
            allocations = {}
            for (rp, rc), amount in move.candidate.amounts:
                allocations.setdefault(rp, {'resources': {}})[
                    'resources'][rc] = amount
            self.client.request('PUT', '/allocations/%s' % server.name, body={
                'allocations': allocations,
                'project_id': current['project_id'],
                'user_id': current['user_id'],
                'consumer_generation': current.get('consumer_generation')},
                version=CONSUMER_VERSION, expect=(204,))
            moves.append(Move(step, server.name, server.flavor.flavor,
                              server.host, host, ', '.join(move.targets)))
        return moves

    def free_count(self):
        free = frozenset(state_mod.free_gpus(self.client))
        return self.problem_.free_count(free)

    def offered(self, query, freed):
        """Each of ``freed`` (``(Domain, units)``) the N-GPU query offers."""
        offered = []
        sets = {}
        for domain, units in freed:
            host = domain.host
            if host not in sets:
                url = _Query(query.flavor, query.params).url(self.node[host])
                sets[host] = [self._candidate(c).gpus for c in _candidates(
                    self.client, url, query.flavor)['allocation_requests']]
            if domain.mesh:
                # Units of a mesh: as many as the GPUs its candidates use.
                used = frozenset(g for s in sets[host] if s <= domain.gpus
                                 for g in s)
                fits = len(used) // self.size
                offered.extend([domain.label] * min(units, fits))
            elif domain.gpus in sets[host]:
                offered.append(domain.label)
        return offered


def advise(client, hosts, queries, size, count, nova_flavors=None,
           limit=search_mod.SEARCH_STEPS):
    """Plan (and apply to ``client``, an embedded Placement) the moves.

    :param hosts: topology :class:`Host` list.
    :param queries: :class:`Request` of every flavor (servers are matched
        to them; the one of ``size`` proves the result).
    :param nova_flavors: optional dict server uuid -> flavor name, from
        the compute API.
    :param limit: steps of the exact search.
    :returns: :class:`Advice`.
    :raises NvlinkError: Placement refuses a flavor's query.
    """
    reader = _Reader(client, hosts, queries, size, nova_flavors)
    problem = reader.problem()
    before = problem.free_count(reader.free)
    plan = search_mod.search(problem, count, limit)
    moves = reader.replay(plan)
    freed = []
    for domain, units in plan.targets:
        if domain.mesh:
            units -= len(domain.gpus & reader.free) // size
        elif domain.gpus <= reader.free:
            units = 0
        if units > 0:
            freed.append((domain, units))
    notes = list(reader.notes)
    if not plan.exact:
        notes.append('the plan is a heuristic one, not proven the fewest '
                     'moves: %s (the exact search stops there)'
                     % plan.reason)
    query = next(q for q in queries if q.size == size)
    offered = reader.offered(query, freed)
    for domain, units in freed:
        if domain.label not in offered:
            notes.append(
                '%s is free but the %d-GPU flavor is not offered it (%s: '
                'its query finds no candidate there, e.g. the host lacks '
                'the flavor\'s vCPUs, RAM or disk)' % (
                    domain.label, size, query.flavor))
    labels = [d.label for d, units in freed for _ in range(units)]
    return Advice(size, count, moves, before, reader.free_count(), labels,
                  offered, notes, plan.exact, reader.unmatched)
