"""Time options take a finite number of seconds up to a day, or exit 3.

``nan`` compares false with everything (``--timeout nan`` meant no limit,
``--request-timeout nan`` failed in the HTTP stack) and ``inf`` or
``1e308`` overflow ``time_t``; each is a usage error naming the option and
the range. Run through the real ``openstack`` CLI, in process: argparse
refuses the value before anything is read.
"""

import argparse
import os

from oslotest import base

from nvlink_placement.osc import live
from tests.functional import cli

ETC = os.path.join(os.path.dirname(__file__), '..', '..', 'etc')
TOPOLOGY = os.path.join(ETC, 'examples', 'hgx-h100.yaml')
# Every command with --retry-window, --request-timeout and --timeout
# (nvlink_placement.osc.live.add_retry_arguments), with what it needs.
WITH_TIMEOUTS = [
    ('check', '--topology', TOPOLOGY),
    ('reshape', '--topology', TOPOLOGY),
    ('flatten', '--all'),
    ('capacity',),
    ('tree',),
    ('snapshot', '-o', os.devnull),
]
BAD = ('nan', 'NaN', 'inf', 'Infinity', '1e308', '86401', '-1', 'soon',
       '9' * 400)
RANGE = 'is not a number of seconds from 0 to 86400 (a day)'


class TestTimeOptions(base.BaseTestCase):

    def error(self, *argv):
        result = cli.run(self, 'nvlink', *argv)
        self.assertEqual(3, result.code, (argv, result.stderr))
        self.assertEqual('', result.stdout)
        self.assertTrue(result.stderr.startswith('usage: '), argv)
        self.assertNotIn('Traceback', result.stderr)
        return result.stderr.splitlines()[-1].split(': error: ', 1)[1]

    def test_every_bad_value(self):
        # A long value is cut (reprlib's way) in the message.
        shown = {'9' * 400: "'%s...%s'" % ('9' * 27, '9' * 28)}
        for value in BAD:
            self.assertEqual('%s %s' % (shown.get(value, repr(value)), RANGE),
                             str(self.assertRaises(
                                 argparse.ArgumentTypeError, live._seconds,
                                 value)))

    def test_every_command_and_option(self):
        # Each option of each command goes through that type: one bad value
        # each through the CLI (the values themselves are tested above).
        for i, command in enumerate(WITH_TIMEOUTS):
            for j, option in enumerate(('--retry-window',
                                        '--request-timeout', '--timeout')):
                value = BAD[(i * 3 + j) % len(BAD)]
                if value == '9' * 400:
                    value = '1e999'
                self.assertEqual(
                    'argument %s: %r %s' % (option, value, RANGE),
                    self.error(*command + (option, value)))

    def test_flavor_verify(self):
        command = ('flavor', 'verify', '--topology', TOPOLOGY, '--flavors',
                   os.devnull)
        for value in ('nan', 'inf', '1e308', '-1', '86401'):
            self.assertEqual(
                "argument --retry-window: %r %s" % (value, RANGE),
                self.error(*command + ('--retry-window', value)))
        # Its --timeout is per request and must be above 0.
        for value in ('nan', 'inf', '1e308', '99999999999999999999', '0',
                      '-5', 'soon'):
            self.assertEqual(
                "argument --timeout: %r is not a number of seconds above 0 "
                "up to 86400 (a day)" % value,
                self.error(*command + ('--timeout', value)))

    def test_bounds_are_accepted(self):
        # 0 and a day parse; the command then fails for want of a cloud
        # (exit 1), not on the option.
        for value in ('0', '86400', '0.5', '-0'):
            result = cli.run(self, 'nvlink', 'check', '--topology', TOPOLOGY,
                             '--retry-window', '0', '--request-timeout',
                             value, '--timeout', value)
            self.assertEqual(1, result.code, (value, result.stderr))
            self.assertNotIn('error: argument', result.stderr)
