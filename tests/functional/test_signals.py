"""SIGINT and SIGTERM stop a live run between two writes (real processes).

Each test starts the installed ``openstack`` CLI as a subprocess against
gunicorn Placement behind the fault proxy, and signals it from the proxy's
rule when the proxy has counted a given write: the signal lands while that
write is in flight. The run must then make no further write, say on
standard error which hosts are done, interrupted and untouched, and exit
130 (SIGINT) or 143 (SIGTERM); ``check`` then reports the interrupted
hosts and a rerun (of ``reshape`` or ``flatten``) finishes them.
"""

import os
import signal
import subprocess
import sys
import threading
import time

from nvlink_placement import errors
from nvlink_placement.osc import offline
from nvlink_placement.placement import snapshot
from nvlink_placement.plan import desired
from nvlink_placement.plan import run
from nvlink_placement.topology import loader
from tests import fault_proxy
from tests.functional import base as fbase
from tests.functional import faults

BIN = os.path.dirname(sys.executable)
#: Writes of one host's reshape (6 groups created, 6 trait sets, 8 GPUs
#: moved) and flatten (8 GPUs moved back, 6 groups deleted).
RESHAPE_WRITES = 20
FLATTEN_WRITES = 14


def provider_write(request):
    """A write of a provider (not a trait's creation)."""
    return request.is_write and request.path.startswith('/resource_providers')


class SignalTestCase(faults.ProxyTestCase):

    def start(self, *args):
        """Start ``openstack <args>`` against the proxy; the Popen."""
        env = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
        env['PYTHONWARNINGS'] = 'ignore'
        process = subprocess.Popen(
            [os.path.join(BIN, 'openstack')] + list(args) + [
                '--os-auth-type', 'admin_token', '--os-token', 'admin',
                '--os-endpoint', self.proxy.url],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            stdin=subprocess.DEVNULL, env=env)
        self.addCleanup(self._reap, process)
        return process

    @staticmethod
    def _reap(process):
        if process.poll() is None:
            process.kill()
        process.communicate()

    def signal_at(self, process, n, signum, counts=provider_write):
        """Signal ``process`` when the proxy sees the ``n``-th write.

        That write is forwarded half a second later: the signal lands
        while it is in flight. The rule counts requests ``counts`` accepts.
        """
        seen = {'n': 0}
        lock = threading.Lock()

        def rule(request):
            if not counts(request):
                return fault_proxy.PASS
            with lock:
                seen['n'] += 1
                now = seen['n']
            if now == n:
                os.kill(process.pid, signum)
                return fault_proxy.delay(0.5)
            return fault_proxy.PASS
        self.proxy.rule = rule

    def writes(self):
        return [r for r in self.proxy.log if r.method in fault_proxy.WRITES and
                r.path.startswith('/resource_providers')]

    def summary(self, stderr):
        lines = [line for line in stderr.splitlines()
                 if line.startswith('interrupted by ')]
        self.assertEqual(1, len(lines), stderr)
        return lines[0]


class TestReshapeInterrupted(SignalTestCase):

    def test_sigint_stops_before_the_next_write(self):
        hosts = self.hosts(4)
        faults.seed(self.upstream, hosts)
        topology = self.topology(hosts)
        wanted = self.reference()
        del self.proxy.log[:]
        process = self.start('nvlink', 'reshape', '--topology', topology,
                             '--workers', '1', '-f', 'value')
        # The second write of the second host.
        self.signal_at(process, RESHAPE_WRITES + 2, signal.SIGINT)
        out, err = process.communicate(timeout=120)
        self.proxy.rule = lambda request: fault_proxy.PASS
        self.assertEqual(130, process.returncode, err)
        self.assertEqual(
            'interrupted by SIGINT: 1 host done (%s), 1 interrupted (%s: 2 '
            'of %d writes), 2 untouched (%s, %s); rerun `openstack nvlink '
            'reshape` to finish; `openstack nvlink check` shows the tree'
            % (hosts[0], hosts[1], RESHAPE_WRITES, hosts[2], hosts[3]),
            self.summary(err))
        self.assertNotIn('Traceback', err)
        # The write in flight was answered; none was sent after it (the
        # full plan is 80).
        self.assertEqual(RESHAPE_WRITES + 2, len(self.writes()))
        # Standard output lists the writes made.
        rows = out.splitlines()
        self.assertEqual(RESHAPE_WRITES + 2, len(rows), out)
        self.assertEqual([hosts[0]] * RESHAPE_WRITES + [hosts[1]] * 2,
                         [row.split()[0] for row in rows])
        self.assertConverged(hosts[:1], wanted)

        # check reports the interrupted and untouched hosts, not the done
        # one; a rerun finishes them.
        check = self.openstack('nvlink', 'check', '--topology', topology,
                               '-f', 'value', '-c', 'host')
        self.assertEqual(2, check.code, check.stderr)
        self.assertEqual(set(hosts[1:]), set(check.stdout.split()))
        rerun = self.openstack('nvlink', 'reshape', '--topology', topology)
        self.assertEqual(0, rerun.code, rerun.stderr)
        self.assertConverged(hosts, wanted)
        check = self.openstack('nvlink', 'check', '--topology', topology)
        self.assertEqual(0, check.code, check.stderr)

    def test_sigterm_while_placement_hangs(self):
        hosts = self.hosts(2)
        faults.seed(self.upstream, hosts)
        topology = self.topology(hosts)
        wanted = self.reference()
        held = threading.Semaphore(0)

        def rule(request):
            if not provider_write(request):
                return fault_proxy.PASS
            held.release()
            return fault_proxy.HOLD
        self.proxy.rule = rule
        process = self.start('nvlink', 'reshape', '--topology', topology,
                             '--request-timeout', '3600')
        # Both hosts' first writes are held (two workers of the default 8).
        self.assertTrue(held.acquire(timeout=60))
        self.assertTrue(held.acquire(timeout=60))
        process.send_signal(signal.SIGTERM)
        # Acted on at once, not after the held requests' hour-long
        # timeout: a process still waiting fails the test here.
        out, err = process.communicate(timeout=120)
        self.proxy.rule = lambda request: fault_proxy.PASS
        self.assertEqual(143, process.returncode, err)
        self.assertEqual(
            'interrupted by SIGTERM: 0 hosts done, 2 interrupted (%s: 0 of '
            '%d writes, 1 unanswered, %s: 0 of %d writes, 1 unanswered), 0 '
            'untouched; rerun `openstack nvlink reshape` to finish; '
            '`openstack nvlink check` shows the tree'
            % (hosts[0], RESHAPE_WRITES, hosts[1], RESHAPE_WRITES),
            self.summary(err))
        self.assertEqual(2, len(self.writes()))
        # The held writes were committed: the rerun adopts their groups.
        rerun = self.openstack('nvlink', 'reshape', '--topology', topology)
        self.assertEqual(0, rerun.code, rerun.stderr)
        self.assertConverged(hosts, wanted)

    def test_the_first_of_two_signals_decides(self):
        # SIGINT, then SIGTERM while the run still waits for the held
        # write: the stop is SIGINT's (exit 130, its name), the second
        # signal changes nothing and ends nothing early.
        hosts = self.hosts(2)
        faults.seed(self.upstream, hosts)
        topology = self.topology(hosts)
        held = threading.Semaphore(0)

        def rule(request):
            if not provider_write(request):
                return fault_proxy.PASS
            held.release()
            return fault_proxy.HOLD
        self.proxy.rule = rule
        process = self.start('nvlink', 'reshape', '--topology', topology,
                             '--request-timeout', '60')
        self.assertTrue(held.acquire(timeout=60))
        self.assertTrue(held.acquire(timeout=60))
        process.send_signal(signal.SIGINT)
        # Within the grace the first signal gives the held writes.
        time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
        self.proxy.rule = lambda request: fault_proxy.PASS
        self.assertEqual(130, process.returncode, err)
        self.assertTrue(self.summary(err).startswith(
            'interrupted by SIGINT: 0 hosts done, 2 interrupted'), err)
        self.assertNotIn('Traceback', err)
        self.assertEqual(2, len(self.writes()))


class TestFlattenInterrupted(SignalTestCase):

    def test_sigint_stops_flatten(self):
        hosts = self.hosts(3)
        faults.seed(self.upstream, hosts)
        original = faults.shape(self.upstream, hosts[0]).copy()
        topology = self.topology(hosts)
        reshape = self.openstack('nvlink', 'reshape', '--topology', topology)
        self.assertEqual(0, reshape.code, reshape.stderr)
        del self.proxy.log[:]
        process = self.start('nvlink', 'flatten', '--workers', '1',
                             *[arg for h in hosts for arg in ('--host', h)])
        self.signal_at(process, FLATTEN_WRITES + 3, signal.SIGINT)
        out, err = process.communicate(timeout=120)
        self.proxy.rule = lambda request: fault_proxy.PASS
        self.assertEqual(130, process.returncode, err)
        self.assertEqual(
            'interrupted by SIGINT: 1 host done (%s), 1 interrupted (%s: 3 '
            'of %d writes), 1 untouched (%s); rerun `openstack nvlink '
            'flatten` to finish; `openstack nvlink check` shows the tree'
            % (hosts[0], hosts[1], FLATTEN_WRITES, hosts[2]),
            self.summary(err))
        self.assertEqual(FLATTEN_WRITES + 3, len(self.writes()))
        self.assertEqual(original, faults.shape(self.upstream, hosts[0]))
        rerun = self.openstack('nvlink', 'flatten', '--all')
        self.assertEqual(0, rerun.code, rerun.stderr)
        for host in hosts:
            self.assertEqual(original, faults.shape(self.upstream, host),
                             host)


class TestSnapshotInterrupted(SignalTestCase):

    def test_sigint_leaves_no_file(self):
        hosts = self.hosts(3)
        faults.seed(self.upstream, hosts)
        output = os.path.join(self.tmp, 'out', 'snap.json')
        os.mkdir(os.path.dirname(output))
        process = self.start('nvlink', 'snapshot', '-o', output,
                             *[arg for h in hosts for arg in ('--host', h)])
        self.signal_at(process, 3, signal.SIGINT,
                       counts=lambda request: request.method == 'GET')
        out, err = process.communicate(timeout=120)
        self.proxy.rule = lambda request: fault_proxy.PASS
        self.assertEqual(130, process.returncode, err)
        self.assertEqual('interrupted by SIGINT: no snapshot written (%s not '
                         'written); run the command again' % output,
                         self.summary(err))
        self.assertEqual([], os.listdir(os.path.dirname(output)))
        self.assertEqual('', out)
        # Requests stopped with the signal: the one in flight and at most
        # one per other worker after it.
        gets = [r for r in self.proxy.log if r.method == 'GET']
        self.assertLess(len(gets), 3 + 8)

    def test_write_file_after_a_stop_writes_nothing(self):
        stop = threading.Event()
        stop.set()
        path = os.path.join(self.tmp, 'snap.json')
        with open(path, 'w') as f:
            f.write('old')
        document = snapshot.read_file(fbase.H100_SNAPSHOT)
        self.assertRaises(errors.Interrupted, snapshot.write_file, document,
                          path, stop)
        self.assertEqual(['snap.json'], os.listdir(self.tmp))
        with open(path) as f:
            self.assertEqual('old', f.read())

    def test_save_snapshot_after_a_stop_writes_nothing(self):
        stop = threading.Event()
        save = os.path.join(self.tmp, 'saved.json')

        def reshape_then_stop():
            with offline.offline(fbase.H100_SNAPSHOT, save, stop) as placed:
                topology = loader.load(fbase.H100_TOPOLOGY)
                run.run(placed.client, [
                    desired.from_topology(h) for h in topology.hosts.values()],
                    tables=offline.tables(placed.client))
                stop.set()
        self.assertRaises(errors.Interrupted, reshape_then_stop)
        self.assertEqual([], os.listdir(self.tmp))

    def test_sigint_stops_snapshot_load(self):
        document = snapshot.read_file(fbase.H100_SNAPSHOT)
        process = self.start('nvlink', 'snapshot', 'load',
                             fbase.H100_SNAPSHOT, '--allow-existing')
        self.signal_at(process, 3, signal.SIGINT)
        out, err = process.communicate(timeout=120)
        self.proxy.rule = lambda request: fault_proxy.PASS
        self.assertEqual(130, process.returncode, err)
        writes = [r for r in self.proxy.log
                  if r.method in fault_proxy.WRITES]
        self.assertEqual(
            'interrupted by SIGINT: part of %s loaded (%d writes sent); '
            'Placement holds part of the file: a second load is refused '
            'while any of it is there, so load into an empty Placement '
            'again' % (fbase.H100_SNAPSHOT, len(writes)), self.summary(err))
        # Three provider writes, after the resource classes and traits.
        self.assertEqual(3, len(self.writes()))
        listed = {rp['uuid'] for rp in self.upstream.get(
            '/resource_providers')['resource_providers']}
        loaded = [rp for rp in document['resource_providers']
                  if rp['uuid'] in listed]
        self.assertLessEqual(len(loaded), 3)
        self.assertEqual(18, len(document['resource_providers']))


class TestFlavorApplyInterrupted(SignalTestCase):

    def test_sigint_while_reading_placement(self):
        hosts = self.hosts(1)
        faults.seed(self.upstream, hosts)
        process = self.start('nvlink', 'flavor', 'generate', '--topology',
                             self.topology(hosts), '--alias', 'h100',
                             '--apply')
        # The member-trait check reads Placement before any flavor write.
        self.signal_at(process, 1, signal.SIGINT,
                       counts=lambda request: request.method == 'GET')
        out, err = process.communicate(timeout=120)
        self.assertEqual(130, process.returncode, err)
        self.assertEqual('interrupted by SIGINT: nothing written; rerun '
                         '`openstack nvlink flavor generate --apply` to '
                         'finish', self.summary(err))
        self.assertEqual('', out.strip())     # an empty table
