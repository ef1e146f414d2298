"""``topology validate|merge``: coverage warnings, --strict, one host per
fragment (through the command line)."""

import json
import os

import fixtures
from oslotest import base
import yaml

from tests.functional import base as fbase
from tests.functional import cli

# Board-2 of the fake HGX H100 host (tests/unit/discovery/helpers.py).
ADDRESSES = ['0000:18:00.0', '0000:2a:00.0', '0000:3a:00.0', '0000:5d:00.0',
             '0000:9a:00.0', '0000:ab:00.0', '0000:ba:00.0', '0000:db:00.0']
MODULES = [2, 4, 1, 3, 6, 8, 5, 7]
SWITCHES = ['0000:05:00.0', '0000:06:00.0']

PARTIAL = ('lists 3 of the 8 GPUs of board hgx-h100-8gpu (modules 3, 4, 5, '
           '6, 7 missing): the missing ones stay out of its NVLink groups; '
           'list every GPU (host inspection does)')
UNGROUPED = ('NVSwitches but no NVLink groups and no board: the domains of '
             'an NVSwitch board come from Fabric Manager or the board; '
             'inspect the host again with Fabric Manager (--fm-*) or '
             '--board, or set its board')


class CoverageTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def write(self, name, hosts):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as f:
            yaml.safe_dump({'version': 1, 'hosts': hosts}, f)
        return path

    def full(self, **extra):
        """An 8-GPU board-2 host with its board."""
        return dict({'board': 'hgx-h100-8gpu',
                     'gpus': dict(zip(ADDRESSES, MODULES))}, **extra)

    def partial(self):
        """Modules 2, 8 and 1 of the board: 3 of its 8 GPUs."""
        return {'board': 'hgx-h100-8gpu',
                'gpus': {ADDRESSES[0]: 2, ADDRESSES[5]: 8, ADDRESSES[2]: 1}}

    def inspected_without_fm(self):
        """What host inspection gives without FM or --board: no groups."""
        return {'gpus': {a: {'module_id': m} for a, m in
                         zip(ADDRESSES, MODULES)},
                'nvswitches': SWITCHES}


class TestValidateWarns(CoverageTest):

    def test_fewer_gpus_than_the_board(self):
        path = self.write('t.yaml', {'c1': self.partial(), 'c2': self.full()})
        result = cli.run(self, 'nvlink', 'topology', 'validate', path)
        self.assertEqual(
            (0, '%s: valid: 2 hosts, 11 GPUs, 7 groups\n' % path,
             'warning: %s: hosts.c1: %s\n' % (path, PARTIAL)),
            (result.code, result.stdout, result.stderr))

    def test_nvswitch_host_without_groups_or_board(self):
        path = self.write('t.yaml', {'c1': self.inspected_without_fm()})
        result = cli.run(self, 'nvlink', 'topology', 'validate', path,
                         '-f', 'json')
        self.assertEqual(0, result.code)
        line = '%s: hosts.c1: %s' % (path, UNGROUPED)
        self.assertEqual({'file': path, 'valid': True, 'hosts': 1,
                          'gpus': 8, 'groups': 0, 'problems': [],
                          'warnings': [line]}, json.loads(result.stdout))
        self.assertEqual('warning: %s\n' % line, result.stderr)

    def test_board_host_whose_gpus_are_all_excluded(self):
        host = self.full()
        host['gpus'] = {a: {'module_id': m, 'excluded': 'vGPU in use'}
                        for a, m in host['gpus'].items()}
        path = self.write('t.yaml', {'c1': host})
        result = cli.run(self, 'nvlink', 'topology', 'validate', path)
        self.assertEqual(0, result.code)
        self.assertEqual(
            'warning: %s: hosts.c1: board hgx-h100-8gpu has NVLink domains, '
            'but this host gets none (8 of its GPUs are excluded)\n' % path,
            result.stderr)

    def test_no_warning_for_whole_hosts_and_pcie_hosts(self):
        for topology in (fbase.H100_TOPOLOGY,
                         os.path.join(fbase.EXAMPLES, 'direct-nvlink.yaml'),
                         self.write('pcie.yaml', {'p1': {'gpus': {
                             ADDRESSES[0]: 1, ADDRESSES[1]: 1}}})):
            result = cli.run(self, 'nvlink', 'topology', 'validate',
                             topology, '--strict')
            self.assertEqual((0, ''), (result.code, result.stderr), topology)

    def test_strict_makes_warnings_problems(self):
        path = self.write('t.yaml', {'c1': self.partial()})
        result = cli.run(self, 'nvlink', 'topology', 'validate', path,
                         '--strict')
        self.assertEqual((1, '', '%s: hosts.c1: %s\n' % (path, PARTIAL)),
                         (result.code, result.stdout, result.stderr))
        result = cli.run(self, 'nvlink', 'topology', 'validate', path,
                         '--strict', '-f', 'json')
        self.assertEqual(1, result.code)
        document = json.loads(result.stdout)
        self.assertEqual((False, ['%s: hosts.c1: %s' % (path, PARTIAL)]),
                         (document['valid'], document['problems']))


class TestMerge(CoverageTest):

    def test_warning_names_the_fragment(self):
        a = self.write('a.yaml', {'c1': self.full()})
        b = self.write('b.yaml', {'c2': self.inspected_without_fm()})
        out = os.path.join(self.tmp, 'merged.yaml')
        result = cli.run(self, 'nvlink', 'topology', 'merge', a, b, '-o', out)
        self.assertEqual(
            (0, '', 'warning: %s: hosts.c2: %s\n%s: 2 hosts from 2 '
             'fragments\n' % (b, UNGROUPED, out)),
            (result.code, result.stdout, result.stderr))
        self.assertTrue(os.path.exists(out))

    def test_strict_writes_nothing(self):
        a = self.write('a.yaml', {'c1': self.full()})
        b = self.write('b.yaml', {'c2': self.partial()})
        out = os.path.join(self.tmp, 'merged.yaml')
        result = cli.run(self, 'nvlink', 'topology', 'merge', a, b, '-o', out,
                         '--strict')
        self.assertEqual((1, '', '%s: hosts.c2: %s\n' % (b, PARTIAL)),
                         (result.code, result.stdout, result.stderr))
        self.assertFalse(os.path.exists(out))

    def test_identical_host_in_two_fragments_is_refused(self):
        """Cloned hosts give identical fragments under one name."""
        a = self.write('node-a.yaml', {'compute-01': self.full()})
        b = self.write('node-b.yaml', {'compute-01': self.full()})
        out = os.path.join(self.tmp, 'merged.yaml')
        result = cli.run(self, 'nvlink', 'topology', 'merge', a, b, '-o', out)
        self.assertEqual(
            (1, '', "%s: hosts.compute-01 is also in %s, identically: each "
             "host must come from one fragment (drop one if the same host "
             "was given twice). Two hosts that report the same name (cloned "
             "images, containers) need hypervisor_hostname set per host to "
             "Nova's name for each\n" % (b, a)),
            (result.code, result.stdout, result.stderr))
        self.assertFalse(os.path.exists(out))

    def test_same_file_twice_is_read_once(self):
        a = self.write('a.yaml', {'compute-01': self.full()})
        spelled = os.path.join(self.tmp, '.', 'a.yaml')
        result = cli.run(self, 'nvlink', 'topology', 'merge', a, spelled)
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(['compute-01'],
                         list(yaml.safe_load(result.stdout)['hosts']))
