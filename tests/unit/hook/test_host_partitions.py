"""Which partitions are active: ``openstack nvlink host partitions`` and
the notes of ``nvlink-host-inspect``; what the hook imports."""

import errno
import io
import json
import os
import subprocess
import sys
import textwrap
import types

import fixtures
from oslotest import base
import yaml

from nvlink_placement.cmd import host_inspect
from nvlink_placement import errors
from nvlink_placement.fabric import client as fm
from nvlink_placement.osc import display
from nvlink_placement.osc import host as osc_host
from tests.unit.discovery import helpers

M = helpers.BY_MODULE
ALL = [M[m] for m in range(1, 9)]


class PartitionsTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(helpers.HostTempDir()).path
        self.mapping = os.path.join(self.tmp, 'map.json')
        with open(self.mapping, 'w') as handle:
            json.dump({'00000000:%s' % a[5:].upper(): m
                       for a, m in helpers.BOARD2.items()}, handle)

    def activate(self, library, *ids):
        with fm.FabricManagerClient(fm.load_library(library)) as client:
            for pid in ids:
                client.activate_partition(pid)


class TestHostPartitions(PartitionsTest):

    def listing(self, *argv):
        command = osc_host.HostPartitions(
            types.SimpleNamespace(stdout=io.StringIO()), None)
        self.assertFalse(command.auth_required)
        args = command.get_parser('openstack nvlink host partitions'
                                  ).parse_args(list(argv))
        columns, rows = command.take_action(args)
        self.assertEqual(('partition_id', 'active', 'num_gpus',
                          'physical_ids', 'addresses'), columns)
        return [(pid, active, count, ids.machine_readable(),
                 addresses.machine_readable())
                for pid, active, count, ids, addresses in rows]

    def test_live_fabric_manager(self):
        library = helpers.build_fake_nvfm(self)
        self.activate(library, 3, 12)
        rows = self.listing('--fm-library', library, '--mapping',
                            self.mapping, '--fm-timeout', '2')
        self.assertEqual(
            [(0, False, 8, list(range(1, 9)), ALL),
             (1, False, 4, [1, 2, 3, 4], ALL[:4]),
             (2, False, 4, [5, 6, 7, 8], ALL[4:]),
             (3, True, 2, [1, 3], [M[1], M[3]]),
             (4, False, 2, [2, 4], [M[2], M[4]]),
             (5, False, 2, [5, 7], [M[5], M[7]]),
             (6, False, 2, [6, 8], [M[6], M[8]])] +
            [(7 + i, i == 5, 1, [i + 1], [ALL[i]]) for i in range(8)],
            rows)

    def test_table_keeps_ids_and_addresses_aligned(self):
        column = display.InOrder([M[1], M[2], 'unknown'])
        # osc_lib's ListColumn would sort them.
        self.assertEqual('0000:3a:00.0, 0000:18:00.0, unknown',
                         column.human_readable())
        self.assertEqual('3, 1', display.InOrder([3, 1]).human_readable())
        self.assertEqual([3, 1], display.InOrder([3, 1]).machine_readable())

    def test_saved_fmpm_output_without_mapping(self):
        document = json.loads(helpers.fmpm_json(helpers.H100_TABLE))
        document['partitionInfo'][1]['isActive'] = 1
        fmpm = os.path.join(self.tmp, 'fmpm.json')
        with open(fmpm, 'w') as handle:
            json.dump(document, handle)
        rows = self.listing('--fmpm-json', fmpm)
        self.assertEqual((1, True, 4, [1, 2, 3, 4], ['unknown'] * 4),
                         rows[1])
        self.assertEqual([1], [r[0] for r in rows if r[1]])

    def test_errors(self):
        library = helpers.build_fake_nvfm(self)
        self.useFixture(fixtures.EnvironmentVariable('FAKE_NVFM_FAIL',
                                                     'fmConnect:-3'))
        for argv, message in (
                (['--fm-library', library, '--fm-socket', '/run/fm.sock'],
                 'Fabric Manager at unix:/run/fm.sock: fmConnect failed: '
                 'FM_ST_NOT_SUPPORTED (-3): Fabric Manager is not in shared '
                 'NVSwitch mode (FABRIC_MODE=1)'),
                (['--fm-library', library, '--fmpm-json', 'x.json'],
                 '--fmpm-json replaces asking Fabric Manager: do not combine '
                 'it with --fm-library')):
            exc = self.assertRaises(errors.NvlinkError, self.listing, *argv)
            self.assertEqual(message, str(exc))


class TestHungFabricManager(PartitionsTest):
    """Host commands give up on a Fabric Manager that never answers."""

    def hang(self, call):
        pidfile = os.path.join(self.tmp, 'hung.pid')
        self.useFixture(fixtures.EnvironmentVariable('FAKE_NVFM_HANG', call))
        self.useFixture(fixtures.EnvironmentVariable(
            'FAKE_NVFM_HANG_PIDFILE', pidfile))
        return pidfile

    def assertKilled(self, pidfile):
        with open(pidfile) as handle:
            pid = int(handle.read())
        error = self.assertRaises(OSError, os.kill, pid, 0)
        self.assertEqual(errno.ESRCH, error.errno)

    def test_partitions_listing_stops_at_the_deadline(self):
        library = helpers.build_fake_nvfm(self)
        pidfile = self.hang('fmGetSupportedFabricPartitions')
        command = osc_host.HostPartitions(
            types.SimpleNamespace(stdout=io.StringIO()), None)
        args = command.get_parser('partitions').parse_args(
            ['--fm-library', library, '--fm-deadline', '1'])
        exc = self.assertRaises(errors.NvlinkError, command.take_action,
                                args)
        self.assertEqual(
            'Fabric Manager did not answer within 1 s while reading the '
            'partitions (fmGetSupportedFabricPartitions): stopped waiting '
            '(fm_deadline)', str(exc))
        self.assertKilled(pidfile)

    def test_inspect_stops_at_the_deadline(self):
        library = helpers.build_fake_nvfm(self)
        pidfile = self.hang('fmConnect')
        host = self.useFixture(helpers.FakeSysfs())
        done = subprocess.run(
            [os.path.join(os.path.dirname(sys.executable),
                          'nvlink-host-inspect'),
             '--hostname', 'compute-01', '--sysfs-root', host.root,
             '--mapping', self.mapping, '--fm-library', library,
             '--no-nvidia-smi', '--fm-deadline', '1'],
            cwd=os.path.dirname(helpers.TESTS), capture_output=True,
            text=True, timeout=60)
        self.assertEqual(
            (1, '', 'nvlink-host-inspect: error: Fabric Manager did not '
             'answer within 1 s while connecting to Fabric Manager at '
             '127.0.0.1:6666 (fmConnect): stopped waiting (fm_deadline)\n'),
            (done.returncode, done.stdout, done.stderr))
        self.assertKilled(pidfile)

    def test_a_library_that_is_not_libnvfm_is_not_loaded(self):
        helpers.build_fake_nvfm(self)
        script = os.path.join(self.tmp, 'libnvfm.so.1')
        with open(script, 'w') as handle:
            handle.write('#!/bin/sh\n')
        command = osc_host.HostPartitions(
            types.SimpleNamespace(stdout=io.StringIO()), None)
        args = command.get_parser('partitions').parse_args(
            ['--fm-library', script])
        exc = self.assertRaises(errors.NvlinkError, command.take_action,
                                args)
        self.assertEqual('fm_library %s: not a 64-bit ELF shared library'
                         % script,
                         str(exc))


class TestInspectNotes(PartitionsTest):

    def test_active_partitions_are_noted(self):
        library = helpers.build_fake_nvfm(self)
        self.activate(library, 3, 12)
        host = self.useFixture(helpers.FakeSysfs())
        stdout = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', stdout))
        self.assertEqual(0, host_inspect.main([
            '--hostname', 'compute-01', '--sysfs-root', host.root,
            '--mapping', self.mapping, '--fm-library', library,
            '--no-nvidia-smi']))
        fragment = yaml.safe_load(stdout.getvalue())['hosts']['compute-01']
        self.assertEqual(
            ['FM partitions active (GPUs in use by VMs): 3 {0000:3a:00.0, '
             '0000:5d:00.0}; 12 {0000:9a:00.0}'], fragment['notes'])


class TestHookImports(base.BaseTestCase):
    """The hook runs on a bare compute node: standard library only."""

    def test_only_standard_library_and_ours(self):
        script = textwrap.dedent("""\
            import sys
            before = set(sys.modules)
            import nvlink_placement.cmd.partition_hook
            allowed = ('nvlink_placement.hook', 'nvlink_placement.cmd',
                       'nvlink_placement.discovery', 'nvlink_placement.errors',
                       'nvlink_placement.fabric',
                       'nvlink_placement.documents',
                       'nvlink_placement.helptext',
                       'nvlink_placement.topology.pci',
                       'nvlink_placement.topology.laminar',
                       'nvlink_placement.topology.boards')
            print(' '.join(sorted(
                m for m in set(sys.modules) - before
                if m.split('.')[0] not in sys.stdlib_module_names
                and m not in ('nvlink_placement', 'nvlink_placement.topology')
                and not m.startswith(allowed))))
            """)
        root = os.path.dirname(helpers.TESTS)
        done = subprocess.run([sys.executable, '-c', script], cwd=root,
                              capture_output=True, text=True, check=True)
        self.assertEqual('', done.stdout.strip())
