"""Input files others write: bounded, clearly refused, never echoed.

Topologies (and their ``gpus_file``), flavor files and alias configs go
through one reader (:mod:`nvlink_placement.documents`); flavors and
aliases are bounded by what Nova and Placement accept. The commands are
run through the real ``openstack`` CLI where the exit status matters.
"""

import json
import os

import fixtures
from keystoneauth1 import loading
from oslotest import base

from nvlink_placement import documents
from nvlink_placement import errors
from nvlink_placement.flavors import inputs
from nvlink_placement.flavors import request
from nvlink_placement.osc import logmask
from nvlink_placement import redact
from nvlink_placement.topology import loader
from tests.functional import cli

ETC = os.path.join(os.path.dirname(__file__), '..', '..', 'etc')
EXAMPLE = os.path.join(ETC, 'examples', 'hgx-h100.yaml')
SNAPSHOT = os.path.join(ETC, 'examples', 'hgx-h100-snapshot.json')
# A billion laughs: 9**6 "lol" once expanded.
BOMB = '''version: 1
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
hosts: *f
'''
FLAVOR = {'name': 'h100.2x', 'vcpus': 32, 'ram': 262144, 'disk': 200,
          'extra_specs': {'pci_passthrough:alias': 'h100:2:_h100'}}
ALIASES = {'h100': request.Alias('h100', 'CUSTOM_PCI_10DE_2330')}


class FilesTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def write(self, name, content):
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb' if isinstance(content, bytes) else 'w') as f:
            f.write(content)
        return path

    def problems(self, path, **kwargs):
        exc = self.assertRaises(errors.TopologyError, loader.load, path,
                                **kwargs)
        return ['%s: %s' % p for p in exc.problems]

    def openstack(self, *argv):
        result = cli.run(self, *argv)
        self.assertNotIn('Traceback', result.stderr)
        return result


class TestAliasBombs(FilesTest):
    """Item 6: no YAML aliases, so nothing expands."""

    REFUSED = 'YAML aliases (*a) are not accepted'

    def test_topology(self):
        path = self.write('bomb.yaml', BOMB)
        result = self.openstack('nvlink', 'topology', 'validate', path)
        self.assertEqual(1, result.code)
        self.assertEqual(
            '%s: b[0]: line 3 column 8: %s: write the value out (a GPU map '
            'can be shared with gpus_file)\n' % (path, self.REFUSED),
            result.stderr)

    def test_gpus_file_flavors_and_alias_config(self):
        mapping = self.write('m.yaml', 'x: &a "0000:19:00.0"\ny: *a\n')
        topology = self.write('t.yaml', 'version: 1\nhosts:\n  h:\n    '
                              'board: hgx-h100-8gpu\n    gpus_file: m.yaml\n')
        self.assertEqual(
            ['%s: hosts.h.gpus_file: %s: y: line 2 column 4: %s: write the '
             'value out (a GPU map can be shared with gpus_file)'
             % (topology, mapping, self.REFUSED)], self.problems(topology))
        flavors = self.write('f.yaml', '- &a {name: x}\n- *a\n')
        exc = self.assertRaises(errors.NvlinkError, inputs.read_flavors,
                                flavors)
        self.assertIn('%s: [1]: line 2 column 3: %s' % (flavors,
                                                        self.REFUSED),
                      str(exc))
        aliases = self.write('a.yaml', '- &a {name: h100, resource_class: '
                             'X}\n- *a\n')
        exc = self.assertRaises(errors.NvlinkError,
                                inputs.read_alias_config, aliases)
        self.assertIn(self.REFUSED, str(exc))

    def test_no_message_renders_a_whole_value(self):
        # 20 000 hosts given as a list: the message quotes a few.
        path = self.write('t.json', json.dumps(
            {'version': 1, 'hosts': ['compute-%d' % i
                                     for i in range(20000)]}))
        found = self.problems(path)
        self.assertEqual(
            ["%s: hosts: expected a mapping, got a list ['compute-0', "
             "'compute-1', 'compute-2', 'compute-3', ...]" % path], found)


class TestCounts(FilesTest):
    """Item 7: counts and amounts within Placement's and Nova's bounds."""

    def build(self, **specs):
        flavor = dict(FLAVOR, extra_specs=dict(FLAVOR['extra_specs'],
                                               **specs))
        return request.build(inputs.flavor_from_dict(flavor), ALIASES)

    def test_alias_count(self):
        self.assertEqual(64, self.build(**{
            'pci_passthrough:alias': 'h100:64:_h100'}).size)
        for count in ('65', '99999999999999999999', '9' * 240):
            exc = self.assertRaises(errors.NvlinkError, self.build, **{
                'pci_passthrough:alias': 'h100:%s' % count})
            self.assertEqual(
                "flavor h100.2x: pci_passthrough:alias='h100:%s': more "
                "devices than any host holds (at most 64)" % count, str(exc))
        # Longer values are no Nova extra spec at all.
        exc = self.assertRaises(errors.NvlinkError, self.build, **{
            'pci_passthrough:alias': 'h100:%s' % ('9' * 5000)})
        self.assertEqual(
            "flavor: flavor h100.2x: extra spec value %s is longer than 255 "
            "characters" % documents.short('h100:' + '9' * 5000), str(exc))

    def test_resource_amounts(self):
        self.build(**{'resources:VCPU': '2147483647'})
        exc = self.assertRaises(errors.NvlinkError, self.build, **{
            'resources:VCPU': '99999999999999999999999'})
        self.assertEqual(
            "flavor h100.2x: resources:VCPU='99999999999999999999999': the "
            "amount must be an integer from 0 to 2147483647 (Placement's "
            "largest)", str(exc))
        # Within bounds one by one, beyond them summed: disk + ephemeral.
        flavor = inputs.flavor_from_dict(dict(
            FLAVOR, disk=2147483647, ephemeral=1))
        exc = self.assertRaises(errors.NvlinkError, request.build, flavor,
                                ALIASES)
        self.assertEqual('flavor h100.2x: it asks 2147483648 DISK_GB in one '
                         'request group; Placement takes at most 2147483647',
                         str(exc))
        exc = self.assertRaises(errors.NvlinkError, inputs.flavor_from_dict,
                                dict(FLAVOR, vcpus=2 ** 31), 'f.yaml')
        self.assertEqual('f.yaml: flavor h100.2x: vcpus must be a '
                         'non-negative integer up to 2147483647, got '
                         '2147483648', str(exc))

    def test_request_groups_per_flavor(self):
        own = {'group_policy': 'none'}
        own.update({'resources%d:VCPU' % i: '1' for i in range(32)})
        own.update({'trait%d:HW_CPU_X86_AVX2' % i: 'required'
                    for i in range(32, 64)})
        groups = {key.replace('resources', '').replace('required', '')
                  for key, _ in self.build(**own).params
                  if key.startswith(('resources', 'required'))}
        # Its own 64 and the 2 of the alias, besides the unsuffixed one.
        self.assertEqual(64 + 2, len(groups - {''}))
        own['trait64:HW_CPU_X86_AVX2'] = 'required'
        exc = self.assertRaises(errors.NvlinkError, self.build, **own)
        self.assertEqual(
            "flavor: flavor h100.2x: 65 request groups (resources<N>: and "
            "trait<N>: suffixes '0', '1', '10' ...); a flavor may name at "
            "most 64, and Nova sends each to Placement", str(exc))

    def test_extra_specs_per_flavor(self):
        specs = {'hw:numa_cpus.%d' % i: '0' for i in range(255)}
        self.assertEqual(256, len(inputs.flavor_from_dict(dict(
            FLAVOR, extra_specs=dict(FLAVOR['extra_specs'], **specs)))[
                'extra_specs']))
        specs['hw:numa_cpus.255'] = '0'
        exc = self.assertRaises(
            errors.NvlinkError, inputs.flavor_from_dict, dict(
                FLAVOR, extra_specs=dict(FLAVOR['extra_specs'], **specs)),
            'f.json')
        self.assertEqual('f.json: flavor h100.2x: 257 extra specs; a flavor '
                         'may have at most 256', str(exc))

    def test_100000_groups_refused_before_any_query(self):
        # The audit's file: 2.8 MB, 135 s and a 2.4-million-character line.
        specs = {'resources%d:VCPU' % i: '1' for i in range(100000)}
        specs['pci_passthrough:alias'] = 'h100:1'
        flavors = self.write('f.json', json.dumps([dict(
            FLAVOR, name='gpu.h100.1x', extra_specs=specs)]))
        result = self.openstack(
            'nvlink', 'flavor', 'verify', '--topology', EXAMPLE,
            '--resource-class', 'CUSTOM_PCI_10DE_2330', '--flavors', flavors)
        self.assertEqual((1, '', '%s: flavor gpu.h100.1x: 100001 extra '
                          'specs; a flavor may have at most 256\n' % flavors),
                         (result.code, result.stdout, result.stderr))

    def test_refusal_cuts_the_query(self):
        flavor = dict(FLAVOR, name='long.8x', extra_specs={
            'pci_passthrough:alias': 'h100:8:_h100', 'group_policy': 'none',
            'trait1:CUSTOM_NO_SUCH_TRAIT': 'required'})
        url = request.build(inputs.flavor_from_dict(flavor), ALIASES).url
        self.assertGreater(len(url), 600)
        result = self.openstack(
            'nvlink', 'flavor', 'verify', '--snapshot', SNAPSHOT,
            '--topology', EXAMPLE, '--resource-class', 'CUSTOM_PCI_10DE_2330',
            '--flavors', self.write('f.json', json.dumps([flavor])),
            '-f', 'value', '-c', 'host')
        self.assertEqual(
            (1, 'compute-01\ncompute-02\n',
             'flavor verify: Nova 34 query, owner filter on (default Nova '
             '34)\n'
             'long.8x: 0 candidates, 0 distinct GPU sets, 0 duplicates; '
             'reached 0 of 0 hosts with a free domain\n'
             'long.8x: Placement refused the query: GET %s... failed with '
             'HTTP 400 (placement.query.bad_value): Resourceless suffixed '
             'group request should be specified in `same_subtree` query '
             "param: bad group(s) - ['1'].\n" % url[:300]),
            (result.code, result.stdout, result.stderr))

    def test_refused_before_any_query(self):
        # The check comes before Placement: no cloud, no snapshot needed.
        flavors = self.write('f.yaml', json.dumps([dict(
            FLAVOR, extra_specs={'pci_passthrough:alias':
                                 'h100:99999999999999999999'})]))
        result = self.openstack(
            'nvlink', 'flavor', 'verify', '--topology', EXAMPLE,
            '--resource-class', 'CUSTOM_PCI_10DE_2330', '--flavors', flavors)
        self.assertEqual(1, result.code)
        self.assertEqual(
            "flavor h100.2x: pci_passthrough:alias='h100:99999999999999999999"
            "': more devices than any host holds (at most 64)\n",
            result.stderr)


class TestClearMessages(FilesTest):
    """Item 8: the file and the line or key path, in words."""

    def test_not_utf8(self):
        text = b'version: 1\nhosts:\n  caf\xe9: {}\n'
        reason = 'line 3 column 6: not UTF-8 (byte 0xe9): the file must be ' \
            'UTF-8 text'
        path = self.write('t.yaml', text)
        self.assertEqual(['%s: %s' % (path, reason)], self.problems(path))
        path = self.write('f.yaml', text)
        exc = self.assertRaises(errors.NvlinkError, inputs.read_flavors,
                                path)
        self.assertEqual('%s: %s' % (path, reason), str(exc))
        path = self.write('a.conf', text)
        exc = self.assertRaises(errors.NvlinkError,
                                inputs.read_alias_config, path)
        self.assertEqual('%s: %s' % (path, reason), str(exc))
        path = self.write('t16.yaml', 'version: 1\n'.encode('utf-16'))
        self.assertEqual(
            ['%s: the file is UTF-16 (it starts with a byte-order mark), not '
             'UTF-8: convert it, e.g. iconv -f UTF-16 -t UTF-8' % path],
            self.problems(path))

    def test_a_directory_is_named_as_one(self):
        for option in ('--topology', '--flavors'):
            argv = ['nvlink', 'flavor', 'verify', '--topology', EXAMPLE,
                    '--snapshot', SNAPSHOT, '--flavors', self.dir]
            if option == '--topology':
                argv[4] = self.dir
            result = self.openstack(*argv)
            self.assertEqual(
                (1, '%s: is a directory, not a file\n' % self.dir),
                (result.code, result.stderr), option)

    def test_validate_names_a_board_host_listing_some_gpus(self):
        path = self.write('three.yaml', (
            'version: 1\nhosts:\n  h:\n    board: hgx-h100-8gpu\n'
            '    gpus:\n      "0000:19:00.0": 1\n'
            '      "0000:3b:00.0": 2\n      "0000:4c:00.0": 5\n'))
        result = self.openstack('nvlink', 'topology', 'validate',
                                '--topology', path)
        self.assertEqual(0, result.code, result.stderr)
        # A note on stderr (topology coverage), the exit code unchanged.
        self.assertIn('warning: %s: hosts.h: lists 3 of the 8 GPUs of board '
                      'hgx-h100-8gpu' % path, result.stderr)

    def test_deep_nesting(self):
        path = self.write('t.yaml', 'version: 1\nhosts: ' + '[' * 200 +
                          ']' * 200 + '\n')
        self.assertEqual(['%s: hosts%s: nested deeper than 32 levels'
                          % (path, '[0]' * 31)], self.problems(path))
        path = self.write('t.json', '{"hosts": ' + '[' * 3000 + ']' * 3000 +
                          '}')
        self.assertEqual(['%s: nested deeper than 32 levels' % path],
                         self.problems(path))

    def test_long_numbers(self):
        digits = '7' * 5000
        path = self.write('t.yaml', H100_ONE % digits)
        self.assertEqual(
            ['%s: hosts.h.gpus["0000:19:00.0"]: a number of 5000 characters '
             '(at most 30 digits)' % path], self.problems(path))
        path = self.write('t2.yaml', H100_ONE % ('"%s"' % digits))
        self.assertEqual(
            ["%s: hosts.h.gpus[\"0000:19:00.0\"]: '7777777777777777777777777"
             "77...7777777777777777777777777777' is not valid here: "
             "expected a non-negative integer or a decimal string or a "
             "mapping" % path],
            self.problems(path))

    def test_keys_must_be_strings(self):
        for key, kind in (('1234', 'an integer'), ('yes', 'a boolean'),
                          ('null', 'null'), ('2024-01-02', 'a date')):
            path = self.write('t.yaml', 'version: 1\nhosts:\n  %s:\n    '
                              'groups: []\n' % key)
            self.assertEqual(
                ["%s: hosts: line 3 column 3: key '%s' is not a string: YAML "
                 "reads it as %s; quote it" % (path, key, kind)],
                self.problems(path))
        path = self.write('t.yaml', 'version: 1\nhosts:\n  [a, b]: {}\n')
        self.assertEqual(['%s: hosts: line 3 column 3: a key must be a '
                          'string, not a list' % path], self.problems(path))
        # Quoted, they are host names like any other.
        path = self.write('t.yaml', 'version: 1\nhosts:\n  "1234":\n    '
                          'groups: [["0000:01:00.0", "0000:02:00.0"]]\n')
        self.assertEqual(['1234'], list(loader.load(path).hosts))

    def test_alias_fields(self):
        for spec, message in (
                ({'name': 'h100', 'resource_class': 5},
                 "a: alias 'h100': resource_class must be a string, got 5"),
                ({'name': 'h100', 'resource_class': 'X', 'traits': ['T']},
                 "a: alias 'h100': traits must be a string, got ['T']"),
                ({'name': 'h100', 'resource_class': 'X' * 300},
                 "a: alias 'h100': resource class %s is longer than 255 "
                 "characters" % documents.short('CUSTOM_' + 'X' * 300))):
            exc = self.assertRaises(errors.NvlinkError,
                                    inputs.alias_from_spec, spec, 'a')
            self.assertEqual(message, str(exc))


H100_ONE = '''version: 1
hosts:
  h:
    groups: [["0000:19:00.0", "0000:3b:00.0"]]
    gpus:
      "0000:19:00.0": %s
      "0000:3b:00.0": 4
'''


class TestGpusFile(FilesTest):
    """Item 9: gpus_file stays in the topology's directory, never echoed."""

    SECRET = 'root:$6$s3cr3t-hash:19000:0:99999:7:::\n'

    def setUp(self):
        super().setUp()
        self.shadow = self.write(os.path.join('elsewhere', 'shadow'),
                                 self.SECRET)
        with open(os.path.join(ETC, 'examples', 'mappings',
                               'compute-02.json')) as handle:
            self.mapping = handle.read()

    def topology(self, gpus_file, name='t.yaml'):
        return self.write(os.path.join('topo', name), (
            'version: 1\nhosts:\n  h:\n    board: hgx-h100-8gpu\n'
            '    gpus_file: %s\n' % gpus_file))

    def test_paths_leaving_the_directory(self):
        os.symlink(self.shadow, os.path.join(self.dir, 'topo-link'))
        for gpus_file in (self.shadow, '../elsewhere/shadow', '/etc/shadow'):
            path = self.topology(gpus_file)
            leads_to = os.path.dirname(os.path.realpath(os.path.join(
                os.path.dirname(path), gpus_file)))
            # The whole path, and the global option before "nvlink".
            self.assertEqual(
                ['%s: hosts.h.gpus_file: %s is outside %s, the directory of '
                 'the topology file: move it there, or allow its directory '
                 'with the global option --os-nvlink-gpus-file-dir, given '
                 'before "nvlink": openstack --os-nvlink-gpus-file-dir %s '
                 'nvlink ...'
                 % (path, gpus_file, os.path.dirname(path), leads_to)],
                self.problems(path))
        # A link inside the directory that leads out is refused too.
        os.symlink(self.shadow, os.path.join(self.dir, 'topo', 'm.json'))
        found = self.problems(self.topology('m.json'))
        self.assertIn('is outside', found[0])

    def test_allowed_directory(self):
        self.write(os.path.join('maps', 'm.json'), self.mapping)
        path = self.topology('../maps/m.json')
        self.assertIn('is outside', self.problems(path)[0])
        topology = loader.load(path, [os.path.join(self.dir, 'maps')])
        self.assertEqual(8, len(topology.hosts['h'].gpus))
        result = self.openstack(
            '--os-nvlink-gpus-file-dir', os.path.join(self.dir, 'maps'),
            'nvlink', 'topology', 'validate', path)
        self.assertEqual((0, '%s: valid: 1 host, 8 GPUs, 6 groups\n' % path),
                         (result.code, result.stdout))

    def test_contents_never_shown(self):
        path = self.topology('shadow')
        self.write(os.path.join('topo', 'shadow'), self.SECRET)
        result = self.openstack('nvlink', 'topology', 'validate', path)
        self.assertEqual(
            (1, '%s: expected a mapping of PCI address to module id; none of '
             'its 1 keys is a PCI address\n'
             % os.path.join(os.path.dirname(path), 'shadow')),
            (result.code, result.stderr))
        self.write(os.path.join('topo', 'shadow'), 'just text\n')
        result = self.openstack('nvlink', 'topology', 'validate', path)
        self.assertEqual(
            (1, '%s: expected a mapping of PCI address to module id, got a '
             'string\n' % os.path.join(os.path.dirname(path), 'shadow')),
            (result.code, result.stderr))


class TestSecretsInLogs(FilesTest):
    """Item 10: -v / --debug do not print the password or the token."""

    def test_start_line_is_masked(self):
        for argv in (['-v', '--os-auth-type', 'password', '--os-password',
                      's3cr3t', '--os-username', 'u', '--os-auth-url',
                      'http://127.0.0.1:9/v3'],
                     ['--debug', '--os-auth-type', 'admin_token',
                      '--os-token', 's3cr3t', '--os-endpoint',
                      'http://127.0.0.1:9'],
                     ['-v', '--os-token=s3cr3t']):
            result = self.openstack(*argv + ['nvlink', 'topology',
                                             'validate', EXAMPLE])
            self.assertEqual(0, result.code)
            self.assertIn('START with options', result.stderr)
            self.assertNotIn('s3cr3t', result.stderr)

    def start_lines(self, stderr):
        return [line for line in stderr.splitlines()
                if line.startswith('START with options:')]

    def test_whole_values_are_masked(self):
        # The START line joins the arguments with spaces: the filter masks
        # the argument itself, not the first word of the joined line.
        login = ['--os-auth-type', 'password', '--os-username', 'u',
                 '--os-auth-url', 'http://127.0.0.1:9/v3']
        command = ['nvlink', 'topology', 'validate', EXAMPLE]
        for secret, shown in (
                (['--os-password', 'PWone PWtwo'], '--os-password ***'),
                (['--os-password=PWone PWtwo'], '--os-password=***'),
                (['--os-passw', 'PWone --PWtwo'], '--os-passw ***'),
                (['--os-password', '-1 PWtwo'], '--os-password ***')):
            result = self.openstack(*['-v'] + secret + login + command)
            self.assertEqual(0, result.code, secret)
            self.assertEqual(
                ['START with options: -v %s %s %s'
                 % (shown, ' '.join(login), ' '.join(command))],
                self.start_lines(result.stderr))
            self.assertNotIn('PWtwo', result.stderr)

    def test_passcode_in_every_line(self):
        # TOTP: osc_lib masks neither --os-passcode nor passcode='...'.
        argv = ['-vv', '--os-auth-type', 'v3totp', '--os-auth-url',
                'http://127.0.0.1:9/v3', '--os-username', 'u',
                '--os-passcode', '987654', '--os-project-name', 'p',
                '--os-user-domain-name', 'Default', '--os-project-domain-name',
                'Default', 'nvlink', 'check', '--topology', EXAMPLE,
                '--retry-window', '0']
        result = cli.run(self, *argv)
        self.assertEqual(1, result.code)
        self.assertNotIn('987654', result.stderr)
        self.assertEqual(
            ['START with options: %s'
             % ' '.join(argv).replace('987654', '***')],
            self.start_lines(result.stderr))
        lines = result.stderr.splitlines()
        namespace = [line for line in lines if line.startswith('options: ')]
        self.assertEqual(1, len(namespace))
        self.assertIn(" passcode='***', ", namespace[0])
        used = [line for line in lines if line.startswith('Using parameters')]
        self.assertEqual(
            ["Using parameters {'auth_url': 'http://127.0.0.1:9/v3', "
             "'project_name': 'p', 'project_domain_name': 'Default', "
             "'username': 'u', 'user_domain_name': 'Default', "
             "'passcode': '***'}"], used)
        hook = [line for line in lines if line.startswith('auth_config_hook')]
        self.assertTrue(hook)
        for line in hook:
            self.assertIn("'passcode': '***'", line)

    def test_credentials_inside_an_endpoint_url(self):
        # keystoneauth logs the URL in every REQ line, the error names it,
        # and --debug prints the traceback with it.
        for debug in ([], ['--debug']):
            result = cli.run(self, *debug + [
                '--os-auth-type', 'admin_token', '--os-token', 't',
                '--os-endpoint', 'http://admin:s3cr3t@127.0.0.1:9/',
                'nvlink', 'check', '--topology', EXAMPLE,
                '--retry-window', '0'])
            self.assertEqual(1, result.code)
            self.assertNotIn('s3cr3t', result.stderr + result.stdout)
            self.assertIn('cannot reach Placement: Unable to establish '
                          'connection to http://admin:***@127.0.0.1:9/',
                          result.stderr)
            if debug:
                self.assertIn('REQ: curl -g -i -X GET '
                              'http://admin:***@127.0.0.1:9/',
                              result.stderr)
                self.assertIn('Traceback', result.stderr)

    def test_url_credentials_in_text(self):
        self.assertEqual(
            "{'endpoint': 'http://u:***@h:8778/', 'x': 'https://***@h/'} "
            'me@example.org http://h:80/a@b',
            redact.url_credentials(
                "{'endpoint': 'http://u:pw@h:8778/', 'x': 'https://tok@h/'} "
                'me@example.org http://h:80/a@b'))
        self.assertEqual('--os-auth-url http://u:***@k/v3',
                         logmask.mask('--os-auth-url http://u:pw@k/v3'))

    def test_every_keystoneauth_secret_option(self):
        # keystoneauth marks them secret=True; osc_lib registers them all.
        found, options = set(), set()
        for name in loading.get_available_plugin_names():
            for opt in loading.get_plugin_options(name):
                if not opt.secret:
                    continue
                found.add(opt.dest)
                options.update(opt.argparse_args)
                for option in opt.argparse_args:
                    self.assertEqual(
                        [option, '***', '--os-username', 'u',
                         option + '=***'],
                        logmask.mask_argv([option, 'a b', '--os-username',
                                           'u', option + '=a b']))
                self.assertEqual(
                    "Namespace(%s='***', username='u')" % opt.dest,
                    logmask.mask("Namespace(%s='a b', username='u')"
                                 % opt.dest))
                self.assertEqual(
                    "{'%s': '***', 'username': 'u'}" % opt.dest,
                    logmask.mask("{'%s': 'a b', 'username': 'u'}"
                                 % opt.dest))
        self.assertEqual(set(logmask.SECRET_KEYS), found)
        self.assertEqual(set(logmask.SECRET_OPTIONS), options)
        self.assertEqual(
            "Namespace(code_challenge_method='S256', access_token_endpoint="
            "'http://idp', passcode=None, passcode='***', password='***', "
            "key='k.pem')",
            logmask.mask(
                "Namespace(code_challenge_method='S256', "
                "access_token_endpoint='http://idp', passcode=None, "
                "passcode=987654, "
                "password=b'x', key='k.pem')"))

    def test_mask(self):
        # Without the argument list (the fallback): every word up to the
        # next option.
        line = ('--os-password PWone PWtwo --os-username u --os-token=tok '
                '--os-client-secret cs --os-key k --os*** x --host h '
                '--os-passcode 987654 --debug --os-passc -1 --x')
        self.assertEqual(
            '--os-password *** --os-username u --os-token=*** '
            '--os-client-secret *** --os-key *** --os*** *** --host h '
            '--os-passcode *** --debug --os-passc *** --x',
            logmask.mask(line))
