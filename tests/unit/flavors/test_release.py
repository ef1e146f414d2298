"""The query shape per Nova release, and what a live cloud tells."""

from oslotest import base

from nvlink_placement import errors
from nvlink_placement.flavors import release


class TestRelease(base.BaseTestCase):

    def test_parse(self):
        self.assertEqual([34, 33, 27],
                         [release.parse_release(t)
                          for t in ('34', '33.0.2', ' 27.1 ')])
        exc = self.assertRaises(errors.NvlinkError, release.parse_release,
                                '26.0.0')
        self.assertEqual(
            'Nova 26 does not schedule PCI devices through Placement '
            '([filter_scheduler] pci_in_placement is new in Nova 27), so no '
            'flavor can ask for an NVLink domain there', str(exc))
        self.assertRaises(errors.NvlinkError, release.parse_release,
                          'dalmatian')

    def test_release_for_microversion(self):
        cases = {(2, 104): (34, 'Nova 34'), (2, 103): (33, 'Nova 33'),
                 (2, 100): (32, 'Nova 31 or 32'),
                 (2, 95): (28, 'Nova 27 or 28'),
                 (2, 101): (32, 'Nova 31 or 32'),
                 (2, 110): (34, 'Nova 34 or newer'),
                 (2, 93): (None, 'older than Nova 27')}
        for version, expected in cases.items():
            self.assertEqual(expected,
                             release.release_for_microversion(version))
        self.assertEqual((2, 104), release.parse_microversion('2.104'))
        self.assertIsNone(release.parse_microversion('latest'))

    def test_choose_offline(self):
        self.assertEqual(release.NovaQuery(34, True, 'default Nova 34'),
                         release.choose())
        self.assertEqual(
            release.NovaQuery(33, False, '--nova-release 33'),
            release.choose(33))
        self.assertEqual(
            release.NovaQuery(33, True, '--nova-release 33; --owner-filter '
                              'on'), release.choose(33, release.ON))

    def test_choose_live(self):
        nova = release.choose(microversion=(2, 104), nodes_without_owner=[])
        self.assertEqual(
            'Nova 34 query, owner filter on (compute API maximum '
            'microversion 2.104: Nova 34; every compute node provider '
            'carries OWNER_NOVA)', nova.describe())
        self.assertEqual((('OWNER_NOVA',), ('COMPUTE_STATUS_DISABLED',),
                          ('OWNER_NOVA',)),
                         (nova.root_required, nova.root_forbidden,
                          nova.gpu_required))
        old = release.choose(microversion=(2, 104), nodes_without_owner=[
            'cn%d' % i for i in range(7)])
        self.assertFalse(old.owner_filter)
        self.assertEqual(((), ()), (old.root_required, old.gpu_required))
        self.assertIn('compute node provider(s) cn0, cn1, cn2, cn3, cn4 and '
                      '2 more lack OWNER_NOVA: some nova-compute is older '
                      'than service version 73', old.source)
        self.assertFalse(release.choose(
            microversion=(2, 100), nodes_without_owner=[]).owner_filter)
        exc = self.assertRaises(errors.NvlinkError, release.choose,
                                microversion=(2, 79))
        self.assertIn('the compute API stops at microversion 2.79 (older '
                      'than Nova 27)', str(exc))
