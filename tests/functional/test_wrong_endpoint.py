"""A wrong ``--os-endpoint``: said at once, and named as the likely cause.

A closed port is retried for ``--retry-window`` seconds: one line on
standard error says so as the first try fails (not a minute of silence),
then the error. A URL whose ``/resource_providers`` answers 404 is not
Placement's root: the error asks whether the endpoint is right. The
commands run as real ``openstack`` processes against real sockets (a port
nobody listens on, a tiny ``http.server``).
"""

import http.server
import json
import os
import subprocess
import sys
import threading

import fixtures
from oslotest import base

from nvlink_placement import errors
from nvlink_placement.placement import client as pc
from tests import fault_proxy
from tests.functional import base as fbase
from tests import placement_server

BIN = os.path.dirname(sys.executable)
NOTICE = 'retrying for up to'


def check(endpoint, *options):
    """``openstack nvlink check`` against ``endpoint``; CompletedProcess."""
    env = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
    return subprocess.run(
        [os.path.join(BIN, 'openstack'), 'nvlink', 'check', '--topology',
         fbase.H100_TOPOLOGY, '--os-auth-type', 'admin_token', '--os-token',
         'admin', '--os-endpoint', endpoint] + list(options),
        capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
        timeout=120)


class _NotFound(http.server.BaseHTTPRequestHandler):
    """Answers 404 to everything, with the server's ``body`` (bytes)."""

    def do_GET(self):
        body, kind = self.server.answer
        self.send_response(404)
        self.send_header('Content-Type', kind)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class TestWrongEndpoint(base.BaseTestCase):

    def not_found(self, body, kind):
        """Start a server answering 404 with ``body``; its URL."""
        server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _NotFound)
        server.answer = (body, kind)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        return 'http://127.0.0.1:%d' % server.server_address[1]

    def test_closed_port_says_it_retries_once(self):
        port = placement_server.free_port()
        done = check('http://ops:s3cret@127.0.0.1:%d' % port,
                     '--retry-window', '3')
        self.assertEqual(1, done.returncode, done.stderr)
        lines = done.stderr.splitlines()
        notices = [line for line in lines if NOTICE in line]
        # One line however many tries the window held (4 or more).
        self.assertEqual(
            ['Placement at http://ops:***@127.0.0.1:%d did not answer '
             '(connection refused); retrying for up to 3 s '
             '(--retry-window)' % port], notices)
        self.assertEqual(0, lines.index(notices[0]))
        self.assertIn('cannot reach Placement', lines[-1])
        self.assertIn('(retried for 3 s, --retry-window)', lines[-1])
        self.assertNotIn('s3cret', done.stderr)

    def test_no_window_no_notice(self):
        done = check('http://127.0.0.1:%d' % placement_server.free_port(),
                     '--retry-window', '0')
        self.assertEqual(1, done.returncode, done.stderr)
        self.assertNotIn(NOTICE, done.stderr)
        self.assertIn('cannot reach Placement', done.stderr)

    def test_404_on_resource_providers_asks_for_the_endpoint(self):
        for body, kind in ((b'', 'text/plain'),
                           (json.dumps({'errors': [{
                               'status': 404, 'title': 'Not Found',
                               'detail': 'The resource could not be found.'
                           }]}).encode(), 'application/json')):
            url = self.not_found(body, kind) + '/wrong'
            done = check(url, '--retry-window', '0')
            self.assertEqual(1, done.returncode, done.stderr)
            self.assertIn(
                'GET /resource_providers failed with HTTP 404', done.stderr)
            self.assertIn(
                '(every Placement serves /resource_providers: is '
                '--os-endpoint / the catalog\'s placement endpoint right? '
                'It is %s here)' % url, done.stderr)
            self.assertNotIn(NOTICE, done.stderr)


class TestNoticeOncePerProcess(base.BaseTestCase):
    """Two requests that both fail: one notice (in process, real socket)."""

    def test_one_notice_for_two_failing_requests(self):
        self.addCleanup(pc._NOTICED.clear)
        pc._NOTICED.clear()
        logger = self.useFixture(fixtures.FakeLogger(
            name=pc.__name__, level='INFO'))
        url = 'http://127.0.0.1:%d' % placement_server.free_port()
        client = pc.PlacementClient(fault_proxy.adapter(url),
                                    retry_window=0.3)
        for _ in range(2):
            self.assertRaises(errors.PlacementError, client.get,
                              '/resource_providers')
        notices = [line for line in logger.output.splitlines()
                   if NOTICE in line]
        self.assertEqual(['Placement at %s did not answer (connection '
                          'refused); retrying for up to 0.3 s '
                          '(--retry-window)' % url], notices)
        # Each retry is still logged, at INFO: at least one per request
        # (how many fit in 0.3 s depends on the machine's load).
        self.assertGreaterEqual(sum(1 for line in logger.output.splitlines()
                                    if 'retrying in' in line), 2)
