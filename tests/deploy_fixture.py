"""The deployment layouts' test topology and what Nova must make of it.

``tests/fixtures/misc/deploy-mixed.yaml``: bridge pairs, two HGX H100
hosts, GPUs listed out of PCI order, GPUs excluded (vGPU, MIG). The member
traits below are written out by hand from the boards' NVLink domains
(HGX H100 Fabric Manager partitions: pairs of modules (1,3) (2,4) (5,7)
(6,8), quads 1-4 and 5-8; member ``i`` is the ``i``-th GPU by module id,
by PCI address without module ids; the whole host's usable GPUs make one
more size), not computed by the code under test.
"""

import os

TOPOLOGY = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        'fixtures', 'misc', 'deploy-mixed.yaml')
VENDOR_ID, PRODUCT_ID = '10de', '2330'
HOSTS = ('pairs-01', 'hgx-01', 'hgx-02', 'mig-01')


def _traits(*pairs):
    return tuple(sorted('CUSTOM_PCI_GROUP%d_MEMBER%d' % p for p in pairs))


#: host -> usable GPU address -> the member traits Nova must give it.
MEMBER_TRAITS = {
    'pairs-01': {
        '0000:41:00.0': _traits((2, 0), (4, 0)),
        '0000:61:00.0': _traits((2, 1), (4, 1)),
        '0000:c1:00.0': _traits((2, 0), (4, 2)),
        '0000:e1:00.0': _traits((2, 1), (4, 3)),
    },
    # Module 5 excluded: quad 5-8 and pair (5,7) are gone; 7 usable GPUs.
    'hgx-01': {
        '0000:4c:00.0': _traits((2, 0), (4, 0), (7, 0)),   # module 1
        '0000:19:00.0': _traits((2, 0), (4, 1), (7, 1)),   # module 2
        '0000:5d:00.0': _traits((2, 1), (4, 2), (7, 2)),   # module 3
        '0000:3b:00.0': _traits((2, 1), (4, 3), (7, 3)),   # module 4
        '0000:cb:00.0': _traits((2, 0), (7, 4)),           # module 6
        '0000:9b:00.0': _traits((7, 5)),                   # module 7
        '0000:db:00.0': _traits((2, 1), (7, 6)),           # module 8
    },
    'hgx-02': {
        '0000:4c:00.0': _traits((2, 0), (4, 0), (8, 0)),
        '0000:19:00.0': _traits((2, 0), (4, 1), (8, 1)),
        '0000:5d:00.0': _traits((2, 1), (4, 2), (8, 2)),
        '0000:3b:00.0': _traits((2, 1), (4, 3), (8, 3)),
        '0000:bb:00.0': _traits((2, 0), (4, 0), (8, 4)),
        '0000:cb:00.0': _traits((2, 0), (4, 1), (8, 5)),
        '0000:9b:00.0': _traits((2, 1), (4, 2), (8, 6)),
        '0000:db:00.0': _traits((2, 1), (4, 3), (8, 7)),
    },
    'mig-01': {'0000:21:00.0': ()},
}
#: host -> the GPUs its topology excludes: no device_spec entry may match.
EXCLUDED = {'hgx-01': ('0000:bb:00.0',), 'mig-01': ('0000:a1:00.0',)}
