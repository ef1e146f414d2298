"""Exit codes of the real console scripts, run as subprocesses.

0 success or in sync, 1 error, 2 drift (``check``), 3 usage error (every
command: unknown or missing option, bad option value, options that do not
go together), with argparse's usage message.
"""

import concurrent.futures
import importlib.metadata
import os
import subprocess
import sys

from oslotest import base

from tests.functional import base as fbase
from tests.functional import cli

BIN = os.path.dirname(sys.executable)
SNAPSHOT = fbase.H100_SNAPSHOT
TOPOLOGY = fbase.H100_TOPOLOGY


def _env():
    env = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
    env['PYTHONWARNINGS'] = 'ignore'
    return env


def run(script, *argv):
    """``(exit status, stdout, stderr)`` of ``script argv``."""
    done = subprocess.run([os.path.join(BIN, script)] + list(argv),
                          capture_output=True, text=True, env=_env(),
                          stdin=subprocess.DEVNULL, timeout=120)
    return done.returncode, done.stdout, done.stderr


def run_all(calls):
    """Run ``(script, argv...)`` tuples two at a time; results in order."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda call: run(*call), calls))


def nvlink_commands():
    """Every ``openstack nvlink ...`` command, as argv lists."""
    entry_points = importlib.metadata.entry_points(
        group='openstack.nvlink.v1')
    return sorted(ep.name.split('_') for ep in entry_points)


class TestUsageErrors(base.BaseTestCase):

    def test_every_command_unknown_option_exits_3(self):
        # In process (the same OpenStackShell the console script runs);
        # the subprocess tests below prove the status reaches the shell.
        commands = nvlink_commands()
        self.assertIn(['nvlink', 'check'], commands)
        self.assertEqual(17, len(commands))
        for argv in commands:
            name = ' '.join(argv)
            result = cli.run(self, *(argv + ['--topolgy', 'x']))
            self.assertEqual(3, result.code, (name, result.stderr))
            # In process the program name is the test runner's.
            self.assertIn(' %s [-h]' % name, result.stderr)
            self.assertIn('%s: error: ' % name, result.stderr)
            self.assertNotIn('Traceback', result.stderr)

    def test_mistyped_option_and_missing_choice(self):
        results = run_all([
            ('openstack', 'nvlink', 'check', '--topology', TOPOLOGY,
             '--snapshot', SNAPSHOT, '--topolgy', TOPOLOGY),
            ('openstack', 'nvlink', 'flatten', '--snapshot', SNAPSHOT),
        ])
        (code, out, err), (code2, out2, err2) = results
        self.assertEqual(3, code, err)
        self.assertIn('openstack nvlink check: error: unrecognized '
                      'arguments: --topolgy', err)
        self.assertEqual('', out)
        self.assertEqual(3, code2, err2)
        self.assertIn('usage: openstack nvlink flatten', err2)
        self.assertIn('openstack nvlink flatten: error: name the hosts to '
                      'flatten with --host (repeatable), or give --all', err2)

    def test_bad_values_and_combinations_exit_3(self):
        # In process (same parser, same SystemExit) to keep the suite fast.
        cases = [
            (('check', '--snapshot', SNAPSHOT),
             'the following arguments are required: --topology'),
            (('nova-config', '--topology', TOPOLOGY, '--alias', 'h100',
              '--vendor-id', 'zz'),
             "argument --vendor-id: 'zz' is not a PCI id (4 hex digits, e.g. "
             "10de)"),
            (('nova-config', '--topology', TOPOLOGY, '--alias', 'h100',
              '--vendor-id', '10de', '--product-id', '233'),
             "argument --product-id: '233' is not a PCI id (4 hex digits, "
             "e.g. 10de)"),
            (('check', '--topology', TOPOLOGY, '--retry-window', 'soon'),
             "argument --retry-window: 'soon' is not a number of seconds"),
            (('reshape', '--topology', TOPOLOGY, '--workers', 'many'),
             "argument --workers: 'many' is not a whole number"),
            (('reshape', '--topology', TOPOLOGY, '--save-snapshot', 'x.json'),
             '--save-snapshot needs --snapshot'),
            (('snapshot', '--from-topology', TOPOLOGY, '--vcpus', '0', '-o',
              os.devnull), '--vcpus must be at least 1'),
            (('flavor', 'generate', '--topology', TOPOLOGY, '--alias', 'h100',
              '--dry-run'), '--dry-run goes with --apply'),
            (('check', '-f', 'xml', '--topology', TOPOLOGY),
             "argument -f/--format: invalid choice: 'xml'"),
            (('flavor', 'generate', '--topology', TOPOLOGY, '--alias', 'h100',
              '--sizes', 'two'), "argument --sizes: --sizes 'two': expected "
                                 'positive integers separated by commas'),
            (('nova-config', '--topology', TOPOLOGY, '--alias', 'h100',
              '--sizes', '0'), 'argument --sizes: '),
            (('flavor', 'verify', '--topology', TOPOLOGY, '--snapshot',
              SNAPSHOT), 'no flavors: give --flavors FILE'),
            (('flatten', '--host', 'compute-01', '--all', '--snapshot',
              SNAPSHOT, '--dry-run'), '--host and --all do not go together'),
            (('snapshot', '--snapshot', SNAPSHOT, '--vcpus', '8', '-o',
              os.devnull), '--vcpus only goes with --from-topology'),
        ]
        for argv, message in cases:
            result = cli.run(self, 'nvlink', *argv)
            self.assertEqual(3, result.code, (argv, result.stderr))
            self.assertIn(' nvlink %s' % argv[0], result.stderr)
            self.assertTrue(result.stderr.startswith('usage: '), argv)
            self.assertIn(': error: ' + message, result.stderr)
            self.assertEqual('', result.stdout, argv)

    def test_console_scripts(self):
        results = run_all([
            ('nvlink-host-inspect', '--bogus'),
            ('nvlink-host-inspect', '--fm-timeout', 'x'),
            ('nvlink-partition-hook', 'guest', 'prepare'),
        ])
        (code, out, err), (code2, _, err2), (code3, out3, err3) = results
        self.assertEqual(3, code, err)
        self.assertIn('usage: nvlink-host-inspect', err)
        self.assertIn('nvlink-host-inspect: error: unrecognized arguments: '
                      '--bogus', err)
        self.assertEqual(3, code2, err2)
        self.assertEqual(3, code3, err3)
        self.assertEqual('', out3)
        self.assertTrue(err3.startswith('usage: nvlink-partition-hook'),
                        err3)


class TestExitCodeTable(base.BaseTestCase):

    def test_in_sync_error_drift_and_unknown_command(self):
        results = run_all([
            ('openstack', 'nvlink', 'check', '--topology', TOPOLOGY,
             '--snapshot', SNAPSHOT, '-f', 'value', '-c', 'drift'),
            ('openstack', 'nvlink', 'check', '--topology', TOPOLOGY,
             '--snapshot', os.path.join(fbase.EXAMPLES, 'missing.json')),
            ('openstack', 'nvlink', 'check', '--help'),
            # A mistyped command name: OSC answers before our code runs.
            ('openstack', 'nvlink', 'chek'),
        ])
        (drift, out, err), (error, _, err1), (helped, hout, _), \
            (unknown, uout, _) = results
        self.assertEqual(2, drift, err)
        self.assertIn('wrong-parent', out.split())
        self.assertEqual(1, error, err1)
        self.assertNotIn('Traceback', err1)
        self.assertEqual(0, helped)
        self.assertIn('--prometheus-textfile PATH', hout)
        self.assertEqual(2, unknown)
        self.assertIn("'nvlink chek' is not an openstack command", uout)
        self.assertIn('  nvlink check', uout)
