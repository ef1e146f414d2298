"""Nova 34's weighers and first-candidate rule, as modelled."""

import random

from oslotest import base

from nvlink_placement.simulate import choice


def summary(root, resources):
    return {'root_provider_uuid': root, 'resources': {
        rc: {'capacity': cap, 'used': used}
        for rc, (cap, used) in resources.items()}}


def answer():
    """Two hosts: A has 7 of 8 GPUs free, B all 8; A has less RAM free."""
    summaries = {
        'A': summary('A', {'VCPU': (896, 16), 'MEMORY_MB': (2000, 500),
                           'DISK_GB': (3500, 100)}),
        'B': summary('B', {'VCPU': (896, 0), 'MEMORY_MB': (2000, 0),
                           'DISK_GB': (3500, 0)}),
    }
    for host, used in (('A', 1), ('B', 0)):
        for i in range(8):
            summaries['%s%d' % (host, i)] = summary(
                host, {'RC': (1, 1 if i < used else 0)})
    requests = [{'allocations': {'B': {'resources': {'VCPU': 16}},
                                 'B3': {'resources': {'RC': 1}}}},
                {'allocations': {'A': {'resources': {'VCPU': 16}},
                                 'A5': {'resources': {'RC': 1}}}},
                {'allocations': {'A': {'resources': {'VCPU': 16}},
                                 'A1': {'resources': {'RC': 1}}}}]
    return {'allocation_requests': requests, 'provider_summaries': summaries}


class TestChoice(base.BaseTestCase):

    def test_host_states(self):
        hosts = choice.by_host(answer())
        self.assertEqual(['A', 'B'], [h.uuid for h in hosts])
        a, b = hosts
        self.assertEqual((1500, 880, 3400 * 1024, 7),
                         (a.free_ram_mb, a.free_vcpus, a.free_disk_mb,
                          a.free_pci))
        self.assertEqual(['A5', 'A1'], [
            sorted(c['allocations'])[1] for c in a.candidates])
        self.assertEqual(8, b.free_pci)

    def test_pci_weigher_stacks(self):
        a, b = choice.by_host(answer())
        weights = choice.weigh([a, b])
        # A: CPU 880/896 + disk 3400/3500 + PCI 1 + RAM 1500/2000.
        self.assertAlmostEqual(880 / 896. + 3400 / 3500. + 1 + 0.75,
                               weights[0])
        self.assertEqual(3.0, weights[1])
        self.assertGreater(weights[0], weights[1])
        ranked = choice.rank([a, b], {'A': 'a', 'B': 'b'})
        self.assertEqual(['A', 'B'], [h.uuid for h, _ in ranked])

    def test_one_host_weighs_zero(self):
        self.assertEqual([0.0], choice.weigh(choice.by_host(answer())[:1]))

    def tied(self, count):
        _, b = choice.by_host(answer())
        return [choice.HostState('uuid-%02d' % i, b.free_ram_mb,
                                 b.free_vcpus, b.free_disk_mb, b.free_pci,
                                 b.candidates) for i in range(count)]

    def test_ties_in_nova_host_set_order(self):
        hosts = self.tied(6)
        names = {h.uuid: 'compute-%02d' % i for i, h in enumerate(hosts)}
        first = [h.uuid for h, _ in choice.rank(hosts, names)]
        self.assertEqual(sorted(first), sorted(names))
        # Fixed for the process and the hosts: not drawn per request, and
        # not the order the answer listed them in.
        for order in (hosts[::-1], hosts[2:] + hosts[:2]):
            self.assertEqual(first, [h.uuid for h, _ in choice.rank(
                order, names)])

    def test_ties_shuffled(self):
        hosts = self.tied(3)
        names = {h.uuid: h.uuid for h in hosts}
        orders = {tuple(h.uuid for h, _ in choice.rank(
            hosts, names, shuffle=random.Random(seed))) for seed in range(40)}
        self.assertEqual(6, len(orders))

    def test_shuffle_keeps_the_best_first(self):
        a, b = choice.by_host(answer())
        names = {'A': 'a', 'B': 'b'}
        for seed in range(10):
            self.assertEqual(['A', 'B'], [h.uuid for h, _ in choice.rank(
                [b, a], names, shuffle=random.Random(seed))])

    def test_keep_filters_candidates(self):
        a, b = choice.by_host(answer())
        kept = choice.keep([a, b], lambda c: 'A1' in c['allocations'])
        self.assertEqual(['A'], [h.uuid for h in kept])
        self.assertEqual(1, len(kept[0].candidates))

    def test_claim_body(self):
        candidate = answer()['allocation_requests'][0]
        body = choice.claim_body(dict(candidate, mappings={'': ['B']}),
                                 'p', 'u')
        self.assertEqual({'allocations': candidate['allocations'],
                          'mappings': {'': ['B']}, 'project_id': 'p',
                          'user_id': 'u', 'consumer_generation': None}, body)
