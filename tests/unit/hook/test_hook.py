"""nvlink-partition-hook end to end against the fake libnvfm.

Each test builds its own copy of the fake library; its partition state
lives in a file of that test (``FAKE_NVFM_STATE``), so successive hook
runs in one test, each talking to FM from its own child process, see
what the previous ones did, as they would see a running Fabric Manager.
"""

import io
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time

import fixtures
from oslotest import base

from nvlink_placement.cmd import partition_hook
from nvlink_placement.fabric import client as fm
from nvlink_placement.hook import activation
from nvlink_placement.hook import config
from nvlink_placement.hook import domain
from nvlink_placement.hook import lock
from nvlink_placement.hook import partitions
from tests.unit.discovery import helpers
from tests.unit.hook import samples

M = helpers.BY_MODULE
NAME = 'instance-0000002a'
PCIE_GPU = '0000:c1:00.0'
P = 'nvlink-partition-hook: '


def gpus(*modules):
    return [M[m] for m in modules]


def described(pid, *modules):
    """How the hook names partition ``pid`` of these modules."""
    return 'partition %d {%s}' % (pid, ', '.join(
        '%s (module %d)' % (M[m], m) for m in sorted(modules)))


class NoRead(io.BytesIO):
    def read(self, *args):
        raise AssertionError('the hook read its standard input')


def stdin(data):
    """Standard input holding ``data`` (str: UTF-8), as libvirt gives it."""
    if isinstance(data, str):
        data = data.encode()
    return io.TextIOWrapper(data if isinstance(data, io.BytesIO) else
                            io.BytesIO(data))


class HookTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.sysfs = self.useFixture(helpers.FakeSysfs())
        self.sysfs.add_gpu(PCIE_GPU, iommu_group=90, numa=1, device='0x26b5')
        self.library = helpers.build_fake_nvfm(self)
        self.mapping = os.path.join(self.tmp, 'map.json')
        with open(self.mapping, 'w') as handle:
            json.dump({'00000000:%s' % a[5:].upper(): str(m)
                       for a, m in helpers.BOARD2.items()}, handle)
        self.lock_dir = os.path.join(self.tmp, 'run')
        self.conf = os.path.join(self.tmp, 'hook.conf')
        with open(self.conf, 'w') as handle:
            handle.write('[hook]\nfm_library = %s\nmapping = %s\n'
                         'lock_dir = %s\nsysfs_root = %s\nlog = stderr\n'
                         % (self.library, self.mapping, self.lock_dir,
                            self.sysfs.root))
        for key in config.Settings.__dataclass_fields__:
            self.useFixture(fixtures.EnvironmentVariable(
                config.ENV_PREFIX + key.upper()))
        self.useFixture(fixtures.EnvironmentVariable(config.ENV_FILE,
                                                     self.conf))
        self.env(FAKE_NVFM_STATE=os.path.join(self.tmp, 'fm-state'))

    def env(self, **values):
        for key, value in values.items():
            self.useFixture(fixtures.EnvironmentVariable(key, value))

    def hook(self, operation, sub_operation, xml, name=NAME):
        stdout, stderr = io.StringIO(), io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdin', stdin(xml)))
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', stdout))
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', stderr))
        code = partition_hook.main([name, operation, sub_operation, '-'])
        self.assertEqual('', stdout.getvalue())
        return code, stderr.getvalue()

    def start(self, addresses, extra=''):
        return self.hook('prepare', 'begin',
                         samples.domain_xml(addresses, extra))

    def stop(self, addresses, extra=''):
        return self.hook('release', 'end',
                         samples.domain_xml(addresses, extra))

    def client(self):
        return fm.FabricManagerClient(fm.load_library(self.library))

    def active(self):
        with self.client() as client:
            return [p.id for p in client.supported_partitions() if p.active]

    def activate(self, *ids):
        with self.client() as client:
            for pid in ids:
                client.activate_partition(pid)


class TestCycle(HookTest):

    def test_start_and_stop_1_2_4_8_gpu_vms(self):
        for modules, pid in (((5,), 11), ((1, 3), 3), ((6, 8), 6),
                             ((1, 2, 3, 4), 1), ((5, 6, 7, 8), 2),
                             (tuple(range(1, 9)), 0)):
            self.assertEqual(
                (0, P + 'INFO: activated %s of VM %s\n'
                 % (described(pid, *modules), NAME)),
                self.start(gpus(*modules)), modules)
            self.assertEqual([pid], self.active(), modules)
            self.assertEqual(
                (0, P + 'INFO: deactivated %s of VM %s\n'
                 % (described(pid, *modules), NAME)),
                self.stop(gpus(*modules)), modules)
            self.assertEqual([], self.active(), modules)

    def test_vms_side_by_side(self):
        for modules in ((2,), (1, 3), (5, 6, 7, 8), (4,)):
            self.assertEqual(0, self.start(gpus(*modules))[0])
        self.assertEqual([2, 3, 8, 10], self.active())
        self.assertEqual(0, self.stop(gpus(1, 3))[0])
        self.assertEqual([2, 8, 10], self.active())
        # The freed pair can go to a new 2-GPU VM at once.
        self.assertEqual(0, self.start(gpus(3, 1))[0])
        self.assertEqual([2, 3, 8, 10], self.active())

    def test_b200_adjacent_pairs(self):
        self.env(FAKE_NVFM_TABLE='b200')
        code, err = self.start(gpus(1, 2))
        self.assertEqual((0, P + 'INFO: activated %s of VM %s\n'
                          % (described(4, 1, 2), NAME)), (code, err))
        self.assertEqual([4], self.active())

    def test_other_devices_are_ignored(self):
        extra = (samples.NIC_HOSTDEV + samples.SRIOV_INTERFACE +
                 samples.MDEV + samples.USB)
        self.assertEqual(
            (0, P + 'INFO: VM %s: GPU %s is in no Fabric Manager partition '
             '(not a baseboard GPU): ignored\n' % (NAME, PCIE_GPU) +
             P + 'INFO: activated %s of VM %s\n' % (described(11, 5), NAME)),
            self.start(gpus(5) + [PCIE_GPU], extra))
        self.assertEqual([11], self.active())


class TestIdempotence(HookTest):

    def test_already_active_is_success(self):
        self.activate(3)
        self.assertEqual(
            (0, P + 'INFO: %s of VM %s is already active\n'
             % (described(3, 1, 3), NAME)), self.start(gpus(1, 3)))
        self.assertEqual([3], self.active())

    def test_inactive_deactivation_is_success(self):
        self.activate(4)
        self.assertEqual(
            (0, P + 'INFO: %s of VM %s is not active: nothing to '
             'deactivate\n' % (described(3, 1, 3), NAME)),
            self.stop(gpus(1, 3)))
        self.assertEqual([4], self.active())

    def test_fm_says_already_active(self):
        # Another tool activated it between our read and our call.
        self.env(FAKE_NVFM_FAIL='fmActivateFabricPartition:-7')
        self.assertEqual(
            (0, P + 'INFO: %s of VM %s: Fabric Manager says it is already '
             'active (FM_ST_IN_USE)\n' % (described(3, 1, 3), NAME)),
            self.start(gpus(1, 3)))

    def test_fm_says_not_active(self):
        self.activate(3)
        self.env(FAKE_NVFM_FAIL='fmDeactivateFabricPartition:-4')
        self.assertEqual(
            (0, P + 'INFO: %s of VM %s: Fabric Manager says it is not active '
             '(FM_ST_UNINITIALIZED)\n' % (described(3, 1, 3), NAME)),
            self.stop(gpus(1, 3)))

    def test_stop_without_exact_partition(self):
        self.assertEqual(
            (0, P + 'INFO: no Fabric Manager partition is made of exactly '
             'the GPUs of VM %s (GPUs %s (module 1), %s (module 2)): nothing '
             'to deactivate\n' % (NAME, M[1], M[2])), self.stop(gpus(1, 2)))


class TestPolicy(HookTest):

    MISMATCH = (
        'no Fabric Manager partition is made of exactly the GPUs of VM %s '
        '(GPUs %s (module 1), %s (module 2)); nearest: %s, %s, %s' % (
            NAME, M[1], M[2], described(1, 1, 2, 3, 4), described(3, 1, 3),
            described(4, 2, 4)))
    FM_DOWN = (
        'Fabric Manager at 127.0.0.1:6666: fmConnect failed: '
        'FM_ST_CONNECTION_NOT_VALID (-9): Fabric Manager could not be '
        'reached (is nvidia-fabricmanager running and listening there?)')

    def test_mismatch_refused(self):
        self.assertEqual(
            (1, P + 'ERROR: refusing to start VM %s (policy refuse): %s\n'
             % (NAME, self.MISMATCH)), self.start(gpus(1, 2)))
        self.assertEqual([], self.active())

    def test_mismatch_allowed(self):
        self.env(NVLINK_HOOK_POLICY='allow')
        self.assertEqual(
            (0, P + 'WARNING: VM %s starts without NVLink between its GPUs '
             '(policy allow): %s\n' % (NAME, self.MISMATCH)),
            self.start(gpus(1, 2)))
        self.assertEqual([], self.active())

    def test_fm_down_refused(self):
        self.env(FAKE_NVFM_FAIL='fmConnect:-9')
        self.assertEqual(
            (1, P + 'ERROR: refusing to start VM %s (policy refuse): %s\n'
             % (NAME, self.FM_DOWN)), self.start(gpus(1, 3)))
        self.assertEqual(
            (1, P + 'ERROR: VM %s stopped, its partition was not '
             'deactivated: %s\n' % (NAME, self.FM_DOWN)),
            self.stop(gpus(1, 3)))

    def test_fm_down_allowed(self):
        self.env(FAKE_NVFM_FAIL='fmConnect:-9', NVLINK_HOOK_POLICY='allow')
        self.assertEqual(
            (0, P + 'WARNING: VM %s starts without NVLink between its GPUs '
             '(policy allow): %s\n' % (NAME, self.FM_DOWN)),
            self.start(gpus(1, 3)))
        self.assertEqual(
            (0, P + 'WARNING: VM %s stopped, its partition was not '
             'deactivated: %s\n' % (NAME, self.FM_DOWN)),
            self.stop(gpus(1, 3)))

    def test_fm_restart_is_survived(self):
        # The first call after an FM restart fails; the client reconnects.
        self.env(FAKE_NVFM_FAIL_ONCE='fmGetSupportedFabricPartitions:-9')
        self.assertEqual(0, self.start(gpus(1, 3))[0])
        self.assertEqual([3], self.active())

    def test_activation_failure(self):
        self.env(FAKE_NVFM_FAIL='fmActivateFabricPartition:-10')
        self.assertEqual(
            (1, P + 'ERROR: refusing to start VM %s (policy refuse): Fabric '
             'Manager at 127.0.0.1:6666: fmActivateFabricPartition failed: '
             'FM_ST_NVLINK_ERROR (-10)\n' % NAME), self.start(gpus(1, 3)))

    def test_no_libnvfm(self):
        missing = os.path.join(self.tmp, 'libnvfm.so.1')
        self.env(NVLINK_HOOK_FM_LIBRARY=missing)
        self.assertEqual(
            (1, P + 'ERROR: refusing to start VM %s (policy refuse): '
             'fm_library %s: No such file or directory\n' % (NAME, missing)),
            self.start(gpus(1, 3)))

    def test_missing_mapping(self):
        missing = os.path.join(self.tmp, 'absent.json')
        self.env(NVLINK_HOOK_MAPPING=missing)
        self.assertEqual(
            (1, P + 'ERROR: refusing to start VM %s (policy refuse): cannot '
             'read mapping file %s: No such file or directory\n'
             % (NAME, missing)), self.start(gpus(1, 3)))

    def test_lock_timeout(self):
        self.env(NVLINK_HOOK_LOCK_TIMEOUT='0.2')
        with lock.HostLock(self.lock_dir, 1):
            code, err = self.start(gpus(1, 3))
        self.assertEqual(
            (1, P + 'ERROR: refusing to start VM %s (policy refuse): another '
             'nvlink-partition-hook has held %s/hook.lock for more than 0.2 '
             's (is one stuck talking to Fabric Manager?)\n'
             % (NAME, self.lock_dir)), (code, err))
        self.assertEqual([], self.active())


class TestOverlap(HookTest):

    def test_start_with_an_overlapping_active_partition(self):
        self.activate(1)
        code, err = self.start(gpus(1, 3))
        self.assertEqual(
            (1, P + 'ERROR: refusing to start VM %s (policy refuse): cannot '
             'activate %s for VM %s (GPUs %s (module 1), %s (module 3)): '
             'active %s holds %s (module 1), %s (module 3); an active '
             'partition is never deactivated automatically: if no running VM '
             'uses it, deactivate it (`fmpm -d 1`)\n' % (
                 NAME, described(3, 1, 3), NAME, M[1], M[3],
                 described(1, 1, 2, 3, 4), M[1], M[3])), (code, err))
        self.assertEqual([1], self.active())

    def test_stop_never_deactivates_an_overlapping_partition(self):
        self.activate(1)
        for policy, code, level in (('refuse', 1, 'ERROR'),
                                    ('allow', 0, 'WARNING')):
            self.env(NVLINK_HOOK_POLICY=policy)
            self.assertEqual(
                (code, P + '%s: VM %s stopped, its partition was not '
                 'deactivated: VM %s (GPUs %s (module 1), %s (module 3)) '
                 'released, and its partition 3 is not active: active %s '
                 'holds %s (module 1), %s (module 3); an active partition is '
                 'never deactivated automatically: if no running VM uses it, '
                 'deactivate it (`fmpm -d 1`)\n' % (
                     level, NAME, NAME, M[1], M[3], described(1, 1, 2, 3, 4),
                     M[1], M[3])), self.stop(gpus(1, 3)))
            self.assertEqual([1], self.active())


class TestNothingToDo(HookTest):

    def test_other_operations_do_not_read_input(self):
        for operation, sub_operation in (
                ('start', 'begin'), ('started', 'begin'), ('stopped', 'end'),
                ('migrate', 'begin'), ('restore', 'begin'),
                ('reconnect', 'begin'), ('attach', 'begin'),
                ('prepare', 'end')):
            self.assertEqual((0, ''), self.hook(operation, sub_operation,
                                                NoRead()))

    def test_guests_without_pci_devices_need_no_configuration(self):
        self.env(NVLINK_HOOK_CONFIG=os.path.join(self.tmp, 'absent.conf'))
        for xml in (samples.domain_xml(),
                    samples.domain_xml(extra=samples.MDEV + samples.USB +
                                       samples.SRIOV_INTERFACE)):
            self.assertEqual((0, ''), self.hook('prepare', 'begin', xml))
            self.assertEqual((0, ''), self.hook('release', 'end', xml))

    def test_guest_without_nvidia_gpu(self):
        # Neither the mapping nor Fabric Manager is needed.
        self.env(NVLINK_HOOK_MAPPING=os.path.join(self.tmp, 'absent.json'),
                 FAKE_NVFM_FAIL='fmConnect:-9')
        self.assertEqual(
            (0, P + 'INFO: VM %s passes through no NVIDIA GPU (0000:0c:00.0):'
             ' nothing to do\n' % NAME), self.start([], samples.NIC_HOSTDEV))

    def test_guest_with_only_a_pcie_gpu(self):
        # FM's partitions, all placed by the mapping, do not hold it.
        self.assertEqual(
            (0, P + 'INFO: VM %s: GPU %s is in no Fabric Manager partition '
             '(not a baseboard GPU): ignored\n' % (NAME, PCIE_GPU)),
            self.start([PCIE_GPU]))
        self.assertEqual([], self.active())
        # Without FM nobody can tell: refused, or allowed with a warning.
        self.env(FAKE_NVFM_FAIL='fmConnect:-9')
        self.assertEqual(
            (1, P + 'ERROR: refusing to start VM %s (policy refuse): %s\n'
             % (NAME, TestPolicy.FM_DOWN)), self.start([PCIE_GPU]))
        self.env(NVLINK_HOOK_POLICY='allow')
        self.assertEqual(0, self.start([PCIE_GPU])[0])

    def test_device_missing_from_sysfs(self):
        code, err = self.start(['0000:e1:00.0'])
        self.assertEqual(
            (1, P + 'ERROR: refusing to start VM %s (policy refuse): cannot '
             'read %s/bus/pci/devices/0000:e1:00.0/vendor: No such file or '
             'directory\n' % (NAME, self.sysfs.root)), (code, err))


class TestCommandLine(HookTest):

    def test_usage(self):
        stderr = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', stderr))
        self.assertEqual(3, partition_hook.main(['guest', 'prepare']))
        self.assertEqual('usage: nvlink-partition-hook GUEST OPERATION '
                         'SUB-OPERATION [EXTRA] < DOMAIN-XML\n',
                         stderr.getvalue())

    def test_help(self):
        stdout = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', stdout))
        self.assertEqual(0, partition_hook.main(['--help']))
        self.assertTrue(stdout.getvalue().startswith(
            partition_hook.USAGE + '\nlibvirt runs '), stdout.getvalue())

    def test_invalid_xml(self):
        self.assertEqual(
            (1, P + 'ERROR: refusing to start VM g (policy refuse): domain '
             'XML of guest g: invalid XML: unclosed token: line 1, column '
             '0\n'), self.hook('prepare', 'begin', '<domain', name='g'))

    def test_configuration_error(self):
        self.env(NVLINK_HOOK_POLICY='deny')
        self.assertEqual(
            (1, P + "error: environment NVLINK_HOOK_POLICY: expected refuse "
             "or allow, got 'deny'\n"), self.start(gpus(1, 3)))

    def test_name_from_arguments_when_the_xml_has_none(self):
        xml = samples.domain_xml(gpus(5)).replace(
            '<name>%s</name>' % NAME, '')
        self.assertEqual(
            (0, P + 'INFO: activated %s of VM guest-7\n' % described(11, 5)),
            self.hook('prepare', 'begin', xml, name='guest-7'))


class TestSyslog(HookTest):

    def test_syslog_and_stderr(self):
        # A syslog daemon's /dev/log: a Unix datagram socket.
        path = os.path.join(self.tmp, 'log')
        server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(server.close)
        server.bind(path)
        server.settimeout(5)
        self.useFixture(fixtures.MonkeyPatch(
            'nvlink_placement.cmd.partition_hook.SYSLOG_SOCKET', path))
        self.env(NVLINK_HOOK_LOG='auto')
        self.assertEqual((0, ''), self.start(gpus(5)))
        # <30>: facility daemon (3) * 8 + severity info (6).
        self.assertEqual(
            '<30>nvlink-partition-hook[%d]: activated %s of VM %s\x00'
            % (os.getpid(), described(11, 5), NAME),
            server.recv(4096).decode())
        code, err = self.start(gpus(1, 2))
        self.assertEqual(1, code)
        self.assertTrue(err.startswith(P + 'ERROR: refusing to start VM'))
        # <27>: daemon * 8 + severity error (3).
        message = server.recv(4096).decode()
        self.assertTrue(message.startswith(
            '<27>nvlink-partition-hook[%d]: refusing to start VM %s (policy '
            'refuse): no Fabric Manager partition' % (os.getpid(), NAME)),
            message)

    def test_syslog_without_dev_log(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nvlink_placement.cmd.partition_hook.SYSLOG_SOCKET',
            os.path.join(self.tmp, 'absent')))
        for destination, warning in (
                ('auto', ''),
                ('syslog', P + 'WARNING: log = syslog, but %s does not '
                 'exist: logging to standard error\n'
                 % os.path.join(self.tmp, 'absent'))):
            self.env(NVLINK_HOOK_LOG=destination)
            self.assertEqual(
                (0, warning + P + 'INFO: activated %s of VM %s\n'
                 % (described(11, 5), NAME)), self.start(gpus(5)))
            self.assertEqual(0, self.stop(gpus(5))[0])


class TestConcurrency(HookTest):
    """Two hooks at once: the lock serializes them, both succeed."""

    def settings(self):
        return config.Settings(fm_library=self.library, mapping=self.mapping,
                               lock_dir=self.lock_dir,
                               sysfs_root=self.sysfs.root, log='stderr')

    def logger(self):
        log = logging.getLogger('tests.hook.concurrency')
        log.propagate = False
        log.setLevel(logging.INFO)
        handler = logging.Handler()
        handler.emit = lambda record: self.messages.append(
            record.getMessage())
        log.addHandler(handler)
        self.addCleanup(log.removeHandler, handler)
        return log

    def test_two_threads(self):
        self.messages = []
        # The FM work runs in child processes: they note what they do in
        # a file, one line per event.
        journal = os.path.join(self.tmp, 'events')
        place, act = partitions.place, activation._act

        def note(event):
            with open(journal, 'a') as handle:
                handle.write('%s %d\n' % (event, os.getpid()))

        def slow_place(*args):
            # Widen the window between reading the table and acting on it.
            note('read')
            time.sleep(0.2)
            return place(*args)

        def noted_act(*args):
            message = act(*args)
            note('acted')
            return message

        self.useFixture(fixtures.MonkeyPatch(
            'nvlink_placement.hook.partitions.place', slow_place))
        self.useFixture(fixtures.MonkeyPatch(
            'nvlink_placement.hook.activation._act', noted_act))
        settings, log = self.settings(), self.logger()
        codes = {}

        def run(action, name, modules):
            guest = domain.Domain(name, tuple(gpus(*modules)))
            codes[name] = activation.run(settings, action, guest, log)

        for action, expected in ((activation.START, [3, 4]),
                                 (activation.STOP, [])):
            open(journal, 'w').close()
            threads = [threading.Thread(target=run, name=name,
                                        args=(action, name, modules))
                       for name, modules in (('vm-a', (1, 3)),
                                             ('vm-b', (2, 4)))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
            self.assertEqual({'vm-a': 0, 'vm-b': 0}, codes)
            self.assertEqual(expected, self.active())
            # Serialized: each hook acted before the other read.
            with open(journal) as handle:
                events = [line.split() for line in handle]
            first, second = events[0][1], events[2][1]
            self.assertNotEqual(first, second)
            self.assertEqual([['read', first], ['acted', first],
                              ['read', second], ['acted', second]], events)
        self.assertEqual(
            ['activated %s of VM vm-a' % described(3, 1, 3),
             'activated %s of VM vm-b' % described(4, 2, 4),
             'deactivated %s of VM vm-a' % described(3, 1, 3),
             'deactivated %s of VM vm-b' % described(4, 2, 4)],
            sorted(self.messages))

    def test_two_processes(self):
        script = ('import sys\n'
                  'from nvlink_placement.cmd.partition_hook import main\n'
                  'sys.exit(main())\n')
        root = os.path.dirname(helpers.TESTS)
        with lock.HostLock(self.lock_dir, 1):
            procs = [subprocess.Popen(
                [sys.executable, '-c', script, name, 'prepare', 'begin', '-'],
                cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True)
                for name in ('vm-a', 'vm-b')]
            for proc, modules in zip(procs, ((1, 3), (2, 4))):
                proc.stdin.write(samples.domain_xml(gpus(*modules)))
                proc.stdin.close()
            time.sleep(0.5)
            # Both wait for the lock held here.
            self.assertEqual([None, None], [p.poll() for p in procs])
        results = [(p.wait(30), p.stdout.read(), p.stderr.read())
                   for p in procs]
        for proc in procs:
            proc.stdout.close()
            proc.stderr.close()
        self.assertEqual(
            [(0, '', P + 'INFO: activated %s of VM instance-0000002a\n'
              % described(3, 1, 3)),
             (0, '', P + 'INFO: activated %s of VM instance-0000002a\n'
              % described(4, 2, 4))], results)
