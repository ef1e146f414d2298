"""Request counts, crash/failure at every write, and a concurrent writer."""

import threading

from nvlink_placement import errors
from nvlink_placement.placement import client as pc
from nvlink_placement.plan import actions as act
from nvlink_placement.plan import desired
from nvlink_placement.plan import run
from nvlink_placement.topology import loader
from tests.functional import base
from tests.functional import test_day2
from tests import novalike

WRITES = ('POST', 'PUT', 'DELETE')


class Crash(Exception):
    """Stands for the process dying: not a Placement or user error."""


class FaultyClient(pc.PlacementClient):
    """The real client over the same Placement, failing at write ``k``.

    ``mode`` ``crash``: the process stops before write ``k`` is sent.
    ``lost``: write ``k`` reaches Placement, then the process stops (the
    answer is lost). ``error``: write ``k`` is answered with an HTTP 500
    without reaching Placement.
    """

    def __init__(self, real, k, mode):
        super().__init__(real.adapter, lock=real.lock)
        self.k, self.mode, self.writes = k, mode, 0

    def request(self, method, url, *args, **kwargs):
        if method in WRITES:
            self.writes += 1
            if self.writes == self.k:
                if self.mode == 'crash':
                    raise Crash(url)
                if self.mode == 'error':
                    raise errors.PlacementError('injected', status=500)
                super().request(method, url, *args, **kwargs)
                raise Crash(url)
        return super().request(method, url, *args, **kwargs)


def normalized(client, hosts):
    """Tree shape by names, without uuids (group uuids differ per run).

    ``{name: (parent name, traits, inventories, allocations)}`` with the
    host name replaced by ``HOST``.
    """
    rps = client.get('/resource_providers')['resource_providers']
    names = {rp['uuid']: rp['name'] for rp in rps}
    shape = {}
    for rp in rps:
        root = names[rp['root_provider_uuid']]
        if root not in hosts:
            continue
        traits = client.get('/resource_providers/%s/traits' % rp['uuid'])
        inv = client.get('/resource_providers/%s/inventories' % rp['uuid'])
        used = client.get('/resource_providers/%s/allocations' % rp['uuid'])
        shape[rp['name'].replace(root, 'HOST')] = (
            names.get(rp['parent_provider_uuid'], '').replace(root, 'HOST'),
            sorted(traits['traits']), inv['inventories'],
            used['allocations'])
    return shape


class TestRequestCounts(base.PlacementTestCase):

    def test_reads_do_not_grow_with_hosts(self):
        self.seed_example()
        topology = loader.load(base.H100_TOPOLOGY)
        hosts = [desired.from_topology(h) for h in topology.hosts.values()]
        self.client.requests.clear()
        result = run.run(self.client, hosts)
        # 3 traits, 12 groups created + traits set, 16 GPUs moved.
        # Reads: the listing and the custom traits (ours do not exist yet).
        self.assertEqual({'GET': 2, 'PUT': 3 + 12 + 16, 'POST': 12},
                         dict(self.client.requests))
        self.assertEqual(43, len(result.actions))
        self.client.requests.clear()
        self.assertEqual([], run.run(self.client, hosts,
                                     apply=False).actions)
        # listing, custom traits, owner, GROUP2, GROUP4: whatever the hosts.
        self.assertEqual({'GET': 5}, dict(self.client.requests))


class TestFaultInjection(base.PlacementTestCase):
    """Stop or fail at every write of a full reshape, then run again."""

    HOSTS = ('compute-01',)

    def reshape_host(self, client, host):
        doc = test_day2.h100_topology(health={'0000:19:00.0': 'unhealthy'},
                                      hosts=('compute-01',))
        doc['hosts'] = {host: doc['hosts']['compute-01']}
        topology = loader.parse(doc, base.H100_TOPOLOGY)
        return run.run(client, [desired.from_topology(topology.hosts[host])])

    def test_crash_before_each_write(self):
        self.every_write_index('crash')

    def test_crash_after_each_write(self):
        self.every_write_index('lost')

    def test_error_at_each_write(self):
        self.every_write_index('error')

    def every_write_index(self, mode):
        consumer = 'c0c0c0c0-0000-4000-8000-000000000000'
        names = novalike.seed_host(self.client, 'ref', novalike.BOARD1)
        novalike.allocate(self.client, consumer, {
            names['ref_0000:BB:00.0']: {novalike.GPU_RC: 1}})
        self.client.requests.clear()
        clean = self.reshape_host(self.client, 'ref')
        total = sum(self.client.requests[m] for m in WRITES)
        # 4 traits (with the reservation marker) + 6 groups x 2 + 8 moves
        # + one set-reserved of two writes (marker, inventory).
        self.assertEqual(4 + 12 + 8 + 2, total)
        self.assertEqual(total - 1, len(clean.actions))
        expected = normalized(self.client, ['ref'])
        tried = 0
        # The traits exist now; a fresh host needs 22 writes.
        for k in range(1, total - 4 + 1):
            host = 'h-%s-%d' % (mode, k)
            names = novalike.seed_host(self.client, host,
                                       novalike.BOARD1)
            novalike.allocate(self.client, consumer.replace(
                'c0c0c0c0', '%08x' % (tried + 1)), {
                names['%s_0000:BB:00.0' % host]: {novalike.GPU_RC: 1}})
            faulty = FaultyClient(self.client, k, mode)
            try:
                result = self.reshape_host(faulty, host)
            except Crash:
                pass
            else:
                self.assertEqual('error', mode)
                self.assertEqual(1, len(result.failures))
            self.reshape_host(self.client, host)
            self.assertEqual([], self.reshape_host(self.client,
                                                   host).actions)
            got = normalized(self.client, [host])
            # Allocations differ only by consumer uuid.
            self.assertEqual(
                {n: v[:3] for n, v in expected.items()},
                {n: v[:3] for n, v in got.items()}, '%s %d' % (mode, k))
            self.assertEqual(
                [list(v[3].values()) for v in expected.values()],
                [list(v[3].values()) for v in got.values()])
            tried += 1
        self.assertEqual(22, tried)

    def test_trait_creation_interrupted(self):
        novalike.seed_host(self.client, 'compute-01', novalike.BOARD1)
        for k in (1, 2, 3):
            try:
                self.reshape_host(FaultyClient(self.client, k, 'crash'),
                                  'compute-01')
            except Crash:
                pass
        result = self.reshape_host(self.client, 'compute-01')
        self.assertEqual(1, len([a for a in result.actions
                                 if a.action == act.CREATE_TRAIT]))
        self.assertEqual([], self.reshape_host(self.client,
                                               'compute-01').actions)


class TestConcurrentNova(base.PlacementTestCase):
    """Nova keeps rewriting its PCI RPs' traits and inventories."""

    def test_converges(self):
        names = novalike.seed_host(self.client, 'compute-01',
                                   novalike.BOARD1)
        nova = pc.PlacementClient(self.client.adapter, lock=self.client.lock)
        stop = threading.Event()
        conflicts = []
        rounds = []

        def refresh():
            # nova-compute's update_available_resource: rewrite every PCI
            # RP's traits and inventory from its own view, generation-safe.
            while not stop.is_set():
                for name, uuid in names.items():
                    if name == 'compute-01':
                        continue
                    try:
                        t = nova.get('/resource_providers/%s/traits' % uuid)
                        nova.request('PUT', '/resource_providers/%s/traits'
                                     % uuid, version='1.6', body={
                                         'traits': novalike.PCI_TRAITS,
                                         'resource_provider_generation':
                                             t['resource_provider_generation']
                                     })
                        i = nova.get('/resource_providers/%s/inventories'
                                     % uuid)
                        nova.request('PUT', '/resource_providers/%s/'
                                     'inventories' % uuid, version='1.26',
                                     body=i)
                    except errors.PlacementError as exc:
                        conflicts.append(exc.code)
                rounds.append(1)

        writer = threading.Thread(target=refresh)
        writer.start()
        try:
            doc = test_day2.h100_topology(
                health={'0000:19:00.0': 'unhealthy',
                        '0000:3b:00.0': 'unhealthy'}, hosts=('compute-01',))
            topology = loader.parse(doc, base.H100_TOPOLOGY)
            wanted = [desired.from_topology(topology.hosts['compute-01'])]
            first = run.run(self.client, wanted)
            while len(rounds) < 2:
                stop.wait(0.05)
        finally:
            stop.set()
            writer.join()
        self.assertEqual([], first.failures)
        self.assertEqual([], run.run(self.client, wanted).actions)
        for gpu in ('0000:19:00.0', '0000:3B:00.0'):
            uuid = names['compute-01_%s' % gpu]
            inv = self.client.get('/resource_providers/%s/inventories'
                                  % uuid)['inventories'][novalike.GPU_RC]
            self.assertEqual(1, inv['reserved'])
            self.assertEqual(novalike.PCI_TRAITS, sorted(self.client.get(
                '/resource_providers/%s/traits' % uuid)['traits']))
        self.assertTrue(set(conflicts) <= {pc.CONCURRENT_UPDATE})
