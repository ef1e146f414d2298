"""The flat tree Nova reports, generated from a topology."""

import os

from oslotest import base

from nvlink_placement import errors
from nvlink_placement.novaconfig import as_configured
from nvlink_placement.osc import snapshot as osc_snapshot
from nvlink_placement.placement import nova_tree
from nvlink_placement.placement import snapshot
from nvlink_placement.topology import loader

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
H100 = os.path.join(ROOT, 'etc', 'examples', 'hgx-h100.yaml')
RC = 'CUSTOM_PCI_10DE_2330'


def topology(gpus):
    return loader.parse({'version': 1, 'hosts': {'cn-1': {'gpus': gpus}}},
                        'topo.yaml')


class TestFromTopology(base.BaseTestCase):

    def test_example_hosts(self):
        document = as_configured.from_topology(loader.load(H100),
                                               resource_class=RC)
        providers = document['resource_providers']
        self.assertEqual(18, len(providers))
        self.assertEqual({}, document['allocations'])
        node = providers[0]
        self.assertEqual('compute-01', node['name'])
        self.assertIsNone(node['parent_provider_uuid'])
        self.assertEqual(nova_tree.node_uuid('compute-01'), node['uuid'])
        self.assertIn('OWNER_NOVA', node['traits'])
        self.assertIn('COMPUTE_NODE', node['traits'])
        self.assertEqual({'total': 224, 'reserved': 0, 'min_unit': 1,
                          'max_unit': 224, 'step_size': 1,
                          'allocation_ratio': 4.0},
                         node['inventories']['VCPU'])
        self.assertEqual(512, node['inventories']['MEMORY_MB']['reserved'])
        gpu = [p for p in providers
               if p['name'] == 'compute-01_0000:4C:00.0'][0]
        self.assertEqual(node['uuid'], gpu['parent_provider_uuid'])
        self.assertEqual(nova_tree.pci_uuid(node['uuid'], '0000:4c:00.0'),
                         gpu['uuid'])
        self.assertEqual({RC: {'total': 1, 'reserved': 0, 'min_unit': 1,
                               'max_unit': 1, 'step_size': 1,
                               'allocation_ratio': 1.0}},
                         gpu['inventories'])
        # Module 1: member 0 of its pair, its quad and the board.
        self.assertEqual(['COMPUTE_MANAGED_PCI_DEVICE',
                          'CUSTOM_PCI_GROUP2_MEMBER0',
                          'CUSTOM_PCI_GROUP4_MEMBER0',
                          'CUSTOM_PCI_GROUP8_MEMBER0', 'OWNER_NOVA'],
                         gpu['traits'])
        # Reproducible: the same input gives the same document.
        self.assertEqual(document, as_configured.from_topology(
            loader.load(H100), resource_class=RC))

    def test_hosts_and_sizes(self):
        document = as_configured.from_topology(
            loader.load(H100), ['compute-02'], resource_class=RC, vcpus=64,
            memory_mb=1024, disk_gb=10)
        self.assertEqual({'compute-02'}, {
            p['name'].split('_')[0] for p in document['resource_providers']})
        node = document['resource_providers'][0]['inventories']
        self.assertEqual((64, 64, 1024, 10), (
            node['VCPU']['total'], node['VCPU']['max_unit'],
            node['MEMORY_MB']['total'], node['DISK_GB']['total']))

    def test_resource_class_from_the_topology(self):
        document = as_configured.from_topology(topology({
            '0000:01:00.0': {'resource_class': 'CUSTOM_GPU_A'},
            '0000:02:00.0': {'vendor_id': '10de', 'device_id': '2901'},
            '0000:03:00.0': 1}), resource_class='CUSTOM_DEFAULT')
        classes = {p['name']: list(p['inventories'])
                   for p in document['resource_providers']}
        self.assertEqual(['CUSTOM_GPU_A'], classes['cn-1_0000:01:00.0'])
        self.assertEqual(['CUSTOM_PCI_10DE_2901'],
                         classes['cn-1_0000:02:00.0'])
        self.assertEqual(['CUSTOM_DEFAULT'], classes['cn-1_0000:03:00.0'])

    def test_excluded_gpu_gets_no_provider(self):
        # A GPU in vGPU or MIG use is not in [pci] device_spec: Nova
        # reports no PCI provider for it.
        document = as_configured.from_topology(topology({
            '0000:01:00.0': 1,
            '0000:02:00.0': {'module_id': 2,
                             'excluded': 'vGPU in use (mdev parent)'}}),
            resource_class=RC)
        self.assertEqual(['cn-1', 'cn-1_0000:01:00.0'],
                         [p['name'] for p in document['resource_providers']])

    def test_no_resource_class_is_an_error(self):
        exc = self.assertRaises(errors.NvlinkError,
                                as_configured.from_topology,
                                loader.load(H100))
        self.assertIn('%s: no resource class for compute-01 0000:19:00.0, '
                      % H100, str(exc))
        self.assertIn('and 11 more; give --resource-class', str(exc))

    def test_unknown_host(self):
        exc = self.assertRaises(errors.NvlinkError,
                                as_configured.from_topology,
                                loader.load(H100), ['compute-09'],
                                resource_class=RC)
        self.assertEqual("%s: no host 'compute-09' in the topology (did "
                         "you mean 'compute-02' or 'compute-01'?)" % H100,
                         str(exc))

    def test_bad_resource_class_is_found_by_validation(self):
        exc = self.assertRaises(errors.NvlinkError,
                                as_configured.from_topology,
                                topology({'0000:01:00.0': 1}),
                                resource_class='PGPUS')
        self.assertIn("unknown standard resource class 'PGPUS'", str(exc))

    def test_nova_normalizes_the_option(self):
        self.assertEqual(RC, osc_snapshot.nova_resource_class(
            'pci_10de_2330'))
        self.assertEqual('CUSTOM_A_B', osc_snapshot.nova_resource_class(
            'a-b'))
        self.assertEqual('PGPU', osc_snapshot.nova_resource_class('pgpu'))
        self.assertEqual(RC, osc_snapshot.nova_resource_class(RC))


class TestSnapshotShape(base.BaseTestCase):

    def test_generated_snapshot_is_canonical(self):
        document = as_configured.from_topology(loader.load(H100),
                                               resource_class=RC)
        self.assertEqual(document, snapshot.document(
            list(reversed(document['resource_providers'])), {}))
