"""What a nova-compute writes, and the example snapshot (Nova 34's).

Two nova-computes with the example's HGX H100 boards report to Placement;
``etc/examples/hgx-h100-snapshot.json`` must be exactly what they wrote
(``snapshot`` export of it), except for what depends on the machine or
the moment:

- uuids (Nova's are random; the example keeps its own, by name),
- compute node inventory ``total`` and ``max_unit`` (the example's are
  an HGX H100 server's: 224 vCPUs, 2 TiB RAM, 3.5 TB disk; Nova's fake
  libvirt host is small),
- allocations (the example holds one 1-GPU instance).

Compute node traits are what Nova 34's libvirt driver reports on Nova's
fake libvirt host, ``COMPUTE_NODE`` and ``OWNER_NOVA`` included (older
releases write no ``OWNER_NOVA``: :data:`nova_tests.base.OWNER_REPORTED`;
the example is compared on Nova 34 only). Each GPU
provider carries its member traits: each nova-compute runs with its own
host's ``[pci] device_spec`` from ``nova-config`` (:mod:`nova_tests.base`).

Run with ``NVLINK_WRITE_EXAMPLE=1`` to rewrite the example from Nova.
"""

import copy
import os
import unittest

from nova_tests import base
from nvlink_placement.novaconfig import as_configured
from nvlink_placement.placement import snapshot
from nvlink_placement.placement import snapshot_api
from nvlink_placement.topology import loader
from tests.functional import base as functional_base

HARDWARE = ('total', 'max_unit')


def example_from_nova(written, example):
    """The example as Nova wrote it (see the module docstring)."""
    mine = {p['name']: p for p in example['resource_providers']}
    uuids = {p['uuid']: mine[p['name']]['uuid']
             for p in written['resource_providers']}
    document = copy.deepcopy(written)
    for provider in document['resource_providers']:
        own = mine[provider['name']]
        provider['uuid'] = own['uuid']
        if provider['parent_provider_uuid'] is None:
            for rc, inventory in provider['inventories'].items():
                inventory.update({k: own['inventories'][rc][k]
                                  for k in HARDWARE})
        else:
            provider['parent_provider_uuid'] = uuids[
                provider['parent_provider_uuid']]
    document['allocations'] = example['allocations']
    return document


class TestComputeWrites(base.NovaTestCase):

    def setUp(self):
        super().setUp()
        for host in base.BOARDS:
            self.start_board(host)
        self._run_periodics()

    def test_what_nova_writes(self):
        members = base.member_traits()
        self.assertEqual(
            ['COMPUTE_MANAGED_PCI_DEVICE', 'CUSTOM_PCI_GROUP2_MEMBER0',
             'CUSTOM_PCI_GROUP4_MEMBER0', 'CUSTOM_PCI_GROUP8_MEMBER0'] +
            (['OWNER_NOVA'] if base.OWNER_REPORTED else []),
            self.traits('compute-01_0000:4C:00.0'))
        # Every PCI provider: Nova's traits and its host's member traits,
        # as ``snapshot --from-topology`` models them.
        modelled = as_configured.from_topology(
            loader.load(self.topology(list(base.BOARDS))),
            resource_class=base.RC)
        self.assertEqual(
            {p['name']: base.pci_traits(members[p['name']])
             for p in modelled['resource_providers']
             if p['parent_provider_uuid']},
            {name: self.traits(name) for name in members})
        node = self.traits('compute-01')
        self.assertIn('COMPUTE_NODE', node)
        self.assertEqual(base.OWNER_REPORTED, 'OWNER_NOVA' in node)
        client = self.client()
        inventories = client.get('/resource_providers/%s/inventories'
                                 % self.providers()['compute-01'][0])[
                                     'inventories']
        self.assertEqual(
            {'DISK_GB': (1.0, 0), 'MEMORY_MB': (1.0, 512),
             'VCPU': (4.0, 0)},
            {rc: (inv['allocation_ratio'], inv['reserved'])
             for rc, inv in inventories.items()})
        self.assertEqual([True] * 3, [inv['max_unit'] == inv['total']
                                      for inv in inventories.values()])
        uuid = self.providers()['compute-01_0000:4C:00.0'][0]
        self.assertEqual(
            {base.RC: {'allocation_ratio': 1.0, 'max_unit': 1, 'min_unit': 1,
                       'reserved': 0, 'step_size': 1, 'total': 1}},
            {rc: {k: v for k, v in inv.items()} for rc, inv in client.get(
                '/resource_providers/%s/inventories' % uuid)[
                    'inventories'].items()})

    @unittest.skipUnless(base.NOVA_RELEASE == 34, 'the example is what '
                         'Nova 34 writes (older releases write no '
                         'OWNER_NOVA and other compute node traits)')
    def test_example_snapshot_is_what_nova_writes(self):
        written = snapshot_api.export(self.client())
        example = snapshot.read_file(functional_base.H100_SNAPSHOT)
        expected = example_from_nova(written, example)
        if os.environ.get('NVLINK_WRITE_EXAMPLE'):
            snapshot.write_file(expected, functional_base.H100_SNAPSHOT)
        self.assertEqual(expected, example)
