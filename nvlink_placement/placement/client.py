"""The one place that talks HTTP to Placement.

Owns microversions, error decoding, timeouts and retries. Works on any
keystoneauth1 ``Adapter`` whose ``service_type`` is ``placement``: the OSC
session for a live cloud, or
:class:`nvlink_placement.placement.embedded.EmbeddedPlacement`.

Microversions (Placement API reference, "REST API Version History"):
1.14 nested providers; 1.20 POST returns the provider; 1.23 error codes;
1.30 reshaper; 1.36 same_subtree; 1.37 re-parenting; 1.38 consumer_type.
Every write this tool sends uses :data:`WRITE_VERSION` (1.37): from 1.23 on
a 409 carries its error code, so a lost generation race
(``placement.concurrent_update``) can be told from any other conflict. A
server older than the microversion a request needs answers 406; that
becomes a clear error naming both versions.

Retries and timeouts
--------------------
Two kinds of failure are retried, each where its meaning is known:

- *Transient* (here, in :meth:`PlacementClient.request`): no connection,
  connection reset, no answer within the per-request timeout, and HTTP
  429, 500, 502, 503 and 504 (a restarting Placement, a load balancer with
  no backend, SQLite's "database is locked"). The request is sent again
  after an exponential back-off with jitter (0.5 s doubling, capped at 5 s,
  each delay drawn between half and all of its value; an integer
  ``Retry-After`` is honoured up to 10 s) until ``retry_window`` seconds
  have passed since its first failure; the last try falls on the end of
  the window (default 60 s: an outage of a minute is ridden out).
  The first such failure in a process is said at once, on one line at
  WARNING (:meth:`PlacementClient._notice`): a wrong ``--os-endpoint``
  port is not a minute of silence. Each retry is logged at INFO.
- *Generation races* (:func:`retry_on_conflict`):
  ``placement.concurrent_update`` means another writer (nova-compute
  refreshing its providers) changed the provider between our read and our
  write; the write re-reads and tries again.

A write whose answer was lost may have been committed, so the repeated
request can meet its own effect (a 409 "already exists", a 404 on delete, a
stale generation); the executor
(:mod:`nvlink_placement.plan.executor`) makes each write accept that.

Decision on keystoneauth1 (read in keystoneauth1 5.18 ``session.py``): its
``connect_retries`` / ``status_code_retries`` / ``retriable_status_codes``
count retries rather than time, start at 0.5 s and double up to 60 s
between tries with no jitter (or use one fixed delay), and treat a read
timeout as a connection failure that it resends for every method. A count
cannot express "ride out 60 s" whatever the timeout, a 60 s cap can leave a
recovered Placement idle for most of a minute, and without jitter the
parallel workers of a run (and parallel runs) come back in lock-step on a
Placement that is just restarting. So keystoneauth's retries stay off (its
default) and the loop here is the only retry layer; keystoneauth still
does the work it fits: the per-request ``timeout`` (passed to requests,
raised as ``ConnectTimeout``), the exception mapping, the endpoint and the
token. :class:`PlacementClient` also holds the deadline of the whole run
(``run_timeout``): once it passes, no request is sent or retried; and a
stop (``stop``, set by SIGINT or SIGTERM, :mod:`nvlink_placement.interrupt`):
once it is set, no request is sent and a back-off wait ends at once.
"""

import collections
import logging
import random
import re
import threading
import time

from keystoneauth1 import exceptions as ks_exc

from nvlink_placement import documents
from nvlink_placement import errors
from nvlink_placement import redact

LOG = logging.getLogger(__name__)

READ_VERSION = '1.14'
WRITE_VERSION = '1.37'
# Placement error codes (placement/errors.py). Both a duplicate uuid and a
# duplicate name answer DUPLICATE_NAME.
CONCURRENT_UPDATE = 'placement.concurrent_update'
DUPLICATE_NAME = 'placement.duplicate_name'

#: Seconds a failing request keeps being retried (``--retry-window``).
DEFAULT_RETRY_WINDOW = 60.0
#: Seconds one request may take before it counts as lost
#: (``--request-timeout``): far above any answer Placement gives a healthy
#: run (a 1000-host provider listing takes about a second), below the 60 s
#: idle timeout of common load balancers.
DEFAULT_REQUEST_TIMEOUT = 30.0
RETRIABLE_STATUSES = frozenset((429, 500, 502, 503, 504))
FIRST_DELAY = 0.5
MAX_DELAY = 5.0
#: Tries of a write that keeps losing generation races.
CONFLICT_TRIES = 5
#: Characters of a request URL (a flavor's allocation candidates query can
#: be long) and of Placement's error detail shown in a message.
SHOWN_URL = 300
SHOWN_DETAIL = 500

#: The services (client descriptions) whose first transient failure was
#: said already in this process (:meth:`PlacementClient._notice`).
_NOTICED = set()
_NOTICED_LOCK = threading.Lock()


def version_tuple(text):
    """``'1.37'`` -> ``(1, 37)``."""
    major, minor = text.split('.')
    return int(major), int(minor)


def backoff(attempt):
    """Seconds to wait before retry number ``attempt`` (0-based).

    Exponential from :data:`FIRST_DELAY`, capped at :data:`MAX_DELAY`, drawn
    uniformly between half and all of that ("equal jitter").
    """
    delay = min(MAX_DELAY, FIRST_DELAY * 2 ** attempt)
    return random.uniform(delay / 2, delay)


def retry_on_conflict(write, tries=CONFLICT_TRIES):
    """Call ``write()`` again when it loses a generation race.

    :param write: callable that reads the provider's current generation
        and writes with it (so a second call is a fresh try).
    :raises PlacementError: the last conflict after ``tries`` calls, or any
        other error at once.
    """
    for attempt in range(tries):
        try:
            return write()
        except errors.PlacementError as exc:
            if exc.code != CONCURRENT_UPDATE or attempt == tries - 1:
                raise
            LOG.info('generation conflict, reading again: %s', exc)


class PlacementClient(object):
    """A Placement client over a keystoneauth1 adapter.

    :param adapter: keystoneauth1 ``Adapter`` (``raise_exc`` is ignored;
        the client checks status codes itself).
    :param lock: optional lock held around every request (the embedded
        Placement shares one SQLite connection between threads).
    :param description: how to name the server in messages.
    :param retry_window: seconds a request keeps being retried after its
        first transient failure (0: never retry).
    :param request_timeout: seconds one request may take (None: no limit
        of ours; the adapter's own applies). Live commands pass
        :data:`DEFAULT_REQUEST_TIMEOUT` or ``--request-timeout``.
    :param run_timeout: seconds from now after which no request is sent
        (None: no limit).

    :ivar stop: ``threading.Event`` or None; once set, every request
        raises :class:`errors.Interrupted` before it is sent (or resent).
    :ivar requests: ``collections.Counter`` of requests sent, by method.
    :ivar retried: ``collections.Counter`` of transient failures ridden
        out, by kind (``HTTP 503``, ``no connection``, ``timeout``).
    """

    def __init__(self, adapter, lock=None, description='Placement',
                 retry_window=DEFAULT_RETRY_WINDOW,
                 request_timeout=None, run_timeout=None):
        self.adapter = adapter
        self.lock = lock or _NullLock()
        self.description = description
        self.retry_window = retry_window
        self.request_timeout = request_timeout
        self.run_timeout = run_timeout
        self.deadline = (None if run_timeout is None else
                         time.monotonic() + run_timeout)
        self.stop = None
        self.requests = collections.Counter()
        self.retried = collections.Counter()
        self._counter_lock = threading.Lock()

    # -- requests ----------------------------------------------------------

    def request(self, method, url, body=None, version=READ_VERSION,
                expect=(200, 201, 204), tolerate=()):
        """Send one request, retrying transient failures, and decode it.

        :param version: microversion header value, or None for none.
        :param expect: status codes that mean success.
        :param tolerate: status codes returned as ``None`` instead of raising
            (e.g. 404 on an idempotent DELETE).
        :returns: decoded JSON body (dict), ``{}`` when empty, or None for a
            tolerated status.
        :raises PlacementError: with Placement's detail and error code;
            ``status`` None when no answer came (unreachable, timed out,
            past the run's deadline).
        :raises Interrupted: :attr:`stop` is set; the request was not sent.
        """
        headers = {'Accept': 'application/json'}
        if version:
            headers['OpenStack-API-Version'] = 'placement %s' % version
        kwargs = {'headers': headers, 'raise_exc': False}
        if body is not None:
            kwargs['json'] = body
        response = self._send(method, url, kwargs)
        status = response.status_code
        if status == 406 and version:
            detail, code = _decode_error(response)
            raise errors.PlacementError(
                '%s does not speak microversion %s (%s). Nothing was '
                'written.' % (self.description, version,
                              _max_version(response) or detail),
                status=status, code=code)
        if (response.content and (status == 404 or status in expect) and
                not _is_json(response)):
            raise errors.PlacementError(_not_placement(response, url),
                                        status=status)
        if status in tolerate:
            return None
        if status not in expect:
            detail, code = _decode_error(response)
            raise errors.PlacementError(
                '%s %s failed with HTTP %d%s: %s%s' % (
                    method, _shown(url), status,
                    ' (%s)' % code if code else '', detail,
                    AUTH_HINT if status in (401, 403) else
                    _endpoint_hint(response, url) if status == 404 else ''),
                status=status, code=code)
        if not response.content:
            return {}
        return response.json()

    def get(self, url, version=READ_VERSION):
        """GET ``url`` and return the decoded body."""
        return self.request('GET', url, version=version)

    def _send(self, method, url, kwargs):
        """The response, after riding out transient failures."""
        first_failure = None
        attempt = 0
        while True:
            if self.stop is not None and self.stop.is_set():
                raise errors.Interrupted()
            timeout = self._timeout(method, url)
            if timeout is not None:
                kwargs['timeout'] = timeout
            with self._counter_lock:
                self.requests[method] += 1
            try:
                with self.lock:
                    response = self.adapter.request(url, method, **kwargs)
            except ks_exc.SSLError as exc:
                raise errors.PlacementError(
                    'cannot reach %s: %s' % (self.description, exc))
            except ks_exc.ConnectTimeout as exc:
                kind, failure, retry_after = 'timeout', exc, None
            except ks_exc.ConnectionError as exc:
                kind, failure, retry_after = 'no connection', exc, None
            except ks_exc.ClientException as exc:
                raise errors.PlacementError('%s: %s' % (self.description,
                                                        exc))
            else:
                if response.status_code not in RETRIABLE_STATUSES:
                    return response
                kind = 'HTTP %d' % response.status_code
                failure = response
                retry_after = _retry_after(response)
            now = time.monotonic()
            if first_failure is None:
                first_failure = now
            waited = now - first_failure
            if waited >= self.retry_window:
                raise self._gave_up(method, url, kind, failure, waited)
            if not attempt:
                self._notice(kind, failure)
            # The last try falls on the end of the window.
            delay = min(self.retry_window - waited, backoff(attempt)
                        if retry_after is None else retry_after)
            if self.deadline is not None:
                delay = min(delay, max(0.0, self.deadline - now))
            with self._counter_lock:
                self.retried[kind] += 1
            LOG.info('%s %s: %s; retrying in %.1f s', method,
                     url.split('?')[0], _describe(kind, failure), delay)
            if self.stop is None:
                time.sleep(delay)
            elif self.stop.wait(delay):
                raise errors.Interrupted()
            attempt += 1

    def _notice(self, kind, failure):
        """Say, once per process and service, that requests are retried.

        One WARNING line naming the endpoint (credentials masked), what
        went wrong and how long the client keeps trying, e.g. ``Placement
        at http://host:8778 did not answer (connection refused); retrying
        for up to 60 s (--retry-window)``.
        """
        with _NOTICED_LOCK:
            if self.description in _NOTICED:
                return
            _NOTICED.add(self.description)
        try:
            endpoint = self.adapter.get_endpoint()
        except ks_exc.ClientException:
            endpoint = None
        if kind == 'timeout':
            what = ('did not answer within %s s (--request-timeout)'
                    % _seconds(self.request_timeout)
                    if self.request_timeout else 'did not answer in time')
        elif kind == 'no connection':
            what = 'did not answer (%s)' % (
                'connection refused' if 'refused' in str(failure).lower()
                else 'no connection')
        else:
            what = 'answered %s' % kind
        LOG.warning(redact.url_credentials(
            '%s%s %s; retrying for up to %s s (--retry-window)' % (
                self.description, ' at %s' % endpoint if endpoint else '',
                what, _seconds(self.retry_window))))

    def _timeout(self, method, url):
        """Timeout for the next try: per request, within the run's."""
        if self.deadline is None:
            return self.request_timeout
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise errors.PlacementError(
                'stopped before %s %s: the run reached its --timeout of %s '
                's. Run the command again: it continues where it stopped.'
                % (method, url.split('?')[0], _seconds(self.run_timeout)))
        if self.request_timeout is None:
            return left
        return min(self.request_timeout, left)

    def _gave_up(self, method, url, kind, failure, waited):
        path = url.split('?')[0]
        if kind == 'timeout':
            first = ('%s did not answer %s %s within %s s (--request-timeout)'
                     % (self.description, method, path,
                        _seconds(self.request_timeout)))
        elif kind == 'no connection':
            first = 'cannot reach %s: %s' % (self.description, failure)
        else:
            detail, code = _decode_error(failure)
            return errors.PlacementError(
                '%s %s failed with %s (retried for %s s, --retry-window): %s'
                % (method, _shown(url), kind, _seconds(waited), detail),
                status=failure.status_code, code=code)
        return errors.PlacementError('%s (retried for %s s, --retry-window)'
                                     % (first, _seconds(waited)))


class _NullLock(object):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _seconds(value):
    return '%g' % round(value, 1)


def _shown(url):
    """``url`` for a message: cut to :data:`SHOWN_URL` characters."""
    return documents.clip(url, SHOWN_URL)


def _describe(kind, failure):
    if kind.startswith('HTTP'):
        return '%s %s' % (kind, _decode_error(failure)[0])
    return str(failure)


def _retry_after(response):
    """``Retry-After`` seconds (the integer form), capped, or None."""
    value = response.headers.get('Retry-After', '')
    if value.strip().isdigit():
        return min(float(value), MAX_DELAY * 2)
    return None


def _max_version(response):
    try:
        error = response.json()['errors'][0]
        return 'it speaks %s at most' % error['max_version']
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def _is_json(response):
    return 'json' in response.headers.get('Content-Type', '').lower()


def _what(response):
    """A non-JSON body in a few words, e.g. ``an HTML page ("Oops")``."""
    text = response.text.strip()
    kind = response.headers.get('Content-Type', '').split(';')[0].strip()
    if 'html' in kind.lower() or text[:1] == '<':
        title = re.search(r'<title[^>]*>([^<]{1,200})</title>', text, re.I)
        return 'an HTML page%s' % (
            ' ("%s")' % ' '.join(title.group(1).split()) if title else '')
    return '%s (%s)' % (kind or 'a body of unknown type',
                        documents.short(text[:200]))


def _not_placement(response, url):
    """The message for an answer that is not Placement's.

    Names the URL, what came back, and the endpoint to check.
    """
    full = response.url or url
    path = url.split('?')[0]
    endpoint = full[:full.find(path)] if path and path in full else full
    return ('%s answered HTTP %d with %s, not JSON: %s does not look like '
            'the Placement API (check --os-endpoint, or the placement '
            'endpoint in the service catalog)'
            % (full.split('?')[0], response.status_code, _what(response),
               endpoint or full))


def _endpoint_hint(response, url):
    """Said after a 404 on a collection every Placement serves.

    ``/resource_providers``, ``/traits``, ``/resource_classes``, ...: a
    404 there means the URL is not Placement's root (``--os-endpoint
    http://host:8778/wrong``), not that a provider is gone. Empty for any
    other path.
    """
    path = url.split('?')[0]
    if path.strip('/').count('/') or not path.strip('/'):
        return ''
    full = (response.url or url).split('?')[0]
    endpoint = full[:-len(path)] if full.endswith(path) else full
    return (' (every Placement serves %s: is --os-endpoint / the '
            'catalog\'s placement endpoint right? It is %s here)'
            % (path, endpoint))


#: Said after HTTP 401 or 403: what the credentials may lack.
AUTH_HINT = (' (Placement refused the credentials: an admin role is needed '
             'for its resource provider API; --os-auth-type none sends no '
             'token, and a Placement with [api] auth_strategy = noauth2, as '
             'on a laptop, takes --os-auth-type admin_token --os-token admin '
             '--os-endpoint URL)')


def _decode_error(response):
    """Return ``(detail, code)`` from a Placement JSON error body."""
    try:
        error = response.json()['errors'][0]
    except (ValueError, KeyError, IndexError, TypeError):
        if not _is_json(response) and response.text.strip():
            return _what(response), None
        return response.text.strip()[:500] or response.reason, None
    detail = (error.get('detail') or error.get('title') or '').strip()
    # Placement prefixes details with the status line; keep the last line.
    detail = detail.splitlines()[-1].strip() if detail else ''
    return documents.clip(detail, SHOWN_DETAIL), error.get('code')
