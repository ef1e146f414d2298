"""Every option of ``flavor generate`` and ``flavor verify``, through the CLI.

Each test gives an option a value other than its default and checks what
reaches the output: flavor names, vCPUs, RAM, disk, the alias value, the
sizes a dialect refuses; the query ``flavor verify`` sends and the query
shape it says it modelled. (The full extra specs of multi-GPU flavors are
checked elsewhere.)
"""

import json
import os
import shutil
import tempfile
import urllib.parse

import fixtures
from oslotest import base as oslo_base

from nvlink_placement.flavors import generate
from nvlink_placement.placement import embedded
from nvlink_placement.placement import snapshot
from nvlink_placement.plan import desired
from nvlink_placement.plan import run
from nvlink_placement.topology import loader
from tests.functional import base
from tests.functional import cli

ALIAS_KEY = generate.ALIAS_KEY


class _CliCase(oslo_base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def generate(self, *options):
        """``flavor generate`` of the H100 example: (code, rows, stderr)."""
        result = cli.run(self, 'nvlink', 'flavor', 'generate', '--topology',
                         base.H100_TOPOLOGY, '--alias', 'h100', '-f', 'json',
                         *options)
        rows = json.loads(result.stdout) if result.code == 0 else None
        return result.code, rows, result.stderr


class TestGenerateOptions(_CliCase):

    def test_defaults(self):
        # What each option below is compared with.
        code, rows, err = self.generate()
        self.assertEqual(0, code, err)
        self.assertIn('compute-01, compute-02: 8 or more GPUs of one class, '
                      'and flavors ask up to 8', err)
        self.assertEqual(
            [('gpu.h100.%dx' % n, 16 * n, 131072 * n, 100) for n in
             (1, 2, 4, 8)],
            [(r['name'], r['vcpus'], r['ram'], r['disk']) for r in rows])
        self.assertEqual(['h100:1', 'h100:2:_h100', 'h100:4:_h100',
                          'h100:8'],
                         [r['extra_specs'][ALIAS_KEY] for r in rows])

    def test_name_template(self):
        code, rows, err = self.generate('--name-template',
                                        'nvl-{size}gpu-{alias}',
                                        '--sizes', '1,2')
        self.assertEqual((0, ''), (code, err))
        self.assertEqual(['nvl-1gpu-h100', 'nvl-2gpu-h100'],
                         [r['name'] for r in rows])
        code, _, err = self.generate('--name-template', 'same-{alias}',
                                     '--sizes', '1,2')
        self.assertEqual(1, code)
        self.assertIn("--name-template 'same-{alias}' gives sizes 1 and 2 "
                      "the same name 'same-h100'; include {size}", err)

    def test_sizes_of_vcpus_ram_and_disk(self):
        code, rows, err = self.generate('--vcpus-per-gpu', '3',
                                        '--ram-per-gpu', '1000', '--disk',
                                        '7', '--sizes', '1,2,4')
        self.assertEqual((0, ''), (code, err))
        self.assertEqual([(3, 1000, 7), (6, 2000, 7), (12, 4000, 7)],
                         [(r['vcpus'], r['ram'], r['disk']) for r in rows])
        # Each one alone: the others keep their defaults.
        for option, value, column, expected in (
                ('--vcpus-per-gpu', '5', 'vcpus', [5, 10]),
                ('--ram-per-gpu', '2048', 'ram', [2048, 4096]),
                ('--disk', '0', 'disk', [0, 0])):
            code, rows, err = self.generate(option, value, '--sizes', '1,2')
            self.assertEqual((0, ''), (code, err), option)
            self.assertEqual(expected, [r[column] for r in rows], option)
            untouched = {'vcpus': [16, 32], 'ram': [131072, 262144],
                         'disk': [100, 100]}
            del untouched[column]
            self.assertEqual(untouched, {c: [r[c] for r in rows]
                                         for c in untouched}, option)

    def test_amounts_out_of_range_are_refused(self):
        for option, value, message in (
                ('--vcpus-per-gpu', '0', '--vcpus-per-gpu must be at least '
                                         '1, not 0'),
                ('--ram-per-gpu', '0', '--ram-per-gpu must be at least 1, '
                                       'not 0'),
                ('--disk', '-1', '--disk must be at least 0, not -1')):
            code, _, err = self.generate(option, value)
            self.assertEqual(1, code, option)
            self.assertIn(message, err)
            self.assertNotIn('Traceback', err)

    def test_dialect_upstream(self):
        code, rows, err = self.generate('--dialect', 'upstream')
        self.assertEqual(0, code, err)
        # Only what upstream Nova can express: 1 GPU and the whole host.
        self.assertEqual([('gpu.h100.1x', 'h100:1'),
                          ('gpu.h100.8x', 'h100:8')],
                         [(r['name'], r['extra_specs'][ALIAS_KEY])
                          for r in rows])
        self.assertEqual([{ALIAS_KEY: 'h100:1'}, {ALIAS_KEY: 'h100:8'}],
                         [r['extra_specs'] for r in rows])
        for size in (2, 4):
            self.assertIn('size %d not generated: upstream Nova cannot name '
                          'the request groups of a PCI alias' % size, err)
        code, rows, err = self.generate('--dialect', 'upstream', '--sizes',
                                        '1,2')
        self.assertEqual(1, code)
        self.assertIn('size 2 refused: upstream Nova cannot name the '
                      'request groups of a PCI alias', err)
        self.assertNotIn('Traceback', err)

    def test_dialect_mosk_is_the_default(self):
        code, rows, err = self.generate('--dialect', 'mosk', '--sizes', '2')
        self.assertEqual((0, ''), (code, err))
        self.assertEqual([('gpu.h100.2x', 'h100:2:_h100')],
                         [(r['name'], r['extra_specs'][ALIAS_KEY])
                          for r in rows])
        code, _, err = self.generate('--dialect', 'nova')
        self.assertEqual(3, code)
        self.assertIn("argument --dialect: invalid choice: 'nova'", err)

    def test_print_commands_carry_the_options(self):
        result = cli.run(self, 'nvlink', 'flavor', 'generate', '--topology',
                         base.H100_TOPOLOGY, '--alias', 'h100', '--sizes',
                         '1', '--name-template', 'x.{size}', '--vcpus-per-gpu',
                         '2', '--ram-per-gpu', '512', '--disk', '9',
                         '--dialect', 'upstream', '--print-commands')
        self.assertEqual((0, ''), (result.code, result.stderr))
        self.assertEqual(
            'openstack flavor create --vcpus 2 --ram 512 --disk 9 x.1\n'
            'openstack --os-compute-api-version 2.86 flavor set \\\n'
            '  --property pci_passthrough:alias=h100:1 \\\n'
            '  x.1\n', result.stdout)


class TestVerifyOptions(_CliCase):
    """``flavor verify`` on the example snapshot, reshaped."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tmpdir = tempfile.mkdtemp()
        cls.reshaped = os.path.join(cls.tmpdir, 'reshaped.json')
        document = snapshot.read_file(base.H100_SNAPSHOT)
        with embedded.EmbeddedPlacement(document) as client:
            topology = loader.load(base.H100_TOPOLOGY)
            result = run.run(client, [desired.from_topology(h) for h in
                                      topology.hosts.values()])
            assert not result.failures, result.failures
            snapshot.write_file(client.placement.export(), cls.reshaped)
        cls.flavors = os.path.join(cls.tmpdir, 'flavors.json')
        with open(cls.flavors, 'w') as f:
            json.dump([s.as_dict() for s in generate.generate(
                list(topology.hosts.values()), 'h100',
                sizes=[1, 2]).flavors], f)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmpdir)
        super().tearDownClass()

    def verify(self, *options, snapshot_path=None):
        """(code, rows, stderr) of ``flavor verify -f json``."""
        result = cli.run(self, 'nvlink', 'flavor', 'verify', '--snapshot',
                         snapshot_path or self.reshaped, '--topology',
                         base.H100_TOPOLOGY, '--flavors', self.flavors,
                         '--resource-class', base.novalike.GPU_RC, '-f',
                         'json', *options)
        return result.code, json.loads(result.stdout or '[]'), result.stderr

    @staticmethod
    def limits(rows):
        """dict flavor -> the ``limit`` values of its query."""
        return {r['flavor']: urllib.parse.parse_qs(r['query'])['limit']
                for r in rows}

    def test_limit(self):
        code, rows, err = self.verify()
        self.assertEqual(0, code, err)
        self.assertEqual({'gpu.h100.1x': ['1000'], 'gpu.h100.2x': ['1000']},
                         self.limits(rows))
        # compute-01 has 7 free GPUs: 7 1-GPU candidates, 6 ordered pairs.
        self.assertEqual([7, 8, 6, 8], [r['candidates'] for r in rows])
        code, rows, err = self.verify('--limit', '3')
        self.assertEqual({'gpu.h100.1x': ['3'], 'gpu.h100.2x': ['3']},
                         self.limits(rows))
        # Placement cut every answer at 3 candidates, of both hosts
        # together; verify says the answer may be cut short.
        self.assertEqual(0, code, err)
        self.assertEqual([3, 3], [sum(r['candidates'] for r in rows
                                      if r['flavor'] == flavor)
                                  for flavor in ('gpu.h100.1x',
                                                 'gpu.h100.2x')])
        for flavor in ('gpu.h100.1x', 'gpu.h100.2x'):
            self.assertIn('%s: the answer holds limit=3 candidates and may '
                          'be cut short' % flavor, err)

    def test_owner_filter(self):
        code, rows, err = self.verify()
        self.assertEqual('flavor verify: Nova 34 query, owner filter on '
                         '(default Nova 34)', err.splitlines()[0])
        self.assertTrue(all('OWNER_NOVA' in r['query'] for r in rows))
        code, rows, err = self.verify('--owner-filter', 'off')
        self.assertEqual(0, code, err)
        self.assertEqual('flavor verify: Nova 34 query, owner filter off '
                         '(default Nova 34; --owner-filter off)\n', err)
        self.assertEqual([], [r['query'] for r in rows
                              if 'OWNER_NOVA' in r['query']])
        # The tree of a nova-compute older than 34: no OWNER_NOVA on the
        # compute nodes. With the filter on nothing fits; off, all fits.
        document = snapshot.read_file(self.reshaped)
        for provider in document['resource_providers']:
            if provider['parent_provider_uuid'] is None:
                provider['traits'].remove('OWNER_NOVA')
        older = os.path.join(self.tmp, 'older.json')
        snapshot.write_file(document, older)
        code, rows, err = self.verify('--owner-filter', 'on',
                                      snapshot_path=older)
        self.assertEqual(1, code)
        self.assertEqual([0, 0, 0, 0], [r['candidates'] for r in rows])
        self.assertIn('lack OWNER_NOVA', err)
        code, rows, err = self.verify('--owner-filter', 'off',
                                      snapshot_path=older)
        self.assertEqual(0, code, err)
        self.assertEqual([7, 8, 6, 8], [r['candidates'] for r in rows])
