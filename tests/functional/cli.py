"""Run ``openstack`` commands in process and capture what they print."""

import io

import fixtures
from openstackclient import shell


class Result(object):
    def __init__(self, code, stdout, stderr):
        self.code = code
        self.stdout = stdout
        self.stderr = stderr


def run(test, *argv):
    """Run ``openstack <argv>`` in process; returns :class:`Result`."""
    out, err = io.StringIO(), io.StringIO()
    test.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
    test.useFixture(fixtures.MonkeyPatch('sys.stderr', err))
    for name in ('OS_CLOUD', 'OS_AUTH_URL', 'OS_TOKEN', 'OS_ENDPOINT'):
        test.useFixture(fixtures.EnvironmentVariable(name))
    code = shell.OpenStackShell().run(list(argv))
    return Result(code, out.getvalue(), err.getvalue())
