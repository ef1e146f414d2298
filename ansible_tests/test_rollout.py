"""The fleet rollout playbook, run for real (etc/ansible/inspect-hosts.yml).

``ansible-playbook`` over a local connection to fake hosts: each has its
own fake sysfs tree (an 8-GPU HGX H100 with NVSwitches), a module-id
mapping and, for the Fabric Manager path, the fake libnvfm built from
tests/fakes/fake_nvfm.c. The inspector is reached through a small wrapper
script (the playbook's ``nvlink_host_inspect``) that runs it with this
test's Python; the merge runs the real ``openstack`` client.

Every host sets ``hypervisor_hostname``: over a local connection they all
have this machine's FQDN, which is the duplicate-name case.
"""

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys

import fixtures
from oslotest import base
import yaml

from nvlink_placement.topology import loader
from tests.unit.discovery import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAYBOOK = os.path.join(ROOT, 'etc', 'ansible', 'inspect-hosts.yml')
BIN = os.path.dirname(sys.executable)

# nvlink-host-inspect with the test's Python; each call's arguments are
# logged, one line per call.
WRAPPER = """#!/bin/sh
printf '%%s\\n' "$*" >> %s
exec %s -c 'import sys
from nvlink_placement.cmd import host_inspect
sys.exit(host_inspect.main())' "$@"
"""


def _tool(name):
    path = os.path.join(BIN, name)
    return path if os.access(path, os.X_OK) else shutil.which(name)


class Rollout(base.BaseTestCase):
    """A temp dir holding fake hosts, an inventory and the playbook run."""

    def setUp(self):
        super().setUp()
        self.playbook = _tool('ansible-playbook')
        self.openstack = _tool('openstack')
        if not (self.playbook and self.openstack):
            self.skipTest('needs ansible-playbook and openstack on PATH or '
                          'next to %s' % sys.executable)
        # Real: the playbook names the fragments by their real path.
        self.tmp = os.path.realpath(self.useFixture(fixtures.TempDir()).path)
        self.wrapper = os.path.join(self.tmp, 'nvlink-host-inspect')
        self.calls = os.path.join(self.tmp, 'calls.log')
        with open(self.wrapper, 'w') as f:
            f.write(WRAPPER % (shlex.quote(self.calls),
                               shlex.quote(sys.executable)))
        os.chmod(self.wrapper, stat.S_IRWXU)
        self.mapping = os.path.join(self.tmp, 'map.json')
        with open(self.mapping, 'w') as f:
            json.dump({'00000000:%s' % a[5:].upper(): m
                       for a, m in helpers.BOARD2.items()}, f)
        self.fragments = os.path.join(self.tmp, 'fragments')
        self.topology = os.path.join(self.tmp, 'topology.yaml')
        self.hosts = {}

    def add_host(self, name, hypervisor_hostname=None, sysfs=None, **vars):
        """An inventory host on a fake sysfs; ``vars`` are playbook vars."""
        sysfs = sysfs or self.useFixture(helpers.FakeSysfs())
        host = {'ansible_connection': 'local',
                'ansible_python_interpreter': sys.executable,
                'ansible_become': False,
                'nvlink_host_inspect': self.wrapper,
                'nvlink_sysfs_root': sysfs.root,
                'nvlink_no_nvidia_smi': True}
        if hypervisor_hostname:
            host['hypervisor_hostname'] = hypervisor_hostname
        host.update(vars)
        self.hosts[name] = host

    def run_playbook(self, *options, playbook=PLAYBOOK):
        inventory = os.path.join(self.tmp, 'inventory.yaml')
        with open(inventory, 'w') as f:
            yaml.safe_dump({'all': {
                'hosts': {'localhost': {
                    'ansible_connection': 'local',
                    'ansible_python_interpreter': sys.executable}},
                'children': {'gpu_compute': {'hosts': self.hosts}}}}, f)
        config = os.path.join(self.tmp, 'ansible.cfg')
        with open(config, 'w') as f:
            f.write('[defaults]\n')
        env = dict(os.environ, ANSIBLE_HOME=os.path.join(self.tmp, 'ah'),
                   ANSIBLE_LOCAL_TEMP=os.path.join(self.tmp, 'at'),
                   ANSIBLE_NOCOLOR='1', ANSIBLE_PIPELINING='1',
                   ANSIBLE_RETRY_FILES_ENABLED='0',
                   ANSIBLE_CONFIG=config)
        result = subprocess.run(
            [self.playbook, '-i', inventory, playbook,
             # Relative: from where ansible-playbook runs (self.tmp).
             '-e', 'fragments_dir=fragments', '-e', 'topology=topology.yaml',
             '-e', 'nvlink_openstack=%s' % self.openstack] + list(options),
            capture_output=True, text=True, env=env, cwd=self.tmp,
            timeout=300)
        return result

    def recap(self, result):
        """``{host: (ok, changed, failed)}`` from the PLAY RECAP."""
        return {m.group(1): tuple(map(int, m.group(2, 3, 4)))
                for m in re.finditer(
                    r'^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+'
                    r'unreachable=\d+\s+failed=(\d+)', result.stdout,
                    re.MULTILINE)}

    def calls_of(self, hostname):
        """The inspector's arguments for ``hostname``, one list per call."""
        with open(self.calls) as f:
            calls = [line.split() for line in f]
        return [c for c in calls if c[1:2] == [hostname]]


def _groups(topology, host):
    return sorted(tuple(sorted(g.members)) for g in
                  topology.hosts[host].groups)


H100 = sorted(tuple(sorted(g)) for g in helpers.H100_GROUPS)


class TestRollout(Rollout):
    """Four hosts, every discovery path; then the same run again."""

    def test_fresh_checkout_then_a_second_run_changes_nothing(self):
        library = helpers.build_fake_nvfm(self)
        fmpm = os.path.join(self.tmp, 'fmpm.json')
        with open(fmpm, 'w') as f:
            f.write(helpers.fmpm_json(helpers.H100_TABLE))
        query = os.path.join(self.tmp, 'q.txt')
        with open(query, 'w') as f:
            f.write(helpers.h100_query_all_gpus())
        matrix = helpers.fixture_path('nvidia-smi',
                                      'topo-hgx-h100-nv18-nics.txt')
        # Fabric Manager through the fake libnvfm.
        self.add_host('node-a', 'compute-a', nvlink_fm_library=library,
                      nvlink_fm_socket='/run/nvidia-fabricmanager/fm.sock',
                      nvlink_fm_timeout=2, nvlink_fm_deadline=20,
                      nvlink_mapping=self.mapping)
        # The board, module ids and matrix from nvidia-smi captures.
        self.add_host('node-b', 'compute-b', nvlink_board='hgx-h200-8gpu',
                      nvlink_no_fm=True, nvlink_no_nvidia_smi=False,
                      nvlink_nvidia_smi_q=query, nvlink_topo_matrix=matrix)
        # Saved fmpm -l output; a vGPU in use, three GPUs not healthy.
        self.add_host('node-c', 'compute-c', nvlink_fmpm_json=fmpm,
                      nvlink_mapping=self.mapping,
                      sysfs=self.useFixture(helpers.FakeSysfs(quirks=True)))
        # NVSwitches, no FM, no board: no group, which it says is expected.
        self.add_host('node-h', 'compute-h', nvlink_no_fm=True,
                      nvlink_mapping=self.mapping,
                      nvlink_expect_no_groups=True)
        self.assertFalse(os.path.exists(self.fragments))

        first = self.run_playbook()
        self.assertEqual(0, first.returncode, first.stdout + first.stderr)
        self.assertEqual(['node-a.yaml', 'node-b.yaml', 'node-c.yaml',
                          'node-h.yaml'], sorted(os.listdir(self.fragments)))
        topology = loader.load(self.topology)
        self.assertEqual(['compute-a', 'compute-b', 'compute-c', 'compute-h'],
                         list(topology.hosts))
        for host in ('compute-a', 'compute-b'):
            self.assertEqual(H100, _groups(topology, host))
        with open(self.topology) as f:
            merged = yaml.safe_load(f)
        self.assertEqual('hgx-h200-8gpu',
                         merged['hosts']['compute-b']['board'])
        self.assertEqual({'fm'}, {g.source for g in
                                  topology.hosts['compute-a'].groups})
        # The vGPU parent (module 7) leaves its groups: its pair {5, 7}
        # keeps one GPU, no group.
        self.assertEqual(
            sorted(kept for kept in (tuple(a for a in g if a != '0000:db:00.0')
                                     for g in H100) if len(kept) > 1),
            _groups(topology, 'compute-c'))
        self.assertEqual([], topology.hosts['compute-h'].groups)

        # The options reach the inspector.
        self.assertEqual([[
            '--hostname', 'compute-a', '--sysfs-root',
            self.hosts['node-a']['nvlink_sysfs_root'], '-f', 'yaml',
            '--mapping', self.mapping, '--fm-socket',
            '/run/nvidia-fabricmanager/fm.sock', '--fm-library', library,
            '--fm-timeout', '2', '--fm-deadline', '20', '--no-nvidia-smi']],
            self.calls_of('compute-a')[:1])
        self.assertEqual(
            ['--board', 'hgx-h200-8gpu', '--nvidia-smi-q', query,
             '--topo-matrix', matrix, '--no-fm'],
            self.calls_of('compute-b')[0][6:])
        self.assertEqual(['--mapping', self.mapping, '--fmpm-json', fmpm,
                          '--no-nvidia-smi'],
                         self.calls_of('compute-c')[0][6:])

        # What the inspector noted, and the merge's warning, are shown.
        for line in (
                'compute-c: note: 0000:db:00.0 will be left out of its '
                'NVLink groups: vGPU in use (mdev parent, 1 mdev instance)',
                'compute-c: GPU 0000:2a:00.0 degraded: PCIe link below its '
                'maximum: x8, maximum x16',
                'compute-c: GPU 0000:9a:00.0 unhealthy: config space reads '
                'all ones: the GPU fell off the bus"',
                'compute-c: GPU 0000:ab:00.0 unhealthy: 1 fatal AER errors '
                '(aer_dev_fatal)"',
                'compute-h: note: all GPUs share one NVLink fabric '
                '(NVSwitches present); its domains come from Fabric Manager',
                'warning: %s: hosts.compute-h: NVSwitches but no NVLink '
                'groups and no board' % os.path.join(self.fragments,
                                                     'node-h.yaml')):
            self.assertIn('"' + line, first.stdout)
        self.assertNotIn('compute-a: note', first.stdout)
        self.assertNotIn('compute-b: note', first.stdout)

        second = self.run_playbook()
        self.assertEqual(0, second.returncode, second.stdout + second.stderr)
        self.assertEqual({'node-a': 0, 'node-b': 0, 'node-c': 0, 'node-h': 0,
                          'localhost': 0},
                         {h: r[1] for h, r in self.recap(second).items()},
                         second.stdout)
        self.assertEqual(topology.hosts, loader.load(self.topology).hosts)


class TestRefused(Rollout):
    """Each way a host fails, in one run: nothing is merged."""

    def test_no_groups_and_twin_names_fail_and_nothing_is_merged(self):
        # NVSwitches, no FM, no board, not said to be expected.
        self.add_host('node-d', 'compute-d', nvlink_no_fm=True,
                      nvlink_mapping=self.mapping)
        # No hypervisor_hostname: both have this machine's FQDN.
        self.add_host('node-e', nvlink_board='hgx-h100-8gpu',
                      nvlink_no_fm=True, nvlink_mapping=self.mapping)
        self.add_host('node-f', nvlink_board='hgx-h100-8gpu',
                      nvlink_no_fm=True, nvlink_mapping=self.mapping)
        self.add_host('node-g', 'compute-g', nvlink_board='hgx-h100-8gpu',
                      nvlink_no_fm=True, nvlink_mapping=self.mapping)
        # The inspector fails: a board it does not know.
        self.add_host('node-i', 'compute-i', nvlink_board='hgx-h999-8gpu',
                      nvlink_no_fm=True, nvlink_mapping=self.mapping)
        result = self.run_playbook()
        self.assertEqual(2, result.returncode, result.stdout + result.stderr)
        recap = self.recap(result)
        self.assertEqual({'node-d': 1, 'node-e': 1, 'node-f': 1,
                          'node-g': 0, 'node-i': 1, 'localhost': 1},
                         {h: r[2] for h, r in recap.items()})
        out = ' '.join(result.stdout.split())
        self.assertIn(
            'compute-d: no NVLink group found for its 8 GPUs, and it has '
            'NVSwitches: their domains come from Fabric Manager '
            '(nvlink_fm_address, nvlink_fm_socket, nvlink_fm_library, '
            'nvlink_fmpm_json) or the board (nvlink_board); set '
            'nvlink_expect_no_groups to true if it has none. Inspector '
            'notes: all GPUs share one NVLink fabric', out)
        fqdn = re.search(r'node-e and node-f all name themselves (\S+) ',
                         out)
        self.assertIsNotNone(fqdn, out)
        self.assertIn(
            'node-f and node-e all name themselves %s (hypervisor_hostname, '
            'else ansible_fqdn): their fragments would merge into one host. '
            'Set hypervisor_hostname per host to Nova\'s name for it.'
            % fqdn.group(1), out)
        self.assertIn("nvlink-host-inspect exited 1: nvlink-host-inspect: "
                      "error: unknown board 'hgx-h999-8gpu'; built-in boards: "
                      "dgx-1-p100,", out)
        self.assertIn('Not merged: no fragment from node-d, node-e, node-f, '
                      'node-i (see their errors above).', out)
        # The failed hosts wrote nothing, the others their fragment.
        self.assertEqual(['node-g.yaml'], os.listdir(self.fragments))
        self.assertFalse(os.path.exists(self.topology))
        self.assertEqual([], self.calls_of(fqdn.group(1)))


class TestStaleTwin(Rollout):
    """A fragment another inventory host left under the same name."""

    def test_merge_refused_naming_both_files_topology_kept(self):
        self.add_host('node-x', 'compute-x', nvlink_board='hgx-h100-8gpu',
                      nvlink_no_fm=True, nvlink_mapping=self.mapping)
        os.mkdir(self.fragments)
        stale = os.path.join(self.fragments, 'old-node.yaml')
        with open(stale, 'w') as f:
            yaml.safe_dump({'version': 1, 'hosts': {'compute-x': {
                'board': 'hgx-h100-8gpu', 'gpus': helpers.BOARD2}}}, f)
        with open(self.topology, 'w') as f:
            f.write('# the last good merge\n')
        result = self.run_playbook()
        self.assertEqual(2, result.returncode, result.stdout + result.stderr)
        self.assertEqual({'node-x': 0, 'localhost': 1},
                         {h: r[2] for h, r in self.recap(result).items()})
        out = ' '.join(result.stdout.split())
        self.assertIn(
            'openstack nvlink topology merge exited 1, nothing written: '
            '%s: hosts.compute-x differs from the one in %s: '
            'hosts.compute-x.gpus' % (
                stale, os.path.join(self.fragments, 'node-x.yaml')), out)
        with open(self.topology) as f:
            self.assertEqual('# the last good merge\n', f.read())


class TestCheckMode(Rollout):

    def test_check_is_refused_before_anything(self):
        self.add_host('node-y', 'compute-y', nvlink_board='hgx-h100-8gpu',
                      nvlink_no_fm=True, nvlink_mapping=self.mapping)
        result = self.run_playbook('--check')
        self.assertEqual(2, result.returncode, result.stdout + result.stderr)
        self.assertIn('This playbook has no check mode: it only reads the '
                      'hosts, and writes the fragments and the topology file '
                      'on this machine.', ' '.join(result.stdout.split()))
        self.assertFalse(os.path.exists(self.fragments))
        self.assertFalse(os.path.exists(self.calls))
