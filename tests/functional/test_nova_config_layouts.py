"""``nova-config`` as an operator's deployment reads it, through the CLI.

The printed ``[pci] device_spec`` entries are read here independently of
the code under test: a host's list is every ``device_spec`` row whose
service is ``nova-compute`` or names the host, in order, and a GPU takes
the first entry whose ids match and whose address (if any) is its own
(Nova's rule, ``nova/pci/whitelist.py``; proven with Nova's own code in
``nova_tests/test_deploy_layouts.py``). Expected member traits are written
out by hand (:mod:`tests.deploy_fixture`).
"""

import csv
import io
import json
import os
import re

import fixtures
from oslotest import base
import yaml

from tests import deploy_fixture as fx
from tests.functional import cli

SERVICE = re.compile(r'^nova-compute(?: \((.+)\))?$')


def host_lists(rows, hosts):
    """host -> its device_spec entries (dicts) from ``nova-config`` rows."""
    lists = {h: [] for h in hosts}
    for row in rows:
        if (row['section'], row['option']) != ('pci', 'device_spec'):
            continue
        match = SERVICE.match(row['service'])
        assert match, row['service']
        names = match.group(1).split(', ') if match.group(1) else hosts
        for name in names:
            lists[name].append(json.loads(row['value']))
    return lists


def first_match(entries, address):
    for entry in entries:
        if (entry.get('vendor_id') == fx.VENDOR_ID and
                entry.get('product_id') == fx.PRODUCT_ID and
                entry.get('address', address) == address):
            return entry
    return None


class Base(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def nova_config(self, *args, topology=fx.TOPOLOGY):
        return cli.run(self, 'nvlink', 'nova-config', '--topology', topology,
                       '--alias', 'h100', *args)

    def rows(self, *args, **kw):
        result = self.nova_config('-f', 'json', *args, **kw)
        self.assertEqual(0, result.code, result.stderr)
        return json.loads(result.stdout)


class TestEntries(Base):

    def test_every_gpu_first_matches_its_own_entry(self):
        lists = host_lists(self.rows(), list(fx.HOSTS))
        for host, gpus in fx.MEMBER_TRAITS.items():
            for address, traits in gpus.items():
                entry = first_match(lists[host], address)
                self.assertIsNotNone(entry, (host, address))
                self.assertEqual(
                    list(traits), sorted(filter(None, entry.get(
                        'traits', '').split(','))), (host, address))

    def test_excluded_gpus_match_no_entry(self):
        for dialect in ('mosk', 'upstream'):
            lists = host_lists(self.rows('--dialect', dialect),
                               list(fx.HOSTS))
            for host, addresses in fx.EXCLUDED.items():
                # No generic entry on such a host, only addresses.
                self.assertTrue(all('address' in e for e in lists[host]),
                                (dialect, host, lists[host]))
                for address in addresses:
                    self.assertIsNone(first_match(lists[host], address),
                                      (dialect, host, address))
                for address in fx.MEMBER_TRAITS[host]:
                    self.assertIsNotNone(first_match(lists[host], address),
                                         (dialect, host, address))
            # The other hosts keep the generic entry, last.
            for host in ('pairs-01', 'hgx-02'):
                self.assertEqual({'vendor_id': fx.VENDOR_ID,
                                  'product_id': fx.PRODUCT_ID},
                                 lists[host][-1], (dialect, host))

    def test_machine_output_names_every_host(self):
        document = yaml.safe_load(open(fx.TOPOLOGY))
        hgx = document['hosts']['hgx-02']
        names = ['gpu-%02d' % i for i in range(1, 13)]
        path = os.path.join(self.tmp, 'twelve.yaml')
        with open(path, 'w') as f:
            # JSON (also YAML): no anchors for the shared host.
            json.dump({'version': 1, 'hosts': {n: hgx for n in names}}, f)
        full = 'nova-compute (%s)' % ', '.join(names)
        readers = {
            'json': lambda text: [r['service'] for r in json.loads(text)],
            'yaml': lambda text: [r['service']
                                  for r in yaml.safe_load(text)],
            'csv': lambda text: [r[0] for r in csv.reader(
                io.StringIO(text))][1:],
            'value': str.splitlines}
        for fmt, read in readers.items():
            result = self.nova_config('-f', fmt, '-c', 'service',
                                      topology=path)
            self.assertEqual(0, result.code, result.stderr)
            services = read(result.stdout)
            self.assertEqual(8, services.count(full), (fmt, services))
            self.assertNotIn(' more', result.stdout, fmt)
        ini = self.nova_config('--ini', topology=path)
        self.assertIn('# nova.conf on %s\n' % full, ini.stdout)
        self.assertNotIn(' more', ini.stdout)
        # A table, for people, names ten.
        table = self.nova_config('-c', 'service', topology=path)
        self.assertIn('gpu-10 and 2 more', table.stdout)

    def test_gpu_nova_cannot_pass_through_is_refused(self):
        path = os.path.join(self.tmp, 'vmd.yaml')
        gpu = {'vendor_id': '10de', 'device_id': '2330'}
        with open(path, 'w') as f:
            json.dump({'version': 1, 'hosts': {'vmd-01': {'gpus': {
                '10000:01:00.0': gpu, '0000:41:00.0': gpu,
                '10001:02:00.0': dict(gpu, excluded='behind VMD')}}}}, f)
        key = '%s: hosts.vmd-01.gpus["10000:01:00.0"]: PCI domain 0x10000 ' \
              'is above 0xffff' % path
        for argv in (('topology', 'validate', path),
                     ('nova-config', '--topology', path, '--alias', 'h100'),
                     ('nova-config', '--topology', path, '--alias', 'h100',
                      '--output-dir', os.path.join(self.tmp, 'out'),
                      '--layout', 'kolla')):
            result = cli.run(self, 'nvlink', *argv)
            self.assertEqual(1, result.code, argv)
            self.assertEqual('', result.stdout, argv)
            self.assertIn(key, result.stderr, argv)
            # The excluded one is not passed through: no problem.
            self.assertNotIn('10001:02:00.0', result.stderr, argv)
            self.assertNotIn('Traceback', result.stderr, argv)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, 'out')))


KOLLA = ['nova/pairs-01/nova.conf', 'nova/hgx-01/nova.conf',
         'nova/hgx-02/nova.conf', 'nova/mig-01/nova.conf',
         'nova/nova-api.conf',
         'nova/nova-scheduler.conf', 'nova/nova-conductor.conf',
         'nova/nova-super-conductor.conf']
OSA = ['host_vars/pairs-01.yml', 'host_vars/hgx-01.yml',
       'host_vars/hgx-02.yml', 'host_vars/mig-01.yml',
       'group_vars/nova_all.yml']
CONFIG_DIR = ['hosts/%s/nova-compute.conf.d/nvlink-placement.conf' % h
              for h in fx.HOSTS] + [
    'services/%s.conf.d/nvlink-placement.conf' % s
    for s in ('nova-api', 'nova-scheduler', 'nova-conductor')]


class TestOutputDir(Base):

    def write(self, layout, *args, **kw):
        return self.nova_config('--output-dir', self.out, '--layout', layout,
                                *args, **kw)

    def setUp(self):
        super().setUp()
        self.out = os.path.join(self.tmp, 'out')

    def test_a_bare_relative_name_that_does_not_exist_yet(self):
        # The operator guide's own form, "--output-dir nova-config", from
        # the current directory: the check walked up "nova-config/nova"
        # to "" and looped there for ever. The timeout turns a hang back
        # into a failure.
        self.useFixture(fixtures.Timeout(60, gentle=True))
        cwd = os.getcwd()
        os.chdir(self.tmp)
        self.addCleanup(os.chdir, cwd)
        result = self.nova_config('--output-dir', 'nova-config', '--layout',
                                  'kolla')
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(['written: %s' % os.path.join('nova-config', *f.split(
            '/')) for f in KOLLA], result.stderr.splitlines())
        self.assertTrue(os.path.isfile(os.path.join(
            self.tmp, 'nova-config', 'nova', 'hgx-01', 'nova.conf')))

    def test_each_layout_writes_its_files_then_keeps_them(self):
        for layout, files in (('kolla', KOLLA), ('openstack-ansible', OSA),
                              ('config-dir', CONFIG_DIR)):
            self.out = os.path.join(self.tmp, layout)
            paths = [os.path.join(self.out, *f.split('/')) for f in files]
            result = self.write(layout)
            self.assertEqual((0, ''), (result.code, result.stdout), layout)
            self.assertEqual(['written: %s' % p for p in paths],
                             result.stderr.splitlines(), layout)
            for path in paths:
                os.utime(path, (1000000000, 1000000000))
            listing = self.write(layout, '-f', 'json')
            self.assertEqual(0, listing.code, listing.stderr)
            self.assertEqual(['unchanged: %s' % p for p in paths],
                             listing.stderr.splitlines(), layout)
            rows = json.loads(listing.stdout)
            self.assertEqual(
                [(p, layout, 'unchanged') for p in paths],
                [(r['file'], r['layout'], r['status']) for r in rows])
            self.assertEqual(list(fx.HOSTS) + [None] * (len(files) - 4),
                             [r['host'] for r in rows])
            self.assertEqual([1000000000] * len(paths),
                             [int(os.stat(p).st_mtime) for p in paths])

    def test_a_changed_host_rewrites_its_file_only(self):
        self.assertEqual(0, self.write('kolla').code)
        document = yaml.safe_load(open(fx.TOPOLOGY))
        document['hosts']['hgx-02']['gpus']['0000:9b:00.0'][
            'excluded'] = 'MIG mode enabled (nvidia-smi)'
        path = os.path.join(self.tmp, 'changed.yaml')
        with open(path, 'w') as f:
            yaml.safe_dump(document, f)
        result = self.write('kolla', topology=path)
        self.assertEqual(0, result.code, result.stderr)
        written = [line.split(': ', 1)[1][len(self.out) + 1:]
                   for line in result.stderr.splitlines()
                   if line.startswith('written: ')]
        self.assertEqual(['nova/hgx-02/nova.conf'], written)
        with open(os.path.join(self.out, 'nova', 'hgx-02', 'nova.conf')) as f:
            text = f.read()
        self.assertNotIn('0000:9b:00.0', text)
        self.assertNotIn('device_spec = {"vendor_id": "10de", "product_id": '
                         '"2330"}\n', text)

    def test_the_generic_entry_is_in_no_shared_file(self):
        for layout, files in (('kolla', KOLLA), ('config-dir', CONFIG_DIR),
                              ('openstack-ansible', OSA)):
            self.out = os.path.join(self.tmp, layout)
            self.assertEqual(0, self.write(layout).code)
            for name in files:
                with open(os.path.join(self.out, name)) as f:
                    text = f.read()
                shared = not any('/%s/' % h in '/' + name or
                                 '/%s.yml' % h in name for h in fx.HOSTS)
                self.assertEqual(not shared, 'device_spec' in text,
                                 (layout, name))

    def test_a_host_gone_from_the_topology_is_named_not_removed(self):
        self.assertEqual(0, self.write('openstack-ansible').code)
        gone = os.path.join(self.out, 'host_vars', 'old-09.yml')
        # A file it wrote for a host since dropped (its mark on top).
        with open(os.path.join(self.out, 'host_vars', 'hgx-01.yml')) as f:
            text = f.read()
        with open(gone, 'w') as f:
            f.write(text)
        # The operator's own file of another host is no host file of ours.
        with open(os.path.join(self.out, 'host_vars', 'ctl-01.yml'),
                  'w') as f:
            f.write('container_address: 10.0.0.5\n')
        result = self.write('openstack-ansible', '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(
            {'file': gone, 'layout': 'openstack-ansible', 'host': 'old-09',
             'service': 'nova-compute', 'status': 'stale'},
            json.loads(result.stdout)[-1])
        self.assertIn('stale: %s (a host the topology does not have; left '
                      'as it is' % gone, result.stderr)
        self.assertTrue(os.path.exists(gone))
        # With --host the other hosts' files are not judged.
        result = self.write('openstack-ansible', '--host', 'hgx-01')
        self.assertNotIn('stale', result.stderr)

    def test_bad_directories_write_nothing(self):
        blocker = os.path.join(self.tmp, 'file')
        open(blocker, 'w').close()
        cases = [
            (blocker, '--output-dir %s is not a directory' % blocker),
            (os.path.join(self.tmp, 'no', 'such'),
             '--output-dir %s: its parent directory %s does not exist'
             % (os.path.join(self.tmp, 'no', 'such'),
                os.path.join(self.tmp, 'no'))),
        ]
        for out, message in cases:
            self.out = out
            result = self.write('kolla')
            self.assertEqual((1, '', message + '\n'),
                             (result.code, result.stdout, result.stderr))
        # A file where a host's folder must go: checked before any write.
        self.out = os.path.join(self.tmp, 'partly')
        os.makedirs(os.path.join(self.out, 'nova'))
        open(os.path.join(self.out, 'nova', 'mig-01'), 'w').close()
        result = self.write('kolla')
        self.assertEqual(1, result.code)
        self.assertIn('cannot write %s' % os.path.join(
            self.out, 'nova', 'mig-01', 'nova.conf'), result.stderr)
        self.assertEqual(['mig-01'], os.listdir(os.path.join(self.out,
                                                             'nova')))

    def test_usage_errors(self):
        for args, message in (
                (('--output-dir', self.out), '--output-dir DIR and --layout '
                 'LAYOUT go together'),
                (('--layout', 'kolla'), '--output-dir DIR and --layout '
                 'LAYOUT go together'),
                (('--output-dir', self.out, '--layout', 'kolla', '--ini'),
                 '--ini prints config fragments; --output-dir writes files'),
                (('--output-dir', self.out, '--layout', 'puppet'),
                 "invalid choice: 'puppet'")):
            result = self.nova_config(*args)
            self.assertEqual(3, result.code, args)
            self.assertIn(message, result.stderr, args)
        self.assertFalse(os.path.exists(self.out))


class TestOperatorFiles(Base):
    """What the operator already has in the output directory is kept."""

    def setUp(self):
        super().setUp()
        self.out = os.path.join(self.tmp, 'deploy')
        os.makedirs(self.out)

    def put(self, relative, text):
        path = os.path.join(self.out, *relative.split('/'))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def write(self, layout, *args):
        return self.nova_config('--output-dir', self.out, '--layout', layout,
                                *args)

    def assert_refused(self, layout, *messages):
        before = sorted(os.listdir(self.out))
        result = self.write(layout)
        self.assertEqual((1, ''), (result.code, result.stdout),
                         result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        for message in messages:
            self.assertIn(message, result.stderr)
        self.assertEqual(before, sorted(os.listdir(self.out)))
        return result.stderr

    def test_files_it_did_not_write_are_refused_by_name(self):
        theirs = '[filter_scheduler]\nenabled_filters = ComputeFilter\n'
        scheduler = self.put('nova/nova-scheduler.conf', theirs)
        host = self.put('nova/hgx-01/nova.conf', '[DEFAULT]\ndebug = True\n')
        self.assert_refused('kolla', 'nothing written: these files are '
                            'already there and were not written by this '
                            'command', '\n  %s\n  %s' % (host, scheduler))
        with open(scheduler) as f:
            self.assertEqual(theirs, f.read())
        self.assertEqual(['nova-scheduler.conf', 'hgx-01'],
                         os.listdir(os.path.join(self.out, 'nova')))
        # An operator's host_vars file with the host's other variables.
        hv = self.put('host_vars/hgx-02.yml', 'container_address: 10.0.0.7\n')
        self.assert_refused('openstack-ansible', '\n  %s' % hv)

    def test_kolla_old_name_in_the_operators_nova_conf(self):
        self.put('nova.conf', '[pci]\npassthrough_whitelist = {"vendor_id": '
                 '"10de", "product_id": "2330"}\n')
        self.put('../globals.yml', 'nova_pci_passthrough_whitelist: []\n')
        self.assert_refused(
            'kolla', 'nova.conf: [pci] passthrough_whitelist: kolla-ansible '
            'merges keys by name, so this old name stays beside each '
            'host\'s device_spec and Nova reads it first',
            '../globals.yml: nova_pci_passthrough_whitelist: kolla-ansible\'s'
            ' nova.conf template writes it as [pci] passthrough_whitelist')

    def test_a_file_that_is_not_ini_is_named_once(self):
        # Read once per option the layout looks for, it was named once
        # per read: the same line four times.
        self.put('nova.conf', '[DEFAULT]\ndebug = True\nnot a setting\n')
        stderr = self.assert_refused(
            'kolla', 'nova.conf: line 3: No \':\' or \'=\' found in '
            'assignment (not an ini file oslo.config reads)')
        self.assertEqual(1, stderr.count('nova.conf: line 3'), stderr)

    def test_an_operator_file_is_read_whole_or_refused(self):
        # A setting past 16 MiB was cut off unread: the old name at the end
        # of a big nova.conf passed, and the files were written.
        big = self.put('nova.conf', '[DEFAULT]\n' + ('#' * 99 + '\n') *
                       170000 + '[pci]\npassthrough_whitelist = '
                       '{"vendor_id": "8086"}\n')
        self.assert_refused('kolla', '%s: larger than 16777216 bytes' % big)
        os.unlink(big)
        # A link to a file not there (a mount not up yet) hides settings.
        os.symlink(os.path.join(self.tmp, 'gone.conf'), big)
        self.assert_refused('kolla', '%s: No such file or directory' % big)
        os.unlink(big)
        self.put('nova.conf', '[pci]\nalias = {"name": "caf\xe9"}\n')
        with open(big, 'ab') as f:
            f.write(b'# \xff\n')
        self.assert_refused('kolla', '%s: line 3 column 3: not UTF-8' % big)

    def test_a_link_to_nothing_where_a_file_goes_is_refused(self):
        # config-dir reads none of its targets: the link was replaced.
        drop_in = os.path.join(self.out, 'hosts', 'hgx-01',
                               'nova-compute.conf.d', 'nvlink-placement.conf')
        os.makedirs(os.path.dirname(drop_in))
        os.symlink(os.path.join(self.tmp, 'gone.conf'), drop_in)
        self.assert_refused('config-dir', 'nothing written: these files are '
                            'already there', '\n  %s' % drop_in)
        self.assertTrue(os.path.islink(drop_in))
        self.assertEqual(['hosts'], os.listdir(self.out))

    def test_each_alias_line_has_its_own_models_comment(self):
        # Two models: the second alias line sat under the first's comment,
        # which names the first model's resource class and hosts.
        mixed = os.path.join(os.path.dirname(os.path.dirname(
            os.path.dirname(os.path.abspath(__file__)))), 'etc', 'examples',
            'hgx-h100-b200.yaml')
        result = cli.run(self, 'nvlink', 'nova-config', '--topology', mixed,
                         '--alias', 'h100=10de:2330', '--alias',
                         'b200=10de:2901', '--output-dir', self.out,
                         '--layout', 'kolla')
        self.assertEqual(0, result.code, result.stderr)
        with open(os.path.join(self.out, 'nova', 'nova-api.conf')) as f:
            lines = f.read().splitlines()
        aliases = [i for i, line in enumerate(lines)
                   if line.startswith('alias = ')]
        self.assertEqual(2, len(aliases), lines)
        for index, (name, rc, hosts) in zip(aliases, (
                ('h100', 'CUSTOM_PCI_10DE_2330', 'h100-01, h100-02'),
                ('b200', 'CUSTOM_PCI_10DE_2901', 'b200-01, b200-02'))):
            self.assertIn('"name": "%s"' % name, lines[index])
            self.assertTrue(lines[index - 1].startswith('# '), lines)
            self.assertIn('(resource class %s, on %s)' % (rc, hosts),
                          lines[index - 1])

    def test_a_folder_where_an_operator_file_goes_is_refused(self):
        # A folder named nova.conf (a volume mounted at the wrong path)
        # was skipped as no file: its settings never reached the check.
        for layout, relative in (('kolla', 'nova.conf'),
                                 ('openstack-ansible',
                                  'openstack_user_config.yml')):
            folder = os.path.join(self.out, relative)
            os.makedirs(folder)
            self.assert_refused(layout, '%s: is a directory, not a file'
                                % folder)
            os.rmdir(folder)

    def test_a_link_to_a_file_it_wrote_is_written_through(self):
        # The operator keeps the files in a repository and links them in:
        # the link was replaced by a file, the repository kept the old
        # text.
        self.assertEqual(0, self.write('config-dir').code)
        drop_in = os.path.join(self.out, 'hosts', 'hgx-01',
                               'nova-compute.conf.d', 'nvlink-placement.conf')
        with open(drop_in) as f:
            fresh = f.read()
        kept = os.path.join(self.tmp, 'repo', 'hgx-01.conf')
        os.makedirs(os.path.dirname(kept))
        # Ours (its first line, the mark, kept), but out of date.
        with open(kept, 'w') as f:
            f.write(fresh.splitlines(True)[0] + '[pci]\n')
        os.unlink(drop_in)
        os.symlink(kept, drop_in)
        result = self.write('config-dir', '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        self.assertIn({'file': drop_in, 'status': 'written'},
                      [{k: r[k] for k in ('file', 'status')}
                       for r in json.loads(result.stdout)])
        self.assertEqual(kept, os.readlink(drop_in))
        with open(kept) as f:
            self.assertEqual(fresh, f.read())

    def test_an_operator_yaml_fault_is_named_by_line(self):
        # PyYAML's own text was given, its newlines flattened: the line
        # of the fault sat among the snippet's blanks and carets.
        self.put('openstack_user_config.yml', 'global_overrides:\n'
                 '  nova_pci_alias: [\n')
        self.assert_refused(
            'openstack-ansible', '\n  openstack_user_config.yml: line 3 '
            'column 1: invalid YAML: expected the node content, but found '
            '\'<stream end>\' (while parsing a flow node)\n')
        # Anchors and aliases, as OpenStack-Ansible's example file has
        # them, are read as it reads them.
        self.put('openstack_user_config.yml', 'infra_hosts: &infra\n'
                 '  infra1: {ip: 172.29.236.11}\n'
                 'shared-infra_hosts: *infra\n')
        result = self.write('openstack-ansible')
        self.assertEqual(0, result.code, result.stderr)

    def test_an_operators_alias_of_our_name_is_kept_or_refused(self):
        # The operator's own h100 alias, with a NUMA policy, was replaced
        # by ours without a word, its numa_policy lost.
        theirs = ('{"name": "h100", "vendor_id": "10de", "product_id": '
                  '"2330", "numa_policy": "required"}')
        self.put('nova.conf', '[pci]\nalias = %s\n' % theirs)
        self.assert_refused(
            'kolla', '\n  nova.conf [pci]: alias h100 is %s, and this '
            'run\'s alias of that name, {"name": "h100", "vendor_id": '
            '"10de", "product_id": "2330"}, would replace it: remove it '
            'there, or give the GPUs another --alias name\n' % theirs)
        self.put('openstack_user_config.yml', 'global_overrides:\n'
                 '  nova_pci_alias:\n  - %s\n' % theirs)
        self.assert_refused(
            'openstack-ansible', '\n  openstack_user_config.yml: '
            'nova_pci_alias: alias h100 is %s' % theirs)
        # The same alias as ours is no loss.
        ours = '{"name": "h100", "vendor_id": "10de", "product_id": "2330"}'
        self.put('nova.conf', '[pci]\nalias = %s\n' % ours)
        result = self.write('kolla')
        self.assertEqual(0, result.code, result.stderr)

    def test_kolla_keeps_the_operators_entries_aliases_and_filters(self):
        nic = '{"vendor_id": "8086", "product_id": "154c"}'
        alias = '{"name": "x710", "vendor_id": "8086", "product_id": "154c"}'
        self.put('nova.conf', '[pci]\ndevice_spec = {"vendor_id": "10de", '
                 '"product_id": "2330"}\ndevice_spec = %s\nalias = %s\n\n'
                 '[filter_scheduler]\nenabled_filters = ComputeFilter,'
                 'NUMATopologyFilter\n' % (nic, alias))
        self.assertEqual(0, self.write('kolla').code)
        with open(os.path.join(self.out, 'nova', 'pairs-01',
                               'nova.conf')) as f:
            host = f.read()
        specs = [line for line in host.splitlines()
                 if line.startswith('device_spec = ')]
        self.assertEqual('device_spec = %s' % nic, specs[-1])
        self.assertEqual('device_spec = {"vendor_id": "10de", "product_id": '
                         '"2330"}', specs[-2])
        self.assertEqual(1, host.count('device_spec = {"vendor_id": "10de", '
                                       '"product_id": "2330"}\n'))
        self.assertIn('alias = %s\n' % alias, host)
        with open(os.path.join(self.out, 'nova', 'nova-scheduler.conf')) as f:
            self.assertIn('enabled_filters = ComputeFilter,NUMATopologyFilter,'
                          'PciPassthroughFilter\n', f.read())

    def test_openstack_ansible_variables_that_would_win_are_refused(self):
        self.put('user_variables.yml', 'nova_device_spec:\n  - \'{"devname":'
                 ' "p1p1"}\'\nnova_scheduler_extra_filters: []\n')
        self.put('group_vars/nova_compute.yml', 'nova_pci_alias: []\n')
        self.put('openstack_user_config.yml', yaml.safe_dump({
            'compute-infra_hosts': {'infra1': {'container_vars': {
                'nova_nova_conf_overrides': {'DEFAULT': {'debug': True}}}}}}))
        self.assert_refused(
            'openstack-ansible',
            'user_variables.yml: nova_device_spec: the user_*.yml files are '
            'extra variables',
            'user_variables.yml: nova_scheduler_extra_filters:',
            'group_vars/nova_compute.yml: nova_pci_alias: Ansible would take '
            'one of this file and group_vars/nova_all.yml whole',
            'openstack_user_config.yml (compute-infra_hosts.infra1.'
            'container_vars): nova_nova_conf_overrides: a host\'s variables '
            'beat group_vars')

    def test_a_second_run_keeps_the_first_runs_aliases(self):
        for layout, path, read in (
                ('kolla', 'nova/nova-api.conf', str),
                ('config-dir',
                 'services/nova-api.conf.d/nvlink-placement.conf', str),
                ('openstack-ansible', 'group_vars/nova_all.yml',
                 lambda t: '\n'.join(yaml.safe_load(t)['nova_pci_alias']))):
            self.out = os.path.join(self.tmp, layout)
            for alias in ('h100', 'h100-other'):
                result = cli.run(self, 'nvlink', 'nova-config', '--topology',
                                 fx.TOPOLOGY, '--output-dir', self.out,
                                 '--layout', layout, '--alias', alias,
                                 '--host', 'hgx-01')
                self.assertEqual(0, result.code, result.stderr)
            with open(os.path.join(self.out, *path.split('/'))) as f:
                text = read(f.read())
            for alias in ('h100', 'h100-other'):
                self.assertIn('{"name": "%s", "vendor_id": "10de", '
                              '"product_id": "2330"}' % alias, text,
                              (layout, alias))

    def test_an_earlier_versions_files_are_removed_if_marked(self):
        mark = ('# Written from the topology by "openstack nvlink nova-config '
                '--layout openstack-ansible": do not edit.\n')
        old = self.put('group_vars/nova_scheduler.yml',
                       mark + 'nova_nova_conf_overrides: {}\n')
        result = self.write('openstack-ansible', '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        self.assertIn('removed: %s' % old, result.stderr)
        self.assertEqual({'file': old, 'layout': 'openstack-ansible',
                          'host': None, 'service': '', 'status': 'removed'},
                         json.loads(result.stdout)[-1])
        self.assertFalse(os.path.exists(old))
