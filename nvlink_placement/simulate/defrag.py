"""Defragmentation advice: the fewest cold migrations that free K domains.

A cold migration (``openstack server migrate``) moves a server to another
host and, once confirmed, frees every GPU it held on its source host. To
get K free NVLink domains of N GPUs:

1. Read who holds which GPU: the consumers on every GPU provider in use,
   and each consumer's whole allocation (to match it to a flavor of the
   flavors file by its VCPU / MEMORY_MB / DISK_GB and GPU count).
2. Repeat until K domains are free: for every domain not free (a fixed
   N-GPU domain of the topology, or one more N GPUs of a mesh) the
   servers that must leave; choose the domains to free that need the
   fewest servers in all (:meth:`_Planner.cheapest`: a server holding
   GPUs of two domains of its host moves once for both, so the domains of
   each host are weighed together, every combination, and the hosts
   combined exactly; ties: host and domain order) and free the first of
   them. Each of its servers needs a destination: a host
   other than its own where its flavor's ``GET /allocation_candidates``
   (Nova's query) has a candidate, tried in Nova's weighed order
   (:mod:`.choice`), where *every* candidate uses no GPU of a domain
   being freed and leaves the count of free N-GPU domains as it was: with
   ``--host`` Nova's scheduler claims the host's first candidate, and
   Placement's order is arbitrary (see :mod:`.choice`), so any of them
   may be the one. A domain whose servers cannot all move is skipped.
3. Every move is applied at once to an embedded Placement (``PUT
   /allocations/{server}`` with the destination's candidate: the source's
   GPUs are free), so the next destination check sees the state after
   the earlier moves. Against a live cloud the state is first exported
   into an embedded Placement: nothing is written to the cloud.
4. Proof: the N-GPU flavor's query, sent at the end, must offer every
   freed domain.

The fewest moves when every server chosen can move; a server with no
destination makes its domain skipped and the choice is made again without
it (then a good answer, not a proven minimum). A host with more than
:data:`MAX_COMBINED` domains to choose from has its domains weighed one by
one.
"""

import dataclasses
import itertools

from nvlink_placement import errors
from nvlink_placement.flavors import request as request_mod
from nvlink_placement.placement import state as state_mod
from nvlink_placement.simulate import choice

COLUMNS = ('step', 'server', 'flavor', 'source', 'destination', 'frees',
           'command')
MIGRATE_MICROVERSION = '2.56'     # compute API: cold migrate with --host
CONSUMER_VERSION = '1.28'         # consumer generations in /allocations
#: Domains of one host weighed in every combination (8: a 16-GPU board's
#: pairs, 255 combinations); above it, one by one.
MAX_COMBINED = 8


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
    :ivar freed: labels of the domains the moves free.
    :ivar offered: labels of freed domains the N-GPU flavor's candidates
        include after the moves (all of them, unless a note says why).
    """
    size: int
    count: int
    moves: list
    free_before: int
    free_after: int
    freed: list
    offered: list
    notes: list

    @property
    def reached(self):
        return self.free_after >= self.count

    def describe(self):
        return ('defrag: %d free %d-GPU domain(s) before, %d after %d '
                'move(s); freed %s; offered by the %d-GPU flavor afterwards: '
                '%d of %d' % (self.free_before, self.size, self.free_after,
                              len(self.moves), ', '.join(self.freed) or
                              'none', self.size, len(self.offered),
                              len(self.freed)))

    def shortfall(self):
        return ('only %d free %d-GPU domain(s) reachable, %d wanted: the '
                'other domains hold servers that no other host can take'
                % (self.free_after, self.size, self.count))


@dataclasses.dataclass
class _Server:
    uuid: str
    host: str
    gpus: set           # addresses on its host
    flavor: object      # Request or None
    project_id: str
    user_id: str


def _candidates(client, query):
    """The allocation candidates of ``query``.

    :raises NvlinkError: when Placement refuses the query (flavors of
        another tree: the reshaped layout's flavors on a flat tree).
    """
    try:
        return client.get(query.url, version=request_mod.MICROVERSION)
    except errors.PlacementError as exc:
        if exc.status is None or exc.status >= 500:
            raise
        raise errors.NvlinkError(
            'flavor %s: Placement refused its query (%s): give the flavors '
            'this tree serves (on a flat tree, the upstream ones)'
            % (query.flavor, str(exc).split('): ', 1)[-1]))


def _unsuffixed(query):
    params = dict(query.params)
    return {rc: int(n) for rc, n in (
        item.split(':') for item in params.get('resources', '').split(',')
        if item)}


class _Planner(object):

    def __init__(self, client, hosts, queries, size):
        self.client = client
        self.hosts = {h.name: h for h in hosts}
        self.order = [h.name for h in hosts]
        self.size = size
        self.queries = queries
        self.notes = []
        listing = client.get('/resource_providers')['resource_providers']
        self.uuid_of = {rp['name']: rp['uuid'] for rp in listing}
        self.gpu_of = {}
        for host in hosts:
            for address in host.usable():
                rp = self.uuid_of.get(host.gpu_provider_name(address))
                if rp is not None:
                    self.gpu_of[rp] = (host.name, address)
        free = state_mod.free_gpus(client)
        self.free = {h: set() for h in self.order}
        for rp, (host, address) in self.gpu_of.items():
            if rp in free:
                self.free[host].add(address)
        self.servers = self._servers(set(self.gpu_of) - free)

    def _servers(self, busy):
        consumers = set()
        for rp in sorted(busy):
            body = self.client.get('/resource_providers/%s/allocations' % rp)
            consumers.update(body.get('allocations', {}))
        servers = {}
        for consumer in sorted(consumers):
            body = self.client.get('/allocations/%s' % consumer,
                                   version=CONSUMER_VERSION)
            gpus, host, node = set(), None, {}
            for rp, alloc in body['allocations'].items():
                if rp in self.gpu_of:
                    host, address = self.gpu_of[rp]
                    gpus.add(address)
                else:
                    node.update(alloc['resources'])
            flavor = next((q for q in self.queries if q.size == len(gpus) and
                           _unsuffixed(q) == node), None)
            if flavor is None:
                self.notes.append(
                    'server %s (%d GPU(s) on %s, %s) matches no flavor of '
                    'the flavors file: it is not moved' % (
                        consumer, len(gpus), host, ', '.join(
                            '%s=%d' % kv for kv in sorted(node.items()))))
            servers[consumer] = _Server(consumer, host, gpus, flavor,
                                        body.get('project_id'),
                                        body.get('user_id'))
        return servers

    # -- domains ----------------------------------------------------------

    def free_domains(self, name, free=None):
        free = self.free[name] if free is None else free
        host = self.hosts[name]
        count = sum(1 for d in host.fixed_domains(self.size) if d <= free)
        count += sum(len(m & free) // self.size
                     for m in host.meshes(self.size))
        return count

    def total_free(self):
        return sum(self.free_domains(n) for n in self.order)

    def holders(self, name, addresses):
        return [s for s in self.servers.values()
                if s.host == name and s.gpus & addresses]

    def options(self, skipped):
        """``(cost, order, host, label, GPUs, servers)`` of each domain."""
        out = []
        for position, name in enumerate(self.order):
            host = self.hosts[name]
            free = self.free[name]
            for domain, label in sorted(host.fixed_domains(
                    self.size).items(), key=lambda kv: kv[1]):
                if domain <= free or (name, label) in skipped:
                    continue
                servers = self.holders(name, domain)
                out.append((len(servers), position, name, label, domain,
                            servers))
            for mesh, label in sorted(host.meshes(self.size).items(),
                                      key=lambda kv: kv[1]):
                if (name, label) in skipped:
                    continue
                idle = mesh & free
                deficit = self.size - len(idle) % self.size
                if len(mesh) - len(idle) < deficit:
                    continue
                chosen, gained = [], 0
                for server in sorted(self.holders(name, mesh),
                                     key=lambda s: (-len(s.gpus & mesh),
                                                    s.uuid)):
                    if gained >= deficit:
                        break
                    chosen.append(server)
                    gained += len(server.gpus & mesh)
                out.append((len(chosen), position, name, label,
                            frozenset(mesh), chosen))
        out.sort(key=lambda o: o[:2] + (o[3],))
        return out

    def cheapest(self, skipped, wanted):
        """The cheapest options (:meth:`options`) freeing ``wanted`` more.

        As many domains as can be when fewer, in option order. Cost: the
        distinct servers to move. Per host, every combination of its fixed
        domains (a server spanning two moves once); meshes and hosts above
        :data:`MAX_COMBINED` domains one option at a time. Hosts are
        combined by dynamic programming over the count freed.
        """
        options = self.options(skipped)
        by_host = {}
        for option in options:
            by_host.setdefault(option[2], []).append(option)
        # best[k] = (servers to move, chosen options) freeing k domains.
        best = {0: (0, ())}
        for name in self.order:
            labels = set(self.hosts[name].fixed_domains(self.size).values())
            fixed, single = [], []
            for option in by_host.get(name, []):
                (fixed if option[3] in labels else single).append(option)
            if len(fixed) > MAX_COMBINED:
                single, fixed = by_host.get(name, []), []
            bundles = [(1, o[0], (o,)) for o in single]
            for r in range(1, min(wanted, len(fixed)) + 1):
                for combo in itertools.combinations(fixed, r):
                    servers = {s.uuid for o in combo for s in o[5]}
                    bundles.append((r, len(servers), combo))
            step = dict(best)
            for freed, (cost, chosen) in best.items():
                for r, more, combo in bundles:
                    k = min(wanted, freed + r)
                    total = cost + more
                    if k not in step or total < step[k][0]:
                        step[k] = (total, chosen + combo)
            best = step
        _, chosen = best[max(best)]
        return sorted(chosen, key=options.index)

    # -- moves --------------------------------------------------------------

    def destination(self, server, protected):
        """``(host, candidate, GPUs)`` on a suitable host, or None.

        :param protected: dict host -> set of addresses being freed.
        """
        body = _candidates(self.client, server.flavor)
        states = [h for h in choice.by_host(body)
                  if self._host_of(h.uuid) not in (None, server.host)]
        for state, _ in sorted(zip(states, choice.weigh(states)),
                               key=lambda sw: -sw[1]):
            name = self._host_of(state.uuid)
            before = self.free_domains(name)
            fine = []
            for candidate in state.candidates:
                taken = {self.gpu_of[u][1] for u, a in
                         candidate['allocations'].items() if u in self.gpu_of}
                if taken & protected.get(name, set()) or self.free_domains(
                        name, self.free[name] - taken) < before:
                    break
                fine.append((candidate, taken))
            else:
                # Every candidate there is fine: whichever Placement lists
                # first (its order is arbitrary), Nova's pick is.
                return (name,) + fine[0]
        return None

    def _host_of(self, node_uuid):
        for name in self.order:
            if self.uuid_of.get(name) == node_uuid:
                return name
        return None

    def move(self, server, name, candidate, taken):
        """Move ``server``'s allocations; returns what :meth:`undo` needs."""
        current = self.client.get('/allocations/%s' % server.uuid,
                                  version=CONSUMER_VERSION)
        self._put(server, candidate['allocations'],
                  current.get('consumer_generation'))
        undo = (server.host, set(server.gpus), current['allocations'])
        self.free[server.host].update(server.gpus)
        self.free[name].difference_update(taken)
        server.host, server.gpus = name, set(taken)
        return undo

    def undo(self, server, undo):
        """Put ``server`` back where :meth:`move` found it."""
        host, gpus, allocations = undo
        current = self.client.get('/allocations/%s' % server.uuid,
                                  version=CONSUMER_VERSION)
        self._put(server, {rp: {'resources': a['resources']}
                           for rp, a in allocations.items()},
                  current.get('consumer_generation'))
        self.free[server.host].update(server.gpus)
        self.free[host].difference_update(gpus)
        server.host, server.gpus = host, gpus

    def _put(self, server, allocations, generation):
        self.client.request('PUT', '/allocations/%s' % server.uuid, body={
            'allocations': allocations, 'project_id': server.project_id,
            'user_id': server.user_id, 'consumer_generation': generation},
            version=CONSUMER_VERSION, expect=(204,))


def advise(client, hosts, queries, size, count):
    """Plan (and apply to ``client``, an embedded Placement) the moves.

    :param queries: :class:`Request` of every flavor (servers are matched
        to them; the one of ``size`` proves the result).
    :returns: :class:`Advice`.
    """
    planner = _Planner(client, hosts, queries, size)
    before = planner.total_free()
    moves, freed, skipped = [], [], set()
    protected = {}
    while planner.total_free() < count:
        options = planner.cheapest(skipped, count - planner.total_free())
        if not options:
            break
        _, _, name, label, domain, servers = options[0]
        if any(s.flavor is None for s in servers):
            skipped.add((name, label))
            continue
        protected.setdefault(name, set()).update(domain)
        plan = []
        for server in servers:
            found = planner.destination(server, protected)
            if found is None:
                break
            source = server.host
            plan.append((server, source, found[0],
                         planner.move(server, *found)))
        if len(plan) < len(servers):
            planner.notes.append(
                'domain %s: server %s fits on no other host (its flavor has '
                'no suitable candidate): the domain is left as it is' % (
                    label, servers[len(plan)].uuid))
            for server, _, _, undo in reversed(plan):
                planner.undo(server, undo)
            skipped.add((name, label))
            protected[name].difference_update(domain)
            continue
        freed.append(label)
        for server, source, destination, _ in plan:
            moves.append(Move(len(moves) + 1, server.uuid,
                              server.flavor.flavor, source, destination,
                              label))
    offered = _offered(planner, queries, freed)
    return Advice(size, count, moves, before, planner.total_free(), freed,
                  offered, planner.notes)


def _offered(planner, queries, freed):
    """Labels of ``freed`` domains the N-GPU flavor's query offers."""
    query = next(q for q in queries if q.size == planner.size)
    body = _candidates(planner.client, query)
    sets = {}
    for candidate in body['allocation_requests']:
        gpus = [planner.gpu_of[u] for u in candidate['allocations']
                if u in planner.gpu_of]
        if gpus:
            sets.setdefault(gpus[0][0], []).append(
                frozenset(a for _, a in gpus))
    offered = []
    for label in freed:
        for name in planner.order:
            host = planner.hosts[name]
            domains = {v: k for k, v in host.fixed_domains(
                planner.size).items()}
            meshes = {v: k for k, v in host.meshes(planner.size).items()}
            if label in domains and domains[label] in sets.get(name, []):
                offered.append(label)
            elif label in meshes and any(s <= meshes[label]
                                         for s in sets.get(name, [])):
                offered.append(label)
    return offered
