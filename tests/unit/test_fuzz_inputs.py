"""Mutated real files into every loader: a clear error or a result.

The seeds are the files the tool reads in real life: the example
topologies and GPU maps (``etc/examples``), Nova's sample config, the
captured ``nvidia-smi`` outputs (``tests/fixtures``), flavors as ``flavor
generate`` writes them, ``fmpm -l`` JSON, a libvirt domain XML and the
hook's configuration. Each case applies one to three seeded mutations
(bytes flipped or cut, a line repeated, YAML aliases, deep nesting, long
numbers, non-UTF-8 bytes, keys YAML reads as numbers...) and loads the
result. Every outcome must be a result or an ``NvlinkError`` whose
message names the file and has no line longer than
:data:`MAX_LINE`; no case may allocate more than :data:`MAX_MEMORY`
(tracemalloc's peak) or write a file. A watchdog fails a case that has
not ended after :data:`HANG_SECONDS`: a hang guard, not a measurement.
Seeded, so a failure names a case that can be replayed.

Snapshots (the two example exports) go through the same reader every
``--snapshot`` command uses, checks included.
"""

import json
import os
import random
import re
import shutil
import signal
import tracemalloc

import fixtures
from oslotest import base
import yaml

from nvlink_placement.discovery import files
from nvlink_placement.discovery import fm_partitions
from nvlink_placement.discovery import module_ids
from nvlink_placement.discovery import nvidia_smi
from nvlink_placement.discovery import topo_matrix
from nvlink_placement import documents
from nvlink_placement import errors
from nvlink_placement.flavors import generate
from nvlink_placement.flavors import inputs
from nvlink_placement.hook import config
from nvlink_placement.hook import domain
from nvlink_placement.placement import snapshot
from nvlink_placement.topology import loader
from tests.functional import cli
from tests.unit.discovery import helpers
from tests.unit.hook import samples

SEED = 14
CASES = 12           # per seed file
MAX_MEMORY = 64 * 1024 * 1024
MAX_LINE = 1000
HANG_SECONDS = 60
LIBYAML_CASES = 600
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, 'etc', 'examples')
TOKENS = (b'&a ', b'*a', b'*a\n', b'[' * 60, b'{"a": ' * 40, b'\xff',
          b'\xfe\xff', b'\xef\xbb\xbf', b'\x00', b'\r', b'\t', b'9' * 5000,
          b'"' + b'x' * 3000 + b'"', b'!!python/object/apply:os.system '
          b'["true"]', b'<<: *a\n', b'? [a, b]\n: c\n', b'\n  yes: 1\n',
          b'\n  1234: 2\n', b'\nnull: 3\n', b'~', b'1e999', b'-1', b'0x1f',
          b'2024-13-45', b'%YAML 1.1\n---\n', b'---\n', b'\n- \n', b': ',
          b'"', b"'", b'}', b']', b',', b'#', b'=', b'\\u0000')


class Timeout(Exception):
    pass


def mutate(data, rng):
    """``data`` with one to three mutations; returns (bytes, names)."""
    names = []
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(('flip', 'insert', 'delete', 'repeat', 'cut',
                           'number', 'swap'))
        names.append(kind)
        at = rng.randint(0, len(data))
        if kind == 'flip' and data:
            at = min(at, len(data) - 1)
            data = data[:at] + rng.choice(TOKENS)[:1] + data[at + 1:]
        elif kind == 'insert':
            data = data[:at] + rng.choice(TOKENS) + data[at:]
        elif kind == 'delete':
            data = data[:at] + data[at + rng.randint(1, 40):]
        elif kind == 'cut':
            data = data[:at]
        elif kind in ('repeat', 'swap'):
            lines = data.split(b'\n')
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            if kind == 'repeat':
                lines.insert(j, lines[i])
            else:
                lines[i], lines[j] = lines[j], lines[i]
            data = b'\n'.join(lines)
        else:
            numbers = list(re.finditer(rb'[0-9]+', data))
            if numbers:
                found = rng.choice(numbers)
                data = (data[:found.start()] + rng.choice(
                    (b'9' * 5000, b'18446744073709551616', b'-7', b'0')) +
                    data[found.end():])
    return data, names


class TestFuzzLoaders(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(helpers.HostTempDir())
        self.dir = self.useFixture(fixtures.TempDir()).path
        shutil.copytree(os.path.join(EXAMPLES, 'mappings'),
                        os.path.join(self.dir, 'mappings'))
        tracemalloc.start()
        self.addCleanup(tracemalloc.stop)
        previous = signal.signal(signal.SIGALRM, self._timeout)
        self.addCleanup(signal.signal, signal.SIGALRM, previous)
        self.addCleanup(signal.alarm, 0)
        self.failing = {}

    @staticmethod
    def _timeout(signum, frame):
        raise Timeout()

    def read(self, *parts):
        with open(os.path.join(ROOT, *parts), 'rb') as handle:
            return handle.read()

    def listing(self):
        return sorted(os.path.join(d, f) for d, _, names in os.walk(self.dir)
                      for f in names)

    def fuzz(self, name, seed, load):
        """Feed mutations of ``seed`` (bytes) to ``load(path)``."""
        rng = random.Random('%d/%s' % (SEED, name))
        path = os.path.join(self.dir, name)
        load_seed = self.case(name, 'seed', seed, path, load)
        self.assertIsNone(load_seed, 'the unmutated seed %s must load' % name)
        for index in range(CASES):
            data, names = mutate(seed, rng)
            problem = self.case(name, '%d %s' % (index, names), data, path,
                                load)
            if problem is not None:
                self.failing.setdefault(name, (data, problem))

    def case(self, name, label, data, path, load):
        """Load ``data`` from ``path``; returns the error message or None."""
        where = 'case %s of %s (seed %d)' % (label, name, SEED)
        with open(path, 'wb') as handle:
            handle.write(data)
        before = self.listing()
        tracemalloc.reset_peak()
        signal.alarm(HANG_SECONDS)
        try:
            load(path)
            message = None
        except errors.NvlinkError as exc:
            message = str(exc)
        except Timeout:
            self.fail('%s did not end within %d s' % (where, HANG_SECONDS))
        finally:
            signal.alarm(0)
        peak = tracemalloc.get_traced_memory()[1]
        self.assertLess(peak, MAX_MEMORY, '%s: %d bytes' % (where, peak))
        self.assertEqual(before, self.listing(), '%s wrote a file' % where)
        if message is not None:
            self.assertIn(path, message, where)
            longest = max(len(line) for line in message.splitlines())
            self.assertLessEqual(longest, MAX_LINE, where)
        return message

    def test_topologies_and_gpu_maps(self):
        for name in ('hgx-h100.yaml', 'hgx-a100.yaml', 'hgx-b200.yaml',
                     'pcie-bridge-pairs.yaml'):
            self.fuzz(name, self.read('etc', 'examples', name), loader.load)
        document = yaml.safe_load(self.read('etc', 'examples',
                                            'hgx-h100.yaml'))
        self.fuzz('hgx-h100.json', json.dumps(document, indent=2).encode(),
                  loader.load)
        self.fuzz('mappings/compute-02.json', self.read(
            'etc', 'examples', 'mappings', 'compute-02.json'),
            module_ids.read_mapping)
        # The same map as a gpus_file of a topology.
        topology = os.path.join(self.dir, 'uses-map.yaml')
        with open(topology, 'w') as handle:
            handle.write('version: 1\nhosts:\n  h:\n    board: hgx-h100-8gpu\n'
                         '    gpus_file: map.json\n')
        self.fuzz('map.json', self.read('etc', 'examples', 'mappings',
                                        'gpu-pci-module-mapping.json'),
                  lambda path: loader.load(topology))
        self.assertIn('hgx-h100.yaml', self.failing)
        self.exit_1('hgx-h100.yaml', 'nvlink', 'topology', 'validate')

    def test_flavors_and_aliases(self):
        hosts = list(loader.load(os.path.join(EXAMPLES,
                                              'hgx-h100.yaml')).hosts.values())
        flavors = [{'name': f.name, 'vcpus': f.vcpus, 'ram': f.ram,
                    'disk': f.disk, 'extra_specs': f.extra_specs}
                   for f in generate.generate(hosts, 'h100').flavors]
        self.fuzz('flavors.yaml', yaml.safe_dump(flavors).encode(),
                  inputs.read_flavors)
        self.fuzz('flavors.json', json.dumps(flavors, indent=1).encode(),
                  inputs.read_flavors)
        self.fuzz('nova.conf', self.read('etc', 'nova',
                                         'nova-compute.conf.sample'),
                  inputs.read_alias_config)
        self.fuzz('aliases.yaml', b'- name: h100\n  vendor_id: "10de"\n'
                  b'  product_id: "2330"\n  traits: CUSTOM_A,B\n',
                  inputs.read_alias_config)
        self.exit_1('flavors.yaml', 'nvlink', 'flavor', 'verify',
                    '--topology', os.path.join(EXAMPLES, 'hgx-h100.yaml'),
                    '--resource-class', 'CUSTOM_PCI_10DE_2330', '--flavors')

    def test_host_captures(self):
        for name in sorted(os.listdir(helpers.fixture_path('nvidia-smi'))):
            parse = (nvidia_smi.parse_query if name.startswith('q-') else
                     topo_matrix.parse)
            self.fuzz(name, self.read('tests', 'fixtures', 'nvidia-smi',
                                      name),
                      lambda path, parse=parse: parse(
                          files.read_text(path, 'capture'), path))
        self.fuzz('fmpm.json', helpers.fmpm_json(helpers.H100_TABLE).encode(),
                  fm_partitions.read_fmpm_json)

    def test_snapshots(self):
        for name in ('hgx-h100-snapshot.json', 'direct-nvlink-snapshot.json'):
            self.fuzz(name, self.read('etc', 'examples', name),
                      snapshot.read_file)
        self.exit_1('hgx-h100-snapshot.json', 'nvlink', 'tree',
                    '--snapshot')

    def test_hook_inputs(self):
        self.fuzz('hook.conf', b'[hook]\npolicy = allow\nfm_timeout = 2\n'
                  b'fm_deadline = 20\nmapping = /run/map.json\n'
                  b'lock_timeout = 30 # seconds\nlog = stderr\n',
                  lambda path: config.load({config.ENV_FILE: path}))

        def parse_xml(path):
            with open(path, 'rb') as handle:
                guest = domain.parse(handle.read(), 'domain XML %s' % path)
            self.assertNotIn('\n', guest.name)
        self.fuzz('domain.xml', samples.domain_xml(
            [helpers.BY_MODULE[1], helpers.BY_MODULE[3]]).encode(),
            parse_xml)

    def test_libyaml_reads_as_pyyaml(self):
        # documents.parse_yaml hands plain text to libyaml: each mutated
        # file gives the same document, or the same message, as PyYAML's
        # Python parser alone (the reader before libyaml was used).
        seeds = [self.read('etc', 'examples', name) for name in (
            'hgx-h100.yaml', 'hgx-b200.yaml', 'pcie-bridge-pairs.yaml')]
        seeds.append(b'- name: h100\n  vendor_id: "10de"\n  traits: A,B\n'
                     b'- {name: "a100", resource_class: CUSTOM_X}\n')
        rng = random.Random('%d/libyaml' % SEED)
        plain = 0
        for index in range(LIBYAML_CASES):
            data, names = mutate(rng.choice(seeds) + rng.choice(
                (b'', b'x: [a:b, {c: d}]\n', b'y: "\\x41\\u263a"\n',
                 b'z: |\n  t\n', b'w: {? a : b}\n', b'v:\tx\n')), rng)
            try:
                text = documents.read_text(self.write(data), 1 << 20)
            except documents.DocumentError:
                continue
            plain += not documents._NOT_FOR_LIBYAML.search(text)
            found = [self.outcome(text, libyaml) for libyaml in (True, False)]
            self.assertEqual(found[1], found[0],
                             'case %d %s (seed %d)' % (index, names, SEED))
        self.assertGreater(plain, LIBYAML_CASES // 2)

    def write(self, data):
        path = os.path.join(self.dir, 'd.yaml')
        with open(path, 'wb') as handle:
            handle.write(data)
        return path

    @staticmethod
    def outcome(text, libyaml):
        try:
            return documents.parse_yaml(text, 'd.yaml', libyaml=libyaml)
        except documents.DocumentError as exc:
            return str(exc)

    def exit_1(self, name, *argv):
        """A failing case through the ``openstack`` CLI: exit 1, one error."""
        data, message = self.failing[name]
        path = os.path.join(self.dir, name)
        with open(path, 'wb') as handle:
            handle.write(data)
        result = cli.run(self, *argv + (path,))
        self.assertEqual(1, result.code, result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        self.assertIn(path, result.stderr)
