"""Faults converge in one run: a real gunicorn Placement behind a proxy.

Each fault test reshapes several Nova-like hosts through
:class:`tests.fault_proxy.FaultProxy` with ``openstack nvlink reshape``
(in process) and checks: exit 0 in ONE run, each tree equal to a clean
run's, the instances' allocations untouched, no duplicate or orphan
provider. Interruptions (a run killed after any write) are in
``test_interrupted``; request counts on the embedded Placement are at the
end.
"""

import collections
import itertools
import json
import re
import threading

from nvlink_placement import errors
from nvlink_placement.plan import desired
from nvlink_placement.plan import run
from nvlink_placement.topology import loader
from tests import fault_proxy
from tests.functional import base
from tests.functional import faults
from tests import novalike

RP_PATH = re.compile(r'^/resource_providers/([0-9a-f-]{36})(/traits|'
                     r'/inventories)?$')
RACE_TRAIT = 'CUSTOM_SOMEONE_ELSE'
# Short windows where the test is not about the window itself.
FAST = ('--retry-window', '20', '--request-timeout', '10')


class FaultTestCase(faults.ProxyTestCase):

    _references = {}

    def expected(self, unhealthy=()):
        """A clean run's tree (one per class and health map)."""
        key = (type(self), tuple(unhealthy))
        if key not in self._references:
            self._references[key] = self.reference(unhealthy)
        return self._references[key]

    def reshape(self, hosts, *options, unhealthy=()):
        """``openstack nvlink reshape`` of ``hosts`` through the proxy."""
        return self.openstack('nvlink', 'reshape', '--topology',
                              self.topology(hosts, unhealthy), '-f', 'json',
                              *options)

    def converges(self, rule, *options, count=3):
        """Reshape ``count`` fresh hosts under ``rule`` in one run."""
        expected = self.expected()
        hosts = self.hosts(count)
        faults.seed(self.upstream, hosts)
        self.proxy.rule = rule
        result = self.reshape(hosts, *(options or FAST))
        self.assertEqual(0, result.code, result.stderr)
        # 6 groups created, 6 trait sets, 8 GPU moves per host (the clean
        # reference run created the traits).
        self.assertEqual(20 * count, len(json.loads(result.stdout)))
        self.assertConverged(hosts, expected)
        return result


class TestTransientFaults(FaultTestCase):

    def test_503_answers(self):
        result = self.converges(fault_proxy.every(
            3, fault_proxy.answer(503), methods=('GET', 'POST', 'PUT',
                                                 'DELETE')))
        answered = self.proxy.faults('answer')
        self.assertGreater(len(answered), 10)
        self.assertIn('GET', {r.method for r in answered})
        self.assertIn('rode out %d transient Placement failures (HTTP 503: '
                      '%d)' % (len(answered), len(answered)), result.stderr)

    def test_500_answers(self):
        self.converges(fault_proxy.every(3, fault_proxy.answer(500)))
        self.assertGreater(len(self.proxy.faults('answer')), 10)

    def test_answers_lost_after_commit(self):
        self.converges(fault_proxy.every(3, fault_proxy.DROP))
        dropped = self.proxy.faults('drop')
        # Placement committed them and the client never knew; the retry of
        # a committed create met "already exists" (409) and carried on.
        # (Hosts run in parallel: a retry can be dropped again.)
        self.assertEqual({'POST', 'PUT'}, {r.method for r in dropped})
        self.assertLessEqual({r.status for r in dropped}, {200, 409})
        created = [r for r in dropped if r.method == 'POST' and
                   r.status == 200]
        self.assertGreater(len(created), 2)
        self.assertGreaterEqual(
            len([r for r in self.proxy.log if r.method == 'POST' and
                 r.status == 409]), len(created))

    def test_requests_held_without_answer(self):
        self.converges(fault_proxy.every(4, fault_proxy.HOLD),
                       '--retry-window', '20', '--request-timeout', '1')
        held = self.proxy.faults('hold')
        self.assertGreater(len(held), 5)
        # Committed, then the client timed out and sent them again.
        self.assertLessEqual({r.status for r in held}, {200, 204, 409})
        self.assertIn(200, {r.status for r in held})

    def test_slow_server(self):
        # Every request is slow; every 5th write arrives at Placement only
        # after the client gave up on it and sent it again.
        slow = fault_proxy.every(5, fault_proxy.delay(1.5))

        def rule(request):
            fault = slow(request)
            return fault if fault.delay else fault_proxy.delay(0.02)
        self.converges(rule, '--retry-window', '20', '--request-timeout',
                       '1')
        # Placement got those writes twice: the late first try and the
        # second one; whichever came second was refused (stale generation,
        # name taken) or changed nothing.
        sent = collections.Counter((r.method, r.path) for r in self.proxy.log
                                   if r.method in fault_proxy.WRITES)
        self.assertGreater(len([k for k, n in sent.items() if n > 1]), 5)

    def test_gives_up_after_the_window(self):
        hosts = self.hosts(1)
        faults.seed(self.upstream, hosts)
        self.proxy.rule = lambda request: fault_proxy.answer(503)
        result = self.reshape(hosts, '--retry-window', '1')
        self.assertEqual(1, result.code)
        self.assertRegex(result.stderr, r'GET /resource_providers failed '
                         r'with HTTP 503 \(retried for \d+(\.\d)? s, '
                         r'--retry-window\)')
        self.assertNotIn('Traceback', result.stderr)

    def test_run_timeout_stops_and_the_next_run_continues(self):
        expected = self.expected()
        hosts = self.hosts(2)
        faults.seed(self.upstream, hosts)
        self.proxy.rule = lambda request: (
            fault_proxy.HOLD if request.is_write else fault_proxy.PASS)
        result = self.reshape(hosts, '--request-timeout', '0.5',
                              '--timeout', '3', '--workers', '1')
        self.assertEqual(1, result.code)
        self.assertIn('the run reached its --timeout of 3 s. Run the command '
                      'again: it continues where it stopped.', result.stderr)
        self.assertIn('2 hosts failed', result.stderr)
        self.proxy.rule = lambda request: fault_proxy.PASS
        result = self.reshape(hosts)
        self.assertEqual(0, result.code, result.stderr)
        self.assertConverged(hosts, expected)


class TestGenerationRace(FaultTestCase):
    """A competing write before each write of the tool.

    Another writer changes the provider between the tool's read and its
    write, once for every write the tool sends.
    """

    def test_race_on_every_kind_of_write(self):
        hosts = self.hosts(2)
        faults.seed(self.upstream, hosts)
        before = {h: faults.shape(self.upstream, h) for h in hosts}
        nova = self.proxy.upstream_client()
        raced = collections.Counter()
        seen = set()

        def rule(request):
            # The first try of each write; creates differ by their body.
            key = (request.method, request.path,
                   request.body if request.method == 'POST' else None)
            if request.is_write and key not in seen:
                seen.add(key)
                raced[compete(nova, request)] += 1
            return fault_proxy.PASS
        self.proxy.rule = rule
        unhealthy = (faults.UNHEALTHY,)
        new_traits = 4 - len(nova.get(
            '/traits?name=in:CUSTOM_OWNER_NVLINK_PLACEMENT,CUSTOM_PCI_GROUP2,'
            'CUSTOM_PCI_GROUP4,CUSTOM_NVLINK_RESERVED_0000_19_00_0',
            version='1.6')['traits'])
        result = self.reshape(hosts, *FAST, unhealthy=unhealthy)
        self.assertEqual(0, result.code, result.stderr)
        conflicts = collections.Counter(
            kind_of(r.method, r.path) for r in self.proxy.log
            if r.status == 409)
        # (Zero new traits when earlier tests of the class made them.)
        self.assertEqual(+collections.Counter({
            'create-trait': new_traits, 'create-provider': 12,
            'set-traits': 12, 'move-provider': 16, 'set-reserved': 2}),
            +raced)
        # Each race made the tool's write fail once, then it re-read.
        self.assertEqual({'create-provider': 12, 'set-traits': 12,
                          'set-reserved': 2}, dict(conflicts))

        seen.clear()
        raced.clear()
        del self.proxy.log[:]
        result = self.openstack('nvlink', 'flatten', '--host', hosts[0],
                                '--host', hosts[1], '-f', 'json', *FAST)
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual({'set-traits': 2, 'set-reserved': 2,
                          'move-provider': 16, 'delete-provider': 12},
                         dict(raced))
        # Releasing a reservation: the inventory, then the marker trait.
        self.assertEqual({'set-traits': 2, 'set-reserved': 2},
                         dict(collections.Counter(
                             kind_of(r.method, r.path) for r in
                             self.proxy.log if r.status == 409)))
        for host in hosts:
            self.assertEqual(before[host], faults.shape(self.upstream, host))
        self.proxy.rule = lambda request: fault_proxy.PASS
        expected = self.expected(unhealthy)
        self.assertEqual(0, self.reshape(hosts, unhealthy=unhealthy).code)
        self.assertConverged(hosts, expected)

    def test_name_taken_elsewhere_is_refused(self):
        hosts = self.hosts(1)
        faults.seed(self.upstream, hosts)
        nova = self.proxy.upstream_client()

        def rule(request):
            if request.method == 'POST':
                # Someone else takes the name, for a provider of their own
                # (a root, outside the compute node's tree).
                nova.request('POST', '/resource_providers', body={
                    'name': json.loads(request.body)['name']},
                    version='1.20')
                self.proxy.rule = lambda request: fault_proxy.PASS
            return fault_proxy.PASS
        self.proxy.rule = rule
        result = self.reshape(hosts, *FAST)
        self.assertEqual(1, result.code)
        self.assertIn('cannot create %s_nvlink-group-of-4-a' % hosts[0],
                      result.stderr)
        self.assertIn('not the one this tool meant to create', result.stderr)

    def test_concurrent_nova_compute(self):
        """nova-compute rewrites its PCI providers while the tool runs.

        Its own client, straight to Placement (no lock shared with the
        tool, which goes through the proxy). The first try of each tool
        write to a provider nova-compute rewrites is held until
        nova-compute has written that provider again: the tool's write
        carries a stale generation, Placement answers 409, the tool reads
        again and converges.
        """
        host, = self.hosts(1)
        names = faults.seed(self.upstream, [host])
        gpus = {uuid for name, uuid in names.items() if name != host}
        nova = self.proxy.upstream_client()
        stop = threading.Event()
        changed = threading.Condition()
        order = itertools.count()
        nova_writes = collections.defaultdict(list)   # uuid -> [order]
        tool_writes = []                               # [order]
        nova_conflicts = []
        held = set()
        unmet = []      # held writes nova-compute did not write in time

        def write(uuid, url, version, body):
            """PUT as nova-compute; the answer, or None when it lost."""
            try:
                answer = nova.request('PUT', url, version=version, body=body)
            except errors.PlacementError as exc:
                # Nova writes traits at 1.6: a 409 without a code.
                nova_conflicts.append((url, exc.status))
                return None
            with changed:
                nova_writes[uuid].append(next(order))
                changed.notify_all()
            return answer

        def refresh():
            # nova-compute's update_available_resource, generation-safe:
            # a trait of its own comes and goes on every PCI RP (each
            # write moves the generation on; Placement keeps it for a
            # write that changes nothing), then the inventory it read.
            nova.request('PUT', '/traits/%s' % RACE_TRAIT, version='1.6',
                         expect=(201, 204))
            while not stop.is_set():
                for uuid in sorted(gpus):
                    url = '/resource_providers/%s' % uuid
                    t = nova.get(url + '/traits', version='1.6')
                    added = write(uuid, url + '/traits', '1.6', {
                        'traits': novalike.PCI_TRAITS + [RACE_TRAIT],
                        'resource_provider_generation':
                            t['resource_provider_generation']})
                    while added is not None:
                        body = {'traits': novalike.PCI_TRAITS,
                                'resource_provider_generation':
                                    added['resource_provider_generation']}
                        if write(uuid, url + '/traits', '1.6', body):
                            break
                        # Lost to the tool: read again, take it away.
                        added = nova.get(url + '/traits', version='1.6')
                    write(uuid, url + '/inventories', '1.26',
                          nova.get(url + '/inventories'))

        def rule(request):
            match = RP_PATH.match(request.path.split('?')[0])
            uuid = match and match.group(2) and match.group(1)
            if request.is_write and uuid in gpus and (
                    request.method, request.path) not in held:
                held.add((request.method, request.path))
                with changed:
                    seen = len(nova_writes[uuid])
                    if not changed.wait_for(
                            lambda: len(nova_writes[uuid]) > seen, timeout=30):
                        unmet.append(request.path)
            if request.is_write:
                with changed:
                    tool_writes.append(next(order))
            return fault_proxy.PASS

        unhealthy = ('0000:19:00.0', '0000:3b:00.0')
        wanted = self.desired([host], unhealthy)
        self.proxy.rule = rule
        writer = threading.Thread(target=refresh)
        writer.start()
        try:
            first = run.run(self.proxy.client(retry_window=20,
                                              request_timeout=10), wanted)
        finally:
            stop.set()
            writer.join()
        self.assertEqual([], first.failures)
        self.assertEqual([], unmet)
        # The two reservations (inventory) were held, nova-compute wrote
        # in between: each met a 409 and was sent again.
        self.assertEqual(2, len(held))
        conflicts = [r for r in self.proxy.log if r.status == 409]
        self.assertEqual(
            {('PUT', '/resource_providers/%s/inventories'
              % novalike.pci_uuid(novalike.node_uuid(host), gpu))
             for gpu in unhealthy},
            {(r.method, r.path) for r in conflicts})
        self.assertGreaterEqual(len(conflicts), 2)
        # Writes interleaved: nova-compute wrote between the tool's first
        # and last write, to the providers the tool was changing.
        during = [n for uuid in gpus for n in nova_writes[uuid]
                  if tool_writes[0] < n < tool_writes[-1]]
        self.assertGreater(len(during), len(held))
        # nova-compute's own writes lost races too, and nothing else.
        self.assertLessEqual({status for _, status in nova_conflicts}, {409})
        self.assertEqual([], run.run(self.upstream, wanted).actions)
        for gpu in unhealthy:
            uuid = novalike.pci_uuid(novalike.node_uuid(host), gpu)
            inv = self.upstream.get('/resource_providers/%s/inventories'
                                    % uuid)['inventories'][novalike.GPU_RC]
            self.assertEqual(1, inv['reserved'])
            self.assertEqual(novalike.PCI_TRAITS, sorted(self.upstream.get(
                '/resource_providers/%s/traits' % uuid)['traits']))


def kind_of(method, path):
    """The plan action a request belongs to."""
    if path.startswith('/traits/'):
        return 'create-trait'
    if method == 'POST':
        return 'create-provider'
    if method == 'DELETE':
        return 'delete-provider'
    match = RP_PATH.match(path.split('?')[0])
    return {'/traits': 'set-traits', '/inventories': 'set-reserved',
            None: 'move-provider'}[match.group(2)]


def compete(nova, request):
    """Write what ``request`` is about, first; return its action kind."""
    kind = kind_of(request.method, request.path)
    if kind == 'create-trait':
        nova.request('PUT', request.path, version='1.6', expect=(201, 204))
    elif kind == 'create-provider':
        body = json.loads(request.body)
        nova.request('POST', '/resource_providers', version='1.20', body={
            'name': body['name'],
            'parent_provider_uuid': body['parent_provider_uuid']})
    else:
        # Another writer changes the provider and changes it back: its
        # generation moves on by two, its content stays.
        uuid = RP_PATH.match(request.path).group(1)
        url = '/resource_providers/%s/traits' % uuid
        body = nova.get(url, version='1.6')
        nova.request('PUT', '/traits/%s' % RACE_TRAIT, version='1.6',
                     expect=(201, 204))
        changed = nova.request('PUT', url, version='1.6', body={
            'traits': body['traits'] + [RACE_TRAIT],
            'resource_provider_generation':
                body['resource_provider_generation']})
        nova.request('PUT', url, version='1.6', body={
            'traits': body['traits'], 'resource_provider_generation':
                changed['resource_provider_generation']})
    return kind


class TestOutage(FaultTestCase):
    """Placement unreachable for 30 s in the middle of a run.

    The default retry window (60 s) rides it out. The one test that really
    waits.
    """

    def test_outage_of_30_seconds(self):
        expected = self.expected()
        hosts = self.hosts(3)
        faults.seed(self.upstream, hosts)
        writes = fault_proxy.every(10, fault_proxy.REFUSE)

        def rule(request):
            fault = writes(request)
            if fault.kind == 'refuse' and not self.proxy.outages:
                self.proxy.outage(30)
                return fault
            return fault_proxy.PASS
        self.proxy.rule = rule
        result = self.reshape(hosts)
        self.assertEqual(0, result.code, result.stderr)
        self.assertConverged(hosts, expected)
        (start, end), = self.proxy.outages
        self.assertIn('rode out', result.stderr)
        self.assertIn('no connection', result.stderr)
        # Writes went on after the outage.
        self.assertGreater(len([r for r in self.proxy.log
                                if r.fault == 'pass']), 20)


class TestThreadedSqlite(FaultTestCase):
    """gunicorn with several threads on SQLite.

    Concurrent writes make Placement answer HTTP 500 "database is locked".
    """

    THREADS = 4

    def test_database_locked_converges_in_one_run(self):
        result = self.converges(lambda request: fault_proxy.PASS,
                                '--workers', '8', *FAST, count=6)
        locked = [r for r in self.proxy.log if r.status == 500]
        # Placement's own answers, retried by the client: each write that
        # met "database is locked" was sent again until it went through.
        self.assertGreater(len(locked), 0)
        self.assertTrue(all('database is locked' in r.error for r in locked),
                        locked[:1])
        self.assertIn('rode out %d transient Placement failures (HTTP 500: '
                      '%d)' % (len(locked), len(locked)), result.stderr)


class TestRequestCounts(base.PlacementTestCase):

    def test_reads_do_not_grow_with_hosts(self):
        self.seed_example()
        topology = loader.load(base.H100_TOPOLOGY)
        hosts = [desired.from_topology(h) for h in topology.hosts.values()]
        self.client.requests.clear()
        result = run.run(self.client, hosts)
        # 3 traits, 12 groups created + traits set, 16 GPUs moved.
        # Reads: the listing and the custom traits (ours do not exist yet);
        # once written, the same five reads as a no-op run (the hosts
        # written, planned again: run.changed_under).
        self.assertEqual({'GET': 2 + 5, 'PUT': 3 + 12 + 16, 'POST': 12},
                         dict(self.client.requests))
        self.assertEqual(43, len(result.actions))
        self.client.requests.clear()
        self.assertEqual([], run.run(self.client, hosts,
                                     apply=False).actions)
        # listing, custom traits, owner, GROUP2, GROUP4: whatever the hosts.
        self.assertEqual({'GET': 5}, dict(self.client.requests))
        # check also looks for split allocations: the resource classes, the
        # free GPUs of the one GPU class (no GPU is in use here).
        self.client.requests.clear()
        self.assertEqual([], run.run(self.client, hosts, apply=False,
                                     allocations=run.ALL_HOSTS).findings)
        self.assertEqual({'GET': 7}, dict(self.client.requests))
