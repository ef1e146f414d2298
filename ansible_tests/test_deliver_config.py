"""The per-host Nova config delivery playbook, run for real.

``etc/ansible/deliver-nova-config.yml`` over a local connection to fake
hosts: nova-config writes the config-dir layout on the control machine,
each host gets its fragment in its own folder, and the handler runs the
playbook's ``nvlink_restart_command``: here a stand-in for nova-compute's
restart that does what Nova does with the fragment (each GPU provider of
the host gets the traits of the first ``device_spec`` entry it matches,
``nova/pci/whitelist.py``, its own traits kept) in a Placement snapshot.
The playbook's last play runs the real ``openstack nvlink check
--snapshot`` on that snapshot until the member-traits drift is gone.
"""

import json
import os
import re
import shlex
import subprocess
import sys

from ansible_tests import test_rollout
from tests import deploy_fixture as fx

PLAYBOOK = os.path.join(test_rollout.ROOT, 'etc', 'ansible',
                        'deliver-nova-config.yml')
MEMBER = re.compile(r'_MEMBER[0-9]+$')

# nova-compute's restart, as far as Placement sees it: argv snapshot, host,
# fragment; each call logged.
FAKE_NOVA = r'''
import fcntl, json, re, sys
snapshot, host, fragment = sys.argv[1:4]
entries, section = [], None
for line in open(fragment):
    line = line.strip()
    if line.startswith('['):
        section = line.strip('[]')
    elif section == 'pci' and line.startswith('device_spec = '):
        entries.append(json.loads(line.split(' = ', 1)[1]))
with open(snapshot + '.lock', 'w') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    with open(snapshot) as f:
        document = json.load(f)
    for rp in document['resource_providers']:
        if not rp['name'].startswith(host + '_0'):
            continue
        address = rp['name'][len(host) + 1:].lower()
        for entry in entries:
            if entry.get('address', address) == address:
                own = [t for t in rp['traits']
                       if not re.search('_MEMBER[0-9]+$', t)]
                extra = [t for t in entry.get('traits', '').split(',') if t]
                rp['traits'] = sorted(set(own) | set(extra))
                break
    with open(snapshot, 'w') as f:
        json.dump(document, f)
with open(snapshot + '.restarts', 'a') as log:
    log.write(host + '\n')
'''


class TestDeliverConfig(test_rollout.Rollout):

    def setUp(self):
        super().setUp()
        self.snapshot = os.path.join(self.tmp, 'cloud.json')
        result = subprocess.run(
            [self.openstack, 'nvlink', 'snapshot', '--from-topology',
             fx.TOPOLOGY, '-o', self.snapshot],
            capture_output=True, text=True, timeout=300)
        self.assertEqual(0, result.returncode, result.stderr)
        # A cloud whose nova-compute has no member-trait entries yet.
        with open(self.snapshot) as f:
            document = json.load(f)
        for rp in document['resource_providers']:
            rp['traits'] = [t for t in rp['traits'] if not MEMBER.search(t)]
        with open(self.snapshot, 'w') as f:
            json.dump(document, f)
        self.fake_nova = os.path.join(self.tmp, 'fake_nova.py')
        with open(self.fake_nova, 'w') as f:
            f.write(FAKE_NOVA)

    def add_hosts(self, restart=None):
        for name in fx.HOSTS:
            folder = os.path.join(self.tmp, 'hosts', name, 'conf.d')
            command = restart or ' '.join(map(shlex.quote, [
                sys.executable, self.fake_nova, self.snapshot, name,
                os.path.join(folder, 'nvlink-placement.conf')]))
            self.hosts['inv-' + name] = {
                'ansible_connection': 'local',
                'ansible_python_interpreter': sys.executable,
                'ansible_become': False, 'hypervisor_hostname': name,
                'nvlink_nova_conf_dir': folder,
                'nvlink_restart_command': command}

    def deliver(self, retries=3, delay=1):
        return self.run_playbook(
            '-e', json.dumps({
                'topology': fx.TOPOLOGY, 'nvlink_alias': 'h100',
                'nvlink_config_dir': os.path.join(self.tmp, 'nova-config'),
                'nvlink_check_args': '--snapshot %s' % self.snapshot,
                'nvlink_check_retries': retries,
                'nvlink_check_delay': delay}), playbook=PLAYBOOK)

    def member_drift(self):
        result = subprocess.run(
            [self.openstack, 'nvlink', 'check', '--topology', fx.TOPOLOGY,
             '--snapshot', self.snapshot, '-f', 'json', '-c', 'host', '-c',
             'drift'], capture_output=True, text=True, timeout=300)
        self.assertEqual(2, result.returncode, result.stderr)
        return sorted({r['host'] for r in json.loads(result.stdout)
                       if r['drift'] == 'member-traits'})

    def restarts(self):
        path = self.snapshot + '.restarts'
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return sorted(f.read().split())

    def test_delivers_restarts_and_waits_then_changes_nothing(self):
        self.add_hosts()
        self.assertEqual(['hgx-01', 'hgx-02', 'pairs-01'],
                         self.member_drift())
        first = self.deliver()
        self.assertEqual(0, first.returncode, first.stdout + first.stderr)
        recap = self.recap(first)
        self.assertEqual(1, recap['localhost'][1])       # files written
        for name in fx.HOSTS:
            # folder, fragment and the handler's restart.
            self.assertEqual((3, 3, 0), recap['inv-' + name], name)
        self.assertEqual(sorted(fx.HOSTS), self.restarts())
        # Member traits are there; the groups are still to be reshaped.
        self.assertEqual([], self.member_drift())
        with open(os.path.join(self.tmp, 'hosts', 'hgx-01', 'conf.d',
                               'nvlink-placement.conf')) as f:
            self.assertNotIn('0000:bb:00.0', f.read())
        second = self.deliver()
        self.assertEqual(0, second.returncode, second.stdout)
        self.assertEqual({h: 0 for h in self.recap(second)},
                         {h: r[1] for h, r in self.recap(second).items()})
        self.assertEqual(sorted(fx.HOSTS), self.restarts())

    def test_fails_naming_the_hosts_nova_did_not_update(self):
        self.add_hosts(restart='true')
        result = self.deliver(retries=2, delay=0)
        self.assertNotEqual(0, result.returncode)
        self.assertIn('after 2 checks, Placement still lacks member traits '
                      'on hgx-01, hgx-02, pairs-01: nova-compute there has '
                      'not reported', re.sub(r'\s+', ' ', result.stdout))
        self.assertEqual(1, self.recap(result)['localhost'][2])
