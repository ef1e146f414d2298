"""The operator guide's "Dry-run in CI" commands, verbatim, pass on a
snapshot of a cloud whose nova-compute has no member-trait entries yet.

The commands are read from doc/source/operator-guide.rst (step 4's
literal block) and run as written, in a directory holding the example
topology (``topology.yaml``, ``mappings/``) and ``prod.json``: the example
snapshot with every member trait removed, as Nova reports it before the
rollout.
"""

import json
import os
import re
import shlex
import shutil

import fixtures
from oslotest import base

from tests.functional import base as fbase
from tests.functional import cli

GUIDE = os.path.join(fbase.ROOT, 'doc', 'source', 'operator-guide.rst')


def ci_commands():
    """Step 4's commands: list of (argv, stdout file or None)."""
    with open(GUIDE) as f:
        text = f.read()
    start = text.index('4. **Dry-run in CI**')
    return block_commands(text[text.index('::\n', start) + 3:
                               text.index('\n5. **', start)])


def block_commands(block):
    """The ``openstack`` lines of a literal block, up to its end.

    :returns: list of ``(argv after "openstack", stdout file or None)``.
    """
    commands = []
    for line in re.sub(r'\\\n\s*', ' ', block).splitlines():
        line = line.strip()
        if not line.startswith('openstack '):
            if commands and not line:
                break
            continue
        argv = shlex.split(line)
        out = None
        if '>' in argv:
            out = argv[argv.index('>') + 1]
            argv = argv[:argv.index('>')]
        commands.append((argv[1:], out))
    return commands


class TestCiSection(base.BaseTestCase):

    def test_commands_pass_before_the_rollout(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        shutil.copy(fbase.H100_TOPOLOGY, os.path.join(tmp, 'topology.yaml'))
        shutil.copytree(os.path.join(fbase.EXAMPLES, 'mappings'),
                        os.path.join(tmp, 'mappings'))
        with open(fbase.H100_SNAPSHOT) as f:
            prod = json.load(f)
        for rp in prod['resource_providers']:
            rp['traits'] = [t for t in rp['traits'] if '_MEMBER' not in t]
        with open(os.path.join(tmp, 'prod.json'), 'w') as f:
            json.dump(prod, f)
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(tmp)

        commands = ci_commands()
        self.assertEqual(
            ['snapshot', 'reshape', 'reshape', 'flavor', 'flavor', 'check'],
            [argv[1] for argv, _ in commands])
        self.assertIn('--as-configured', commands[0][0])
        verify = None
        for argv, out in commands:
            if argv[1:3] == ['flavor', 'verify']:
                argv = argv + ['-f', 'json']
            result = cli.run(self, *argv)
            self.assertEqual(0, result.code, '%s: %s' % (
                shlex.join(argv), result.stderr))
            if out:
                with open(out, 'w') as f:
                    f.write(result.stdout)
            if argv[1:3] == ['flavor', 'verify']:
                verify = json.loads(result.stdout)
        got = {(r['host'], r['flavor']): (r['candidates'], r['valid_sets'],
                                          r['invalid_sets'],
                                          r['missing_sets'])
               for r in verify}
        # One candidate per free domain. compute-01 runs a 1-GPU instance
        # (the example's consumer): 3 free pairs, 1 free quad, no board.
        self.assertEqual({
            ('compute-01', 'gpu.h100.2x'): (3, 3, 0, 0),
            ('compute-01', 'gpu.h100.4x'): (1, 1, 0, 0),
            ('compute-01', 'gpu.h100.8x'): (0, 0, 0, 0),
            ('compute-02', 'gpu.h100.2x'): (4, 4, 0, 0),
            ('compute-02', 'gpu.h100.4x'): (2, 2, 0, 0),
            ('compute-02', 'gpu.h100.8x'): (1, 1, 0, 0)},
            {k: v for k, v in got.items() if k[1] != 'gpu.h100.1x'})
