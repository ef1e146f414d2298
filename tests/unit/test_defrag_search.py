"""The defrag search against an independent brute force.

The brute force below shares no code with the search: it tries every
sequence of moves (each server at most once, each to another host, the
first open candidate taken) in order of length and accepts the first whose
moved servers are exactly the holders of some ``count`` domains that are
free at the end and that no candidate open at any move's destination
(with that plan's earlier moves to the host taken back) touches.
"""

import itertools
import random

from oslotest import base

from nvlink_placement.simulate import defrag_search as ds

GPU = 'GPU'
CPU = 'VCPU'


def _fits(candidate, used, capacity):
    return all(used.get(k, 0) + n <= capacity.get(k, 0)
               for k, n in candidate.amounts)


class _State(object):
    """A state after some moves (copied, never changed in place)."""

    def __init__(self, problem):
        self.problem = problem
        self.used = dict(problem.used)
        self.landed = {h: () for h in problem.hosts}
        self.exposures = ()
        self.where = {s: s.gpus for s in problem.servers}
        self.moved = ()

    def then(self, server, host):
        """The state after ``server`` moves to ``host``, or None."""
        problem = self.problem
        candidates = problem.candidates.get((server.flavor, host), [])
        opened = [c for c in candidates
                  if _fits(c, self.used, problem.capacity)]
        if not opened:
            return None
        base_used = dict(self.used)
        for earlier in self.landed[host]:
            for k, n in earlier.amounts:
                base_used[k] -= n
        pick = opened[0]
        out = _State.__new__(_State)
        out.problem = problem
        out.used = dict(self.used)
        for k, n in server.amounts:
            out.used[k] -= n
        for k, n in pick.amounts:
            out.used[k] = out.used.get(k, 0) + n
        out.landed = dict(self.landed)
        out.landed[host] = self.landed[host] + (pick,)
        out.exposures = self.exposures + (frozenset(
            g for c in candidates if _fits(c, base_used, problem.capacity)
            for g in c.gpus),)
        out.where = dict(self.where)
        out.where[server] = pick.gpus
        out.moved = self.moved + (server,)
        return out

    def free(self):
        gpus = frozenset(g for d in self.problem.domains for g in d.gpus)
        return gpus - frozenset(g for s in self.where.values() for g in s)


def _run(problem, sequence):
    """Apply ``sequence`` of ``(server, host)``: free GPUs, exposures."""
    state = _State(problem)
    for server, host in sequence:
        state = state.then(server, host)
        if state is None:
            return None
    return state.free(), state.exposures


def brute_force(problem, count):
    """Fewest moves freeing ``count`` domains, or None.

    Every sequence of moves, shortest first (a sequence is extended only
    while each of its moves has an open candidate).
    """
    movable = [s for s in problem.servers if s.flavor is not None]
    holders = {d: frozenset(s for s in problem.servers if s.gpus & d.gpus)
               for d in problem.domains}
    level = [_State(problem)]
    for length in range(len(movable) + 1):
        for state in level:
            free, chosen = state.free(), frozenset(state.moved)
            ok = [d for d in problem.domains
                  if d.gpus <= free and holders[d] <= chosen and
                  not any(d.gpus & e for e in state.exposures)]
            union = frozenset(s for d in ok for s in holders[d])
            if len(ok) >= count and union == chosen:
                return length
        level = [after for state in level for server in movable
                 if server not in state.moved
                 for host in problem.hosts if host != server.host
                 for after in [state.then(server, host)] if after]
    return None


def check_plan(test, problem, plan):
    """Replay ``plan`` on its own: every rule of a valid plan holds."""
    servers = [m.server for m in plan.moves]
    test.assertEqual(len(servers), len(set(servers)), 'a server moved twice')
    protected = frozenset(g for d, _ in plan.targets for g in d.gpus)
    holders = frozenset(s for s in problem.servers if s.gpus & protected)
    test.assertEqual(holders, frozenset(servers))
    for move in plan.moves:
        test.assertNotEqual(move.server.host, move.host)
    done = _run(problem, [(m.server, m.host) for m in plan.moves])
    test.assertIsNotNone(done, 'a move has no open candidate')
    free, exposures = done
    for exposure in exposures:
        test.assertEqual(frozenset(), exposure & protected,
                         'a destination may give a freed GPU')
    test.assertTrue(protected <= free)
    test.assertEqual(plan.units, len(plan.targets))
    test.assertGreaterEqual(problem.free_count(free), plan.units)


def _candidate(host, gpus, cpus):
    return ds.Candidate(frozenset(gpus), tuple(sorted(
        [((g, GPU), 1) for g in gpus] + [(((host, CPU)), cpus)])))


def random_problem(rng):
    """2 to 4 hosts of 4 GPUs (two 2-GPU domains).

    Up to 4 servers that can move, and up to 3 one-GPU servers that
    cannot (no flavor).
    """
    hosts = ['h%d' % i for i in range(rng.randint(2, 4))]
    domains, capacity, candidates = [], {}, {}
    for host in hosts:
        gpus = ['%s-g%d' % (host, i) for i in range(4)]
        pairs = [gpus[:2], gpus[2:]]
        for i, pair in enumerate(pairs):
            domains.append(ds.Domain(host, '%s-d%d' % (host, i),
                                     frozenset(pair)))
        for g in gpus:
            capacity[(g, GPU)] = 1
        capacity[(host, CPU)] = rng.randint(3, 8)
        ones = [_candidate(host, [g], 1) for g in gpus]
        rng.shuffle(ones)
        # '2': a pair (a reshaped tree); '2any': any two GPUs (flat).
        twos = [_candidate(host, p, 2) for p in pairs]
        anys = [_candidate(host, p, 2) for p in itertools.combinations(
            gpus, 2)]
        rng.shuffle(anys)
        candidates.update({('1', host): ones, ('2', host): twos,
                           ('2any', host): anys})
    used, servers = {}, []
    kinds = [rng.choice(['1', '1', '2', '2any'])
             for _ in range(rng.randint(2, 4))] + [
                 None] * rng.randint(0, 3)
    for index, flavor in enumerate(kinds):
        host = rng.choice(hosts)
        opened = [c for c in candidates[(flavor or '1', host)]
                  if _fits(c, used, capacity)]
        if not opened:
            continue
        taken = rng.choice(opened)
        for k, n in taken.amounts:
            used[k] = used.get(k, 0) + n
        servers.append(ds.Server('s%d' % index, host, taken.gpus,
                                 taken.amounts, flavor))
    return ds.Problem(2, hosts, domains, servers, capacity, used,
                      candidates)


class TestAgainstBruteForce(base.BaseTestCase):

    def test_random_states(self):
        rng = random.Random(20261203)
        reached = short = several = 0
        for number in range(500):
            problem = random_problem(rng)
            count = problem.free_count(frozenset(
                g for d in problem.domains for g in d.gpus) -
                problem.busy()) + rng.choice([1, 1, 1, 2])
            plan = ds.search(problem, count)
            self.assertTrue(plan.exact)
            expected = brute_force(problem, count)
            check_plan(self, problem, plan)
            if expected is None:
                short += 1
                self.assertLess(plan.units, count, number)
            else:
                reached += 1
                several += expected >= 2
                self.assertGreaterEqual(plan.units, count, number)
                self.assertEqual(expected, len(plan.moves), number)
        # Both kinds of state are in the sample.
        self.assertGreater(reached, 150)
        self.assertGreater(several, 40)
        self.assertGreater(short, 100)


class TestOtherPicks(base.BaseTestCase):
    """A destination judged as if earlier moves there got other GPUs.

    Host S: domain {s1, s2}, a on s1, b on s2. Host D: a free domain
    {t, u} and GPUs x, w, y, z; a's flavor is given x or w there, b's
    {t, x} or {y, z}. Host E: e1, e2, e3. Both domains free at the end:
    a may go to D (x or w, outside both), but b may not follow it: had
    Nova given a w, b could be given {t, x}, in the domain kept free.
    """

    def test_second_move_to_the_host_avoids_the_kept_domain(self):
        def one(host, *gpus):
            return _candidate(host, list(gpus), len(gpus))
        capacity = {(g, GPU): 1 for g in (
            's1', 's2', 't', 'u', 'x', 'w', 'y', 'z', 'e1', 'e2', 'e3')}
        capacity.update({(h, CPU): 10 for h in 'SDE'})
        a = ds.Server('a', 'S', frozenset(['s1']),
                      one('S', 's1').amounts, 'A')
        b = ds.Server('b', 'S', frozenset(['s2']),
                      one('S', 's2').amounts, 'B')
        used = {k: n for s in (a, b) for k, n in s.amounts}
        candidates = {
            ('A', 'D'): [one('D', 'x'), one('D', 'w')],
            ('A', 'E'): [one('E', 'e1')],
            ('B', 'D'): [one('D', 't', 'x'), one('D', 'y', 'z')],
            ('B', 'E'): [one('E', 'e2', 'e3')]}
        problem = ds.Problem(
            2, ['S', 'D', 'E'],
            [ds.Domain('S', 'dS', frozenset(['s1', 's2'])),
             ds.Domain('D', 'dD', frozenset(['t', 'u']))],
            [a, b], capacity, used, candidates)
        plan = ds.search(problem, 2)
        self.assertEqual([('a', 'D'), ('b', 'E')],
                         [(m.server.name, m.host) for m in plan.moves])
        check_plan(self, problem, plan)
        self.assertEqual(2, brute_force(problem, 2))
