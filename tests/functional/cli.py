"""Run ``openstack`` commands in process and capture what they print."""

import io
import logging

import fixtures
from openstackclient import shell


class RestoreLogging(fixtures.Fixture):
    """Undo the process-wide logging set-up of an in-process OSC run.

    osc_lib's log configurator sets the root logger to DEBUG, adds a
    stream handler and sets levels on other loggers. Left in place, every
    later test in the worker captures DEBUG logs: megabytes of Placement
    bodies per test, more than a subunit packet holds.
    """

    def _setUp(self):
        manager = logging.Logger.manager
        saved = {name: (logger.level, list(logger.handlers))
                 for name, logger in manager.loggerDict.items()
                 if isinstance(logger, logging.Logger)}
        root = (logging.root.level, list(logging.root.handlers))

        def restore():
            logging.root.setLevel(root[0])
            logging.root.handlers[:] = root[1]
            for name, logger in list(manager.loggerDict.items()):
                if isinstance(logger, logging.Logger):
                    level, handlers = saved.get(name, (logging.NOTSET, []))
                    logger.setLevel(level)
                    logger.handlers[:] = handlers

        self.addCleanup(restore)


class Result(object):
    def __init__(self, code, stdout, stderr):
        self.code = code
        self.stdout = stdout
        self.stderr = stderr


def run(test, *argv):
    """Run ``openstack <argv>`` in process; returns :class:`Result`."""
    out, err = io.StringIO(), io.StringIO()
    test.useFixture(RestoreLogging())
    test.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
    test.useFixture(fixtures.MonkeyPatch('sys.stderr', err))
    for name in ('OS_CLOUD', 'OS_AUTH_URL', 'OS_TOKEN', 'OS_ENDPOINT'):
        test.useFixture(fixtures.EnvironmentVariable(name))
    try:
        code = shell.OpenStackShell().run(list(argv))
    except SystemExit as exc:     # argparse: usage errors, --help
        code = exc.code
    return Result(code, out.getvalue(), err.getvalue())
