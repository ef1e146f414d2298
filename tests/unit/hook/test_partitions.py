"""Matching a VM's GPUs to a Fabric Manager partition (pure logic)."""

from oslotest import base

from nvlink_placement import errors
from nvlink_placement.fabric import client as fm
from nvlink_placement.hook import partitions
from tests.unit.discovery import helpers

IDS = helpers.BOARD2
M = helpers.BY_MODULE
SXM = '10de:2330'
# What sysfs shows: board 2's H100 SXM GPUs and an L40S PCIe card.
MODELS = dict({a: SXM for a in IDS}, **{'0000:c1:00.0': '10de:26b5'})


def table(rows, active=(), pci_bus_ids=None):
    """:class:`fm.Partition` list for ``(id, physical ids)`` rows."""
    return [fm.Partition(pid, pid in active, tuple(
        fm.PartitionGpu(m, (pci_bus_ids or {}).get(m), 18, 18)
        for m in members)) for pid, members in rows]


def placed(active=(), rows=helpers.H100_TABLE):
    return partitions.place(table(rows, active), IDS, 'map.json')


def vm(*modules):
    return partitions.vm_gpus('instance-1', {M[m] for m in modules},
                              placed(), 'map.json', MODELS)


class TestPlace(base.BaseTestCase):

    def test_h100_by_module_id(self):
        result = placed(active=(3,))
        self.assertEqual(list(range(15)), [p.id for p in result])
        self.assertEqual(
            partitions.FabricPartition(3, True, (
                partitions.Member(1, '0000:3a:00.0'),
                partitions.Member(3, '0000:5d:00.0'))), result[3])
        self.assertEqual({M[5]}, result[11].addresses)
        self.assertEqual([3], [p.id for p in result if p.active])

    def test_pci_bus_id_wins(self):
        # HGX A100: FM fills pciBusId and physical ids are not module ids.
        result = partitions.place(
            table([(11, (9, 10))], pci_bus_ids={9: '0000:07:00.0',
                                                10: '0000:0f:00.0'}),
            {}, 'no mapping file')
        self.assertEqual((partitions.Member(9, '0000:07:00.0'),
                          partitions.Member(10, '0000:0f:00.0')),
                         result[0].members)
        self.assertTrue(result[0].placed)

    def test_unknown_physical_id(self):
        ids = {a: m for a, m in IDS.items() if m != 8}
        result = partitions.place(table(helpers.H100_TABLE), ids, 'map.json')
        self.assertFalse(result[0].placed)
        self.assertEqual(partitions.Member(8, None), result[0].members[7])
        self.assertEqual(frozenset(M[m] for m in range(1, 8)),
                         result[0].addresses)
        self.assertEqual(
            'partition 14 {physical id 8 (unknown address)}',
            partitions.describe_partition(result[14], ids))

    def test_repeated_module_ids(self):
        exc = self.assertRaises(
            errors.NvlinkError, partitions.place, table(helpers.H100_TABLE),
            {'0000:3a:00.0': 1, '0000:18:00.0': 1}, 'map.json')
        self.assertEqual(
            'Fabric Manager partitions (module ids from map.json) need '
            'unique module ids, but module id 1 is reported for '
            '0000:18:00.0, 0000:3a:00.0 (PCIe cards and VMs repeat module '
            'ids; give the real map with --mapping)', str(exc))


class TestDescribe(base.BaseTestCase):

    def test_gpus_in_module_order(self):
        self.assertEqual(
            '0000:3a:00.0 (module 1), 0000:18:00.0 (module 2), '
            '0000:c1:00.0', partitions.describe_gpus(
                ['0000:c1:00.0', '0000:18:00.0', '0000:3a:00.0'], IDS))

    def test_partition(self):
        self.assertEqual(
            'partition 4 {0000:18:00.0 (module 2), 0000:2a:00.0 (module 4)}',
            partitions.describe_partition(placed()[4], IDS))

    def test_vm_gpus_ignores_gpus_no_partition_holds(self):
        # Every partition GPU has an address and is an H100 SXM: the L40S
        # c1 is not on the baseboard.
        gpus = partitions.vm_gpus(
            'instance-1', {'0000:c1:00.0', M[1]}, placed(), 'map.json',
            MODELS)
        self.assertEqual(frozenset({M[1]}), gpus.addresses)
        self.assertEqual(('0000:c1:00.0',), gpus.ignored)

    def test_vm_gpu_of_the_baseboard_model_outside_the_partitions(self):
        # The mapping put module 3 on the L40S: 0000:5d:00.0, an H100 SXM
        # like the partitions' GPUs, is in none of them.
        ids = dict(IDS)
        ids['0000:c1:00.0'] = ids.pop(M[3])
        table_ = partitions.place(table(helpers.H100_TABLE), ids, 'map.json')
        for gpus, alike, them in (
                ({M[1], M[3]}, 'GPU 0000:5d:00.0 of VM instance-1 is a '
                 '10de:2330 GPU', 'it: a baseboard GPU'),
                ({M[3], '0000:e1:00.0'}, 'GPUs 0000:5d:00.0, 0000:e1:00.0 of '
                 'VM instance-1 are 10de:2330 GPUs', 'them: baseboard GPUs')):
            exc = self.assertRaises(
                partitions.UnplacedGpu, partitions.vm_gpus, 'instance-1',
                gpus, table_, 'map.json', dict(MODELS, **{
                    '0000:e1:00.0': SXM}))
            self.assertEqual(
                '%s like those of Fabric Manager\'s partitions, but no '
                'partition holds %s that map.json does not place, or that '
                'Fabric Manager left out; write the mapping again from '
                'nvidia-smi -q and compare it with `openstack nvlink host '
                'partitions`' % (alike, them), str(exc))

    def test_vm_gpu_with_nothing_to_compare_with(self):
        for rows, models, why in (
                ([], MODELS, 'Fabric Manager lists no partition GPU to '
                 'compare it with'),
                (helpers.H100_TABLE, {M[1]: SXM, '0000:c1:00.0': '10de:26b5'},
                 'sysfs does not show partition GPU 0000:18:00.0, '
                 '0000:2a:00.0, 0000:5d:00.0, 0000:9a:00.0, 0000:ab:00.0, '
                 '0000:ba:00.0, 0000:db:00.0 as an NVIDIA GPU of this host, '
                 'so its model is unknown')):
            exc = self.assertRaises(
                partitions.UnknownGpu, partitions.vm_gpus, 'instance-1',
                {'0000:c1:00.0'}, partitions.place(table(rows), IDS,
                                                   'map.json'),
                'map.json', models)
            self.assertEqual(
                'cannot tell whether GPU 0000:c1:00.0 of VM instance-1 is on '
                'the NVSwitch baseboard: no Fabric Manager partition holds '
                'it, but %s' % why, str(exc))

    def test_vm_gpu_may_be_a_baseboard_gpu_the_mapping_lacks(self):
        # The mapping lost module 8 (0000:ab:00.0): partition 14 and the
        # others holding physical id 8 have a member without an address.
        ids = {a: m for a, m in IDS.items() if m != 8}
        table_ = partitions.place(table(helpers.H100_TABLE), ids, 'map.json')
        exc = self.assertRaises(
            partitions.UnknownGpu, partitions.vm_gpus, 'instance-1',
            {M[8], M[6]}, table_, 'map.json', MODELS)
        self.assertEqual(
            'cannot tell whether GPU 0000:ab:00.0 of VM instance-1 is on the '
            'NVSwitch baseboard: no Fabric Manager partition holds it, but '
            'map.json gives no address to physical id 8 of Fabric Manager\'s '
            'partitions; write the mapping again from nvidia-smi -q (it must '
            'list every baseboard GPU)', str(exc))
        # A GPU the partitions hold is fine.
        self.assertEqual(frozenset({M[6]}), partitions.vm_gpus(
            'instance-1', {M[6]}, table_, 'map.json', MODELS).addresses)


class TestExactAndNearest(base.BaseTestCase):

    def test_exact_for_each_size(self):
        result = placed()
        for modules, pid in (((5,), 11), ((1, 3), 3), ((6, 8), 6),
                             ((1, 2, 3, 4), 1), (tuple(range(1, 9)), 0)):
            self.assertEqual(pid, partitions.exact(
                result, vm(*modules).addresses).id, modules)
        self.assertIsNone(partitions.exact(result, vm(1, 2).addresses))

    def test_nearest(self):
        result = placed()
        for modules, ids in (
                # the quad holding both, and the pairs sharing one GPU
                ((1, 2), [1, 3, 4]),
                # the quad; no partition of three
                ((1, 2, 3), [1]),
                ((1, 5), [0, 3, 5]),
                ((1, 2, 3, 4, 5), [0])):
            self.assertEqual(ids, [p.id for p in partitions.nearest(
                result, vm(*modules).addresses)], modules)

    def test_nearest_by_overlap_when_nothing_contains_them(self):
        result = partitions.place(table([(1, (1, 2, 3)), (2, (3, 4)),
                                         (3, (5,))]), IDS, 'map.json')
        self.assertEqual([1], [p.id for p in partitions.nearest(
            result, vm(1, 2, 6, 7).addresses)])
        self.assertEqual([], partitions.nearest(result, vm(8).addresses))


class TestPlans(base.BaseTestCase):

    def test_start_activates(self):
        step = partitions.plan_start(placed(), vm(1, 3), IDS)
        self.assertEqual(('activate', 3), (step.action, step.partition.id))
        self.assertEqual('partition 3 {0000:3a:00.0 (module 1), '
                         '0000:5d:00.0 (module 3)} of VM instance-1',
                         step.detail)

    def test_start_already_active(self):
        step = partitions.plan_start(placed(active=(11,)), vm(5), IDS)
        self.assertEqual((None, 11), (step.action, step.partition.id))
        self.assertEqual('partition 11 {0000:ba:00.0 (module 5)} of VM '
                         'instance-1 is already active', step.detail)

    def test_start_without_exact_partition(self):
        exc = self.assertRaises(partitions.NoExactPartition,
                                partitions.plan_start, placed(), vm(1, 2),
                                IDS)
        self.assertEqual(
            'no Fabric Manager partition is made of exactly the GPUs of VM '
            'instance-1 (GPUs 0000:3a:00.0 (module 1), 0000:18:00.0 (module '
            '2)); nearest: partition 1 {0000:3a:00.0 (module 1), '
            '0000:18:00.0 (module 2), 0000:5d:00.0 (module 3), 0000:2a:00.0 '
            '(module 4)}, partition 3 {0000:3a:00.0 (module 1), 0000:5d:00.0 '
            '(module 3)}, partition 4 {0000:18:00.0 (module 2), '
            '0000:2a:00.0 (module 4)}', str(exc))

    def test_start_blocked_by_active_partition(self):
        exc = self.assertRaises(partitions.OverlappingPartition,
                                partitions.plan_start, placed(active=(1,)),
                                vm(1, 3), IDS)
        self.assertEqual(
            'cannot activate partition 3 {0000:3a:00.0 (module 1), '
            '0000:5d:00.0 (module 3)} for VM instance-1 (GPUs 0000:3a:00.0 '
            '(module 1), 0000:5d:00.0 (module 3)): active partition 1 '
            '{0000:3a:00.0 (module 1), 0000:18:00.0 (module 2), 0000:5d:00.0 '
            '(module 3), 0000:2a:00.0 (module 4)} holds 0000:3a:00.0 (module '
            '1), 0000:5d:00.0 (module 3); an active partition is never '
            'deactivated automatically: if no running VM uses it, deactivate '
            'it (`fmpm -d 1`)', str(exc))

    def test_start_blocked_by_two_partitions(self):
        exc = self.assertRaises(partitions.OverlappingPartition,
                                partitions.plan_start,
                                placed(active=(7, 9)), vm(1, 3), IDS)
        self.assertIn(': active partition 7 {0000:3a:00.0 (module 1)} holds '
                      '0000:3a:00.0 (module 1); active partition 9 '
                      '{0000:5d:00.0 (module 3)} holds 0000:5d:00.0 (module '
                      '3); ', str(exc))
        self.assertTrue(str(exc).endswith('(`fmpm -d 7`, `fmpm -d 9`)'))

    def test_stop_deactivates(self):
        step = partitions.plan_stop(placed(active=(2, 3)), vm(5, 6, 7, 8),
                                    IDS)
        self.assertEqual(('deactivate', 2), (step.action, step.partition.id))

    def test_stop_when_not_active(self):
        step = partitions.plan_stop(placed(active=(4,)), vm(1, 3), IDS)
        self.assertEqual((None, 3), (step.action, step.partition.id))
        self.assertEqual('partition 3 {0000:3a:00.0 (module 1), 0000:5d:00.0 '
                         '(module 3)} of VM instance-1 is not active: nothing '
                         'to deactivate', step.detail)

    def test_stop_without_exact_partition(self):
        step = partitions.plan_stop(placed(active=(5,)), vm(1, 2), IDS)
        self.assertEqual(partitions.Step(
            None, None, 'no Fabric Manager partition is made of exactly the '
            'GPUs of VM instance-1 (GPUs 0000:3a:00.0 (module 1), '
            '0000:18:00.0 (module 2)): nothing to deactivate'), step)

    def test_stop_never_deactivates_an_overlapping_partition(self):
        exc = self.assertRaises(partitions.OverlappingPartition,
                                partitions.plan_stop, placed(active=(1,)),
                                vm(1, 3), IDS)
        self.assertEqual(
            'VM instance-1 (GPUs 0000:3a:00.0 (module 1), 0000:5d:00.0 '
            '(module 3)) released, and its partition 3 is not active: active '
            'partition 1 {0000:3a:00.0 (module 1), 0000:18:00.0 (module 2), '
            '0000:5d:00.0 (module 3), 0000:2a:00.0 (module 4)} holds '
            '0000:3a:00.0 (module 1), 0000:5d:00.0 (module 3); an active '
            'partition is never deactivated automatically: if no running VM '
            'uses it, deactivate it (`fmpm -d 1`)', str(exc))
        exc = self.assertRaises(partitions.OverlappingPartition,
                                partitions.plan_stop, placed(active=(3,)),
                                vm(1, 2), IDS)
        self.assertTrue(str(exc).startswith(
            'VM instance-1 (GPUs 0000:3a:00.0 (module 1), 0000:18:00.0 '
            '(module 2)) released, and no partition is made of exactly its '
            'GPUs: active partition 3 '), str(exc))


class TestListing(base.BaseTestCase):

    def test_rows(self):
        ids = {a: m for a, m in IDS.items() if m != 8}
        rows = partitions.listing(partitions.place(
            table(helpers.H100_TABLE, active=(3, 12)), ids, 'map.json'))
        self.assertEqual(15, len(rows))
        self.assertEqual(
            (0, False, 8, [1, 2, 3, 4, 5, 6, 7, 8],
             ['0000:3a:00.0', '0000:18:00.0', '0000:5d:00.0', '0000:2a:00.0',
              '0000:ba:00.0', '0000:9a:00.0', '0000:db:00.0', 'unknown']),
            rows[0])
        self.assertEqual((3, True, 2, [1, 3], ['0000:3a:00.0',
                                               '0000:5d:00.0']), rows[3])
        self.assertEqual((12, True, 1, [6], ['0000:9a:00.0']), rows[12])
