"""The fewest cold migrations that free K domains: an exact search.

The model (built from Placement by :mod:`.defrag`, or by a test):

* GPUs are resource providers; a *domain* is a fixed set of GPUs of one
  host (free when all its GPUs are), or a *mesh* (any ``size`` of its
  GPUs: ``free GPUs // size`` domains).
* A *server* holds GPUs on one host and resources on providers
  (``amounts``); it can move when it has a flavor.
* A flavor's *candidates* on a host are Placement's allocation requests
  for it on that host with nothing allocated (its structural answer:
  traits, tree, groups). In a state a candidate is open when every
  amount still fits the provider's capacity (Placement's capacity rule,
  ``used + amount <= (total - reserved) * allocation_ratio``).

A plan chooses *targets*: domains (or units of a mesh) that are free at
the end, ``count`` of them; the servers holding a GPU of a target move,
each once, one at a time, each to another host where:

* one of its flavor's candidates is open (the plan takes the first open
  one, in Placement's order: the state after the move assumes it);
* *safe*: no candidate that Nova could be given there touches a GPU of a
  target (``openstack server migrate --host`` claims whichever candidate
  Placement lists first, and its order is arbitrary). A candidate could
  be given when it is open in the state with this plan's earlier moves to
  that host taken back: had Nova given those servers other GPUs, those
  are what is free, so the check holds whichever GPUs it gave.

No server lands in a target (a domain the plan frees), and none moves
twice. The plan's cost is the number of servers moved: the holders of its
targets. :func:`search` tries targets in order of cost and, for each, every
order of the moves and every safe destination (depth first, a state that
failed once is not tried again), so the first plan found needs the fewest
moves of all plans of this model. Plans that also move servers holding no
GPU of a target (to make room elsewhere) are not in the model.

The search is exact while it takes at most ``limit`` steps (one step: one
move tried, or one partial choice of targets weighed) and no mesh has more
than :data:`MESH_HOLDERS` servers; beyond either bound it falls back to a
heuristic and says so (:attr:`Plan.exact` False): for 1, 2, ... ``count``
domains while it finds a plan, the first choice of targets (in order of
cost, at most :data:`HEURISTIC_TARGETS`) whose moves succeed in one greedy
order. Proving that ``count`` domains cannot be freed is the costly case:
every choice of targets is tried.
"""

import dataclasses
import itertools

#: Steps of the exact search before it falls back to the heuristic.
SEARCH_STEPS = 50000
#: Target sets the heuristic tries, and its steps, for each count.
HEURISTIC_TARGETS = 2000
HEURISTIC_STEPS = 20000
#: Servers on one mesh whose every subset is weighed (above: greedy).
MESH_HOLDERS = 12


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One allocation request: GPUs taken and every amount it allocates.

    :ivar gpus: frozenset of GPU provider ids.
    :ivar amounts: tuple of ``((provider, resource class), amount)``.
    """
    gpus: frozenset
    amounts: tuple


@dataclasses.dataclass(frozen=True)
class Server:
    """A consumer holding GPUs of one host.

    :ivar flavor: key of its flavor in :attr:`Problem.candidates`, or
        None when it cannot be moved.
    :ivar amounts: what it holds: tuple of ``((provider, rc), amount)``.
    """
    name: str
    host: str
    gpus: frozenset
    amounts: tuple
    flavor: object


@dataclasses.dataclass(frozen=True)
class Domain:
    host: str
    label: str
    gpus: frozenset
    mesh: bool = False


@dataclasses.dataclass
class Problem:
    """A state to defragment.

    :ivar size: GPUs per domain.
    :ivar hosts: host names, in the order destinations are tried.
    :ivar domains: list of :class:`Domain` of ``size``.
    :ivar servers: list of :class:`Server`.
    :ivar capacity: dict ``(provider, rc)`` -> capacity.
    :ivar used: dict ``(provider, rc)`` -> amount used now (every
        consumer, servers or not).
    :ivar candidates: dict ``(flavor, host)`` -> list of
        :class:`Candidate`, in Placement's order.
    :ivar stuck: GPUs that are not free and that no server frees
        (reserved, or with no capacity).
    """
    size: int
    hosts: list
    domains: list
    servers: list
    capacity: dict
    used: dict
    candidates: dict
    stuck: frozenset = frozenset()

    def busy(self):
        return frozenset(g for s in self.servers for g in s.gpus)

    def free_count(self, free):
        """Free domains when ``free`` (GPU ids) are free."""
        count = 0
        for domain in self.domains:
            if domain.mesh:
                count += len(domain.gpus & free) // self.size
            elif domain.gpus <= free:
                count += 1
        return count


@dataclasses.dataclass(frozen=True)
class Move:
    server: Server
    host: str
    candidate: Candidate
    targets: tuple      # labels of the target domains it holds GPUs of


@dataclasses.dataclass
class Plan:
    """What :func:`search` found.

    :ivar moves: list of :class:`Move`, in order.
    :ivar targets: list of ``(Domain, units)`` free at the end.
    :ivar units: domains the targets count for.
    :ivar exact: True when the plan is proven the fewest moves.
    :ivar reason: why not exact (None when exact).
    :ivar blocked: servers with no flavor that hold GPUs of domains not
        free (they made those domains impossible targets).
    """
    moves: list
    targets: list
    units: int
    exact: bool
    reason: object
    blocked: list


class _OutOfSteps(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class _Choice:
    """Targets on one host: units, holders to move, GPUs protected."""
    units: int
    servers: frozenset
    protected: frozenset
    parts: tuple        # ((Domain, units), ...)
    spare: int          # units that need no move (droppable)


def _fits(candidate, used, capacity):
    return all(used.get(key, 0) + amount <= capacity.get(key, 0)
               for key, amount in candidate.amounts)


class _Search(object):

    def __init__(self, problem, limit):
        self.p = problem
        self.limit = limit
        self.steps = 0
        self.exact = True
        self.reason = None
        self.free0 = frozenset(g for d in problem.domains
                               for g in d.gpus) - problem.busy() - \
            problem.stuck
        self.blocked = set()
        self.choices = {h: self._host_choices(h) for h in problem.hosts}
        self.low = {}

    # -- targets ---------------------------------------------------------

    def _holders(self, gpus):
        return frozenset(s for s in self.p.servers if s.gpus & gpus)

    def _parts(self, domain):
        """``[(units, servers, spare)]`` ways to have ``domain`` free."""
        holders = self._holders(domain.gpus)
        if not domain.mesh:
            if domain.gpus & self.p.stuck:
                return []
            if any(s.flavor is None for s in holders):
                self.blocked.update(s for s in holders if s.flavor is None)
                return []
            return [(1, holders, 0 if holders else 1)]
        out = []
        idle = len(domain.gpus & self.free0)
        movable = sorted((s for s in holders if s.flavor is not None),
                         key=lambda s: (-len(s.gpus & domain.gpus), s.name))
        for units in range(1, len(domain.gpus - self.p.stuck) //
                           self.p.size + 1):
            deficit = units * self.p.size - idle
            if deficit <= 0:
                out.append((units, frozenset(), units))
                continue
            found = self._mesh_subsets(movable, domain, deficit)
            if not found:
                self.blocked.update(s for s in holders if s.flavor is None)
            out.extend((units, subset, 0) for subset in found)
        return out

    def _mesh_subsets(self, movable, domain, deficit):
        """Inclusion-minimal sets of ``movable`` freeing ``deficit`` GPUs."""
        def gain(subset):
            return sum(len(s.gpus & domain.gpus) for s in subset)
        if len(movable) > MESH_HOLDERS:
            self._inexact('more than %d servers on mesh %s'
                          % (MESH_HOLDERS, domain.label))
            chosen = []
            for server in movable:
                if gain(chosen) >= deficit:
                    break
                chosen.append(server)
            return [frozenset(chosen)] if gain(chosen) >= deficit else []
        found = []
        for r in range(1, len(movable) + 1):
            for subset in itertools.combinations(movable, r):
                subset = frozenset(subset)
                if gain(subset) >= deficit and not any(
                        f <= subset for f in found):
                    found.append(subset)
        return found

    def _host_choices(self, host):
        """Every :class:`_Choice` of ``host`` (the empty one last)."""
        per_domain = []
        for domain in self.p.domains:
            if domain.host == host:
                parts = self._parts(domain)
                if parts:
                    per_domain.append((domain, parts))
        choices = {}
        options = [[None] + parts for _, parts in per_domain]
        for picked in itertools.product(*options):
            units, servers, protected, parts, spare = 0, frozenset(), \
                frozenset(), [], 0
            for (domain, _), part in zip(per_domain, picked):
                if part is None:
                    continue
                units += part[0]
                servers |= part[1]
                protected |= domain.gpus
                spare += part[2]
                parts.append((domain, part[0]))
            choice = _Choice(units, servers, protected, tuple(parts), spare)
            key = (units, servers, protected)
            choices.setdefault(key, choice)
        # Most domains first: of plans with as many moves, the one freeing
        # domains of the first hosts is found first.
        return sorted(choices.values(), key=lambda c: (
            -c.units, len(c.servers), [(d.label, u) for d, u in c.parts]))

    def _bounds(self, wanted):
        """``low[i][u]``: fewest moves for ``u`` more units from hosts i+."""
        hosts = self.p.hosts
        inf = float('inf')
        low = [[inf] * (wanted + 1) for _ in range(len(hosts) + 1)]
        low[len(hosts)][0] = 0
        for i in range(len(hosts) - 1, -1, -1):
            for u in range(wanted + 1):
                for choice in self.choices[hosts[i]]:
                    rest = low[i + 1][max(0, u - choice.units)]
                    low[i][u] = min(low[i][u], len(choice.servers) + rest)
        return low

    def target_sets(self, wanted, cost):
        """Choices (one per host) with ``cost`` moves, ``wanted`` units+."""
        hosts = self.p.hosts
        if wanted not in self.low:
            self.low[wanted] = self._bounds(wanted)
        low = self.low[wanted]

        def walk(i, units, spent, picked):
            self._step()
            if spent + low[i][max(0, wanted - units)] > cost:
                return
            if i == len(hosts):
                spare = sum(c.spare for c in picked)
                if spent == cost and units >= wanted and not (
                        spare and units - 1 >= wanted):
                    yield list(picked)
                return
            for choice in self.choices[hosts[i]]:
                picked.append(choice)
                yield from walk(i + 1, units + choice.units,
                                spent + len(choice.servers), picked)
                picked.pop()
        if low[0][wanted] <= cost:
            yield from walk(0, 0, 0, [])

    # -- moves -----------------------------------------------------------

    def _inexact(self, reason):
        if self.exact:
            self.exact = False
            self.reason = reason

    def schedule(self, picked, greedy=False):
        """Moves of the holders of ``picked``, or None."""
        protected = frozenset(g for c in picked for g in c.protected)
        labels = {}
        for choice in picked:
            for domain, _ in choice.parts:
                for server in self._holders(domain.gpus):
                    labels.setdefault(server, []).append(domain.label)
        # Tried in host order, then by domain.
        servers = sorted((s for c in picked for s in c.servers),
                         key=lambda s: (self.p.hosts.index(s.host),
                                        sorted(labels[s]),
                                        self.p.servers.index(s)))
        if self._hopeless(servers, protected):
            return None
        used = dict(self.p.used)
        landed = {h: [] for h in self.p.hosts}
        dead = set()
        done = []

        def dfs():
            if len(done) == len(servers):
                return True
            key = frozenset((m.server, m.host, m.candidate) for m in done)
            if key in dead:
                return False
            moved = {m.server for m in done}
            for server in servers:
                if server in moved:
                    continue
                for host in self.p.hosts:
                    if host == server.host:
                        continue
                    move = self._try(server, host, used, landed[host],
                                     protected)
                    if move is None:
                        continue
                    self._apply(server, move, used, +1)
                    landed[host].append(move)
                    done.append(Move(server, host, move,
                                     tuple(labels.get(server, ()))))
                    if dfs():
                        return True
                    done.pop()
                    landed[host].pop()
                    self._apply(server, move, used, -1)
                    if greedy:
                        return False
            dead.add(key)
            return False
        return list(done) if dfs() else None

    def _step(self):
        self.steps += 1
        if self.steps > self.limit:
            raise _OutOfSteps()

    def _hopeless(self, servers, protected):
        """Whether a server has no destination even in the best case.

        The best case: every server to move already gone. A candidate
        that does not fit then never does, and one touching a GPU of a
        target is never safe.
        """
        used = dict(self.p.used)
        for server in servers:
            for key, amount in server.amounts:
                used[key] -= amount
        for server in servers:
            if not any(not c.gpus & protected and
                       _fits(c, used, self.p.capacity)
                       for host in self.p.hosts if host != server.host
                       for c in self.p.candidates.get(
                           (server.flavor, host), ())):
                return True
        return False

    def _try(self, server, host, used, landed, protected):
        """The candidate ``server`` takes on ``host``, or None (not safe)."""
        self._step()
        candidates = self.p.candidates.get((server.flavor, host), ())
        pick = next((c for c in candidates
                     if _fits(c, used, self.p.capacity)), None)
        if pick is None:
            return None
        base = dict(used)
        for earlier in landed:
            for key, amount in earlier.amounts:
                base[key] -= amount
        for candidate in candidates:
            if candidate.gpus & protected and _fits(
                    candidate, base, self.p.capacity):
                return None
        return pick

    def _apply(self, server, candidate, used, sign):
        for key, amount in server.amounts:
            used[key] = used.get(key, 0) - sign * amount
        for key, amount in candidate.amounts:
            used[key] = used.get(key, 0) + sign * amount

    def first(self, wanted, greedy):
        """The cheapest plan freeing ``wanted`` units, or None.

        With ``greedy``: the first found among at most
        :data:`HEURISTIC_TARGETS` choices of domains, each scheduled in one
        greedy order.
        """
        tried = 0
        for cost in range(len(self.p.servers) + 1):
            for picked in self.target_sets(wanted, cost):
                tried += 1
                if greedy and tried > HEURISTIC_TARGETS:
                    return None
                moves = self.schedule(picked, greedy)
                if moves is not None:
                    return picked, moves
        return None

    def best(self, count):
        """The plan for ``count`` units, or for as many as can be (exact)."""
        for wanted in range(count, 0, -1):
            found = self.first(wanted, greedy=False)
            if found is not None:
                return found
        return None

    def most(self, count):
        """A heuristic plan: 1, 2, ... units while one is found."""
        found = None
        self.limit = HEURISTIC_STEPS
        for wanted in range(1, count + 1):
            self.steps = 0
            try:
                more = self.first(wanted, greedy=True)
            except _OutOfSteps:
                more = None
            if more is None:
                break
            found = more
        return found


def search(problem, count, limit=SEARCH_STEPS):
    """The fewest moves leaving ``count`` domains free (or as many as can).

    :param problem: :class:`Problem`.
    :param count: free domains wanted in all.
    :param limit: steps of the exact search (a step: a move tried, or a
        partial choice of domains weighed); the heuristic then has
        :data:`HEURISTIC_STEPS` for each count it tries.
    :returns: :class:`Plan`; its ``units`` is below ``count`` when no plan
        of the model reaches ``count`` (then the plan reaching the most).
    """
    state = _Search(problem, limit)
    try:
        found = state.best(count)
    except _OutOfSteps:
        state._inexact('more than %d steps of search' % limit)
        found = state.most(count)
    blocked = sorted(state.blocked, key=problem.servers.index)
    if found is None:
        return Plan([], [], 0, state.exact, state.reason, blocked)
    picked, moves = found
    targets = [part for choice in picked for part in choice.parts]
    return Plan(moves, targets, sum(c.units for c in picked), state.exact,
                state.reason, blocked)
