"""``flavor generate --apply`` keeps the rollout order.

Member-trait flavors are refused while no resource provider of a real
Placement (gunicorn over HTTP) carries their member traits: created
before nova-compute writes them, they would find no host. The run with
the traits in place, and the override, reach the compute API (Nova:
nova_tests/test_flavor_apply.py).
"""

from oslotest import base

from tests.functional import base as fbase
from tests.functional import cli
from tests import novalike
from tests import placement_server


class TestRolloutOrder(base.BaseTestCase):

    def start(self, board):
        server = placement_server.PlacementServer(
            snapshot=novalike.document({'compute-01': novalike.BOARD1,
                                        'compute-02': novalike.BOARD2},
                                       board=board)).start()
        self.addCleanup(server.stop)
        return server

    def apply(self, server, *more):
        return cli.run(self, *server.cli_auth(), 'nvlink', 'flavor',
                       'generate', '--topology', fbase.H100_TOPOLOGY,
                       '--alias', 'h100', '--apply', '--dry-run', *more)

    def test_refused_before_nova_reports_member_traits(self):
        server = self.start(board=None)
        result = self.apply(server)
        self.assertEqual(1, result.code, result.stderr)
        for size, traits in ((2, 2), (4, 4), (8, 8)):
            self.assertIn(
                'gpu.h100.%dx requires member traits no resource provider '
                'in Placement has yet: %s' % (size, ', '.join(
                    'CUSTOM_PCI_GROUP%d_MEMBER%d' % (size, i)
                    for i in range(traits))), result.stderr)
        self.assertIn('wait until "openstack nvlink check" reports no '
                      'member-trait drift; reshape; then create the flavors. '
                      '--skip-member-trait-check creates them anyway; '
                      'nothing was written.', result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        # Only the 1-GPU flavor: no member traits, nothing to wait for.
        result = self.apply(server, '--sizes', '1')
        self.assertNotIn('member traits', result.stderr)

    def test_passes_once_nova_reports_them(self):
        server = self.start(board=novalike.H100)
        result = self.apply(server)
        # Past the check: the next step is the compute API, which this
        # cloud (Placement alone) does not have.
        self.assertNotIn('requires member traits', result.stderr)
        self.assertEqual(1, result.code)

    def test_skip_option_goes_with_apply(self):
        result = cli.run(self, 'nvlink', 'flavor', 'generate', '--topology',
                         fbase.H100_TOPOLOGY, '--alias', 'h100',
                         '--skip-member-trait-check')
        self.assertEqual(3, result.code)
        self.assertIn('--skip-member-trait-check goes with --apply',
                      result.stderr)
