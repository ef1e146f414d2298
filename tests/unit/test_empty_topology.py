"""A host with no GPUs is an error, never a silent flatten."""

import os

import fixtures
from oslotest import base

from nvlink_placement import errors
from nvlink_placement.topology import loader
from tests.functional import cli

CONSEQUENCE = ('reshape would move every GPU of {0} back under the compute '
               'node and delete its NVLink groups. To do that on purpose run '
               '"openstack nvlink flatten --host {0}"')


class TestEmptyTopology(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def problems(self, text):
        path = self.write('topo.yaml', text)
        exc = self.assertRaises(errors.TopologyError, loader.load, path)
        return path, exc.problems

    def test_empty_gpus(self):
        path, problems = self.problems(
            'version: 1\nhosts:\n  compute-01:\n    board: hgx-h100-8gpu\n'
            '    gpus: {}\n')
        self.assertEqual(
            [('%s: hosts.compute-01.gpus' % path, 'the GPU mapping is '
              'empty: ' + CONSEQUENCE.format('compute-01'))], problems)

    def test_empty_gpus_file_names_the_file(self):
        mapping = self.write('compute-02.json', '{}\n')
        path, problems = self.problems(
            'version: 1\nhosts:\n  compute-02:\n    board: hgx-h100-8gpu\n'
            '    gpus_file: compute-02.json\n')
        self.assertEqual(
            [('%s: hosts.compute-02.gpus_file' % path,
              '%s holds no GPUs: %s' % (mapping, CONSEQUENCE.format(
                  'compute-02')))], problems)

    def test_host_without_anything(self):
        path, problems = self.problems(
            'version: 1\nhosts:\n  pcie-07: {}\n  pcie-08:\n    groups: []\n')
        self.assertEqual(
            [('%s: hosts.pcie-07' % path, 'no GPUs (give gpus, gpus_file or '
              'groups): ' + CONSEQUENCE.format('pcie-07')),
             ('%s: hosts.pcie-08' % path, 'no GPUs (give gpus, gpus_file or '
              'groups): ' + CONSEQUENCE.format('pcie-08'))], problems)

    def test_unreadable_file_is_reported_once(self):
        path, problems = self.problems(
            'version: 1\nhosts:\n  compute-02:\n    board: hgx-h100-8gpu\n'
            '    gpus_file: missing.json\n')
        self.assertEqual(1, len(problems))
        self.assertIn('No such file or directory', problems[0][1])

    def test_validate_and_reshape_refuse(self):
        path = self.write('topo.yaml', 'version: 1\nhosts:\n  compute-01:\n'
                          '    board: hgx-h100-8gpu\n    gpus: {}\n')
        result = cli.run(self, 'nvlink', 'topology', 'validate', path)
        self.assertEqual(1, result.code)
        self.assertIn('%s: hosts.compute-01.gpus: the GPU mapping is empty'
                      % path, result.stderr)
        # Refused before any Placement is contacted (there is none here).
        result = cli.run(self, 'nvlink', 'reshape', '--topology', path,
                         '--os-auth-type', 'admin_token', '--os-token', 'x',
                         '--os-endpoint', 'http://127.0.0.1:9')
        self.assertEqual(1, result.code)
        self.assertIn('the GPU mapping is empty', result.stderr)
        self.assertNotIn('cannot reach', result.stderr)
