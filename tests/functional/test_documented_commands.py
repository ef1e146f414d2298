"""Every command line of the README and the operator guide, run as printed.

The shell commands are read with docutils from the literal blocks of
``README.rst`` and ``doc/source/operator-guide.rst`` (``::`` blocks and
``code-block`` directives of a shell language; in a block with ``$``
prompts only the prompted lines). Each is run in order, per file, in one
scratch directory holding the files the commands name (``etc/examples/``,
and ``topology.yaml``, ``prod.json``, ``fragments/`` as the guide has them
before its first command), with the virtualenv's ``bin`` on ``PATH`` and
no OpenStack credentials:

- a command that is one ``openstack nvlink ...`` argument list (no shell
  syntax: redirection, glob, variable, chain, background job), while no
  earlier command of the file exported a variable, runs in process
  (:mod:`tests.functional.cli`) with the same argument list bash would
  give it;
- any other runs in one bash process per file, in order (so ``export``,
  ``&`` and heredocs act as in a terminal).

Each must exit 0 within :data:`TIMEOUT` seconds (a hang fails). A command
that needs a live cloud, installs packages, runs a test suite or acts on
a real host is not run: :data:`CLASSIFIED` names it with its reason. A
literal block that is not commands (a diagram, a message) is named in
:data:`NOT_COMMANDS`. A documented command in neither table is run, so a
new one cannot slip through untested; an entry of either table that no
longer matches the docs fails too.

The operator guide's "Trying live mode on a laptop" section starts
gunicorn on the fixed ``127.0.0.1:8778`` and writes ``/tmp/placement``:
the guide's bash runs in its own user, network and mount namespaces
(``unshare``), with a private loopback and a fresh ``/tmp``, so that
parallel test runs on one machine do not meet.
"""

import json
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time

import docutils.core
from docutils import nodes
import fixtures
from oslotest import base
import yaml

from tests.functional import base as fbase
from tests.functional import cli

README = os.path.join(fbase.ROOT, 'README.rst')
GUIDE = os.path.join(fbase.ROOT, 'doc', 'source', 'operator-guide.rst')

LAPTOP = 'Trying live mode on a laptop'
"""The guide's section that needs a private network and /tmp."""

TIMEOUT = 180
"""Seconds one documented command may take before it counts as hung."""

SHELL_LANGUAGES = {'console', 'shell', 'bash', 'sh', 'shell-session'}

LIVE = 'live'
INSTALL = 'install'
SUITE = 'test-suite'
HOST = 'host'
KNOWN_FAILING = 'known-failing'

CLASSIFIED = {
    # command as printed (continuations joined, spaces collapsed):
    # (kind, reason[, the tail of a chain that is run])
    'python3 -m venv .venv && . .venv/bin/activate && pip install -e . && '
    'openstack nvlink reshape --topology etc/examples/hgx-h100.yaml '
    '--snapshot etc/examples/hgx-h100-snapshot.json --dry-run': (
        INSTALL, 'creates a virtualenv and installs the package; the '
        'command after the install is run in the test virtualenv',
        'openstack nvlink reshape --topology etc/examples/hgx-h100.yaml '
        '--snapshot etc/examples/hgx-h100-snapshot.json --dry-run'),
    'pip install -r test-requirements.txt && stestr run': (
        INSTALL, 'installs the test requirements and runs this very suite'),
    'pip install -r nova_tests/requirements.txt && stestr --test-path '
    './nova_tests --top-dir ./ run': (
        INSTALL, 'installs nova==34.0.0 and runs the real-Nova suite '
        '(tox -e nova)'),
    'nova-patches/apply.sh && nova-patches/test.sh && '
    'NVLINK_REQUIRE_NOVA_SERIES=1 stestr --test-path ./nova_tests '
    '--top-dir ./ run': (
        INSTALL, 'patches Nova in site-packages and runs the patched-Nova '
        'suite (tox -e nova-patched)'),
    'python3 -m venv .venv-2026.1 && . .venv-2026.1/bin/activate && pip '
    'install -e . -r requirements.txt -r test-requirements.txt -r '
    'nova_tests/requirements-2026.1.txt': (
        INSTALL, "creates the 2026.1 virtualenv with that release's Nova "
        'and Placement (tox -e nova-2026.1)'),
    'stestr --test-path ./nova_tests --top-dir ./ run': (
        SUITE, 'the real-Nova suite in the release virtualenv (tox -e '
        'nova-2026.1)'),
    'stestr --test-path ./ansible_tests --top-dir ./ run': (
        SUITE, 'the ansible suite (tox -e ansible)'),
    'stestr --test-path ./prometheus_tests --top-dir ./ run': (
        SUITE, "the Prometheus suite (tox -e prometheus; Debian's "
        'prometheus packages)'),
    'openstack nvlink snapshot -o prod.json # read only': (
        LIVE, "reads the cloud's Placement (no --snapshot)"),
    'openstack nvlink snapshot -o prod.json': (
        LIVE, "reads the cloud's Placement (no --snapshot)"),
    'openstack nvlink reshape --topology topo.yaml # live': (
        LIVE, "writes the cloud's Placement; the README prints the "
        '--snapshot form just before it, which is run'),
    'openstack nvlink check --topology topo.yaml # in monitoring': (
        LIVE, "reads the cloud's Placement (no --snapshot)"),
    'openstack nvlink reshape --topology topology.yaml': (
        LIVE, "writes the cloud's Placement; the guide's step 4 runs the "
        '--snapshot form, which is run'),
    'pip install . # or a wheel from: python -m build': (
        INSTALL, 'installs the package'),
    'pip install --no-deps . pyyaml': (
        INSTALL, 'installs the package on a compute host'),
    "pip install '.[server]'": (
        INSTALL, 'installs the package with gunicorn (the test '
        'requirements have gunicorn)'),
    'ansible-playbook -i inventory etc/ansible/deliver-nova-config.yml -e '
    'topology=topology.yaml -e nvlink_alias=h100': (
        HOST, 'writes /etc/nova on the inventory\'s compute hosts and '
        'restarts nova-compute; run for real on fake hosts by '
        'ansible_tests/test_deliver_config.py'),
    'ansible-playbook -i inventory.yaml etc/ansible/inspect-hosts.yml -e '
    'topology=topology.yaml': (
        HOST, "inspects the inventory's compute hosts (sysfs, Fabric "
        'Manager) as root; run for real on fake hosts by ansible_tests/'),
}
"""Documented commands the test does not run, each with its reason."""

UNSAFE = re.compile(r'(^|[\s;&|(])(pip3?|apt-get|apt|dpkg|tox|stestr|'
                    r'systemctl|sudo|kolla-ansible|openstack-ansible|'
                    r'nova-patches/apply\.sh)(\s|$)')
"""Commands never run unless classified: an unlisted one fails the test
before it runs (a new install step must not install in the test)."""

NOT_COMMANDS = {
    # a block's first line: why it is no command
    'compute-01': 'a diagram of the reshaped tree',
    'another run changed 1 host (compute-01) while this one ran: read '
    'again': 'a message the tool prints',
    'interrupted by SIGINT: 1 host done (gpu-01), 1 interrupted (gpu-02: '
    '2': 'a message the tool prints',
}
"""Literal blocks that are not shell commands."""

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
_SHELL_SYNTAX = re.compile(r'[|&;<>()$`*?\[\]{}~\\]')


def normalized(command):
    """``command`` with its continuations joined and spaces collapsed."""
    return ' '.join(command.replace('\\\n', ' ').split())


def literal_blocks(path):
    """Yield ``(line, language or None, text)`` of each literal block."""
    with open(path) as f:
        text = f.read()
    tree = docutils.core.publish_doctree(
        text, source_path=path,
        settings_overrides={'report_level': 5, 'halt_level': 5,
                            'file_insertion_enabled': False,
                            'raw_enabled': False})
    for node in tree.findall(nodes.literal_block):
        classes = node.get('classes', [])
        language = classes[1] if classes[:1] == ['code'] else None
        yield node.line, language, node.astext()


def split_commands(text):
    """The commands of a shell block, each with continuations and heredoc.

    Lines with a ``$`` prompt are the commands where the block has any;
    a line ending in ``\\`` continues on the next; a heredoc runs to its
    delimiter line.
    """
    lines = text.splitlines()
    prompted = any(line.startswith('$ ') for line in lines)
    commands, i = [], 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if prompted:
            if not line.startswith('$ '):
                continue
            line = line[2:]
        if not line.strip():
            continue
        command = [line]
        while command[-1].endswith('\\') and i < len(lines):
            command.append(lines[i])
            i += 1
        heredoc = _HEREDOC.search('\n'.join(command))
        if heredoc:
            while i < len(lines):
                command.append(lines[i])
                i += 1
                if command[-1].strip() == heredoc.group(2):
                    break
        commands.append('\n'.join(command))
    return commands


def documented(path):
    """``(commands, other blocks)`` of a file.

    commands: list of ``(line, text)`` in order; other blocks: the first
    line of each literal block that is no command block.
    """
    commands, others = [], []
    for line, language, text in literal_blocks(path):
        first = text.strip().splitlines()[0] if text.strip() else ''
        if language is not None and language not in SHELL_LANGUAGES:
            continue
        if first in NOT_COMMANDS:
            others.append(first)
            continue
        lines, at = text.splitlines(), 0
        for command in split_commands(text):
            first_line = command.splitlines()[0]
            while first_line not in lines[at]:
                at += 1
            commands.append((line + at, command))
    return commands, others


def laptop_section():
    """The line where the guide's "Trying live mode on a laptop" starts."""
    with open(GUIDE) as f:
        return f.read().splitlines().index(LAPTOP) + 1


def in_process_argv(command):
    """The ``nvlink`` argument list when bash would run just that, or None.

    None where the command has shell syntax beyond words, quotes and a
    trailing comment, or is not ``openstack nvlink ...``.
    """
    try:
        argv = shlex.split(command.replace('\\\n', ' '), comments=True)
    except ValueError:
        return None
    code = command.split('#', 1)[0].replace('\\\n', ' ')
    if _SHELL_SYNTAX.search(code) or argv[:2] != ['openstack', 'nvlink']:
        return None
    return argv[1:]


class Hung(BaseException):
    """An in-process command ran out of time.

    Not an Exception: no ``except Exception`` on the way catches it.
    """


def run_in_process(test, argv, timeout):
    """``openstack <argv>`` in process: ``(status or None, output)``.

    None when it still runs after ``timeout`` seconds (SIGALRM
    interrupts it).
    """
    def alarm(signum, frame):
        raise Hung()

    previous = signal.signal(signal.SIGALRM, alarm)
    started = time.monotonic()
    outer = signal.setitimer(signal.ITIMER_REAL, timeout)[0]
    try:
        result = cli.run(test, *argv)
    except Hung:
        return None, ''
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:   # a test timeout (OS_TEST_TIMEOUT) keeps its time
            signal.setitimer(signal.ITIMER_REAL, max(
                0.001, outer - (time.monotonic() - started)))
    return result.code, result.stdout + result.stderr


def _isolation_works():
    try:
        return subprocess.run(
            ['unshare', '--user', '--map-root-user', '--net', '--mount',
             'true'], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


class Shell(object):
    """One bash process running commands in order, as a terminal would.

    Each command's output goes to files under ``control``; its status
    comes back on bash's standard output.
    """

    def __init__(self, cwd, control, env, isolated):
        self.control = control
        argv = ['bash', '--noprofile', '--norc']
        if isolated:
            # A loopback of its own, an empty /tmp, and in it the scratch
            # directory (parent of cwd) at its own path.
            argv = ['unshare', '--user', '--map-root-user', '--net',
                    '--mount', 'bash', '-c',
                    'ip link set lo up && mount --bind "$1" /mnt && '
                    'mount -t tmpfs tmpfs /tmp && mkdir -p "$1" && '
                    'mount --bind /mnt "$1" && umount /mnt && cd "$2" && '
                    'exec bash --noprofile --norc',
                    'isolated', os.path.dirname(cwd), cwd]
        self.process = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, bufsize=0, start_new_session=True)
        self.count = 0

    def run(self, command, timeout):
        """Run ``command``; return ``(status or None on timeout, output)``."""
        self.count += 1
        name = 'out.%d' % self.count
        out = os.path.join(self.control, name)
        script = '{\n%s\n} >%s 2>&1 </dev/null\necho "__status__ $?"\n' % (
            command, shlex.quote(out))
        self.process.stdin.write(script.encode())
        self.process.stdin.flush()
        deadline = time.monotonic() + timeout
        line = b''
        while not line.endswith(b'\n'):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select(
                    [self.process.stdout], [], [], left)[0]:
                return None, self._output(out)
            byte = os.read(self.process.stdout.fileno(), 1)
            if not byte:
                return 'bash exited', self._output(out)
            line += byte
        return int(line.split()[1]), self._output(out)

    @staticmethod
    def _output(path):
        try:
            with open(path, errors='replace') as f:
                return f.read()
        except OSError:
            return ''

    def close(self):
        """End bash and everything it started (its background jobs)."""
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.process.stdin.close()
        self.process.stdout.close()


class TestDocumentedCommands(base.BaseTestCase):

    def scratch(self):
        """A scratch directory holding ``etc/examples``; return its path."""
        root = self.useFixture(fixtures.TempDir()).path
        work = os.path.join(root, 'work')
        shutil.copytree(fbase.EXAMPLES, os.path.join(work, 'etc', 'examples'))
        os.mkdir(os.path.join(root, 'control'))
        return work

    def run_file(self, path, work, isolated=False, lines=None):
        """Run ``path``'s commands in ``work``; return those run.

        :param lines: ``(first, end)``: only the blocks starting on those
            lines (``end`` excluded, None for the end of the file).
        """
        env = {k: v for k, v in os.environ.items()
               if not k.startswith('OS_')}
        env['PATH'] = os.pathsep.join(
            [os.path.dirname(sys.executable), env.get('PATH', '')])
        shell = Shell(work, os.path.join(os.path.dirname(work), 'control'),
                      env, isolated)
        self.addCleanup(shell.close)
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(work)
        exported = False
        ran = []
        for line, command in documented(path)[0]:
            if lines and not (lines[0] <= line and (
                    lines[1] is None or line < lines[1])):
                continue
            where = '%s:%d: %s' % (os.path.relpath(path, fbase.ROOT), line,
                                   command)
            entry = CLASSIFIED.get(normalized(command))
            self.assertFalse(
                entry is None and UNSAFE.search(command),
                '%s: installs, runs a suite or acts on a host: classify it '
                'in CLASSIFIED (not run)' % where)
            expect_failure = False
            if entry:
                if len(entry) < 3 and entry[0] != KNOWN_FAILING:
                    continue
                if entry[0] == KNOWN_FAILING:
                    expect_failure = True
                else:
                    self.assertTrue(normalized(command).endswith(entry[2]),
                                    where)
                    command = entry[2]
            exported = exported or command.lstrip().startswith('export ')
            argv = None if exported else in_process_argv(command)
            if argv is not None:
                status, output = run_in_process(self, argv, TIMEOUT)
            else:
                status, output = shell.run(command, TIMEOUT)
            ran.append(command)
            if status is None:
                self.fail('%s\nstill running after %d s:\n%s'
                          % (where, TIMEOUT, output))
            if expect_failure:
                self.assertNotEqual(0, status, '%s\nknown to fail, passes '
                                    'now: take it out of CLASSIFIED\n%s'
                                    % (where, output))
            else:
                self.assertEqual(0, status, '%s\nexit %s:\n%s'
                                 % (where, status, output))
        return ran

    def test_readme(self):
        work = self.scratch()
        shutil.copy(fbase.H100_TOPOLOGY, os.path.join(work, 'topo.yaml'))
        shutil.copytree(os.path.join(fbase.EXAMPLES, 'mappings'),
                        os.path.join(work, 'mappings'))
        shutil.copy(fbase.H100_SNAPSHOT, os.path.join(work, 'prod.json'))
        ran = self.run_file(README, work)
        self.assertIn('openstack nvlink reshape --topology topo.yaml '
                      '--snapshot prod.json --dry-run', ran)

    def test_operator_guide(self):
        """Every section but the laptop one, in order."""
        work = self.scratch()
        # The fragments nvlink-host-inspect would print on the example's
        # two hosts, for step 1's merge into topology.yaml.
        with open(fbase.H100_TOPOLOGY) as f:
            topology = yaml.safe_load(f)
        fragments = os.path.join(work, 'fragments')
        shutil.copytree(os.path.join(fbase.EXAMPLES, 'mappings'),
                        os.path.join(fragments, 'mappings'))
        for name, host in topology['hosts'].items():
            with open(os.path.join(fragments, name + '.yaml'), 'w') as f:
                yaml.safe_dump({'version': 1, 'hosts': {name: host}}, f)
        # Production before the rollout: Nova reports no member traits.
        with open(fbase.H100_SNAPSHOT) as f:
            prod = json.load(f)
        for rp in prod['resource_providers']:
            rp['traits'] = [t for t in rp['traits'] if '_MEMBER' not in t]
        with open(os.path.join(work, 'prod.json'), 'w') as f:
            json.dump(prod, f)
        ran = self.run_file(GUIDE, work, lines=(1, laptop_section()))
        self.assertIn('openstack nvlink snapshot --snapshot prod.json '
                      '--as-configured topology.yaml -o planned.json', ran)
        with open(os.path.join(work, 'topology.yaml')) as f:
            merged = yaml.safe_load(f)
        self.assertEqual(['compute-01', 'compute-02'],
                         sorted(merged['hosts']))
        self.assertTrue(os.path.isdir(os.path.join(work, 'nova-config')))

    def test_operator_guide_laptop_section(self):
        """The section "Trying live mode on a laptop" to the end, in order."""
        if not _isolation_works():
            self.skipTest('unshare cannot make user, network and mount '
                          'namespaces here: the section would bind '
                          "127.0.0.1:8778 and write /tmp/placement on the "
                          "machine's own")
        ran = self.run_file(GUIDE, self.scratch(), isolated=True,
                            lines=(laptop_section(), None))
        self.assertIn('openstack nvlink snapshot load '
                      'etc/examples/hgx-h100-snapshot.json', ran)


class TestTables(base.BaseTestCase):
    """The tables match the docs, and the parsing finds what they hold."""

    def test_every_entry_is_still_documented(self):
        commands, others = [], []
        for path in (README, GUIDE):
            found = documented(path)
            commands += [normalized(c) for _, c in found[0]]
            others += found[1]
        self.assertEqual([], sorted(set(CLASSIFIED) - set(commands)))
        self.assertEqual([], sorted(set(NOT_COMMANDS) - set(others)))

    def test_blocks_are_split_as_bash_reads_them(self):
        commands = split_commands(
            '$ openstack nvlink tree \\\n    --dot\noutput\n'
            "$ cat > f <<'EOF'\n[a]\nb = 1\nEOF\n$ ls\n")
        self.assertEqual(['openstack nvlink tree \\\n    --dot',
                          "cat > f <<'EOF'\n[a]\nb = 1\nEOF", 'ls'],
                         commands)
        self.assertEqual(['nvlink', 'tree', '--dot'],
                         in_process_argv(commands[0]))
        self.assertIsNone(in_process_argv(
            'openstack nvlink flavor generate -f json > flavors.json'))
        self.assertIsNone(in_process_argv(
            'openstack nvlink topology merge fragments/*.yaml'))
        self.assertEqual(
            ['nvlink', 'snapshot', '-o', 'prod.json'],
            in_process_argv('openstack nvlink snapshot -o prod.json  # x'))

    def test_a_hang_is_reported_and_ended(self):
        root = self.useFixture(fixtures.TempDir()).path
        shell = Shell(root, root, dict(os.environ), isolated=False)
        self.addCleanup(shell.close)
        self.assertEqual((0, 'a\n'), shell.run('echo a', 30))
        self.assertEqual((None, 'b\n'), shell.run('echo b; sleep 600', 1))
        shell.close()
        self.assertIsNotNone(shell.process.returncode)
