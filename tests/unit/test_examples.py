"""The shipped examples load, and the Ansible playbook is valid."""

import glob
import os
import shutil
import subprocess

from oslotest import base

from nvlink_placement.placement import snapshot
from nvlink_placement.topology import loader

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
ETC = os.path.join(ROOT, 'etc')


class TestExamples(base.BaseTestCase):

    def test_topologies_load(self):
        expected = {'hgx-h100.yaml': (2, 12), 'hgx-b200.yaml': (1, 6),
                    'hgx-a100.yaml': (1, 6), 'pcie-bridge-pairs.yaml': (1, 2),
                    'direct-nvlink.yaml': (3, 4)}
        found = {}
        for path in glob.glob(os.path.join(ETC, 'examples', '*.yaml')):
            topology = loader.load(path)
            found[os.path.basename(path)] = (
                len(topology.hosts),
                sum(len(h.groups) for h in topology.hosts.values()))
        self.assertEqual(expected, found)

    def test_snapshots_load(self):
        paths = glob.glob(os.path.join(ETC, 'examples', '*-snapshot.json'))
        self.assertIn(os.path.join(ETC, 'examples',
                                   'hgx-h100-snapshot.json'), paths)
        for path in paths:
            document = snapshot.read_file(path)
            self.assertEqual(1, len(document['allocations']), path)

    def test_sample_mapping_matches_example_host(self):
        topology = loader.parse({'version': 1, 'hosts': {'h': {
            'board': 'hgx-h100-8gpu',
            'gpus_file': 'mappings/gpu-pci-module-mapping.json'}}},
            os.path.join(ETC, 'examples', 'x.yaml'))
        example = loader.load(os.path.join(ETC, 'examples', 'hgx-h100.yaml'))
        self.assertEqual(
            {a: g.module_id for a, g in
             example.hosts['compute-01'].gpus.items()},
            {a: g.module_id for a, g in topology.hosts['h'].gpus.items()})

    def test_ansible_playbook_syntax(self):
        playbook = shutil.which('ansible-playbook')
        if not playbook:
            self.skipTest('ansible-playbook is not installed')
        result = subprocess.run(
            [playbook, '--syntax-check', '-i', 'localhost,',
             os.path.join(ETC, 'ansible', 'inspect-hosts.yml')],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(0, result.returncode, result.stdout + result.stderr)
