"""The Nova-like trees' member traits agree with what nova-config prints.

:data:`tests.novalike.BOARD_MEMBERS` is written out by hand; the trees of
the functional tests carry those traits. Here ``nova-config --ini`` of a
host of each board is read as nova-compute reads it (:mod:`tests.novaspec`,
first matching entry) and must give every GPU the same traits, so a
``nova-config`` that assigns others fails here and in every test on those
trees.
"""

import json
import os

import fixtures
from oslotest import base

from nvlink_placement.topology import loader
from tests.functional import base as fbase
from tests.functional import cli
from tests import novalike
from tests import novaspec

HOSTS = (
    # (topology, host, board, vendor id, product id)
    ('hgx-h100.yaml', 'compute-01', 'hgx-h100-8gpu', '10de', '2330'),
    ('hgx-h100.yaml', 'compute-02', 'hgx-h100-8gpu', '10de', '2330'),
    ('hgx-b200.yaml', 'compute-b200-01', 'hgx-b200-8gpu', '10de', '2901'),
    ('direct-nvlink.yaml', 'compute-h100x4-01', 'hgx-h100-4gpu', '10de',
     '2330'),
    ('direct-nvlink.yaml', 'dgx1-01', 'dgx-1-v100', '10de', '1db5'),
    (None, 'a100x16-01', 'hgx-a100-16gpu', '10de', '20b2'),
)
#: A 16-GPU board (no example has one): module i at bus 0x08 * i.
A100X16 = {'version': 1, 'hosts': {'a100x16-01': {
    'board': 'hgx-a100-16gpu',
    'gpus': {'0000:%02x:00.0' % (0x08 * i): i for i in range(1, 17)}}}}


class TestBoardMembers(base.BaseTestCase):

    def test_printed_config_gives_the_hand_written_traits(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        for name, host, board, vendor, product in HOSTS:
            if name is None:
                path = os.path.join(tmp, 'a100x16.yaml')
                with open(path, 'w') as f:
                    json.dump(A100X16, f)
            else:
                path = os.path.join(fbase.EXAMPLES, name)
            gpus = loader.load(path).hosts[host].gpus
            modules = {a: g.module_id for a, g in gpus.items()}
            result = cli.run(self, 'nvlink', 'nova-config', '--topology',
                             path, '--host', host, '--alias', 'a', '--ini',
                             '--vendor-id', vendor, '--product-id', product)
            self.assertEqual(0, result.code, result.stderr)
            found = novaspec.member_traits(
                novaspec.ini_values(result.stdout), modules,
                vendor_id=vendor, product_id=product)
            self.assertEqual(novalike.member_traits(modules, board), found,
                             host)
            self.assertEqual(len(modules), len(found), host)
