"""The candidate checker on hand-made answers.

The functional tests run it on real Placement answers; these cover what a
correct Placement never returns (cross-host sets, used GPUs, GPUs the
topology does not know), so every branch of the judgement is exercised.
"""

import socket

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from oslotest import base

from nvlink_placement import errors
from nvlink_placement.flavors import generate
from nvlink_placement.flavors import inputs
from nvlink_placement.flavors import judge
from nvlink_placement.flavors import request
from nvlink_placement.flavors import verify
from nvlink_placement.placement import client as pc
from tests.unit.flavors import helpers

RC = 'CUSTOM_PCI_10DE_2330'
HOSTS = helpers.hosts(**{'compute-01': helpers.h100_host()})
CN = 'cn-uuid'


def gpu_uuid(module):
    return 'gpu-%d' % module


def providers():
    found = {CN: ('compute-01', CN), 'cn9': ('other', 'cn9'),
             'g9': ('other_0000:01:00.0', 'cn9'),
             'gff': ('compute-01_0000:FF:00.0', CN)}
    for address, module in helpers.H100_MAP.items():
        found[gpu_uuid(module)] = ('compute-01_' + address.upper(), CN)
    return found


def candidate(*gpus, **amounts):
    allocations = {CN: {'resources': {'VCPU': 32}}}
    for gpu in gpus:
        allocations[gpu] = {'resources': {RC: amounts.get(gpu, 1)}}
    return {'allocations': allocations}


def summaries(used=()):
    found = {u: {'resources': {RC: {'capacity': 1, 'used': 0}}}
             for u in providers() if u.startswith('g')}
    for u in used:
        found[u]['resources'][RC]['used'] = 1
    return found


def pair_request(limit=1000):
    spec = [f for f in generate.generate(HOSTS, 'h100').flavors
            if f.size == 2][0]
    return request.build(inputs.flavor_from_dict(spec.as_dict()),
                         {'h100': request.Alias('h100', RC)}, limit)


class TestCheck(base.BaseTestCase):

    def check(self, requests, free=(), eligible=None, used=(), limit=1000):
        body = {'allocation_requests': requests,
                'provider_summaries': summaries(used)}
        return judge.check(pair_request(limit), HOSTS, body, providers(),
                           set(free), eligible)

    def test_valid_and_crossing_pairs(self):
        result = self.check([candidate(gpu_uuid(1), gpu_uuid(3)),
                             candidate(gpu_uuid(3), gpu_uuid(1)),
                             candidate(gpu_uuid(1), gpu_uuid(2))])
        host = result.hosts[0]
        self.assertEqual({helpers.by_module(1, 3)}, host.valid)
        self.assertEqual({helpers.by_module(1, 2): (
            'not one NVLink domain of 2: 0000:19:00.0 in '
            'compute-01_nvlink-group-of-2-b; 0000:4c:00.0 in '
            'compute-01_nvlink-group-of-2-a')}, host.invalid)
        # Three candidates, two distinct sets: one duplicate.
        self.assertEqual([(
            'gpu.h100.2x', 'compute-01', 3, 1, 1, 0, 2, 1,
            'group_policy=none&limit=1000'
            '&required_h100-0=CUSTOM_PCI_GROUP2_MEMBER0,OWNER_NOVA'
            '&required_h100-1=CUSTOM_PCI_GROUP2_MEMBER1,OWNER_NOVA'
            '&required_nvl2=CUSTOM_PCI_GROUP2&resources=DISK_GB:100,'
            'MEMORY_MB:262144,VCPU:32&resources_h100-0='
            'CUSTOM_PCI_10DE_2330:1&resources_h100-1=CUSTOM_PCI_10DE_2330:1'
            '&root_required=OWNER_NOVA,!COMPUTE_STATUS_DISABLED'
            '&same_subtree=_h100-0,_h100-1,_nvl2')], result.rows())
        self.assertFalse(result.ok)
        self.assertEqual(
            ['gpu.h100.2x on compute-01: invalid GPU set [0000:19:00.0, '
             '0000:4c:00.0]: not one NVLink domain of 2: 0000:19:00.0 in '
             'compute-01_nvlink-group-of-2-b; 0000:4c:00.0 in '
             'compute-01_nvlink-group-of-2-a'], result.problems)

    def test_what_placement_should_never_return(self):
        result = self.check([
            candidate(gpu_uuid(2), gpu_uuid(4)),
            candidate(gpu_uuid(6), **{gpu_uuid(6): 2}),
            candidate(gpu_uuid(5), 'gff'),
            candidate(gpu_uuid(5), 'g9'),
            {'allocations': {'cn9': {'resources': {'VCPU': 1}},
                             'g9': {'resources': {RC: 1}}}},
        ], used=[gpu_uuid(4)])
        self.assertEqual(['compute-01', 'compute-01,other', 'other'],
                         [h.host for h in result.hosts])
        self.assertEqual({
            helpers.by_module(2, 4):
                'GPU(s) 0000:3b:00.0 are reserved or in use',
            helpers.by_module(6):
                '2 unit(s) on 1 GPU(s), the flavor asks for one on each '
                'of 2',
            frozenset(['compute-01_0000:BB:00.0',
                       'compute-01_0000:FF:00.0']):
                'GPU provider(s) compute-01_0000:FF:00.0 are not GPUs of '
                'compute-01 in the topology'}, result.hosts[0].invalid)
        self.assertEqual(
            {frozenset(['compute-01_0000:BB:00.0', 'other_0000:01:00.0']):
             'spans hosts compute-01,other'}, result.hosts[1].invalid)
        self.assertEqual({frozenset(['other_0000:01:00.0']):
                          'host other is not in the topology'},
                         result.hosts[2].invalid)

    def test_provider_created_after_the_listing(self):
        result = self.check([{'allocations': {
            'new-uuid': {'resources': {RC: 1}}}}])
        self.assertEqual({frozenset(['new-uuid']):
                          'host new-uuid is not in the topology'},
                         result.hosts[1].invalid)

    def test_excluded_gpu(self):
        hosts = helpers.hosts(**{'compute-01': helpers.h100_host(
            details={7: {'excluded': 'vGPU in use'}})})
        body = {'allocation_requests': [candidate(gpu_uuid(5),
                                                  gpu_uuid(7))],
                'provider_summaries': summaries()}
        result = judge.check(pair_request(), hosts, body, providers(),
                             set(), None)
        self.assertEqual(['GPU(s) 0000:9b:00.0 are excluded from NVLink '
                          'groups (vGPU in use)'],
                         list(result.hosts[0].invalid.values()))

    def test_free_domains_never_offered(self):
        free = {gpu_uuid(m) for m in (1, 3, 5, 6, 7)}
        result = self.check([candidate(gpu_uuid(1), gpu_uuid(3))],
                            free=free)
        self.assertEqual({helpers.by_module(5, 7):
                          'compute-01_nvlink-group-of-2-c'},
                         result.hosts[0].missing)
        self.assertEqual(
            ['gpu.h100.2x on compute-01: free NVLink domain '
             'compute-01_nvlink-group-of-2-c [0000:9b:00.0, 0000:bb:00.0] '
             'is never offered'], result.problems)
        # A compute node without room for the flavor misses nothing.
        self.assertEqual({}, self.check([], free=free,
                                        eligible=set()).hosts[0].missing)

    def test_cut_at_the_limit(self):
        free = {gpu_uuid(m) for m in range(1, 9)}
        result = self.check([candidate(gpu_uuid(1), gpu_uuid(3))],
                            free=free, limit=1)
        self.assertTrue(result.ok)
        self.assertEqual({}, result.hosts[0].missing)
        self.assertEqual(
            ['gpu.h100.2x: the answer holds limit=1 candidates and is cut '
             'short: it reached 1 of the 1 hosts with a free 2-GPU domain, '
             'so Nova chooses among those alone; free domains no candidate '
             'offers are not checked'], result.warnings)
        self.assertEqual('gpu.h100.2x: 1 candidates, 1 distinct GPU sets, '
                         '0 duplicates; reached 1 of 1 hosts with a free '
                         'domain', result.summary())

    def test_cut_before_every_host_is_reached(self):
        # Two candidates of one host fill limit=2; the other host with a
        # free pair is never reached.
        hosts = helpers.hosts(**{'compute-01': helpers.h100_host(),
                                 'compute-02': helpers.h100_host()})
        found = providers()
        found['cn2'] = ('compute-02', 'cn2')
        for address, module in helpers.H100_MAP.items():
            found['h-%d' % module] = ('compute-02_' + address.upper(), 'cn2')
        free = {u for u in found if u.startswith(('gpu-', 'h-'))}
        body = {'allocation_requests': [
            candidate(gpu_uuid(1), gpu_uuid(3)),
            candidate(gpu_uuid(3), gpu_uuid(1))], 'provider_summaries': {
            u: {'resources': {RC: {'capacity': 1, 'used': 0}}}
            for u in free}}
        result = judge.check(pair_request(2), hosts, body, found, free,
                             None)
        self.assertEqual(
            ['gpu.h100.2x: the answer holds limit=2 candidates and is cut '
             'short: it reached 1 of the 2 hosts with a free 2-GPU domain, '
             'so Nova chooses among those alone (1 duplicates: flavors '
             'without member traits enumerate permutations of the same '
             'GPUs); free domains no candidate offers are not checked'],
            result.warnings)
        self.assertEqual([(2, 1, 1), (0, 0, 0)],
                         [(h.candidates, h.distinct, h.duplicates)
                          for h in result.hosts])

    def test_host_missing_in_placement(self):
        body = {'allocation_requests': [], 'provider_summaries': {}}
        result = judge.check(pair_request(), HOSTS, body, {}, set(), None)
        self.assertEqual([('gpu.h100.2x', 'compute-01', 0, 0, 0, 0)],
                         [r[:6] for r in result.rows()])
        # Nothing was proven there: a problem, not a warning.
        self.assertEqual([], result.warnings)
        self.assertFalse(result.ok)
        self.assertEqual(['gpu.h100.2x on compute-01: no match, nothing '
                          'proven: no compute node resource provider named '
                          'compute-01 in Placement (a snapshot or cloud of '
                          'other hosts? give --host to verify the topology '
                          'hosts it has)'], result.problems)


DGX1 = ['0000:%s:00.0' % b for b in ('06', '07', '0a', '0b', '85', '86',
                                     '89', '8a')]


class TestMeshCheck(base.BaseTestCase):
    """A DGX-1: two quad meshes; any pair inside a quad is a domain."""

    def setUp(self):
        super().setUp()
        self.hosts = helpers.hosts(dgx1={'board': 'dgx-1-v100', 'gpus': {
            a: i + 1 for i, a in enumerate(DGX1)}})
        self.providers = {'cn': ('dgx1', 'cn')}
        self.providers.update({'g%d' % i: ('dgx1_' + a.upper(), 'cn')
                               for i, a in enumerate(DGX1)})
        spec = [f for f in generate.generate(self.hosts, 'v100').flavors
                if f.size == 2][0]
        self.request = request.build(inputs.flavor_from_dict(
            spec.as_dict()), {'v100': request.Alias('v100', RC)})

    def check(self, *pairs, free=range(8)):
        body = {'allocation_requests': [
            {'allocations': {'g%d' % i: {'resources': {RC: 1}}
                             for i in pair}} for pair in pairs],
            'provider_summaries': {
                'g%d' % i: {'resources': {RC: {'capacity': 1, 'used': 0}}}
                for i in range(8)}}
        return judge.check(self.request, self.hosts, body, self.providers,
                           {'g%d' % i for i in free}, None).hosts[0]

    def test_any_pair_inside_a_quad(self):
        host = self.check((0, 3), (3, 0), (1, 2), (4, 7), (0, 4))
        self.assertEqual({frozenset([DGX1[0], DGX1[3]]),
                          frozenset([DGX1[1], DGX1[2]]),
                          frozenset([DGX1[4], DGX1[7]])}, host.valid)
        self.assertEqual({frozenset([DGX1[0], DGX1[4]]): (
            'not one NVLink domain of 2: 0000:06:00.0 in '
            'dgx1_nvlink-group-of-4-a; 0000:85:00.0 in '
            'dgx1_nvlink-group-of-4-b')}, host.invalid)
        self.assertEqual({}, host.missing)

    def test_a_mesh_is_missing_once(self):
        host = self.check((0, 1), free=(0, 1, 2, 3, 5, 6, 7))
        # Quad a offered a pair; quad b has 3 free GPUs and offered none.
        self.assertEqual({frozenset(DGX1[5:]):
                          'dgx1_nvlink-group-of-4-b (any 2)'}, host.missing)
        self.assertEqual(2, len(self.check().missing))
        # One free GPU cannot hold a pair: nothing is missing there.
        self.assertEqual({}, self.check((0, 1), free=(0, 1, 4)).missing)


class TestTimeout(base.BaseTestCase):
    """A live Placement that never answers: the query gives up, clearly."""

    def test_silent_server(self):
        server = socket.socket()
        self.addCleanup(server.close)
        server.bind(('127.0.0.1', 0))
        server.listen(1)   # connections complete; nothing is ever sent
        adapter = ks_adapter.Adapter(
            session=ks_session.Session(), service_type='placement',
            endpoint_override='http://127.0.0.1:%d' % server.getsockname()[1])
        client = verify.with_timeout(pc.PlacementClient(adapter), seconds=1)
        exc = self.assertRaises(errors.NvlinkError, client.get,
                                pair_request().url, version='1.36')
        self.assertEqual('Placement did not answer GET /allocation_candidates '
                         'within 1 s. ' + verify.WIDE_TREE_HINT, str(exc))
