"""What the live commands change in the HTTP session, and when.

``live._requests_environment`` decides whether requests' ``trust_env``
may be turned off without changing anything but its cost; the
keystoneauth logger is quieted only when no log handler shows DEBUG.
"""

import logging
import os

import fixtures
from oslotest import base

from nvlink_placement.osc import live

PROXY_VARIABLES = ('http_proxy', 'https_proxy', 'all_proxy', 'no_proxy',
                   'ftp_proxy')


class TestRequestsEnvironment(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.home = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.EnvironmentVariable('HOME', self.home))
        for name in (('REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE', 'NETRC') +
                     PROXY_VARIABLES +
                     tuple(v.upper() for v in PROXY_VARIABLES)):
            self.useFixture(fixtures.EnvironmentVariable(name))

    def test_nothing_to_find(self):
        self.assertEqual([], live._requests_environment())

    def test_what_requests_would_read(self):
        self.useFixture(fixtures.EnvironmentVariable(
            'HTTPS_PROXY', 'http://proxy.example:3128'))
        self.assertEqual(['https'], live._requests_environment())
        self.useFixture(fixtures.EnvironmentVariable(
            'REQUESTS_CA_BUNDLE', '/etc/ssl/ca.pem'))
        with open(os.path.join(self.home, '.netrc'), 'w') as f:
            f.write('machine placement login u password p\n')
        self.assertEqual(['https', 'REQUESTS_CA_BUNDLE', '.netrc'],
                         live._requests_environment())


class TestQuietHttpDebug(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        root = logging.getLogger()
        self.addCleanup(setattr, root, 'handlers', list(root.handlers))
        keystoneauth = logging.getLogger('keystoneauth')
        self.addCleanup(keystoneauth.setLevel, keystoneauth.level)
        keystoneauth.setLevel(logging.NOTSET)
        self.root = root

    def handlers(self, *levels):
        self.root.handlers = []
        for level in levels:
            handler = logging.NullHandler()
            handler.setLevel(level)
            self.root.handlers.append(handler)

    def test_no_handler_shows_debug(self):
        self.handlers(logging.WARNING, logging.INFO)
        live._quiet_http_debug()
        self.assertEqual(logging.INFO, logging.getLogger(
            'keystoneauth.session').getEffectiveLevel())

    def test_debug_shown_keeps_everything(self):
        self.handlers(logging.WARNING, logging.DEBUG)
        live._quiet_http_debug()
        self.assertEqual(logging.NOTSET,
                         logging.getLogger('keystoneauth').level)
