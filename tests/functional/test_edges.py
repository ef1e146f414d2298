"""``nova-config`` on identically wired hosts, every output form.

Two HGX H100 hosts with the same addresses and module ids
(:mod:`tests.edge_fixture`): both must get all 9 ``device_spec`` entries
(8 per GPU, then the generic one) in the table rows, the ``--ini`` text
and each ``--output-dir`` layout's per-host file. Expected entries are
written out by hand (:func:`tests.edge_fixture.twin_device_spec`).
"""

import json
import os
import re

import fixtures
from oslotest import base
import yaml

from tests import edge_fixture as fx
from tests.functional import cli
from tests.functional import test_nova_config_layouts as layouts_test

BLOCK = re.compile(r'^# nova\.conf on nova-compute(?: \((.+)\))?$')


def ini_lists(text, hosts):
    """host -> its device_spec entries from ``--ini`` text, by block."""
    lists = {h: [] for h in hosts}
    names = None
    for line in text.splitlines():
        if line.startswith('# nova.conf on ') or line.startswith(
                '# placement.conf on '):
            match = BLOCK.match(line)
            names = (None if match is None else
                     match.group(1).split(', ') if match.group(1) else
                     list(hosts))
        elif names and line.startswith('device_spec = '):
            for name in names:
                lists[name].append(json.loads(line.split(' = ', 1)[1]))
    return lists


class TestIdenticallyWiredHosts(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.expected = {h: fx.twin_device_spec() for h in fx.TWINS}
        self.assertEqual(9, len(fx.twin_device_spec()))

    def nova_config(self, *args):
        result = cli.run(self, 'nvlink', 'nova-config', '--topology',
                         fx.TOPOLOGY, '--alias', 'h100', '--host', 'twin-01',
                         '--host', 'twin-02', *args)
        self.assertEqual(0, result.code, result.stderr)
        return result.stdout

    def test_rows_and_ini_give_both_hosts_every_entry(self):
        rows = json.loads(self.nova_config('-f', 'json'))
        self.assertEqual(self.expected,
                         layouts_test.host_lists(rows, list(fx.TWINS)))
        # One row per entry names both hosts: printed once.
        self.assertEqual(8, sum(1 for r in rows if r['service'] ==
                                'nova-compute (twin-01, twin-02)'))
        self.assertEqual(self.expected, ini_lists(
            self.nova_config('--ini'), fx.TWINS))

    def test_each_layout_gives_both_hosts_every_entry(self):
        readers = {
            'kolla': ('nova/%s/nova.conf', fx.ini_entries),
            'config-dir': ('hosts/%s/nova-compute.conf.d/'
                           'nvlink-placement.conf', fx.ini_entries),
            # The host's GPUs are the first value of nova_device_spec.
            'openstack-ansible': ('host_vars/%s.yml', lambda text: json.loads(
                yaml.safe_load(text)['nova_device_spec'][0])),
        }
        for layout, (pattern, read) in readers.items():
            out = os.path.join(self.tmp, layout)
            self.nova_config('--output-dir', out, '--layout', layout)
            for host in fx.TWINS:
                with open(os.path.join(out, pattern % host)) as f:
                    self.assertEqual(self.expected[host], read(f.read()),
                                     (layout, host))


class TestTwoGpuHostWithoutGroups(base.BaseTestCase):

    def test_the_whole_host_is_a_size_of_two(self):
        # Two GPUs, no board and no groups: the whole host (2 GPUs) is
        # still a size, member 0 and 1 by PCI address.
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'two.yaml')
        with open(path, 'w') as f:
            json.dump({'version': 1, 'hosts': {'two-01': {'gpus': {
                '0000:b1:00.0': {'vendor_id': '10de', 'device_id': '2330'},
                '0000:41:00.0': {'vendor_id': '10de',
                                 'device_id': '2330'}}}}}, f)
        result = cli.run(self, 'nvlink', 'nova-config', '--topology', path,
                         '--alias', 'h100', '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual({'two-01': [
            {'vendor_id': '10de', 'product_id': '2330',
             'address': '0000:41:00.0',
             'traits': 'CUSTOM_PCI_GROUP2_MEMBER0'},
            {'vendor_id': '10de', 'product_id': '2330',
             'address': '0000:b1:00.0',
             'traits': 'CUSTOM_PCI_GROUP2_MEMBER1'},
            {'vendor_id': '10de', 'product_id': '2330'}]},
            layouts_test.host_lists(json.loads(result.stdout), ['two-01']))
