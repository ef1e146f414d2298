"""What the commands say and print: next steps, plain help, formats.

In process against the embedded Placement (``--snapshot``), a tiny HTTP
server that is not Placement, and no credentials at all.
"""

import configparser
import http.server
import io
import json
import os
import re
import subprocess
import sys
import threading

import fixtures
from oslotest import base
import yaml

from nvlink_placement.cmd import partition_hook
from nvlink_placement.novaconfig import settings as novaconfig
from nvlink_placement.topology import loader
from tests.functional import base as fbase
from tests.functional import cli
from tests.functional import writes

RC = 'CUSTOM_PCI_10DE_2330'
RST = re.compile(r'``|:[a-z]+:`')


def _entry_points():
    """The ``openstack nvlink`` commands registered in setup.cfg."""
    config = configparser.ConfigParser()
    config.read(os.path.join(fbase.ROOT, 'setup.cfg'))
    lines = config['entry_points']['openstack.nvlink.v1'].split('\n')
    return [line.split('=')[0].strip().split('_')[1:]
            for line in lines if line.strip()]


class _Html404(http.server.BaseHTTPRequestHandler):
    """What a web server that is not Placement answers: an HTML 404."""

    BODY = (b'<html><head><title>404 Not Found</title></head><body>'
            b'<h1>Not Found</h1><hr><center>nginx</center></body></html>')

    def do_GET(self):
        self.send_response(404)
        self.send_header('Content-Type', 'text/html')
        self.send_header('Content-Length', str(len(self.BODY)))
        self.end_headers()
        self.wfile.write(self.BODY)

    def log_message(self, *args):
        pass


class TestSummaryLines(base.BaseTestCase):
    """reshape and flatten end with what they wrote, or would write."""

    def test_dry_run_apply_and_flatten(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        args = ('--topology', fbase.H100_TOPOLOGY, '--snapshot',
                fbase.H100_SNAPSHOT, '-f', 'value', '-c', 'action')
        dry = cli.run(self, 'nvlink', 'reshape', '--dry-run', *args)
        self.assertEqual(0, dry.code, dry.stderr)
        self.assertIn('dry run: 43 writes planned on 2 hosts; nothing '
                      'written\n', dry.stderr)
        saved = os.path.join(tmp, 'after.json')
        applied = cli.run(self, 'nvlink', 'reshape', '--save-snapshot',
                          saved, *args)
        self.assertIn('reshape: 43 writes made on 2 hosts\n',
                      applied.stderr)
        self.assertIn('%s: 30 resource providers, 1 consumer\n' % saved,
                      applied.stderr)
        flat = cli.run(self, 'nvlink', 'flatten', '--snapshot', saved,
                       '--host', 'compute-01', '-f', 'value')
        self.assertIn('flatten: 14 writes made on 1 host\n', flat.stderr)


class TestOptionValues(base.BaseTestCase):

    def test_workers_at_least_one(self):
        for command in (['reshape', '--topology', fbase.H100_TOPOLOGY,
                         '--snapshot', fbase.H100_SNAPSHOT, '--dry-run'],
                        ['snapshot', '-o', 'x.json']):
            result = cli.run(self, 'nvlink', *command + ['--workers', '0'])
            self.assertEqual(3, result.code, command)
            self.assertIn('argument --workers: 0: at least 1', result.stderr)

    def test_save_snapshot_is_not_the_input(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'prod.json')
        with open(fbase.H100_SNAPSHOT) as f, open(path, 'w') as g:
            g.write(f.read())
        before = os.path.getmtime(path)
        result = cli.run(self, 'nvlink', 'reshape', '--topology',
                         fbase.H100_TOPOLOGY, '--snapshot', path,
                         '--save-snapshot', path)
        self.assertEqual(3, result.code)
        self.assertIn('--save-snapshot %s is the --snapshot input: give '
                      'another file' % path, result.stderr)
        self.assertEqual(before, os.path.getmtime(path))

    def test_flavor_without_disk(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'f.json')
        with open(path, 'w') as f:
            json.dump([{'name': 'f', 'vcpus': 1, 'ram': 1, 'extra_specs': {
                'pci_passthrough:alias': 'h100:2'}}], f)
        result = cli.run(self, 'nvlink', 'flavor', 'verify', '--topology',
                         fbase.H100_TOPOLOGY, '--snapshot',
                         fbase.H100_SNAPSHOT, '--flavors', path,
                         '--resource-class', 'CUSTOM_PCI_10DE_2330')
        self.assertEqual(1, result.code)
        self.assertEqual('%s: flavor f: disk is missing (a non-negative '
                         'integer, as in "openstack flavor show")\n' % path,
                         result.stderr)


class TestLiveModeErrors(base.BaseTestCase):

    def test_no_credentials_names_snapshot(self):
        self.useFixture(fixtures.EnvironmentVariable(
            'OS_CLIENT_CONFIG_FILE', '/nonexistent/clouds.yaml'))
        result = cli.run(self, 'nvlink', 'capacity')
        self.assertEqual(1, result.code)
        self.assertIn('no Placement credentials (Missing value auth-url '
                      'required for auth plugin password): set OS_CLOUD '
                      '(clouds.yaml) or --os-auth-url and the other --os-* '
                      'options; or run offline against a snapshot file with '
                      '--snapshot FILE', result.stderr)
        self.assertNotIn('Traceback', result.stderr)

    def test_snapshot_without_credentials_names_from_topology(self):
        self.useFixture(fixtures.EnvironmentVariable(
            'OS_CLIENT_CONFIG_FILE', '/nonexistent/clouds.yaml'))
        result = cli.run(self, 'nvlink', 'snapshot', '-o', 'x.json')
        self.assertEqual(1, result.code)
        self.assertIn('options; to write the trees Nova would report for a '
                      'topology without a cloud, give --from-topology FILE; '
                      '--snapshot FILE exports from a snapshot file',
                      result.stderr)

    def test_flavor_by_name_with_snapshot(self):
        result = cli.run(self, 'nvlink', 'flavor', 'verify', '--flavor',
                         'gpu.h100.2x', '--topology', fbase.H100_TOPOLOGY,
                         '--snapshot', fbase.H100_SNAPSHOT)
        self.assertEqual(1, result.code)
        self.assertIn('no compute API credentials', result.stderr)
        self.assertIn('--flavor NAME reads the flavor from Nova even with '
                      '--snapshot; offline, give the flavors as a file with '
                      '--flavors FILE', result.stderr)

    def test_endpoint_that_is_not_placement(self):
        server = http.server.HTTPServer(('127.0.0.1', 0), _Html404)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        url = 'http://127.0.0.1:%d' % server.server_port
        result = cli.run(self, '--os-auth-type', 'admin_token',
                         '--os-token', 'admin', '--os-endpoint', url,
                         'nvlink', 'capacity')
        self.assertEqual(1, result.code)
        self.assertEqual(
            '%s/resource_providers answered HTTP 404 with an HTML page '
            '("404 Not Found"), not JSON: %s does not look like the '
            'Placement API (check --os-endpoint, or the placement endpoint '
            'in the service catalog)\n' % (url, url), result.stderr)


class TestHelp(base.BaseTestCase):

    def test_help_is_plain_text(self):
        commands = _entry_points()
        self.assertEqual(17, len(commands))
        for words in commands:
            result = cli.run(self, 'nvlink', *words + ['--help'])
            self.assertEqual(0, result.code, words)
            self.assertIn(' nvlink %s [-h]' % ' '.join(words),
                          result.stdout)
            self.assertIsNone(RST.search(result.stdout),
                              '%s: %s' % (words, result.stdout))
        show = cli.run(self, 'nvlink', 'topology', 'show', '--help')
        self.assertIn('"members" are normalized PCI addresses',
                      ' '.join(show.stdout.split()))

    def test_hook_help_is_plain_text(self):
        out = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
        self.assertEqual(0, partition_hook.main(['--help']))
        text = out.getvalue()
        self.assertIsNone(RST.search(text), text)
        self.assertIn('\nGUEST prepare begin -\n', text)

    def test_flatten_host_help(self):
        flatten = cli.run(self, 'nvlink', 'flatten', '--help').stdout
        self.assertNotIn('every host of the topology', flatten)
        self.assertIn('A compute host to flatten (repeatable; or --all).',
                      ' '.join(flatten.split()))

    def test_docs_keep_double_dashes(self):
        scope = {}
        with open(os.path.join(fbase.ROOT, 'doc', 'source', 'conf.py')) as f:
            exec(compile(f.read(), 'conf.py', 'exec'), scope)
        self.assertIs(False, scope['smartquotes'])

    def test_scheduler_sample_matches_nova_config(self):
        sample = configparser.ConfigParser(interpolation=None)
        sample.read(os.path.join(fbase.ROOT, 'etc', 'nova',
                                 'nova-scheduler.conf.sample'))
        topology = loader.load(fbase.H100_TOPOLOGY)
        settings = [s for s in novaconfig.settings(
            list(topology.hosts.values()), 'h100', vendor_id='10de',
            product_id='2330') if 'nova-scheduler' in s.service]
        self.assertIn('PciPassthroughFilter', sample['filter_scheduler'][
            'enabled_filters'].split(','))
        self.assertEqual(
            [(s.section, s.option, s.value) for s in settings],
            [(s.section, s.option, sample[s.section][s.option])
             for s in settings])


class TestFormats(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def test_tree_json(self):
        result = cli.run(self, 'nvlink', 'tree', '--snapshot',
                         fbase.H100_SNAPSHOT, '--topology',
                         fbase.H100_TOPOLOGY, '--host', 'compute-01',
                         '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        rows = json.loads(result.stdout)
        self.assertEqual(9, len(rows))
        self.assertEqual({'host': 'compute-01', 'provider': 'compute-01',
                          'parent': None, 'depth': 0, 'traits': [],
                          'module': None, 'status': None}, rows[0])
        self.assertEqual({'host': 'compute-01',
                          'provider': 'compute-01_0000:4C:00.0',
                          'parent': 'compute-01', 'depth': 1,
                          'traits': ['CUSTOM_PCI_GROUP2_MEMBER0',
                                     'CUSTOM_PCI_GROUP4_MEMBER0',
                                     'CUSTOM_PCI_GROUP8_MEMBER0'],
                          'module': 1, 'status': 'free'}, rows[3])
        text = cli.run(self, 'nvlink', 'tree', '--snapshot',
                       fbase.H100_SNAPSHOT, '--host', 'compute-01')
        self.assertEqual('compute-01\n├── compute-01_0000:19:00.0 free\n',
                         ''.join(text.stdout.splitlines(True)[:2]))

    def test_validate_json_and_topology_option(self):
        result = cli.run(self, 'nvlink', 'topology', 'validate',
                         '--topology', fbase.H100_TOPOLOGY, '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual({'file': fbase.H100_TOPOLOGY, 'valid': True,
                          'hosts': 2, 'gpus': 16, 'groups': 12,
                          'problems': [], 'warnings': []},
                         json.loads(result.stdout))
        bad = self.write('bad.yaml', 'version: 1\nhosts:\n  c1:\n'
                                     '    groups:\n')
        result = cli.run(self, 'nvlink', 'topology', 'validate', bad,
                         '-f', 'json')
        self.assertEqual(1, result.code)
        self.assertEqual(
            {'file': bad, 'valid': False, 'hosts': None, 'gpus': None,
             'groups': None,
             'problems': ['%s: hosts.c1.groups: expected a list, got null'
                          % bad], 'warnings': []}, json.loads(result.stdout))
        both = cli.run(self, 'nvlink', 'topology', 'show', bad,
                       '--topology', fbase.H100_TOPOLOGY)
        self.assertEqual(3, both.code)  # a usage error
        self.assertIn('two topology files: FILE %s and --topology %s; give '
                      'one' % (bad, fbase.H100_TOPOLOGY), both.stderr)

    def test_value_format_joins_lists(self):
        result = cli.run(self, 'nvlink', 'topology', 'show', '--topology',
                         fbase.H100_TOPOLOGY, '--host', 'compute-01',
                         '-f', 'value', '-c', 'group', '-c', 'members',
                         '-c', 'modules')
        self.assertEqual(0, result.code, result.stderr)
        self.assertIn('compute-01_nvlink-group-of-2-a '
                      '0000:4c:00.0,0000:5d:00.0 1,3\n', result.stdout)
        self.assertNotIn('[', result.stdout)

    def test_value_format_of_mappings_and_empty_cells(self):
        result = cli.run(self, 'nvlink', 'flavor', 'generate', '--topology',
                         fbase.H100_TOPOLOGY, '--alias', 'h100', '--sizes',
                         '2', '-f', 'value', '-c', 'extra_specs')
        self.assertEqual(0, result.code, result.stderr)
        # osc_lib's key='value' form: the values hold commas themselves.
        self.assertEqual(
            "pci_passthrough:alias='h100:2:_h100', "
            "placement:group_policy='none', "
            "placement:same_subtree='_h100-0,_h100-1,_nvl2', "
            "trait_h100-0:CUSTOM_PCI_GROUP2_MEMBER0='required', "
            "trait_h100-1:CUSTOM_PCI_GROUP2_MEMBER1='required', "
            "trait_nvl2:CUSTOM_PCI_GROUP2='required'\n", result.stdout)
        tree = cli.run(self, 'nvlink', 'tree', '--snapshot',
                       fbase.H100_SNAPSHOT, '--host', 'compute-01',
                       '-f', 'value', '-c', 'host', '-c', 'parent',
                       '-c', 'module')
        self.assertEqual(0, tree.code, tree.stderr)
        self.assertEqual('compute-01  \n', tree.stdout.splitlines(True)[0])
        self.assertNotIn('None', tree.stdout)

    def test_shell_format_cannot_run_what_a_value_holds(self):
        bad = self.write('bad.yaml', 'version: 1\nhosts:\n'
                                     '  "h $(touch x) `id` \\\\ x":\n'
                                     '    gpus: nope\n')
        result = cli.run(self, 'nvlink', 'topology', 'validate', bad,
                         '-f', 'shell', '-c', 'problems')
        self.assertEqual(1, result.code, result.stderr)
        self.assertEqual(
            'problems="%s: hosts[\\"h \\$(touch x) \\`id\\` \\\\\\\\ '
            'x\\"].gpus: expected a mapping, got a string \'nope\'"\n' % bad,
            result.stdout)

    def test_merge_to_stdout(self):
        fragment = self.write('c1.yaml', 'version: 1\nhosts:\n  c1:\n'
                                         '    groups:\n'
                                         '      - ["0000:01:00.0", '
                                         '"0000:02:00.0"]\n')
        result = cli.run(self, 'nvlink', 'topology', 'merge', fragment)
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual({'version': 1, 'hosts': {'c1': {'groups': [
            ['0000:01:00.0', '0000:02:00.0']]}}}, yaml.safe_load(
            result.stdout))
        self.assertEqual('<stdout>: 1 host from 1 fragment\n', result.stderr)
        dash = cli.run(self, 'nvlink', 'topology', 'merge', fragment,
                       '-o', '-')
        self.assertEqual(result.stdout, dash.stdout)

    def test_verify_host_and_query_column(self):
        flavors = cli.run(self, 'nvlink', 'flavor', 'generate', '--topology',
                          fbase.H100_TOPOLOGY, '--alias', 'h100',
                          '--sizes', '1', '-f', 'json')
        path = self.write('flavors.json', flavors.stdout)
        args = ('nvlink', 'flavor', 'verify', '--flavors', path,
                '--topology', fbase.H100_TOPOLOGY, '--resource-class', RC,
                '--snapshot', fbase.H100_SNAPSHOT, '--host', 'compute-02')
        result = cli.run(self, *args)
        self.assertEqual(0, result.code, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual('| flavor      | host       | candidates | '
                         'valid_sets | invalid_sets | missing_sets | '
                         'distinct_sets | duplicates | status |',
                         lines[1])
        self.assertEqual('| gpu.h100.1x | compute-02 |          8 |'
                         '          8 |            0 |            0 |'
                         '             8 |          0 | ok     |',
                         lines[3])
        self.assertIn('gpu.h100.1x: 8 candidates, 8 distinct GPU sets, 0 '
                      'duplicates; reached 1 of 1 hosts with a free domain',
                      result.stderr)
        self.assertEqual(5, len(lines))
        query = cli.run(self, *args + ('-f', 'value', '-c', 'query'))
        self.assertTrue(query.stdout.startswith('limit=1000&'),
                        query.stdout)
        longer = cli.run(self, *args + ('--long',))
        self.assertIn('| query', longer.stdout.splitlines()[1])

    def test_nova_config_reason_with_long(self):
        args = ('nvlink', 'nova-config', '--topology', fbase.H100_TOPOLOGY,
                '--alias', 'h100', '--vendor-id', '10de', '--product-id',
                '2330')
        table = cli.run(self, *args)
        self.assertEqual(0, table.code, table.stderr)
        self.assertEqual(['service', 'section', 'option', 'value'],
                         table.stdout.splitlines()[1].replace(
                             '|', ' ').split())
        longer = cli.run(self, *args + ('--long',))
        self.assertIn('reason', longer.stdout.splitlines()[1])

    def test_wide_tree_warning_is_short(self):
        # Only flavors without member traits enumerate permutations: the
        # upstream dialect's whole-host flavor.
        mosk = cli.run(self, 'nvlink', 'flavor', 'generate', '--topology',
                       fbase.H100_TOPOLOGY, '--alias', 'h100')
        self.assertEqual(0, mosk.code, mosk.stderr)
        self.assertNotIn('8 or more', mosk.stderr)
        result = cli.run(self, 'nvlink', 'flavor', 'generate', '--topology',
                         fbase.H100_TOPOLOGY, '--alias', 'h100',
                         '--dialect', 'upstream')
        self.assertEqual(0, result.code, result.stderr)
        start = result.stderr.index('compute-01, compute-02: 8 or more')
        lines = result.stderr[start:].splitlines()[:6]
        self.assertEqual(['  [placement] max_allocation_candidates = 1000',
                          '  [placement] allocation_candidates_generation_'
                          'strategy = breadth-first',
                          '  [workarounds] optimize_for_wide_provider_trees'
                          ' = True'], lines[3:6])
        self.assertLess(max(len(line) for line in lines), 120)


class TestWording(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def test_merge_conflict_shows_both_values(self):
        a = self.write('a.yaml', 'version: 1\nhosts:\n  c1:\n'
                                 '    board: hgx-h100-8gpu\n'
                                 '    gpus: {"0000:01:00.0": 1}\n')
        b = self.write('b.yaml', 'version: 1\nhosts:\n  c1:\n'
                                 '    board: hgx-b200-8gpu\n'
                                 '    gpus: {"0000:01:00.0": 1}\n')
        result = cli.run(self, 'nvlink', 'topology', 'merge', a, b,
                         '-o', os.path.join(self.tmp, 'out.yaml'))
        self.assertEqual(1, result.code)
        self.assertEqual(
            "%s: hosts.c1 differs from the one in %s: hosts.c1.board: "
            "'hgx-b200-8gpu' in %s, 'hgx-h100-8gpu' in %s. Two hosts that "
            "report the same name (cloned images, containers) need "
            "hypervisor_hostname set per host to Nova's name for each\n"
            % (b, a, b, a), result.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, 'out.yaml')))

    def test_schema_errors_in_plain_words(self):
        empty = self.write('empty.yaml', '')
        missing = self.write('missing.yaml', 'hosts: {}\n')
        for path, message in (
                (empty, 'top level: expected a mapping, got null (the file '
                        'is empty)'),
                (missing, "missing required key 'version' at top level")):
            result = cli.run(self, 'nvlink', 'topology', 'validate', path)
            self.assertEqual(1, result.code)
            self.assertEqual('%s: %s\n' % (path, message), result.stderr)

    def test_counts_are_plural_only_when_more_than_one(self):
        one = self.write('one.yaml', 'version: 1\nhosts:\n  c1:\n'
                                     '    groups:\n'
                                     '      - ["0000:01:00.0", '
                                     '"0000:02:00.0"]\n')
        result = cli.run(self, 'nvlink', 'topology', 'validate', one)
        self.assertEqual('%s: valid: 1 host, 2 GPUs, 0 groups\n' % one,
                         result.stdout)

    def test_plan_error_does_not_claim_writes(self):
        topo = self.write('t.yaml', 'version: 1\nhosts:\n  compute-09:\n'
                                    '    groups:\n'
                                    '      - ["0000:01:00.0", '
                                    '"0000:02:00.0"]\n'
                                    '      - ["0000:03:00.0", '
                                    '"0000:04:00.0"]\n')
        base_args = ('--topology', topo, '--snapshot', fbase.H100_SNAPSHOT)
        with writes.nothing_written(self):
            dry = cli.run(self, 'nvlink', 'reshape', '--dry-run', *base_args)
        self.assertEqual(1, dry.code)
        self.assertIn('the plan is invalid; dry run: no changes made:\n',
                      dry.stderr)
        check = cli.run(self, 'nvlink', 'check', *base_args)
        self.assertIn('the plan is invalid:\n', check.stderr)
        self.assertNotIn('written', dry.stderr + check.stderr)

    def test_capacity_names_hosts_not_reshaped(self):
        result = cli.run(self, 'nvlink', 'capacity', '--snapshot',
                         fbase.H100_SNAPSHOT, '-f', 'value', '-c', 'size',
                         '-c', 'state')
        self.assertEqual(2, result.code, result.stderr)
        self.assertEqual(['1 not reshaped', '8 not reshaped'] * 2 +
                         ['1 2 hosts not reshaped', '8 2 hosts not reshaped'],
                         result.stdout.splitlines())
        self.assertIn('2 hosts not reshaped (compute-01, compute-02): no '
                      'NVLink groups in Placement, so only sizes 1 and '
                      'whole-host are listed; run "openstack nvlink '
                      'reshape"', result.stderr)
        saved = os.path.join(self.tmp, 'reshaped.json')
        reshape = cli.run(self, 'nvlink', 'reshape', '--topology',
                          fbase.H100_TOPOLOGY, '--snapshot',
                          fbase.H100_SNAPSHOT, '--save-snapshot', saved)
        self.assertEqual(0, reshape.code, reshape.stderr)
        after = cli.run(self, 'nvlink', 'capacity', '--snapshot', saved)
        self.assertEqual(0, after.code, after.stderr)
        self.assertNotIn('not reshaped', after.stderr + after.stdout)

    def test_dry_run_with_save_snapshot_is_a_usage_error(self):
        saved = os.path.join(self.tmp, 'out.json')
        # argparse exits the process: run the real CLI.
        result = subprocess.run(
            [sys.executable, '-m', 'openstackclient.shell', 'nvlink',
             'reshape', '--topology', fbase.H100_TOPOLOGY, '--snapshot',
             fbase.H100_SNAPSHOT, '--dry-run', '--save-snapshot', saved],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(3, result.returncode)  # a usage error
        self.assertIn('argument --save-snapshot: not allowed with argument '
                      '--dry-run', result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        self.assertFalse(os.path.exists(saved))

    def test_snapshot_and_topology_swapped_or_empty(self):
        # Each file given where the other belongs says what it is.
        empty = self.write('empty.json', '')
        swapped = cli.run(self, 'nvlink', 'check', '--topology',
                          fbase.H100_SNAPSHOT, '--snapshot',
                          fbase.H100_SNAPSHOT)
        self.assertEqual(1, swapped.code, swapped.stderr)
        self.assertEqual(
            '%s: a Placement snapshot, not a topology file (version 1 with '
            '"hosts"); give the snapshot to --snapshot\n'
            % fbase.H100_SNAPSHOT, swapped.stderr)
        for path, message in (
                (fbase.H100_TOPOLOGY, '(this looks like a topology file: '
                                      'give it to --topology)'),
                (empty, 'the file is empty; a snapshot is the JSON file '
                        'that "openstack nvlink snapshot -o FILE" writes')):
            result = cli.run(self, 'nvlink', 'reshape', '--dry-run',
                             '--topology', fbase.H100_TOPOLOGY,
                             '--snapshot', path)
            self.assertEqual(1, result.code, result.stderr)
            self.assertIn(path + ': ', result.stderr)
            self.assertIn(message, result.stderr)
            self.assertNotIn('Traceback', result.stderr)

    def test_merge_refuses_a_file_without_hosts(self):
        fragment = self.write('a.yaml', 'version: 1\nhosts:\n  c1:\n'
                                        '    board: hgx-h100-8gpu\n'
                                        '    gpus: {"0000:01:00.0": 1}\n')
        empty = self.write('empty.yaml', '')
        out = os.path.join(self.tmp, 'out.yaml')
        result = cli.run(self, 'nvlink', 'topology', 'merge', fragment,
                         fbase.H100_SNAPSHOT, empty, '-o', out)
        self.assertEqual(1, result.code, result.stderr)
        self.assertEqual(
            '%s: no hosts: not a topology fragment but a Placement snapshot '
            '(give it to --snapshot)\n'
            '%s: not a topology document of version 1 (the file is empty)\n'
            % (fbase.H100_SNAPSHOT, empty), result.stderr)
        self.assertFalse(os.path.exists(out))

    def test_merge_names_the_fragment_of_a_missing_map(self):
        good = self.write('a.yaml', 'version: 1\nhosts:\n  c1:\n'
                                    '    board: hgx-h100-8gpu\n'
                                    '    gpus: {"0000:01:00.0": 1}\n')
        bad = self.write('b.yaml', 'version: 1\nhosts:\n'
                                   '  gpu-02.example.org:\n'
                                   '    board: hgx-h100-8gpu\n'
                                   '    gpus_file: maps/gone.json\n')
        out = os.path.join(self.tmp, 'out.yaml')
        result = cli.run(self, 'nvlink', 'topology', 'merge', good, bad,
                         '-o', out)
        self.assertEqual(1, result.code, result.stderr)
        gone = os.path.join(self.tmp, 'maps', 'gone.json')
        self.assertEqual(
            '%s: hosts["gpu-02.example.org"].gpus_file: %s: No such file '
            'or directory\n' % (bad, gone), result.stderr)
        self.assertFalse(os.path.exists(out))

    def test_prometheus_textfile_not_ending_in_prom_warns(self):
        path = os.path.join(self.tmp, 'nvlink.txt')
        result = cli.run(self, 'nvlink', 'check', '--topology',
                         fbase.H100_TOPOLOGY, '--snapshot',
                         fbase.H100_SNAPSHOT, '--prometheus-textfile', path,
                         '-f', 'value', '-c', 'drift')
        self.assertEqual(2, result.code, result.stderr)
        self.assertIn("%s does not end in .prom: the node exporter's "
                      "textfile collector will not read it" % path,
                      result.stderr)
        self.assertTrue(os.path.exists(path))

    def test_prometheus_textfile_refuses_a_file_it_did_not_write(self):
        path = os.path.join(self.tmp, 'other.prom')
        theirs = '# HELP node_gpu_temp GPU temperature\nnode_gpu_temp 41\n'
        with open(path, 'w') as f:
            f.write(theirs)
        args = ('nvlink', 'check', '--topology', fbase.H100_TOPOLOGY,
                '--snapshot', fbase.H100_SNAPSHOT, '--prometheus-textfile',
                path, '-f', 'value', '-c', 'drift')
        result = cli.run(self, *args)
        self.assertEqual(1, result.code, result.stderr)
        self.assertIn('--prometheus-textfile %s: the file is there and is '
                      'not a metrics file written by "openstack nvlink '
                      'check"' % path, result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        with open(path) as f:
            self.assertEqual(theirs, f.read())
        # Its own file (and an empty one) it replaces.
        os.unlink(path)
        self.assertEqual(2, cli.run(self, *args).code)
        with open(path) as f:
            self.assertIn('# HELP nvlink_placement_check_success ', f.read())
        self.assertEqual(2, cli.run(self, *args).code)
        open(path, 'w').close()
        self.assertEqual(2, cli.run(self, *args).code)
        with open(path) as f:
            self.assertIn('nvlink_placement_check_success 1', f.read())


class TestNewcomerTrial(base.BaseTestCase):
    """What a newcomer's mistakes get: named arguments, files and options."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def test_stray_topology_file_is_named_with_the_option(self):
        result = cli.run(self, 'nvlink', 'reshape', fbase.H100_TOPOLOGY,
                         '--dry-run')
        self.assertEqual(3, result.code)
        self.assertTrue(result.stderr.endswith(
            'nvlink reshape: error: the following arguments are '
            'required: --topology; unrecognized arguments: %s (%s is a '
            'file: give it as --topology FILE)\n'
            % (fbase.H100_TOPOLOGY, fbase.H100_TOPOLOGY)), result.stderr)

    def test_mistyped_option_is_named(self):
        result = cli.run(self, 'nvlink', 'reshape', '--topolgy', 'X',
                         '--dry-run')
        self.assertEqual(3, result.code)
        self.assertTrue(result.stderr.endswith(
            'error: the following arguments are required: --topology; '
            'unrecognized arguments: --topolgy X (--topolgy: did you mean '
            '--topology?)\n'), result.stderr)

    def test_no_file_hint_for_an_output_option(self):
        # "give it as --output FILE" would overwrite the topology.
        result = cli.run(self, 'nvlink', 'snapshot', fbase.H100_TOPOLOGY)
        self.assertEqual(3, result.code)
        self.assertTrue(result.stderr.endswith(
            'error: the following arguments are required: -o/--output; '
            'unrecognized arguments: %s\n' % fbase.H100_TOPOLOGY),
            result.stderr)

    def test_topology_or_snapshot_as_flavors_file(self):
        for path, what, option in (
                (fbase.H100_TOPOLOGY, 'a topology', '--topology'),
                (fbase.H100_SNAPSHOT, 'a Placement snapshot', '--snapshot')):
            result = cli.run(self, 'nvlink', 'flavor', 'verify',
                             '--topology', fbase.H100_TOPOLOGY, '--flavors',
                             path, '--snapshot', fbase.H100_SNAPSHOT)
            self.assertEqual(1, result.code)
            self.assertEqual(
                '%s: this is %s, not flavors (give it with %s); --flavors '
                'takes flavors as "openstack nvlink flavor generate ... -f '
                'json" prints them: a list of {"name", "vcpus", "ram", '
                '"disk", "extra_specs"}\n' % (path, what, option),
                result.stderr)
        other = os.path.join(self.tmp, 'other.json')
        with open(other, 'w') as f:
            f.write('{"alias": "h100", "count": 2}')
        result = cli.run(self, 'nvlink', 'flavor', 'verify', '--topology',
                         fbase.H100_TOPOLOGY, '--flavors', other,
                         '--snapshot', fbase.H100_SNAPSHOT)
        self.assertEqual(1, result.code)
        self.assertTrue(result.stderr.startswith(
            "%s: this is not flavors (a mapping with keys 'alias', 'count'); "
            "--flavors takes flavors" % other), result.stderr)

    def test_format_options_with_text_only_output(self):
        ids = ('--vendor-id', '10de', '--product-id', '2330')
        for argv, message in (
                (('nova-config', '--topology', fbase.H100_TOPOLOGY,
                  '--alias', 'h100', '--ini', '-f', 'json') + ids,
                 '-f json does not go with --ini, which prints config '
                 'fragments, not rows: leave out -f/-c, or leave out --ini '
                 'to get rows'),
                (('tree', '--snapshot', fbase.H100_SNAPSHOT, '--dot', '-f',
                  'json'),
                 '-f json does not go with --dot, which prints Graphviz DOT, '
                 'not rows: leave out -f/-c, or leave out --dot to get rows'),
                (('tree', '--snapshot', fbase.H100_SNAPSHOT, '--dot', '-c',
                  'host'),
                 '-c host does not go with --dot, which prints Graphviz DOT, '
                 'not rows'),
                (('flavor', 'generate', '--topology', fbase.H100_TOPOLOGY,
                  '--alias', 'h100', '--print-commands', '-f', 'yaml'),
                 '-f yaml does not go with --print-commands, which prints '
                 'openstack flavor commands, not rows')):
            result = cli.run(self, 'nvlink', *argv)
            self.assertEqual(3, result.code, argv)
            self.assertIn(message, result.stderr)
            self.assertEqual('', result.stdout)
        # Without -f/-c the text outputs and the default formats still work.
        result = cli.run(self, 'nvlink', 'tree', '--snapshot',
                         fbase.H100_SNAPSHOT, '--dot')
        self.assertEqual(0, result.code)
        self.assertTrue(result.stdout.startswith('digraph placement {'))
        result = cli.run(self, 'nvlink', 'nova-config', '--topology',
                         fbase.H100_TOPOLOGY, '--alias', 'h100', *ids)
        self.assertEqual(0, result.code)
        self.assertTrue(result.stdout.startswith('+--'), result.stdout)

    def test_numa_advice_names_host_and_address(self):
        gpus = yaml.safe_load(open(fbase.H100_TOPOLOGY))['hosts'][
            'compute-01']['gpus']
        hosts = {}
        for i in range(1, 13):
            hosts['compute-%02d' % i] = {
                'board': 'hgx-h100-8gpu',
                'gpus': {address: dict(
                    {'module_id': module, 'vendor_id': '10de',
                     'device_id': '2330'},
                    **({} if address == '0000:5d:00.0' else
                       {'numa_node': 0 if module <= 4 else 1}))
                    for address, module in gpus.items()}}
        path = os.path.join(self.tmp, 'numa.yaml')
        with open(path, 'w') as f:
            yaml.safe_dump({'version': 1, 'hosts': hosts}, f)
        result = cli.run(self, 'nvlink', 'nova-config', '--topology', path,
                         '--alias', 'h100', '--sizes', '1', '--ini')
        self.assertEqual(0, result.code, result.stderr)
        # --ini is for programs too: every host named.
        self.assertIn(
            '#   hw:numa_nodes=1  (every 1-GPU domain sits on one NUMA node; '
            'the vCPUs and memory must fit that node; NUMA node unknown for '
            '%s)\n' % ', '.join(
                'compute-%02d 0000:5d:00.0' % i for i in range(1, 13)),
            result.stdout)
        # A table for people names ten.
        result = cli.run(self, 'nvlink', 'nova-config', '--topology', path,
                         '--alias', 'h100', '--sizes', '1', '-c', 'reason')
        self.assertEqual(0, result.code, result.stderr)
        self.assertIn('compute-10 0000:5d:00.0 and 2 more', result.stdout)

    def test_nova_config_judges_sizes_as_generate(self):
        message = ('size 3 refused: no NVLink domain of 3 GPUs in the '
                   'topology; sizes that exist: 1, 2, 4, 8\n')
        for argv in (('nova-config', '--vendor-id', '10de', '--product-id',
                      '2330'), ('flavor', 'generate')):
            result = cli.run(self, 'nvlink', *(argv + (
                '--topology', fbase.H100_TOPOLOGY, '--alias', 'h100',
                '--sizes', '2,3')))
            self.assertEqual((1, '', message),
                             (result.code, result.stdout, result.stderr))

    def test_mapping_file_that_is_not_one(self):
        result = cli.run(self, 'nvlink', 'host', 'inspect', '--mapping',
                         fbase.H100_TOPOLOGY)
        self.assertEqual(1, result.code)
        self.assertEqual(
            '%s: line 1 column 1: invalid JSON: Expecting value; expected '
            'the GPU PCI address -> module id mapping file: a JSON object '
            'such as {"00000000:18:00.0": 1, "00000000:2a:00.0": 2}, as '
            'Fabric Manager writes /run/nvidia-fabricmanager/'
            'gpu-pci-module-mapping.json\n' % fbase.H100_TOPOLOGY,
            result.stderr)

    def test_merge_with_a_map_outside_the_output_directory(self):
        os.mkdir(os.path.join(self.tmp, 'frag'))
        fragment = os.path.join(self.tmp, 'frag', 'a.yaml')
        with open(fragment, 'w') as f:
            f.write(open(os.path.join(fbase.EXAMPLES, 'hgx-a100.yaml')).read())
        out = os.path.join(self.tmp, 'm.yaml')
        maps = os.path.join(fbase.EXAMPLES, 'mappings')
        result = cli.run(self, 'nvlink', 'topology', 'merge', fragment,
                         fbase.H100_TOPOLOGY, '-o', out)
        self.assertEqual(1, result.code)
        self.assertEqual(
            '%s: hosts.compute-02.gpus_file: the GPU map %s is outside %s, '
            'the directory of the merged file %s, which could then not read '
            'it: write the merged file (-o) in %s or a directory above it, '
            'or allow the map\'s directory with the global option '
            '--os-nvlink-gpus-file-dir, given before "nvlink": openstack '
            '--os-nvlink-gpus-file-dir %s nvlink ...\n' % (
                fbase.H100_TOPOLOGY, os.path.join(maps, 'compute-02.json'),
                self.tmp, out, maps, maps), result.stderr)
        self.assertFalse(os.path.exists(out))
        # As the message says: the option merges, and reads the file back.
        result = cli.run(self, '--os-nvlink-gpus-file-dir', maps, 'nvlink',
                         'topology', 'merge', fragment, fbase.H100_TOPOLOGY,
                         '-o', out)
        self.assertEqual(0, result.code, result.stderr)
        result = cli.run(self, '--os-nvlink-gpus-file-dir', maps, 'nvlink',
                         'topology', 'validate', out)
        self.assertEqual('%s: valid: 3 hosts, 24 GPUs, 18 groups\n' % out,
                         result.stdout)

    def test_prometheus_textfile_directory_checked_first(self):
        path = os.path.join(self.tmp, 'missing', 'nvlink.prom')
        result = cli.run(self, 'nvlink', 'check', '--topology',
                         fbase.H100_TOPOLOGY, '--snapshot',
                         fbase.H100_SNAPSHOT, '--prometheus-textfile', path)
        self.assertEqual(
            (1, '', 'cannot write %s: directory %s does not exist\n'
             % (path, os.path.dirname(path))),
            (result.code, result.stdout, result.stderr))
        self.assertEqual([], os.listdir(self.tmp))

    def test_save_snapshot_says_it_wrote(self):
        out = os.path.join(self.tmp, 'reshaped.json')
        result = cli.run(self, 'nvlink', 'reshape', '--topology',
                         fbase.H100_TOPOLOGY, '--snapshot',
                         fbase.H100_SNAPSHOT, '--save-snapshot', out,
                         '-f', 'value', '-c', 'action')
        self.assertEqual(0, result.code, result.stderr)
        self.assertIn('%s: 30 resource providers, 1 consumer\n' % out,
                      result.stderr)
        with open(out) as f:
            self.assertEqual(30, len(json.load(f)['resource_providers']))
