"""nova-compute (report client + PCI translator) on the reshaped tree.

A running Nova 34 nova-compute with an HGX H100 board is reshaped live;
then Nova's own ``SchedulerReportClient`` and
``nova.compute.pci_placement_translator`` run as they do in production:
the periodic ``update_available_resource``, a provider cache refresh
(``[compute] resource_provider_association_refresh``, 300 s), a SIGHUP
cache reset and a service restart. None of them writes anything that
undoes the reshape.
"""

import json

from nova_tests import base

HOST = 'compute-01'
GPU = 'compute-01_0000:BB:00.0'          # module 5, pair compute-01 -c
PAIR = 'compute-01_nvlink-group-of-2-c'


class TestComputeKeepsTree(base.NovaTestCase):

    def setUp(self):
        super().setUp()
        self.start_board(HOST)
        self.reshape([HOST])
        self.assertEqual((0, []), self.check([HOST]))
        self.reshaped = self.state()

    def age_provider_cache(self, seconds=301):
        """The report client's cache as it is ``seconds`` later.

        What ``_associations_stale`` compares with ``[compute]
        resource_provider_association_refresh`` is the time each provider
        was last read; moving those back is the clock moving on.
        """
        client = self.computes[HOST].manager.rt.reportclient
        for uuid in client._association_refresh_time:
            client._association_refresh_time[uuid] -= seconds

    def test_periodic_refresh_sighup_and_restart_keep_the_tree(self):
        steps = [
            ('periodic', self._run_periodics),
            ('periodic again', self._run_periodics),
            ('cache refresh after 300 s', lambda: (
                self.age_provider_cache(), self._run_periodics())),
            ('SIGHUP cache reset', lambda: (
                self.computes[HOST].manager.reset(), self._run_periodics())),
            ('restart', lambda: (self.restart_compute_service(HOST),
                                 self._run_periodics())),
        ]
        for label, step in steps:
            step()
            self.assertEqual(json.loads(self.reshaped),
                             json.loads(self.state()), label)
            self.assertEqual((0, []), self.check([HOST]), label)
        self.assertEqual((PAIR, 'compute-01_nvlink-group-of-4-b'),
                         (self.providers()[GPU][1],
                          self.providers()[PAIR][1]))

    def test_pci_traits_are_rewritten_at_refresh_not_every_periodic(self):
        client = self.client()
        uuid = self.providers()[GPU][0]
        client.request('PUT', '/traits/CUSTOM_BY_HAND', version='1.6',
                       expect=(201, 204))
        current = client.get('/resource_providers/%s/traits' % uuid)
        client.request('PUT', '/resource_providers/%s/traits' % uuid,
                       version='1.6', body={
                           'resource_provider_generation':
                               current['resource_provider_generation'],
                           'traits': current['traits'] + ['CUSTOM_BY_HAND']})
        self._run_periodics()
        self._run_periodics()
        self.assertIn('CUSTOM_BY_HAND', self.traits(GPU))
        self.age_provider_cache()
        self._run_periodics()
        # Nova's own traits and the member traits of its device_spec.
        self.assertEqual(base.pci_traits(base.member_traits([HOST])[GPU]),
                         self.traits(GPU))
        # The group providers' traits are never touched.
        self.assertEqual(
            ['CUSTOM_OWNER_NVLINK_PLACEMENT', 'CUSTOM_PCI_GROUP2'],
            self.traits(PAIR))

    def test_operator_reserved_is_kept(self):
        client = self.client()
        uuid = self.providers()[GPU][0]
        inventory = client.get('/resource_providers/%s/inventories/%s'
                               % (uuid, base.RC))
        client.request('PUT', '/resource_providers/%s/inventories/%s'
                       % (uuid, base.RC), version='1.26', body={
                           'resource_provider_generation':
                               inventory['resource_provider_generation'],
                           'total': 1, 'max_unit': 1, 'reserved': 1})
        self._run_periodics()
        self.age_provider_cache()
        self._run_periodics()
        self.restart_compute_service(HOST)
        self._run_periodics()
        self.assertEqual(1, client.get(
            '/resource_providers/%s/inventories/%s' % (uuid, base.RC))[
                'reserved'])

    def test_device_spec_remove_and_restore_is_repaired_by_reshape(self):
        old_uuid = self.providers()[GPU][0]
        address = '0000:bb:00.0'
        configured = self.device_spec[HOST]
        # Only the other GPUs' per-address entries: no generic entry.
        self.device_spec[HOST] = [
            e for e in configured
            if json.loads(e).get('address') not in (None, address)]
        self.assertEqual(7, len(self.device_spec[HOST]))
        self.restart_compute_service(HOST)
        self.assertNotIn(GPU, self.providers())
        result = self.nvlink('check', '--topology', self.topology([HOST]))
        self.assertEqual(1, result.code)
        self.assertIn("compute-01: no Nova PCI resource provider named "
                      "'compute-01_0000:BB:00.0' (check the address, [pci] "
                      "device_spec and report_in_placement)", result.stderr)
        self.device_spec[HOST] = configured
        self.restart_compute_service(HOST)
        new_uuid, parent = self.providers()[GPU]
        self.assertNotEqual(old_uuid, new_uuid)
        self.assertEqual(HOST, parent)
        code, rows = self.check([HOST])
        self.assertEqual(2, code)
        # The row names its repair: reshape of that host (the topology
        # file is a fresh temporary one for each check).
        repair = rows[0].pop('repair')
        self.assertTrue(repair.startswith(
            'openstack nvlink reshape --topology '), repair)
        self.assertTrue(repair.endswith(' --host %s' % HOST), repair)
        self.assertEqual(
            [{'host': HOST, 'drift': 'wrong-parent',
              'action': 'move-provider', 'provider': GPU, 'parent': PAIR,
              'detail': '0000:bb:00.0 module 5'}], rows)
        self.reshape([HOST])
        self.assertEqual((0, []), self.check([HOST]))
        self.assertEqual((new_uuid, PAIR), self.providers()[GPU])
        self._run_periodics()
        self.assertEqual((0, []), self.check([HOST]))
