"""What the simulator counts, judged on small crafted states.

Spanning: a server's GPUs that are one mesh of a direct-NVLink board are
one domain, like a fixed pair or quad of an NVSwitch board. Refusals: a
NoValidHost while some host had at least as many free GPUs as asked is
fragmentation, at exactly that many too.
"""

import os

from oslotest import base

from nvlink_placement import errors
from nvlink_placement.simulate import engine
from nvlink_placement.simulate import numa
from nvlink_placement.topology import loader

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..',
                        '..', '..', 'etc', 'examples')


def host(path, name):
    return loader.load(os.path.join(EXAMPLES, path)).hosts[name]


def by_module(h):
    return {gpu.module_id: a for a, gpu in h.gpus.items()}


def mirror(hosts, free, sizes=(1, 2, 4)):
    """A :class:`engine._Mirror` whose free GPUs are ``free``.

    :param free: dict host name -> module ids free on it.
    """
    providers, free_rps = {}, set()
    for h in hosts:
        providers[h.name] = 'node-%s' % h.name
        modules = by_module(h)
        for module, address in modules.items():
            rp = 'rp-%s-%s' % (h.name, address)
            providers[h.gpu_provider_name(address)] = rp
            if module in free.get(h.name, ()):
                free_rps.add(rp)
    return engine._Mirror(hosts, list(sizes), providers, free_rps)


class TestSpans(base.BaseTestCase):

    def test_mesh_gpus_are_one_domain(self):
        dgx1 = host('direct-nvlink.yaml', 'dgx1-01')
        modules = by_module(dgx1)
        # Any 2 or 4 GPUs of the quad mesh {1-4} are one domain.
        for pick in ((1, 4), (2, 3), (1, 2, 3, 4)):
            self.assertFalse(engine.spans(dgx1, [modules[m] for m in pick]),
                             pick)
        # GPUs of both meshes are not.
        for pick in ((1, 5), (1, 2, 3, 5), (4, 5, 6, 7)):
            self.assertTrue(engine.spans(dgx1, [modules[m] for m in pick]),
                            pick)

    def test_fixed_groups(self):
        h100 = host('hgx-h100.yaml', 'compute-01')
        modules = by_module(h100)
        # The board's pairs are {1,3}, {2,4}, {5,7}, {6,8}; quads 1-4, 5-8.
        self.assertFalse(engine.spans(h100, [modules[1], modules[3]]))
        self.assertTrue(engine.spans(h100, [modules[1], modules[2]]))
        self.assertFalse(engine.spans(h100, [modules[m] for m in (1, 2, 3,
                                                                  4)]))
        self.assertTrue(engine.spans(h100, [modules[m] for m in (1, 2, 3,
                                                                 5)]))
        self.assertFalse(engine.spans(h100, [modules[2]]))


class TestRefusal(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.hosts = [host('hgx-h100.yaml', 'compute-01'),
                      host('hgx-h100.yaml', 'compute-02')]

    def test_exactly_enough_scattered_gpus_is_fragmentation(self):
        # compute-01 has 4 free GPUs, one of each pair: no quad is free.
        state = mirror(self.hosts, {'compute-01': {1, 2, 5, 6},
                                    'compute-02': {7}})
        self.assertEqual(0, state.free_domains()[4])
        self.assertEqual(engine.FRAGMENTATION, engine.refusal(state, 4))
        self.assertEqual(engine.FRAGMENTATION, engine.refusal(state, 2))

    def test_fewer_free_gpus_than_asked_is_no_capacity(self):
        state = mirror(self.hosts, {'compute-01': {1, 2, 5},
                                    'compute-02': {7, 8}})
        self.assertEqual(engine.NO_CAPACITY, engine.refusal(state, 4))
        self.assertEqual(engine.FRAGMENTATION, engine.refusal(state, 3))

    def test_free_domains_count_meshes(self):
        dgx1 = host('direct-nvlink.yaml', 'dgx1-01')
        # Mesh {1-4} has 3 free GPUs: one free pair, no quad; {5-8} whole.
        state = mirror([dgx1], {'dgx1-01': {1, 2, 4, 5, 6, 7, 8}})
        self.assertEqual({2: 3, 4: 1}, state.free_domains())


class TestNuma(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.h100 = host('hgx-h100-numa.yaml', 'compute-02')
        self.modules = by_module(self.h100)

    def test_one_socket_only(self):
        # Modules 1-4 are on NUMA node 0, 5-8 on node 1.
        self.assertTrue(numa.accepts(self.h100, [self.modules[m] for m in
                                                 (1, 2, 3, 4)]))
        self.assertTrue(numa.accepts(self.h100, [self.modules[2],
                                                 self.modules[4]]))
        self.assertFalse(numa.accepts(self.h100, [self.modules[4],
                                                  self.modules[5]]))

    def test_unknown_node_is_refused(self):
        plain = host('hgx-h100.yaml', 'compute-01')
        self.assertFalse(numa.accepts(plain, list(plain.gpus)[:1]))

    def test_extra_specs_are_nova_configs(self):
        specs = numa.extra_specs([self.h100], [1, 2, 4])
        self.assertEqual({'hw:numa_nodes': '1',
                          'hw:pci_numa_affinity_policy': 'required'},
                         specs[4])
        self.assertTrue(all(numa.required(specs[s]) for s in (1, 2, 4)))

    def test_no_numa_data_is_an_error(self):
        plain = host('hgx-h100.yaml', 'compute-01')
        self.assertIn('needs the GPUs\' NUMA nodes', str(self.assertRaises(
            errors.NvlinkError, numa.extra_specs, [plain], [2])))
