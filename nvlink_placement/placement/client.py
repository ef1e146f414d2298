"""The one place that talks HTTP to Placement.

Owns microversions and error decoding. A server older than the microversion
a request needs answers 406; that becomes a clear error naming both
versions. Works on any keystoneauth1 ``Adapter``
whose ``service_type`` is ``placement``: the OSC session for a live cloud,
or :class:`nvlink_placement.placement.embedded.EmbeddedPlacement`.

Microversions (Placement API reference, "REST API Version History"):
1.14 nested providers; 1.20 POST returns the provider; 1.23 error codes;
1.30 reshaper; 1.36 same_subtree; 1.37 re-parenting; 1.38 consumer_type.
"""

import collections
import threading

from keystoneauth1 import exceptions as ks_exc

from nvlink_placement import errors

READ_VERSION = '1.14'
WRITE_VERSION = '1.37'
# Placement error codes (placement/errors.py).
CONCURRENT_UPDATE = 'placement.concurrent_update'
DUPLICATE_NAME = 'placement.duplicate_name'


def version_tuple(text):
    """``'1.37'`` -> ``(1, 37)``."""
    major, minor = text.split('.')
    return int(major), int(minor)


class PlacementClient(object):
    """A Placement client over a keystoneauth1 adapter.

    :param adapter: keystoneauth1 ``Adapter`` (``raise_exc`` is ignored;
        the client checks status codes itself).
    :param lock: optional lock held around every request (the embedded
        Placement shares one SQLite connection between threads).
    :param description: how to name the server in messages.

    :ivar requests: ``collections.Counter`` of requests sent, by method.
    """

    def __init__(self, adapter, lock=None, description='Placement'):
        self.adapter = adapter
        self.lock = lock or _NullLock()
        self.description = description
        self.requests = collections.Counter()
        self._counter_lock = threading.Lock()

    # -- requests ----------------------------------------------------------

    def request(self, method, url, body=None, version=READ_VERSION,
                expect=(200, 201, 204), tolerate=()):
        """Send one request and decode the answer.

        :param version: microversion header value, or None for none.
        :param expect: status codes that mean success.
        :param tolerate: status codes returned as ``None`` instead of raising
            (e.g. 404 on an idempotent DELETE).
        :returns: decoded JSON body (dict), ``{}`` when empty, or None for a
            tolerated status.
        :raises PlacementError: with Placement's detail and error code.
        """
        headers = {'Accept': 'application/json'}
        if version:
            headers['OpenStack-API-Version'] = 'placement %s' % version
        with self._counter_lock:
            self.requests[method] += 1
        kwargs = {'headers': headers, 'raise_exc': False}
        if body is not None:
            kwargs['json'] = body
        try:
            with self.lock:
                response = self.adapter.request(url, method, **kwargs)
        except ks_exc.ConnectionError as exc:
            raise errors.PlacementError(
                'cannot reach %s: %s' % (self.description, exc))
        except ks_exc.ClientException as exc:
            raise errors.PlacementError('%s: %s' % (self.description, exc))
        status = response.status_code
        if status == 406 and version:
            detail, code = _decode_error(response)
            raise errors.PlacementError(
                '%s does not speak microversion %s (%s). Nothing was '
                'written.' % (self.description, version,
                              _max_version(response) or detail),
                status=status, code=code)
        if status in tolerate:
            return None
        if status not in expect:
            detail, code = _decode_error(response)
            raise errors.PlacementError(
                '%s %s failed with HTTP %d%s: %s' % (
                    method, url, status, ' (%s)' % code if code else '',
                    detail), status=status, code=code)
        if not response.content:
            return {}
        return response.json()

    def get(self, url, version=READ_VERSION):
        """GET ``url`` and return the decoded body."""
        return self.request('GET', url, version=version)


class _NullLock(object):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _max_version(response):
    try:
        error = response.json()['errors'][0]
        return 'it speaks %s at most' % error['max_version']
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def _decode_error(response):
    """Return ``(detail, code)`` from a Placement JSON error body."""
    try:
        error = response.json()['errors'][0]
    except (ValueError, KeyError, IndexError, TypeError):
        return response.text.strip()[:500] or response.reason, None
    detail = (error.get('detail') or error.get('title') or '').strip()
    # Placement prefixes details with the status line; keep the last line.
    detail = detail.splitlines()[-1].strip() if detail else ''
    return detail, error.get('code')
