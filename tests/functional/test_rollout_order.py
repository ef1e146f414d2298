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
        self.assertAtComputeStep(self.apply(server, '--sizes', '1'))
        # The override skips the check.
        self.assertAtComputeStep(self.apply(
            server, '--skip-member-trait-check'))

    def assertAtComputeStep(self, result):
        # Past the check: the next step is the compute API, which this
        # cloud (Placement alone, admin_token) does not name. Creating
        # the flavors is tested against Nova in
        # nova_tests/test_flavor_apply.py.
        self.assertEqual(1, result.code, result.stderr)
        self.assertEqual(
            '--apply writes the flavors through the compute API, and this '
            'cloud names none: auth type admin_token has no service '
            'catalog and no compute_endpoint_override is set; nothing was '
            'written\n', result.stderr)

    def test_passes_once_nova_reports_them(self):
        self.assertAtComputeStep(self.apply(self.start(board=novalike.H100)))

    def test_partial_rollout_refuses_the_flavors_still_missing_traits(self):
        # The pair member traits are reported, the quad and whole-board
        # ones not yet (a nova-compute restarted with part of the
        # entries): the 4- and 8-GPU flavors are refused, and only they
        # are named.
        document = novalike.document({'compute-01': novalike.BOARD1,
                                      'compute-02': novalike.BOARD2})
        for rp in document['resource_providers']:
            rp['traits'] = [t for t in rp['traits']
                            if not t.startswith(('CUSTOM_PCI_GROUP4_',
                                                 'CUSTOM_PCI_GROUP8_'))]
        server = placement_server.PlacementServer(snapshot=document).start()
        self.addCleanup(server.stop)
        result = self.apply(server)
        self.assertEqual(1, result.code, result.stderr)
        refused = [line for line in result.stderr.splitlines()
                   if 'requires member traits' in line]
        self.assertEqual([
            'gpu.h100.4x requires member traits no resource provider in '
            'Placement has yet: CUSTOM_PCI_GROUP4_MEMBER0, '
            'CUSTOM_PCI_GROUP4_MEMBER1, CUSTOM_PCI_GROUP4_MEMBER2, '
            'CUSTOM_PCI_GROUP4_MEMBER3',
            'gpu.h100.8x requires member traits no resource provider in '
            'Placement has yet: %s' % ', '.join(
                'CUSTOM_PCI_GROUP8_MEMBER%d' % i for i in range(8))],
            refused)
        # With the 2-GPU flavor alone nothing is missing.
        self.assertAtComputeStep(self.apply(server, '--sizes', '2'))

    def test_skip_option_goes_with_apply(self):
        result = cli.run(self, 'nvlink', 'flavor', 'generate', '--topology',
                         fbase.H100_TOPOLOGY, '--alias', 'h100',
                         '--skip-member-trait-check')
        self.assertEqual(3, result.code)
        self.assertIn('--skip-member-trait-check goes with --apply',
                      result.stderr)
