"""``openstack nvlink snapshot`` offline, and snapshot errors on the CLI."""

import json
import os

import fixtures
from oslotest import base

from nvlink_placement.placement import embedded
from nvlink_placement.placement import snapshot
from nvlink_placement.placement import snapshot_api
from tests.functional import base as fbase
from tests.functional import cli
from tests.functional import writes
from tests import novalike

PCIE = os.path.join(fbase.EXAMPLES, 'pcie-bridge-pairs.yaml')
CONSUMER = 'c1c1c1c1-0000-4000-8000-000000000001'


class TestFromTopology(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def test_plan_before_the_hosts_exist(self):
        out = os.path.join(self.tmp, 'planned.json')
        made = cli.run(self, 'nvlink', 'snapshot', '--from-topology',
                       fbase.H100_TOPOLOGY, '--resource-class',
                       'CUSTOM_PCI_10DE_2330', '-o', out)
        self.assertEqual(0, made.code, made.stderr)
        self.assertEqual('%s: 18 resource providers, 0 consumers\n' % out,
                         made.stdout)
        with open(out, 'rb') as f:
            first = f.read()
        again = cli.run(self, 'nvlink', 'snapshot', '--from-topology',
                        fbase.H100_TOPOLOGY, '--resource-class',
                        'CUSTOM_PCI_10DE_2330', '-o', out)
        self.assertEqual(0, again.code, again.stderr)
        with open(out, 'rb') as f:
            self.assertEqual(first, f.read())
        with writes.nothing_written(self):
            dry = cli.run(self, 'nvlink', 'reshape', '--topology',
                          fbase.H100_TOPOLOGY, '--snapshot', out,
                          '--dry-run', '-f', 'json')
        self.assertEqual(0, dry.code, dry.stderr)
        self.assertEqual(43, len(json.loads(dry.stdout)))

    def test_resource_class_needed_and_normalized(self):
        out = os.path.join(self.tmp, 'pcie.json')
        missing = cli.run(self, 'nvlink', 'snapshot', '--from-topology',
                          PCIE, '-o', out)
        self.assertEqual(1, missing.code)
        self.assertIn('%s: no resource class for compute-pcie-07 '
                      '0000:17:00.0, ' % PCIE, missing.stderr)
        self.assertNotIn('Traceback', missing.stderr)
        self.assertFalse(os.path.exists(out))
        made = cli.run(self, 'nvlink', 'snapshot', '--from-topology', PCIE,
                       '--resource-class', 'pci_10de_2321', '--vcpus', '64',
                       '-o', out)
        self.assertEqual(0, made.code, made.stderr)
        document = snapshot.read_file(out)
        self.assertEqual({'CUSTOM_PCI_10DE_2321'}, {
            rc for rp in document['resource_providers'][1:]
            for rc in rp['inventories']})
        self.assertEqual(64, document['resource_providers'][0][
            'inventories']['VCPU']['total'])

    def test_sizes_must_be_positive(self):
        result = cli.run(self, 'nvlink', 'snapshot', '--from-topology',
                         fbase.H100_TOPOLOGY, '--resource-class', 'X',
                         '--disk-gb', '0', '-o', 'x.json')
        self.assertEqual(3, result.code)     # a usage error
        self.assertIn('--disk-gb must be at least 1', result.stderr)

    def test_export_hosts_of_a_snapshot(self):
        out = os.path.join(self.tmp, 'one.json')
        result = cli.run(self, 'nvlink', 'snapshot', '--snapshot',
                         fbase.H100_SNAPSHOT, '--host', 'compute-01', '-o',
                         out)
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual('%s: 9 resource providers, 1 consumers\n' % out,
                         result.stdout)
        unknown = cli.run(self, 'nvlink', 'snapshot', '--snapshot',
                          fbase.H100_SNAPSHOT, '--host', 'compute-09', '-o',
                          out)
        self.assertEqual(1, unknown.code)
        self.assertIn("no compute node resource provider named "
                      "'compute-09'", unknown.stderr)


class TestBadSnapshotOnTheCli(base.BaseTestCase):

    def test_error_names_file_and_path_and_nothing_is_loaded(self):
        document = snapshot.read_file(fbase.H100_SNAPSHOT)
        gpu = document['resource_providers'][3]
        rc = list(gpu['inventories'])[0]
        gpu['inventories'][rc]['total'] = 0
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'bad.json')
        snapshot.write_file(document, path)
        result = cli.run(self, 'nvlink', 'check', '--topology',
                         fbase.H100_TOPOLOGY, '--snapshot', path)
        self.assertEqual(1, result.code)
        self.assertEqual('%s: resource_providers[3].inventories.%s.total: '
                         '0 is less than the minimum of 1\n' % (path, rc),
                         result.stderr)


class TestProgress(base.BaseTestCase):
    """The export reports progress per phase to a tqdm-like bar."""

    def test_phases(self):
        bars = []

        class Bar(object):
            def __init__(self, total, unit):
                self.total, self.unit, self.done = total, unit, 0
                self.closed = False
                bars.append(self)

            def update(self, n):
                self.done += n

            def close(self):
                self.closed = True

        document = novalike.document({'compute-01': novalike.BOARD1,
                                      'compute-02': novalike.BOARD2})
        names = novalike.names_in(document)
        document['allocations'][CONSUMER] = snapshot.consumer_entry(
            'p', 'u', {names['compute-01']: {'VCPU': 4},
                       names['compute-01_0000:4C:00.0']: {novalike.GPU_RC: 1}},
            consumer_type='INSTANCE')
        with embedded.EmbeddedPlacement(document) as client:
            exported = snapshot_api.export(client, workers=4, progress=Bar)
        self.assertEqual(document, exported)
        # Traits read per provider (20 in use, 6 and the 14 member traits,
        # for 18 providers: fewer GETs), inventories, allocations of the 2
        # nodes and the allocated GPU, the roots' aggregates; the one
        # consumer is read first, with no bar.
        self.assertEqual([('trait set', 18), ('inventory', 18),
                          ('allocation', 3), ('root', 2)],
                         [(b.unit, b.total) for b in bars])
        self.assertTrue(all(b.closed and b.done == b.total for b in bars))
