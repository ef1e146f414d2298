"""``openstack nvlink snapshot load`` into a gunicorn Placement over HTTP."""

import json
import os

import fixtures
from oslotest import base as oslo_base

from nvlink_placement.placement import client as pc
from nvlink_placement.placement import snapshot
from tests.functional import base
from tests.functional import cli
from tests import placement_server

CONSUMER = 'b0b0b0b0-0000-4000-8000-000000000001'


class TestSnapshotLoad(oslo_base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.server = placement_server.PlacementServer().start()
        self.addCleanup(self.server.stop)
        self.client = pc.PlacementClient(self.server.adapter())
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def nvlink(self, *argv):
        return cli.run(self, 'nvlink', *argv + tuple(self.server.cli_auth()))

    def providers(self):
        return sorted(rp['name'] for rp in self.client.get(
            '/resource_providers')['resource_providers'])

    def test_load_then_export_gives_the_file_back(self):
        result = self.nvlink('snapshot', 'load', base.H100_SNAPSHOT)
        self.assertEqual((0, '', '%s: loaded 18 resource providers, 1 '
                             'consumer into Placement\n' % base.H100_SNAPSHOT),
                         (result.code, result.stdout, result.stderr))
        exported = os.path.join(self.tmp, 'out.json')
        result = self.nvlink('snapshot', '-o', exported)
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(snapshot.read_file(base.H100_SNAPSHOT),
                         snapshot.read_file(exported))
        # The loaded Placement serves the commands as a cloud does.
        result = self.nvlink('check', '--topology', base.H100_TOPOLOGY,
                             '-f', 'value', '-c', 'host')
        self.assertEqual(2, result.code, result.stderr)
        # A Placement with providers is refused, and nothing is written.
        before = self.providers()
        result = self.nvlink('snapshot', 'load', base.H100_SNAPSHOT)
        self.assertEqual((1, ''), (result.code, result.stdout))
        self.assertIn('Placement holds 18 resource providers already; '
                      'snapshot load fills an empty one (a laptop, a staging '
                      'cloud). --allow-existing loads next to them',
                      result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        # Told to load next to them, what is there already is named.
        result = self.nvlink('snapshot', 'load', '--allow-existing',
                             base.H100_SNAPSHOT)
        self.assertEqual(1, result.code)
        self.assertIn('Placement already has what %s holds; nothing '
                      'written:\n  resource provider compute-01 ('
                      % base.H100_SNAPSHOT, result.stderr)
        self.assertIn('... and 9 more', result.stderr)
        self.assertEqual(before, self.providers())

    def test_next_to_other_providers(self):
        document = snapshot.read_file(base.H100_SNAPSHOT)
        other = os.path.join(self.tmp, 'one-host.json')
        result = self.nvlink('snapshot', '--snapshot', base.H100_SNAPSHOT,
                             '--host', 'compute-02', '-o', other)
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(0, self.nvlink('snapshot', 'load', other).code)
        first = os.path.join(self.tmp, 'first.json')
        result = self.nvlink('snapshot', '--snapshot', base.H100_SNAPSHOT,
                             '--host', 'compute-01', '-o', first)
        self.assertEqual(0, result.code, result.stderr)
        result = self.nvlink('snapshot', 'load', '--allow-existing',
                             '--dry-run', first)
        self.assertEqual((0, '%s: dry run: would load 9 resource providers, '
                             '1 consumer; nothing written\n' % first),
                         (result.code, result.stderr))
        self.assertEqual(9, len(self.providers()))
        result = self.nvlink('snapshot', 'load', '--allow-existing', first)
        self.assertEqual(0, result.code, result.stderr)
        exported = os.path.join(self.tmp, 'out.json')
        self.assertEqual(0, self.nvlink('snapshot', '-o', exported).code)
        self.assertEqual(document, snapshot.read_file(exported))

    def test_a_name_taken_under_another_uuid_writes_nothing(self):
        # Placement holds a provider named as the snapshot's last one,
        # under another uuid: creating it would fail half way (409), so
        # the load is refused before the first write, naming it.
        document = snapshot.read_file(base.H100_SNAPSHOT)
        last = document['resource_providers'][-1]
        self.client.request('POST', '/resource_providers', version='1.20',
                            body={'uuid': CONSUMER, 'name': last['name']})
        for argv in (('--allow-existing',), ('--allow-existing',
                                             '--dry-run')):
            result = self.nvlink('snapshot', 'load', *argv +
                                 (base.H100_SNAPSHOT,))
            self.assertEqual((1, ''), (result.code, result.stdout), argv)
            self.assertEqual(
                'Placement already has what %s holds; nothing written:\n'
                '  resource provider %s: Placement has that name (%s)\n'
                % (base.H100_SNAPSHOT, last['name'], CONSUMER),
                result.stderr)
            self.assertEqual([last['name']], self.providers(), argv)

    def test_bad_file_writes_nothing(self):
        document = snapshot.read_file(base.H100_SNAPSHOT)
        # One problem at the very end: the last provider's parent.
        document['resource_providers'][-1]['parent_provider_uuid'] = CONSUMER
        bad = os.path.join(self.tmp, 'bad.json')
        snapshot.write_file(document, bad)
        result = self.nvlink('snapshot', 'load', bad)
        self.assertEqual((1, ''), (result.code, result.stdout))
        self.assertIn('%s: resource_providers[17].parent_provider_uuid: '
                      'parent %s of ' % (bad, CONSUMER), result.stderr)
        self.assertEqual([], self.providers())
        # The output of "openstack resource provider list -f json".
        listing = os.path.join(self.tmp, 'list.json')
        with open(listing, 'w') as f:
            json.dump([{'uuid': CONSUMER, 'name': 'compute-01',
                        'generation': 3}], f)
        result = self.nvlink('snapshot', 'load', listing)
        self.assertEqual(1, result.code)
        self.assertEqual([], self.providers())
        result = self.nvlink('snapshot', 'load', '--dry-run',
                             base.H100_SNAPSHOT)
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual([], self.providers())
