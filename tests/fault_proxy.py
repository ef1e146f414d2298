"""A fault-injecting HTTP proxy in front of a real Placement (tests only).

A small threaded stdlib server on 127.0.0.1. Every request is shown to
``rule`` (a callable taking a :class:`Request`, returning a
:class:`Fault`), which decides what the client gets:

- :data:`PASS`, or :func:`delay`: forwarded (after the delay: a slow
  server).
- :func:`answer`: an error status, not forwarded (a load balancer without
  backend, an overloaded server).
- :data:`DROP`: forwarded and committed by Placement, then the connection
  is closed without an answer (a load balancer losing the answer).
- :data:`HOLD`: forwarded and committed, then held without an answer until
  the client gives up (its request timeout).
- :data:`REFUSE`: the connection is closed without forwarding.

:meth:`FaultProxy.outage` stops listening for a while (connections are
refused, open ones closed), as a restarting Placement does. A rule may also
write to Placement itself before it returns (through
:meth:`FaultProxy.upstream_client`): a competing writer between the tool's
read and its write.
"""

import collections
import http.client
import http.server
import itertools
import select
import socket
import socketserver
import threading
import time
import urllib.parse

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint

from nvlink_placement.placement import client as pc
from tests import placement_server

WRITES = frozenset(('POST', 'PUT', 'DELETE', 'PATCH'))
HOP_BY_HOP = frozenset(('connection', 'keep-alive', 'transfer-encoding',
                        'content-length', 'host', 'date', 'server'))

Fault = collections.namedtuple('Fault', 'kind status delay')
PASS = Fault('pass', None, 0.0)
DROP = Fault('drop', None, 0.0)
HOLD = Fault('hold', None, 0.0)
REFUSE = Fault('refuse', None, 0.0)


def answer(status):
    """Answer ``status`` without forwarding."""
    return Fault('answer', status, 0.0)


def delay(seconds):
    """Forward after ``seconds``."""
    return Fault('pass', None, seconds)


#: What the proxy saw: ``fault`` kind, and the status the client got (None:
#: no answer) or, for DROP and HOLD, the one Placement gave; ``error``: the
#: start of Placement's answer when its status was 500 or more.
Record = collections.namedtuple('Record', 'method path fault status error')


class Request(object):
    """A request as the rule sees it: ``method``, ``path``, ``body``."""

    def __init__(self, method, path, body, headers):
        self.method = method
        self.path = path
        self.body = body
        self.headers = headers

    @property
    def is_write(self):
        return self.method in WRITES


def adapter(url):
    """A keystoneauth Adapter onto the Placement at ``url``.

    Admin token, as ``[api] auth_strategy = noauth2`` takes it.
    """
    return ks_adapter.Adapter(
        ks_session.Session(auth=token_endpoint.Token(url, 'admin')),
        service_type='placement')


def every(n, fault, methods=WRITES):
    """A rule: ``fault`` for every ``n``-th request of ``methods``.

    With ``n`` >= 2 the retry of a faulted request is never faulted.
    """
    counter = itertools.count(1)
    lock = threading.Lock()

    def rule(request):
        if request.method not in methods:
            return PASS
        with lock:
            index = next(counter)
        return fault if index % n == 0 else PASS
    return rule


def cut_after(k):
    """A rule: pass ``k`` writes, then refuse everything (the tool died)."""
    state = {'writes': 0}
    lock = threading.Lock()

    def rule(request):
        with lock:
            if state['writes'] >= k:
                return REFUSE
            if request.is_write:
                state['writes'] += 1
        return PASS
    return rule


class FaultProxy(object):
    """Proxy ``upstream`` (a base URL) on a free local port.

    :ivar rule: callable(:class:`Request`) -> :class:`Fault`.
    :ivar log: list of :class:`Record`, in arrival order.
    :ivar outages: list of ``(start, end)`` ``time.monotonic()`` pairs.
    """

    def __init__(self, upstream):
        parts = urllib.parse.urlsplit(upstream)
        self.upstream = upstream
        self._target = (parts.hostname, parts.port)
        self.rule = lambda request: PASS
        self.log = []
        self.outages = []
        self.port = placement_server.free_port()
        self.url = 'http://127.0.0.1:%d' % self.port
        self._lock = threading.Lock()
        self._connections = set()
        self._server = None
        self._stopped = threading.Event()

    # -- life cycle --------------------------------------------------------

    def start(self):
        self._listen()
        return self

    def stop(self):
        self._stopped.set()
        self._close()

    def outage(self, seconds):
        """Refuse connections for ``seconds`` from now (in the background)."""
        start = time.monotonic()
        with self._lock:
            self.outages.append((start, start + seconds))

        def run():
            self._close()
            if not self._stopped.wait(seconds):
                self._listen()
        threading.Thread(target=run, daemon=True).start()

    def _listen(self):
        server = _Server(('127.0.0.1', self.port), _Handler)
        server.proxy = self
        thread = threading.Thread(target=server.serve_forever,
                                  kwargs={'poll_interval': 0.05},
                                  daemon=True)
        thread.start()
        with self._lock:
            self._server = server

    def _close(self):
        with self._lock:
            server, self._server = self._server, None
            connections = list(self._connections)
        if server is not None:
            server.shutdown()
            server.server_close()
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    # -- clients -----------------------------------------------------------

    def client(self, **options):
        """A :class:`PlacementClient` through the proxy.

        :param options: :class:`PlacementClient` retry and timeout options.
        """
        return pc.PlacementClient(adapter(self.url), **options)

    def upstream_client(self):
        """A :class:`PlacementClient` straight to Placement (no faults)."""
        return pc.PlacementClient(adapter(self.upstream))

    def faults(self, kind=None):
        """Records of faulted requests (of ``kind`` when given)."""
        return [r for r in self.log if r.fault != 'pass' and
                (kind is None or r.fault == kind)]

    # -- proxying ----------------------------------------------------------

    def _decide(self, request):
        if self._outage_now():
            return REFUSE
        return self.rule(request)

    def _outage_now(self):
        now = time.monotonic()
        with self._lock:
            return any(start <= now < end for start, end in self.outages)

    def _record(self, request, fault, status, data=b''):
        error = data[:1000].decode('utf-8', 'replace') if (
            status or 0) >= 500 else ''
        with self._lock:
            self.log.append(Record(request.method, request.path, fault.kind,
                                   status, error))

    def _forward(self, request):
        conn = http.client.HTTPConnection(*self._target, timeout=120)
        try:
            headers = {k: v for k, v in request.headers.items()
                       if k.lower() not in HOP_BY_HOP}
            conn.request(request.method, request.path, body=request.body,
                         headers=headers)
            response = conn.getresponse()
            return (response.status, response.getheaders(),
                    response.read())
        finally:
            conn.close()


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def setup(self):
        super().setup()
        # Headers and body go out in two writes: without this, Nagle's
        # algorithm and the client's delayed ACK add 40 ms to each answer.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.proxy._lock:
            self.server.proxy._connections.add(self.connection)

    def finish(self):
        with self.server.proxy._lock:
            self.server.proxy._connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, *args):
        pass

    def _handle(self):
        proxy = self.server.proxy
        length = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(length) if length else None
        request = Request(self.command, self.path, body, self.headers)
        fault = proxy._decide(request)
        if fault.kind == 'refuse':
            proxy._record(request, fault, None)
            self.close_connection = True
            return
        if fault.kind == 'answer':
            proxy._record(request, fault, fault.status)
            self._reply(fault.status, [('Content-Type', 'text/plain')],
                        b'injected by the test proxy')
            return
        if fault.delay:
            time.sleep(fault.delay)
        status, headers, data = proxy._forward(request)
        proxy._record(request, fault, status, data)
        if fault.kind == 'drop':
            self.close_connection = True
            return
        if fault.kind == 'hold':
            self._hold()
            self.close_connection = True
            return
        self._reply(status, headers, data)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

    def _hold(self):
        """Wait until the client hangs up (or the proxy stops)."""
        proxy = self.server.proxy
        while not proxy._stopped.is_set():
            try:
                readable, _, _ = select.select([self.connection], [], [],
                                               0.1)
                if readable and not self.connection.recv(1):
                    return
            except OSError:
                return

    def _reply(self, status, headers, data):
        try:
            self.send_response(status)
            for name, value in headers:
                if name.lower() not in HOP_BY_HOP:
                    self.send_header(name, value)
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            self.close_connection = True
