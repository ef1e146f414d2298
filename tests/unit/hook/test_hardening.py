"""The hook under hostile conditions, through its installed console script.

Each test runs ``nvlink-partition-hook`` as libvirt does: a process with
the domain XML on standard input, here against the fake libnvfm (whose
``FAKE_NVFM_HANG`` makes a call never return). No standard error line
may be a traceback; standard output stays empty.
"""

import errno
import io
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import fixtures

from nvlink_placement import errors
from nvlink_placement.hook import activation
from nvlink_placement.hook import config
from nvlink_placement.hook import domain
from nvlink_placement.hook import lock
from tests.unit.discovery import helpers
from tests.unit.hook import samples
from tests.unit.hook import test_hook

NAME = test_hook.NAME
P = test_hook.P
M = test_hook.M
gpus = test_hook.gpus
described = test_hook.described
REFUSED = P + 'ERROR: refusing to start VM %s (policy refuse): ' % NAME
ALLOWED = P + ('WARNING: VM %s starts without NVLink between its GPUs '
               '(policy allow): ' % NAME)
NOBODY = 65534
SCRIPT = os.path.join(os.path.dirname(sys.executable),
                      'nvlink-partition-hook')
EVIL_SOURCE = textwrap.dedent("""\
    #include <stdio.h>
    #include <stdlib.h>
    __attribute__((constructor)) static void planted(void)
    {
        FILE *out = fopen(getenv("EVIL_MARKER"), "w");
        if (out)
            fclose(out);
    }
    int fmLibInit(void) { return 0; }
    """)


class ScriptTest(test_hook.HookTest):

    def setUp(self):
        super().setUp()
        if not os.path.exists(SCRIPT):
            self.fail('%s is missing: install the package (pip install -e '
                      '.) to test its console script' % SCRIPT)

    def script(self, operation, sub_operation, xml, name=NAME):
        """Run the console script; returns (exit status, standard error)."""
        done = subprocess.run(
            [SCRIPT, name, operation, sub_operation, '-'],
            input=xml if isinstance(xml, bytes) else xml.encode(),
            capture_output=True, timeout=120)
        self.assertEqual(b'', done.stdout)
        err = done.stderr.decode()
        self.assertNotIn('Traceback', err)
        return done.returncode, err

    def start(self, addresses, extra=''):
        return self.script('prepare', 'begin',
                           samples.domain_xml(addresses, extra))

    def stop(self, addresses, extra=''):
        return self.script('release', 'end',
                           samples.domain_xml(addresses, extra))

    def needs_root(self):
        if os.geteuid() != 0:
            self.skipTest('giving a file to another user needs root')

    def write_mapping(self, text):
        with open(self.mapping, 'w') as handle:
            handle.write(text)

    def hang(self, call):
        pidfile = os.path.join(self.tmp, 'hung.pid')
        self.env(FAKE_NVFM_HANG=call, FAKE_NVFM_HANG_PIDFILE=pidfile,
                 NVLINK_HOOK_FM_DEADLINE='1', NVLINK_HOOK_FM_TIMEOUT='1')

        def pid():
            with open(pidfile) as handle:
                return int(handle.read())

        def kill_leftover():
            if os.path.exists(pidfile):
                try:
                    os.kill(pid(), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.addCleanup(kill_leftover)
        return pid

    def assertGone(self, pid):
        error = self.assertRaises(OSError, os.kill, pid, 0)
        self.assertEqual(errno.ESRCH, error.errno)


class TestDeadline(ScriptTest):
    """Item 1: a hung FM call is abandoned at the deadline."""

    def test_refused_at_the_deadline(self):
        for call, doing in (
                ('fmGetSupportedFabricPartitions',
                 'reading the partitions (fmGetSupportedFabricPartitions)'),
                ('fmConnect', 'connecting (fm_library %s)' % self.library)):
            pid = self.hang(call)
            self.assertEqual(
                (1, REFUSED + 'Fabric Manager did not answer within 1 s '
                 'while %s: stopped waiting (fm_deadline)\n' % doing),
                self.start(gpus(1, 3)))
            # The process stuck in libnvfm was killed and reaped.
            self.assertGone(pid())
        self.env(FAKE_NVFM_HANG='')
        self.assertEqual([], self.active())

    def test_allowed_at_the_deadline(self):
        pid = self.hang('fmActivateFabricPartition')
        self.env(NVLINK_HOOK_POLICY='allow')
        self.assertEqual(
            (0, ALLOWED + 'Fabric Manager did not answer within 1 s while '
             'activating partition 3 (fmActivateFabricPartition): stopped '
             'waiting (fm_deadline)\n'), self.start(gpus(1, 3)))
        self.assertGone(pid())

    def test_the_lock_is_free_again(self):
        self.hang('fmGetSupportedFabricPartitions')
        self.assertEqual(1, self.start(gpus(1, 3))[0])
        self.env(FAKE_NVFM_HANG='', NVLINK_HOOK_LOCK_TIMEOUT='1')
        self.assertEqual(
            (0, P + 'INFO: activated %s of VM %s\n' % (described(3, 1, 3),
                                                       NAME)),
            self.start(gpus(1, 3)))


class TestUnmappedGpu(ScriptTest):
    """Item 2: a GPU that may be on the baseboard is never let through."""

    def test_mapping_without_one_of_the_vms_gpus(self):
        self.write_mapping('{%s}' % ', '.join(
            '"%s": %d' % (a, m) for a, m in helpers.BOARD2.items()
            if m != 3))
        message = (
            'cannot tell whether GPU %s of VM %s is on the NVSwitch '
            'baseboard: no Fabric Manager partition holds it, but %s gives '
            'no address to physical id 3 of Fabric Manager\'s partitions; '
            'write the mapping again from nvidia-smi -q (it must list every '
            'baseboard GPU)\n' % (M[3], NAME, self.mapping))
        self.assertEqual((1, REFUSED + message), self.start(gpus(1, 3)))
        self.env(NVLINK_HOOK_POLICY='allow')
        self.assertEqual((0, ALLOWED + message), self.start(gpus(1, 3)))
        # Not even module 1's single-GPU partition: nothing half-done.
        self.assertEqual([], self.active())


class TestMappingOfThisHost(ScriptTest):
    """A mapping must place FM's GPUs on this host's GPUs, or nothing runs.

    A GPU the mapping misplaces looks, to FM's partitions, like a GPU no
    partition holds; only one known not to be a baseboard GPU may pass.
    """

    def mapping_with(self, moved):
        """Write board 2's mapping with module ids moved to other addresses.

        :param moved: dict ``{module id: address}``.
        """
        self.write_mapping(json.dumps({
            moved.get(m, a): m for a, m in helpers.BOARD2.items()}))

    def assertFollowsPolicy(self, message, modules=(1, 3), addresses=()):
        vm = gpus(*modules) + list(addresses)
        self.env(NVLINK_HOOK_POLICY='refuse')
        self.assertEqual((1, REFUSED + message + '\n'), self.start(vm))
        self.env(NVLINK_HOOK_POLICY='allow')
        self.assertEqual((0, ALLOWED + message + '\n'), self.start(vm))
        # Not even the single-GPU partition of module 1: nothing half-done.
        self.assertEqual([], self.active())

    def test_one_address_this_host_does_not_have(self):
        # Module 3 at 0000:5e:00.0 instead of 0000:5d:00.0.
        self.mapping_with({3: '0000:5e:00.0'})
        self.assertFollowsPolicy(
            'mapping file %s names PCI addresses that are not NVIDIA GPUs of '
            'this host: 0000:5e:00.0 (no such device); it was written on '
            'another host or before the addresses changed: write it again '
            'on this host from nvidia-smi -q' % self.mapping)

    def test_mapping_of_another_host(self):
        # Every address one bus further: none of them is on this host.
        moved = {m: '0000:%02x:00.0' % (int(a[5:7], 16) + 1)
                 for a, m in helpers.BOARD2.items()}
        self.mapping_with(moved)
        self.assertFollowsPolicy(
            'mapping file %s names PCI addresses that are not NVIDIA GPUs of '
            'this host: %s; it was written on another host or before the '
            'addresses changed: write it again on this host from nvidia-smi '
            '-q' % (self.mapping, ', '.join(
                '%s (no such device)' % a for a in sorted(moved.values()))))

    def test_addresses_of_devices_that_are_not_gpus(self):
        # An NVSwitch (NVIDIA, not a GPU) and the Mellanox NIC.
        self.mapping_with({3: helpers.NVSWITCHES[0], 4: '0000:0c:00.0'})
        self.assertFollowsPolicy(
            'mapping file %s names PCI addresses that are not NVIDIA GPUs of '
            'this host: 0000:05:00.0 (10de:22a3, class 0x068000), '
            '0000:0c:00.0 (15b3:101b, class 0x020700); it was written on '
            'another host or before the addresses changed: write it again '
            'on this host from nvidia-smi -q' % self.mapping)

    def test_misplaced_gpu_like_the_baseboard_gpus_is_not_ignored(self):
        # Module 3 placed on the PCIe card: 0000:5d:00.0, an H100 SXM
        # like every GPU of the partitions, is in none of them.
        self.mapping_with({3: test_hook.PCIE_GPU})
        self.assertFollowsPolicy(
            'GPU %s of VM %s is a 10de:2330 GPU like those of Fabric '
            'Manager\'s partitions, but no partition holds it: a baseboard '
            'GPU that %s does not place, or that Fabric Manager left out; '
            'write the mapping again from nvidia-smi -q and compare it with '
            '`openstack nvlink host partitions`' % (M[3], NAME, self.mapping))

    def test_baseboard_gpu_outside_the_partitions_is_not_ignored(self):
        # One more H100 SXM that neither the mapping nor FM knows.
        self.sysfs.add_gpu('0000:e1:00.0', iommu_group=91, numa=1)
        self.assertFollowsPolicy(
            'GPU 0000:e1:00.0 of VM %s is a 10de:2330 GPU like those of '
            'Fabric Manager\'s partitions, but no partition holds it: a '
            'baseboard GPU that %s does not place, or that Fabric Manager '
            'left out; write the mapping again from nvidia-smi -q and '
            'compare it with `openstack nvlink host partitions`'
            % (NAME, self.mapping), modules=(), addresses=['0000:e1:00.0'])

    def test_pcie_card_is_still_ignored(self):
        # Another model than the partitions' GPUs: known not to be one.
        self.assertEqual(
            (0, P + 'INFO: VM %s: GPU %s is in no Fabric Manager partition '
             '(not a baseboard GPU): ignored\n' % (NAME, test_hook.PCIE_GPU) +
             P + 'INFO: activated %s of VM %s\n' % (described(11, 5), NAME)),
            self.start(gpus(5) + [test_hook.PCIE_GPU]))


class TestOneBound(ScriptTest):
    """fm_deadline bounds the whole hook: the lock wait counts against it."""

    def test_lock_wait_ends_at_the_deadline(self):
        self.env(NVLINK_HOOK_FM_DEADLINE='1', NVLINK_HOOK_LOCK_TIMEOUT='20')
        with lock.HostLock(self.lock_dir, 1):
            began = time.monotonic()
            code, err = self.start(gpus(1, 3))
            took = time.monotonic() - began
        self.assertEqual(
            (1, REFUSED + 'another nvlink-partition-hook held %s/hook.lock '
             'until fm_deadline (1 s) passed (is one stuck talking to Fabric '
             'Manager?)\n' % self.lock_dir), (code, err))
        self.assertLess(took, 5)
        self.assertEqual([], self.active())

    def test_lock_wait_is_charged_to_the_deadline(self):
        # The hook waits for the lock we hold, then FM hangs: what FM gets
        # is what the wait left of fm_deadline, and the hook says both.
        # Its own accounting is checked, not the clock of this machine.
        self.hang('fmGetSupportedFabricPartitions')
        self.env(NVLINK_HOOK_FM_DEADLINE='3', NVLINK_HOOK_LOCK_TIMEOUT='20')
        lock_file = os.path.join(self.lock_dir, lock.LOCK_FILE)
        with lock.HostLock(self.lock_dir, 1):
            proc = subprocess.Popen(
                [SCRIPT, NAME, 'prepare', 'begin', '-'],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE)
            self.addCleanup(proc.kill)
            proc.stdin.write(samples.domain_xml(gpus(1, 3)).encode())
            proc.stdin.close()
            fds = '/proc/%d/fd' % proc.pid
            for _ in range(400):     # the hook opens the lock file to wait
                if any(os.path.realpath(os.path.join(fds, fd)) == lock_file
                       for fd in os.listdir(fds)):
                    break
                time.sleep(0.05)
            else:
                self.fail('the hook never opened %s' % lock_file)
            time.sleep(0.6)
        code = proc.wait(60)
        out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
        proc.stdout.close()
        proc.stderr.close()
        self.assertEqual((1, ''), (code, out), err)
        found = re.search(r'Fabric Manager did not answer while reading the '
                          r'partitions \(fmGetSupportedFabricPartitions\) in '
                          r'the ([0-9.]+) s left of fm_deadline \(3 s\) after '
                          r'([0-9.]+) s waiting for another '
                          r'nvlink-partition-hook: stopped waiting\n$', err)
        self.assertIsNotNone(found, err)
        left, waited = float(found.group(1)), float(found.group(2))
        self.assertGreaterEqual(waited, 0.5, err)
        # Each figure is rounded to 0.1 s: together at most the deadline.
        self.assertLessEqual(left + waited, 3.1, err)
        self.env(FAKE_NVFM_HANG='')
        self.assertEqual([], self.active())

    def test_concurrent_starts_with_fabric_manager_hung(self):
        # Each start waits for the one ahead of it, stuck on FM: all are
        # refused within fm_deadline of their own start, not one after
        # another (3, 6, 9 s).
        self.hang('fmGetSupportedFabricPartitions')
        self.env(NVLINK_HOOK_FM_DEADLINE='3', NVLINK_HOOK_LOCK_TIMEOUT='20')
        xml = samples.domain_xml(gpus(1, 3)).encode()
        procs = [(time.monotonic(), subprocess.Popen(
            [SCRIPT, NAME, 'prepare', 'begin', '-'], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE))
            for _ in range(3)]
        for _, proc in procs:   # all of them have their XML at once
            proc.stdin.write(xml)
            proc.stdin.close()
        results = []
        for began, proc in procs:
            code = proc.wait(60)
            took = time.monotonic() - began
            results.append((code, took, proc.stdout.read().decode(),
                            proc.stderr.read().decode()))
            proc.stdout.close()
            proc.stderr.close()
        for code, took, out, err in results:
            self.assertEqual((1, ''), (code, out), err)
            # Serialized, the third would end after 9 s; the bound tells the
            # two apart with room for a loaded machine (6.4 s seen at load
            # 16 on 2 cores).
            self.assertLess(took, 8, results)
            self.assertEqual(1, err.count('\n'), err)
            self.assertTrue(err.startswith(REFUSED), err)
            self.assertIn('fm_deadline', err)
        # The first talked to FM until the deadline; the others waited for
        # it and say so.
        first = (REFUSED + 'Fabric Manager did not answer within 3 s while '
                 'reading the partitions (fmGetSupportedFabricPartitions): '
                 'stopped waiting (fm_deadline)\n')
        errs = [r[3] for r in results]
        self.assertEqual(1, errs.count(first), errs)
        for err in errs:
            if err != first:
                self.assertTrue(
                    'until fm_deadline (3 s) passed' in err or
                    'waiting for another nvlink-partition-hook' in err, err)
            # One that got the lock late had only the rest of its deadline
            # for FM: its own figures say so (each rounded to 0.1 s).
            late = re.search(r'in the ([0-9.]+) s left of fm_deadline '
                             r'\(3 s\) after ([0-9.]+) s waiting', err)
            if late:
                self.assertLessEqual(
                    float(late.group(1)) + float(late.group(2)), 3.1, err)
        self.env(FAKE_NVFM_HANG='')
        self.assertEqual([], self.active())


class TestEveryFailureTakesThePolicyPath(ScriptTest):
    """Item 3: no traceback, one line, the policy decides."""

    def test_utf16_domain_xml(self):
        xml = samples.domain_xml(gpus(1, 3)).replace(
            '<domain', '<?xml version="1.0" encoding="UTF-16"?>\n<domain',
            1).encode('utf-16')
        self.assertEqual(
            (0, P + 'INFO: activated %s of VM %s\n' % (described(3, 1, 3),
                                                       NAME)),
            self.script('prepare', 'begin', xml))

    def assert_refused_then_allowed(self, xml, message):
        """``xml`` fails with ``message``: refused, allowed, nothing active."""
        self.assertEqual((1, REFUSED + message),
                         self.script('prepare', 'begin', xml))
        self.env(NVLINK_HOOK_POLICY='allow')
        self.assertEqual((0, ALLOWED + message),
                         self.script('prepare', 'begin', xml))
        self.assertEqual([], self.active())

    def test_domain_xml_not_in_its_encoding(self):
        xml = samples.domain_xml(gpus(1, 3)).encode().replace(
            NAME.encode(), b'vm-\xff', 1)
        message = ('domain XML of guest %s: invalid XML: not well-formed '
                   '(invalid token): line 2, column 11\n' % NAME)
        self.assert_refused_then_allowed(xml, message)

    def test_domain_xml_in_an_unknown_encoding(self):
        xml = samples.domain_xml(gpus(1, 3)).replace(
            '<domain', '<?xml version="1.0" encoding="x-bogus"?>\n<domain',
            1)
        message = ('domain XML of guest %s: invalid XML: unknown encoding: '
                   'x-bogus\n' % NAME)
        self.assert_refused_then_allowed(xml, message)

    def test_any_error_reading_the_domain_xml_follows_the_policy(self):
        # Whatever reading the XML raises (here the standard library's
        # parser), the policy decides, on one line.
        def broken(*args, **kwargs):
            raise RecursionError('an example')
        self.useFixture(fixtures.MonkeyPatch(
            'xml.etree.ElementTree.fromstring', broken))
        xml = samples.domain_xml(gpus(1, 3))
        for policy, code, head in (('refuse', 1, REFUSED),
                                   ('allow', 0, ALLOWED)):
            self.env(NVLINK_HOOK_POLICY=policy)
            self.assertEqual(
                (code, head + 'domain XML of guest %s: unexpected '
                 'RecursionError: an example\n' % NAME),
                self.hook('prepare', 'begin', xml))
        self.assertEqual([], self.active())

    def test_deeply_nested_mapping(self):
        for text, where, policy, code, head in (
                ('[' * 5000 + ']' * 5000, '', 'refuse', 1, REFUSED),
                ('{"a": ' * 40 + '1' + '}' * 40, ': ' + '.'.join('a' * 32),
                 'allow', 0, ALLOWED)):
            self.write_mapping(text)
            self.env(NVLINK_HOOK_POLICY=policy)
            self.assertEqual(
                (code, head + '%s%s: nested deeper than 32 levels\n'
                 % (self.mapping, where)), self.start(gpus(1, 3)))

    def test_timeouts_beyond_an_hour(self):
        self.env(NVLINK_HOOK_FM_TIMEOUT='1e308')
        self.assertEqual(
            (1, P + "error: environment NVLINK_HOOK_FM_TIMEOUT: expected a "
             "number of seconds above 0 and at most 3600, got '1e308'\n"),
            self.start(gpus(1, 3)))
        for key in ('fm_timeout', 'fm_deadline', 'lock_timeout'):
            for value in ('inf', 'nan', '3601', '-1'):
                self.assertRaises(errors.NvlinkError, config.settings_from,
                                  [(key, value, key)])

    def test_unexpected_errors_follow_the_policy(self):
        # A bug (here: a TypeError) is one line, like any failure.
        def broken(*args):
            raise TypeError('an example bug')
        self.useFixture(fixtures.MonkeyPatch(
            'nvlink_placement.hook.activation.nvidia_gpus', broken))
        log = logging.getLogger('tests.hook.hardening')
        stream = io.StringIO()
        handler = logging.StreamHandler(stream)
        log.addHandler(handler)
        self.addCleanup(log.removeHandler, handler)
        guest = domain.Domain(NAME, tuple(gpus(1, 3)))
        for policy, code in (('refuse', 1), ('allow', 0)):
            settings = config.Settings(policy=policy)
            self.assertEqual(code, activation.run(
                settings, activation.START, guest, log))
        self.assertEqual(
            'refusing to start VM %s (policy refuse): unexpected TypeError: '
            'an example bug\nVM %s starts without NVLink between its GPUs '
            '(policy allow): unexpected TypeError: an example bug\n'
            % (NAME, NAME), stream.getvalue())


class TestTrust(ScriptTest):
    """Item 4: links, owners and modes of what the root hook uses."""

    def test_dangling_link_at_the_lock_path(self):
        target = os.path.join(self.tmp, 'created-by-root')
        os.makedirs(self.lock_dir)
        os.symlink(target, os.path.join(self.lock_dir, 'hook.lock'))
        self.assertEqual(
            (1, REFUSED + 'cannot open the lock file %s/hook.lock: it is a '
             'symbolic link\n' % self.lock_dir), self.start(gpus(1, 3)))
        self.assertFalse(os.path.lexists(target))

    def test_linked_lock_directory(self):
        real = os.path.join(self.tmp, 'real')
        os.makedirs(real)
        os.symlink(real, self.lock_dir)
        self.assertEqual(
            (1, REFUSED + 'refusing the lock directory %s: it is a symbolic '
             'link\n' % self.lock_dir), self.start(gpus(1, 3)))
        self.assertEqual([], os.listdir(real))

    def test_lock_directory_of_another_user(self):
        self.needs_root()
        os.makedirs(self.lock_dir)
        os.chown(self.lock_dir, NOBODY, NOBODY)
        self.assertEqual(
            (1, REFUSED + 'refusing lock directory %s: it is owned by uid '
             '%d, not by root (it must be root\'s and writable by root '
             'only)\n' % (self.lock_dir, NOBODY)), self.start(gpus(1, 3)))

    def test_configuration_others_may_write(self):
        for mode, who in ((0o666, 'group and others'), (0o620, 'group')):
            os.chmod(self.conf, mode)
            self.assertEqual(
                (1, P + 'error: refusing configuration file %s: it is '
                 'writable by %s (mode %04o) (it must be root\'s and '
                 'writable by root only)\n' % (self.conf, who, mode)),
                self.start(gpus(1, 3)))
        os.chmod(self.conf, 0o644)
        os.chmod(self.tmp, 0o777)   # world-writable, no sticky bit
        self.addCleanup(os.chmod, self.tmp, 0o700)
        self.assertEqual(
            (1, P + 'error: refusing configuration file %s: %s is writable '
             'by group and others (mode 0777) (it must be root\'s and '
             'writable by root only)\n' % (self.conf, self.tmp)),
            self.start(gpus(1, 3)))

    def test_configuration_of_another_user(self):
        self.needs_root()
        os.chown(self.conf, NOBODY, NOBODY)
        self.assertEqual(
            (1, P + 'error: refusing configuration file %s: it is owned by '
             'uid %d, not by root (it must be root\'s and writable by root '
             'only)\n' % (self.conf, NOBODY)), self.start(gpus(1, 3)))

    def test_mapping_others_may_write(self):
        os.chmod(self.mapping, 0o646)
        message = ('refusing mapping file %s: it is writable by others (mode '
                   '0646) (it must be root\'s and writable by root only)\n'
                   % self.mapping)
        self.assertEqual((1, REFUSED + message), self.start(gpus(1, 3)))

    def test_library_of_another_user_is_not_loaded(self):
        self.needs_root()
        os.chown(self.library, NOBODY, NOBODY)
        self.assertEqual(
            (1, REFUSED + 'refusing fm_library %s: it is owned by uid %d, not '
             'by root (it must be root\'s and writable by root only)\n'
             % (self.library, NOBODY)), self.start(gpus(1, 3)))

    def build(self, soname=None):
        compiler = shutil.which('gcc') or shutil.which('cc')
        source = os.path.join(self.tmp, 'evil.c')
        with open(source, 'w') as handle:
            handle.write(EVIL_SOURCE)
        out = os.path.join(self.tmp, 'libevil.so')
        subprocess.run([compiler, '-shared', '-fPIC', '-o', out, source] + (
            ['-Wl,-soname,' + soname] if soname else []),
            check=True, capture_output=True)
        return out

    def test_other_libraries_are_never_loaded(self):
        marker = os.path.join(self.tmp, 'constructor-ran')
        self.env(EVIL_MARKER=marker)
        for soname, why in (
                (None, 'its SONAME is missing, not libnvfm.so.1: not the '
                 'Fabric Manager runtime library'),
                ('libnvfm.so.1', 'does not define fmLibShutdown, fmConnect, '
                 'fmDisconnect, fmGetSupportedFabricPartitions, '
                 'fmActivateFabricPartition, fmDeactivateFabricPartition: '
                 'not a libnvfm this tool can use')):
            library = self.build(soname)
            self.env(NVLINK_HOOK_FM_LIBRARY=library)
            self.assertEqual(
                (1, REFUSED + 'fm_library %s: %s\n' % (library, why)),
                self.start(gpus(1, 3)))
            self.assertFalse(os.path.exists(marker))


class TestLogLines(ScriptTest):
    """Item 5: what the domain XML says cannot forge a log line."""

    def test_guest_name_with_a_newline(self):
        forged = 'vm\n%sERROR: refusing to start VM other' % P
        xml = samples.domain_xml(gpus(5), name=forged)
        self.assertEqual(
            (0, P + 'INFO: activated %s of VM vm\\x0a%sERROR: refusing to '
             'start VM other\n' % (described(11, 5), P)),
            self.script('prepare', 'begin', xml))

    def test_name_from_the_arguments(self):
        xml = samples.domain_xml(gpus(1, 2)).replace(
            '<name>%s</name>' % NAME, '')
        code, err = self.script('prepare', 'begin', xml,
                                name='g\r\x1b[2Kx')
        self.assertEqual(1, code)
        self.assertTrue(err.startswith(
            P + 'ERROR: refusing to start VM g\\x0d\\x1b[2Kx (policy '
            'refuse): '), err)
        self.assertEqual(1, err.count('\n'))
