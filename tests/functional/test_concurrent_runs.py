"""Two reshapes at once, as two real ``openstack`` processes.

Placement has no lock, so two runs started together both write. Each run
reads its hosts again once it is done: a run whose trees another run
changed meanwhile exits 1 and names the hosts (see
:func:`nvlink_placement.plan.run.changed_under`). Never may both exit 0
on a tree that matches neither topology.

Placement is gunicorn with two workers; each run goes through a fault
proxy of its own, whose rule sets the interleaving (no sleep decides it):
run A writes its groups and half of its GPU moves, then its next write is
held until run B has exited; run B's first write waits until A's is held.
"""

import json
import os
import subprocess
import sys
import threading

import fixtures
from oslotest import base
import yaml

from nvlink_placement.placement import client as pc
from tests import fault_proxy
from tests.functional import faults
from tests import novalike
from tests import placement_server

BIN = os.path.dirname(sys.executable)
#: GPU moves run A makes before its next write is held.
MOVES_FIRST = 4
#: Seconds a held request may wait (far above a run's length).
WAIT = 120
#: Writes of one host's flatten: 8 GPUs moved back, 6 groups deleted.
FLATTEN_WRITES = 14


def variant(doc):
    """``doc`` with modules 3 and 4, and 7 and 8, swapped on every host.

    The same groups by name, other GPUs in them: half of the GPUs change
    their pair.
    """
    swap = {3: 4, 4: 3, 7: 8, 8: 7}
    doc = json.loads(json.dumps(doc))
    for host in doc['hosts'].values():
        host['gpus'] = {a: swap.get(m, m) for a, m in host['gpus'].items()}
    return doc


def is_move(request):
    """``PUT /resource_providers/{uuid}``: a re-parent."""
    parts = request.path.split('?')[0].strip('/').split('/')
    return (request.method == 'PUT' and len(parts) == 2 and
            parts[0] == 'resource_providers')


class Race(base.BaseTestCase):
    """A Placement of the class's own, two fault proxies, one host a test."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.server = placement_server.PlacementServer(workers=2).start()
        cls.proxies = []
        try:
            for _ in range(2):
                cls.proxies.append(
                    fault_proxy.FaultProxy(cls.server.url).start())
        except Exception:
            cls.tearDownClass()
            raise
        cls.upstream = pc.PlacementClient(cls.server.adapter())

    @classmethod
    def tearDownClass(cls):
        for proxy in cls.proxies:
            proxy.stop()
        cls.server.stop()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.host = self.id().rsplit('.', 1)[-1].replace('_', '-')
        novalike.seed_host(self.upstream, self.host, novalike.BOARD1)
        for proxy in self.proxies:
            proxy.rule = lambda request: fault_proxy.PASS
            del proxy.log[:]

    def topology(self, name, doc):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as f:
            yaml.safe_dump(doc, f)
        return path

    def openstack(self, proxy, *args):
        """Start ``openstack <args>`` against ``proxy``; the Popen."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith('OS_')}
        return subprocess.Popen(
            [os.path.join(BIN, 'openstack')] + list(args) + [
                '--os-auth-type', 'admin_token', '--os-token', 'admin',
                '--os-endpoint', proxy.url],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            stdin=subprocess.DEVNULL, env=env)

    def finish(self, process):
        out, err = process.communicate(timeout=WAIT)
        return process.returncode, out, err

    def race(self, path_a, path_b, b_reads=None):
        """Run A and B interleaved (module doc); their results.

        :param b_reads: when B reads the tree: ``'first'``, before A's
            first write (A's writes wait for B's first write); ``'held'``,
            once A is held mid-way (every request of B waits); None, as
            the two processes happen to start.
        :returns: ``((code, stdout, stderr) of A, the same of B)``.
        """
        a_proxy, b_proxy = self.proxies
        a_held = threading.Event()
        b_done = threading.Event()
        b_wrote = threading.Event()
        moves = []

        def rule_a(request):
            if request.is_write and b_reads == 'first':
                b_wrote.wait(WAIT)
            if is_move(request):
                moves.append(request.path)
                if len(moves) == MOVES_FIRST + 1:
                    a_held.set()
                    b_done.wait(WAIT)
            return fault_proxy.PASS

        def rule_b(request):
            if request.is_write:
                b_wrote.set()
            if request.is_write or b_reads == 'held':
                a_held.wait(WAIT)
            return fault_proxy.PASS

        a_proxy.rule, b_proxy.rule = rule_a, rule_b
        options = ('--retry-window', '30', '--request-timeout',
                   str(WAIT + 30), '-f', 'json')
        a = self.openstack(a_proxy, 'nvlink', 'reshape', '--topology',
                           path_a, *options)
        b = self.openstack(b_proxy, 'nvlink', 'reshape', '--topology',
                           path_b, *options)
        try:
            b_result = self.finish(b)
        finally:
            b_done.set()
            a_held.set()
        a_result = self.finish(a)
        # The interleaving asked for happened: A was held mid-way.
        self.assertGreater(len(moves), MOVES_FIRST)
        return a_result, b_result

    def matches(self, path):
        """Whether the tree is the one ``path`` asks for (no action left)."""
        done = subprocess.run(
            [os.path.join(BIN, 'openstack'), 'nvlink', 'reshape',
             '--dry-run', '--topology', path, '-f', 'json'] +
            self.server.cli_auth(), capture_output=True, text=True,
            timeout=WAIT, stdin=subprocess.DEVNULL)
        self.assertEqual(0, done.returncode, done.stderr)
        return json.loads(done.stdout) == []

    def members(self):
        """``{group name suffix: sorted GPU addresses}`` of the host."""
        rps = self.upstream.get('/resource_providers?in_tree=%s' %
                                novalike.node_uuid(self.host))[
            'resource_providers']
        names = {rp['uuid']: rp['name'] for rp in rps}
        found = {}
        for rp in rps:
            parent = names.get(rp['parent_provider_uuid'], '')
            if 'nvlink-group' in parent and 'nvlink-group' not in rp['name']:
                found.setdefault(parent.split('nvlink-group-of-')[1],
                                 []).append(rp['name'].split('_')[1])
        return {k: sorted(v) for k, v in found.items()}


class TestConcurrentReshapes(Race):

    def test_different_topologies(self):
        doc = faults.topology_doc([self.host])
        path_a = self.topology('a.yaml', doc)
        path_b = self.topology('b.yaml', variant(doc))
        (code_a, _, err_a), (code_b, _, err_b) = self.race(path_a, path_b)
        matches = {'a': self.matches(path_a), 'b': self.matches(path_b)}
        # Never both 0 on a tree that matches neither.
        self.assertFalse(code_a == code_b == 0 and not any(matches.values()),
                         (err_a, err_b))
        # B ran whole while A was held: its tree was B's when it read it
        # again. A then finished its moves on B's tree: a tree of neither,
        # and A says so.
        self.assertEqual(0, code_b, err_b)
        self.assertEqual(1, code_a, err_a)
        self.assertIn('another run changed 1 host (%s) while this one ran'
                      % self.host, err_a)
        self.assertIn('openstack nvlink check', err_a)
        self.assertEqual({'a': False, 'b': False}, matches)
        # The pairs of modules 1-4 are B's (3B with 4C), those of 5-8 A's
        # (A's last four moves, after B: 9B with BB).
        self.assertEqual({'2-a': ['0000:3B:00.0', '0000:4C:00.0'],
                          '2-b': ['0000:19:00.0', '0000:5D:00.0'],
                          '2-c': ['0000:9B:00.0', '0000:BB:00.0'],
                          '2-d': ['0000:CB:00.0', '0000:DB:00.0']},
                         self.members())
        # Run again, alone: the tree converges to the topology run.
        again = subprocess.run(
            [os.path.join(BIN, 'openstack'), 'nvlink', 'reshape',
             '--topology', path_b] + self.server.cli_auth(),
            capture_output=True, text=True, timeout=WAIT,
            stdin=subprocess.DEVNULL)
        self.assertEqual(0, again.returncode, again.stderr)
        self.assertTrue(self.matches(path_b))

    def same_topology_twice(self, b_reads):
        path = self.topology('a.yaml', faults.topology_doc([self.host]))
        (code_a, _, err_a), (code_b, _, err_b) = self.race(
            path, path, b_reads)
        self.assertEqual(0, code_a, err_a)
        self.assertEqual(0, code_b, err_b)
        self.assertNotIn('another run', err_a + err_b)
        self.assertTrue(self.matches(path))

    def test_same_topology_twice_converges(self):
        self.same_topology_twice(None)

    def test_same_topology_b_read_the_flat_tree(self):
        # B planned every write (groups included) on the flat tree; A
        # made its groups and moves first.
        self.same_topology_twice('first')

    def test_same_topology_b_read_a_half_tree(self):
        # B read A's groups and first moves, and made the rest.
        self.same_topology_twice('held')


class TestFlattenAll(Race):
    """flatten --all, whose hosts are every host in Placement.

    A Placement of its own: the hosts other tests left in a shared one
    are flattened too, and the count of writes run A is held after (those
    of one host) is never met.
    """

    def test_flatten_all_reports_a_tree_changed_under_it(self):
        # flatten --all finds its hosts in Placement (not in a topology);
        # those are read again after its writes too. Run A (flatten
        # --all) makes all its writes; its next read (the read again) is
        # held until run B (reshape of the same host) has exited: the
        # tree A flattened is reshaped again, and A says so.
        path = self.topology('a.yaml', faults.topology_doc([self.host]))
        reshape = subprocess.run(
            [os.path.join(BIN, 'openstack'), 'nvlink', 'reshape',
             '--topology', path] + self.server.cli_auth(),
            capture_output=True, text=True, timeout=WAIT,
            stdin=subprocess.DEVNULL)
        self.assertEqual(0, reshape.returncode, reshape.stderr)
        a_proxy, b_proxy = self.proxies
        a_held = threading.Event()
        b_done = threading.Event()
        writes = []

        def rule_a(request):
            if request.is_write:
                writes.append(request.path)
            elif len(writes) == FLATTEN_WRITES and not a_held.is_set():
                a_held.set()
                b_done.wait(WAIT)
            return fault_proxy.PASS

        def rule_b(request):
            # B reads only once A's writes are done: it finds a flat tree.
            a_held.wait(WAIT)
            return fault_proxy.PASS

        a_proxy.rule, b_proxy.rule = rule_a, rule_b
        options = ('--retry-window', '30', '--request-timeout',
                   str(WAIT + 30))
        a = self.openstack(a_proxy, 'nvlink', 'flatten', '--all', *options)
        b = self.openstack(b_proxy, 'nvlink', 'reshape', '--topology', path,
                           *options)
        try:
            code_b, _, err_b = self.finish(b)
        finally:
            b_done.set()
            a_held.set()
        code_a, _, err_a = self.finish(a)
        # A's 8 moves and 6 deletes were all made, then its read held.
        self.assertEqual(FLATTEN_WRITES, len(writes), writes)
        self.assertTrue(a_held.is_set())
        self.assertEqual(0, code_b, err_b)
        self.assertEqual(1, code_a, err_a)
        self.assertIn('another run changed 1 host (%s) while this one ran'
                      % self.host, err_a)
        self.assertTrue(self.matches(path))
