"""The live cloud: authentication, retry and time options, the client.

Commands that can run with no cloud (``--snapshot``) set
``auth_required = False``; OSC decides about authentication before it
parses a command's arguments, so when such a command does need the cloud
it authenticates itself (:func:`authenticate`) the way
``osc_lib.shell.prepare_to_run_command`` does. :func:`live_client`
returns a :class:`PlacementClient` with the :func:`add_retry_arguments`
options.
"""

import argparse
import logging
import math
import os
import urllib.request

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from openstack import exceptions as sdk_exc
from requests import utils as requests_utils

from nvlink_placement import documents
from nvlink_placement import errors
from nvlink_placement.placement import client as pc


SNAPSHOT_HINT = 'or run offline against a snapshot file with --snapshot FILE'


def authenticate(app, what='cloud', hint=None):
    """Authenticate through OSC; return its ``ClientManager``.

    What ``osc_lib.shell.prepare_to_run_command`` does for commands with
    ``auth_required = True``; ours set it False because they also run
    offline, and call this when they do need the cloud.

    :param what: what the credentials are for, in the error message.
    :param hint: what to do instead, added to the error message.
    :raises NvlinkError: no usable credentials, saying where they come
        from and what else to do.
    """
    manager = app.client_manager
    manager._auth_required = True
    try:
        manager._cli_options = app.cloud_config.get_one(
            cloud=app.options.cloud, argparse=app.options, validate=True,
            app_name=manager._app_name, app_version=manager._app_version)
        manager.setup_auth()
    except (sdk_exc.ConfigException, ks_exc.AuthPluginException) as exc:
        detail = one_line(exc)
        raise errors.NvlinkError(
            'no %s credentials (%s): set OS_CLOUD (clouds.yaml) or '
            '--os-auth-url and the other --os-* options%s' % (
                what, detail, '; ' + hint if hint else ''))
    except TypeError as exc:
        # keystoneauth's plugin refuses an option of another auth type,
        # e.g. OS_TOKEN left exported with --os-auth-type none.
        raise errors.NvlinkError(
            'the %s credentials mix auth types: %s does not take an option '
            'given in OS_* variables or --os-* options (%s); unset it'
            % (what, '--os-auth-type %s' % app.options.auth_type
               if getattr(app.options, 'auth_type', None)
               else 'the auth type', one_line(exc)))
    return manager


#: The longest wait a time option may ask for: a day. Past it (1e308,
#: inf) requests fail deep in the HTTP stack (``timestamp out of range for
#: platform time_t``), and nan compares false with everything (``--timeout
#: nan`` would mean no limit).
MAX_SECONDS = 86400


def _checked_seconds(text, above_zero):
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    low_ok = value > 0 if above_zero else value >= 0
    if not (low_ok and value <= MAX_SECONDS):
        raise argparse.ArgumentTypeError(
            '%s is not a number of seconds %s %d (a day)'
            % (documents.short(text), 'above 0 up to' if above_zero else
               'from 0 to', MAX_SECONDS))
    return value + 0.0   # -0 is 0


def _seconds(text):
    """argparse type: seconds from 0 to :data:`MAX_SECONDS`.

    Anything else (a word, a negative number, inf, nan, 1e308) is a usage
    error (exit :data:`errors.USAGE_ERROR`).
    """
    return _checked_seconds(text, above_zero=False)


def positive_seconds(text):
    """argparse type: seconds above 0, at most :data:`MAX_SECONDS`."""
    return _checked_seconds(text, above_zero=True)


def add_retry_arguments(parser, timeouts=True):
    """``--retry-window``, ``--request-timeout`` and ``--timeout``.

    They apply to a live Placement (see
    :mod:`nvlink_placement.placement.client` for the retry rules).

    :param timeouts: False adds ``--retry-window`` only (``flavor verify``
        has a ``--timeout`` of its own).
    """
    parser.add_argument(
        '--retry-window', metavar='SECONDS', type=_seconds,
        default=pc.DEFAULT_RETRY_WINDOW,
        help='Keep resending a request that failed for a passing reason '
             '(no connection, no answer, HTTP 429, 500, 502, 503, 504) for '
             'this long after its first failure, waiting 0.5 s doubling to '
             '5 s (with jitter) between tries (default %g; 0 never '
             'resends).' % pc.DEFAULT_RETRY_WINDOW)
    if not timeouts:
        return
    parser.add_argument(
        '--request-timeout', metavar='SECONDS', type=_seconds,
        default=pc.DEFAULT_REQUEST_TIMEOUT,
        help='A request with no answer after this long counts as lost and '
             'is resent (default %g; 0 waits for ever).'
             % pc.DEFAULT_REQUEST_TIMEOUT)
    parser.add_argument(
        '--timeout', metavar='SECONDS', type=_seconds, dest='run_timeout',
        help='Stop sending requests this long after the start (default: no '
             'limit); hosts not finished are reported as failed, and the '
             'next run continues where this one stopped.')


def live_client(app, parsed_args=None, hint=SNAPSHOT_HINT):
    """Authenticate through OSC and return a :class:`PlacementClient`.

    Retries and timeouts come from :func:`add_retry_arguments` options when
    the command has them, else the defaults. keystoneauth's own retries
    stay off: the client is the one retry layer. The token is fetched
    here, before any Placement request, within the request timeout (the
    session's default, which keystoneauth applies to the identity
    requests too) and inside the run's deadline.

    :raises NvlinkError: no credentials, the identity service does not
        answer or refuses them.
    """
    manager = authenticate(app, 'Placement', hint)
    _quiet_http_debug()
    if not _requests_environment():
        manager.session.session.trust_env = False
    adapter = ks_adapter.Adapter(
        session=manager.session, service_type='placement',
        interface=manager.interface, region_name=manager.region_name)
    client = pc.PlacementClient(
        adapter, description='Placement',
        retry_window=getattr(parsed_args, 'retry_window',
                             pc.DEFAULT_RETRY_WINDOW),
        request_timeout=getattr(parsed_args, 'request_timeout',
                                pc.DEFAULT_REQUEST_TIMEOUT) or None,
        run_timeout=getattr(parsed_args, 'run_timeout', None))
    timeout = [t for t in (client.request_timeout, client.run_timeout)
               if t is not None]
    if timeout:
        manager.session.timeout = min(timeout)
    try:
        adapter.get_token()
    except ks_exc.ConnectTimeout as exc:
        raise errors.NvlinkError(
            'the identity service did not answer within %g s '
            '(--request-timeout): %s' % (min(timeout), one_line(exc)))
    except ks_exc.ConnectionError as exc:
        raise errors.NvlinkError('cannot reach the identity service: %s'
                                 % one_line(exc))
    except ks_exc.ClientException as exc:
        raise errors.NvlinkError('the identity service refused the '
                                 'credentials: %s' % one_line(exc))
    return client


def _quiet_http_debug():
    """Stop keystoneauth formatting debug lines that no handler shows.

    osc_lib sets the root logger to DEBUG and filters in its handlers
    (``osc_lib/logs.py``), so keystoneauth builds the curl line and the
    response log of every request (``Session._http_log_request``) only
    for them to be dropped: about a third of the client's CPU on a
    12000-request export. Its logger gets the lowest level a root handler
    shows; with ``--debug`` that is DEBUG and nothing changes.
    """
    levels = [h.level for h in logging.getLogger().handlers]
    if levels and min(levels) > logging.DEBUG:
        logging.getLogger('keystoneauth').setLevel(min(levels))


def _requests_environment():
    """What requests' ``trust_env`` would take from this environment.

    Proxies (``urllib.request.getproxies``: the ``*_proxy`` variables on
    Linux), a CA bundle (``REQUESTS_CA_BUNDLE``, ``CURL_CA_BUNDLE``) and a
    netrc file (``NETRC``, ``~/.netrc``, ``~/_netrc``) are all requests
    reads (``requests/sessions.py``). When there are none, ``trust_env =
    False`` changes nothing but the cost: requests looks them up again for
    every request, about a sixth of the client's CPU on a 12000-request
    export.

    :returns: list of what was found (empty: nothing).
    """
    found = sorted(urllib.request.getproxies())
    found += [name for name in ('REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE',
                                'NETRC') if os.environ.get(name)]
    found += [name for name in requests_utils.NETRC_FILES
              if os.path.exists(os.path.expanduser('~/' + name))]
    return found


def one_line(exc):
    return ' '.join(str(exc).split())
