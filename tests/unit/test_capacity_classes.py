"""Which resource class ``check``'s capacity metrics give each GPU.

Pure: a hand-made provider tree, the free listing as ``check`` reads it
(GPU uuid -> the class it was listed free for) and what allocations were
read; no request.
"""

from oslotest import base

from nvlink_placement.placement import naming
from nvlink_placement.placement import state as state_mod
from nvlink_placement.plan import actions as act
from nvlink_placement.report import capacity

X, Y = 'CUSTOM_PCI_10DE_2330', 'CUSTOM_PCI_10DE_1DB5'


def _tree(host, addresses, group=False):
    """A compute node ``host`` with GPUs, under one 2-GPU group or not."""
    root = state_mod.Provider(host, host, None, host, 1)
    providers = [root]
    parent = host
    if group:
        name = '%s_nvlink-group-of-2-a' % host
        providers.append(state_mod.Provider(
            name, name, host, host, 1,
            traits={naming.OWNER_TRAIT, 'CUSTOM_PCI_GROUP2'}))
        parent = name
    for address in addresses:
        name = '%s_%s' % (host, address)
        providers.append(state_mod.Provider(name, name, parent, host, 1))
    return providers


def _key(name, rc, size=None):
    return (name, rc) if size is None else (name, rc, size)


def _flat(cloud):
    out = {}
    for name in ('gpus', 'free_gpus', 'free_domains', 'stranded_gpus',
                 'split_instances'):
        for key, value in getattr(cloud, name).items():
            out[(name,) + (key if isinstance(key, tuple) else (key,))] = value
    return out


class TestClasses(base.BaseTestCase):

    def state(self, *trees, free=(), allocations=None):
        state = state_mod.State([p for t in trees for p in t], ())
        state.free = dict(free)
        state.allocations = allocations or {}
        return state

    def test_host_and_cloud_class_stand_in_for_taken_gpus(self):
        # h1: a pair, one GPU listed free (class X), one taken; h2 full
        # and never read: both take X, the one class of the cloud.
        state = self.state(
            _tree('h1', ['0000:01:00.0', '0000:02:00.0'], group=True),
            _tree('h2', ['0000:01:00.0', '0000:02:00.0']),
            free={'h1_0000:01:00.0': X})
        self.assertEqual({
            ('gpus', X): 4, ('free_gpus', X): 1,
            ('free_domains', X, 1): 1, ('free_domains', X, 2): 0,
            ('stranded_gpus', X, 1): 0, ('stranded_gpus', X, 2): 1,
            ('split_instances', X, 2): 0,
        }, _flat(capacity.cloud(state, ['h1', 'h2'])))

    def test_allocation_read_names_the_class(self):
        # Two classes in the cloud: a taken host gets its class from an
        # allocation read on one of its GPUs, else "unknown".
        trees = (_tree('h1', ['0000:01:00.0']),
                 _tree('h2', ['0000:01:00.0', '0000:02:00.0']),
                 _tree('h3', ['0000:01:00.0', '0000:02:00.0']))
        free = {'h1_0000:01:00.0': X, 'h2_0000:01:00.0': Y}
        state = self.state(*trees, free=free)
        got = _flat(capacity.cloud(state, ['h1', 'h2', 'h3']))
        self.assertEqual(2, got[('gpus', capacity.UNKNOWN_CLASS)])
        self.assertEqual(0, got[('free_gpus', capacity.UNKNOWN_CLASS)])
        self.assertEqual(2, got[('gpus', Y)])
        state = self.state(*trees, free=free, allocations={
            'h3_0000:02:00.0': {'c1': {Y: 1, 'VCPU': 4}}})
        got = _flat(capacity.cloud(state, ['h1', 'h2', 'h3']))
        self.assertEqual({X: 1, Y: 4}, {k[1]: v for k, v in got.items()
                                        if k[0] == 'gpus'})
        # h2 has one GPU free: no whole host of 2 (h3 none), one stranded.
        self.assertEqual((0, 1), (got[('free_domains', Y, 2)],
                                  got[('stranded_gpus', Y, 2)]))

    def test_split_instances_by_class_and_size(self):
        state = self.state(
            _tree('h1', ['0000:01:00.0', '0000:02:00.0', '0000:03:00.0']),
            free={'h1_0000:03:00.0': X})
        split = act.Action('h1', '', 'h1_0000:01:00.0, h1_0000:02:00.0',
                           drift=act.SPLIT_ALLOCATION, consumer='c')
        other = act.Action('h1', act.MOVE_PROVIDER, 'h1_0000:03:00.0',
                           drift=act.WRONG_PARENT)
        got = capacity.cloud(state, ['h1', 'not-in-placement'],
                             [split, other])
        self.assertEqual({(X, 2): 1, (X, 3): 0}, got.split_instances)
