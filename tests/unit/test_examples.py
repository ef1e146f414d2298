"""The shipped examples load, and the Ansible playbook is valid."""

import argparse
import glob
import os
import re
import shutil
import subprocess

from oslotest import base

from nvlink_placement.discovery import options
from nvlink_placement.placement import snapshot
from nvlink_placement.topology import loader

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
ETC = os.path.join(ROOT, 'etc')
PLAYBOOK = os.path.join(ETC, 'ansible', 'inspect-hosts.yml')


class TestExamples(base.BaseTestCase):

    def test_topologies_load(self):
        expected = {'hgx-h100.yaml': (2, 12), 'hgx-h100-numa.yaml': (2, 12),
                    'hgx-h100-50-numa.yaml': (50, 300),
                    'hgx-b200.yaml': (1, 6),
                    'hgx-h100-b200.yaml': (4, 24),
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


class TestPlaybookText(base.BaseTestCase):
    """The playbook's header documents what it reads; its options exist.

    The playbook itself runs in ansible_tests/ (slower, its own suite).
    """

    def setUp(self):
        super().setUp()
        with open(PLAYBOOK) as f:
            self.text = f.read()
        self.body = self.text.partition('\n- name:')[2]

    def test_every_variable_with_a_default_is_documented(self):
        read = {name for name in re.findall(r'([\w.]+) \| default\(',
                                            self.body) if '.' not in name}
        documented = set(re.findall(r'^#   (\w+)(?: {2,}|$)', self.text,
                                    re.MULTILINE))
        self.assertEqual(documented, read)
        self.assertIn('nvlink_fm_library', read)

    def test_options_passed_exist_in_the_inspector(self):
        parser = options.add_arguments(argparse.ArgumentParser())
        known = set(parser._option_string_actions)
        inspect = self.body.split('name: Inspect the host', 1)[1].split(
            '- name:', 1)[0]
        passed = set(re.findall(r"'(--[a-z-]+)'|\"(--[a-z-]+)\"", inspect))
        passed = {a or b for a, b in passed}
        self.assertEqual(set(), passed - known)
        self.assertEqual(14, len(passed))
