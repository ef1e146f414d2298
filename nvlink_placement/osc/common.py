"""What the commands share: Placement access, progress, output rows.

Commands that can run with no cloud (``--snapshot``) set
``auth_required = False``; OSC decides about authentication before it
parses a command's arguments, so when such a command does need the cloud
it authenticates itself the way ``osc_lib.shell.prepare_to_run_command``
does.
"""

import argparse
import contextlib
import difflib
import logging
import math
import os
import sys
import urllib.request

from cliff import _argparse as cliff_argparse
from cliff import columns
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from openstack import exceptions as sdk_exc
from osc_lib.command import command
from osc_lib import utils
from requests import utils as requests_utils

from nvlink_placement import documents
from nvlink_placement import errors
from nvlink_placement import helptext
from nvlink_placement.placement import client as pc
from nvlink_placement.placement import snapshot
from nvlink_placement.topology import loader


SNAPSHOT_HINT = 'or run offline against a snapshot file with --snapshot FILE'
# Formats that print each value as text: lists and mappings are joined.
FLAT_FORMATS = ('value', 'csv', 'shell')


#: Exit status of a usage error (see :data:`errors.USAGE_ERROR`); never 2,
#: which ``check`` uses for drift.
USAGE_ERROR = errors.USAGE_ERROR


_REQUIRED = 'the following arguments are required: '
# Options that read a file, for the hint on a stray file argument (never
# an output: the hint would overwrite the file).
_FILE_METAVARS = ('FILE', 'PATH')
_OUTPUTS = ('output', 'save_snapshot')


class _Probe(Exception):
    """An argparse error while looking for unrecognized arguments."""


class _UsageErrorParser(object):
    """argparse parser mixin: a usage error exits :data:`USAGE_ERROR`.

    argparse prints the usage and exits 2 (``ArgumentParser.error``); cliff
    lets that ``SystemExit`` through, so ``openstack`` would exit 2 too.

    A missing required option hides the rest: argparse stops there and
    never names the arguments it did not recognize (``reshape topo.yaml``,
    ``reshape --topolgy topo.yaml``). The message then names them too, a
    close option name, and the missing option to use for a stray argument
    that is an existing file.
    """

    _argv = None
    _probing = False

    def parse_args(self, args=None, namespace=None):
        self._argv = list(sys.argv[1:] if args is None else args)
        return super().parse_args(args, namespace)

    def error(self, message):
        if self._probing:
            raise _Probe(message)
        if message.startswith(_REQUIRED) and self._argv is not None:
            message += self._leftovers(message[len(_REQUIRED):].split(', '))
        self.print_usage(sys.stderr)
        self.exit(USAGE_ERROR, '%s: error: %s\n' % (self.prog, message))

    def _leftovers(self, missing_names):
        """``; unrecognized arguments: ...`` and hints, or ``''``.

        Parses the arguments again with no option required, the way
        ``parse_known_args`` does, to find what it would not recognize.
        """
        required = [a for a in self._actions if a.required]
        self._probing = True
        try:
            for action in required:
                action.required = False
            _, extras = super().parse_known_args(list(self._argv),
                                                 argparse.Namespace())
        except (Exception, SystemExit):  # _Probe, or anything odd
            return ''
        finally:
            self._probing = False
            for action in required:
                action.required = True
        if not extras:
            return ''
        hints = []
        known = [o for a in self._actions for o in a.option_strings]
        for extra in extras:
            if extra.startswith('-') and len(extra) > 2:
                close = difflib.get_close_matches(extra.split('=')[0], known,
                                                  n=1)
                if close:
                    hints.append('%s: did you mean %s?'
                                 % (extra.split('=')[0], close[0]))
        missing = [a for a in required if a.option_strings and
                   argparse._get_action_name(a) in missing_names and
                   str(a.metavar).upper() in _FILE_METAVARS and
                   a.dest not in _OUTPUTS]
        files = [e for e in extras
                 if not e.startswith('-') and os.path.isfile(e)]
        if missing and files:
            hints.append('%s is a file: give it as %s' % (
                ', '.join(files), ' or '.join(
                    '%s %s' % (max(a.option_strings, key=len), a.metavar)
                    for a in missing)))
        return '; unrecognized arguments: %s%s' % (
            ' '.join(extras), ''.join(' (%s)' % h for h in hints))


_PARSER_CLASSES = {}


def usage_errors_exit_3(parser):
    """Make ``parser`` exit :data:`USAGE_ERROR` on a usage error.

    Works on whatever parser class cliff made (it has no factory hook):
    the parser becomes an instance of a subclass that overrides ``error``.
    """
    cls = type(parser)
    if not issubclass(cls, _UsageErrorParser):
        if cls not in _PARSER_CLASSES:
            _PARSER_CLASSES[cls] = type(cls.__name__,
                                        (_UsageErrorParser, cls), {})
        parser.__class__ = _PARSER_CLASSES[cls]
    return parser


class _UsageErrors(object):
    """Command mixin: usage errors, argparse's and ours, exit 3.

    An :class:`errors.UsageError` raised while the command runs (options
    that do not go together) is reported like an argparse error: usage,
    message, exit :data:`USAGE_ERROR`.
    """

    _usage_parser = None

    def get_parser(self, prog_name):
        self._usage_parser = usage_errors_exit_3(
            super().get_parser(prog_name))
        return self._usage_parser

    def run(self, parsed_args):
        try:
            return super().run(parsed_args)
        except errors.UsageError as exc:
            if self._usage_parser is None:
                raise
            self._usage_parser.error(str(exc))


class _PlainHelpFormatter(cliff_argparse.SmartHelpFormatter):
    """cliff's help formatter, printing descriptions without rST markup."""

    def _format_text(self, text):
        return super()._format_text(helptext.plain(text))


def positive_int(text):
    """argparse type: a whole number of at least 1 (``--workers``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError('%r is not a whole number' % text)
    if value < 1:
        raise argparse.ArgumentTypeError('%d: at least 1' % value)
    return value


def plural(count, noun, nouns=None):
    """``1 host``, ``2 hosts``, ``0 hosts``."""
    return '%d %s' % (count, noun if count == 1 else nouns or noun + 's')


def flat(value, shell=False):
    """``value`` for ``-f value``, ``csv`` and ``shell``: no Python reprs.

    Lists become comma-joined text (``1,3``); mappings ``key='value'``
    pairs joined by ``, `` (osc_lib's ``format_dict``: values may hold
    commas); None an empty string.

    :param shell: also escape what is special inside double quotes in a
        POSIX shell (backslash, ``$``, backquote); cliff's shell formatter
        escapes only ``"``, so sourcing its output could run a command
        hidden in a host name.
    """
    if isinstance(value, columns.FormattableColumn):
        value = value.machine_readable()
    if value is None:
        value = ''
    elif isinstance(value, (list, tuple)):
        value = ','.join(str(v) for v in value)
    elif isinstance(value, dict):
        value = utils.format_dict(value)
    if shell and isinstance(value, str):
        value = (value.replace('\\', '\\\\').replace('$', '\\$')
                 .replace('`', '\\`'))
    return value


class _Plain(object):
    """What every command of the plugin shares: plain-text ``--help``."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.formatter_class = _PlainHelpFormatter
        return parser


class Command(_UsageErrors, _Plain, command.Command):
    """osc-lib's Command: plain-text help, usage errors exit 3."""


class Lister(_UsageErrors, _Plain, command.Lister):
    """osc-lib's Lister: plain-text help, lists flat in value and csv."""

    def produce_output(self, parsed_args, column_names, data):
        if parsed_args.formatter in FLAT_FORMATS:
            shell = parsed_args.formatter == 'shell'
            data = [[flat(v, shell) for v in row] for row in data]
        return super().produce_output(parsed_args, column_names, data)


class ShowOne(_UsageErrors, _Plain, command.ShowOne):
    """osc-lib's ShowOne: plain-text help, lists flat in value and csv."""

    def produce_output(self, parsed_args, column_names, data):
        if parsed_args.formatter in FLAT_FORMATS:
            data = [flat(v, parsed_args.formatter == 'shell') for v in data]
        return super().produce_output(parsed_args, column_names, data)


class TextByDefault(object):
    """A Lister or ShowOne whose default output is text.

    Put before the cliff base. Without ``-f`` and ``-c`` the command
    prints text itself (it checks :attr:`as_text` in ``produce_output``);
    ``-f table|json|yaml|csv|value`` or ``-c`` give cliff's formatters.
    """

    as_text = False

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.set_defaults(formatter=None)
        for action in parser._actions:
            if action.dest == 'formatter':
                action.help = ('the output format (default: text as '
                               'described above; -c alone gives a table)')
        return parser

    def run(self, parsed_args):
        self.as_text = (parsed_args.formatter is None and
                        not parsed_args.columns)
        if parsed_args.formatter is None:
            parsed_args.formatter = 'table'
        return super().run(parsed_args)


class OwnOutput(object):
    """A Lister or ShowOne with options that print text of their own.

    Put first, before :class:`TextByDefault` and the cliff base.
    :attr:`own_output` maps the dest of each such option (``--ini``,
    ``--dot``) to what it prints; ``-f`` or ``-c`` given with one of them
    is a usage error instead of being ignored.
    """

    own_output = {}

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        self._formatter_default = parser.get_default('formatter')
        parser.set_defaults(formatter=None)
        return parser

    def run(self, parsed_args):
        given = [(dest, what) for dest, what in self.own_output.items()
                 if getattr(parsed_args, dest, None)]
        explicit = (['-f %s' % parsed_args.formatter]
                    if parsed_args.formatter is not None else [])
        explicit += ['-c %s' % c for c in parsed_args.columns or ()]
        if given and explicit:
            dest, what = given[0]
            option = '--' + dest.replace('_', '-')
            self._usage_parser.error(
                '%s does not go with %s, which prints %s, not rows: leave '
                'out -f/-c, or leave out %s to get rows'
                % (' '.join(explicit), option, what, option))
        if parsed_args.formatter is None:
            parsed_args.formatter = self._formatter_default
        return super().run(parsed_args)


def add_placement_arguments(parser, save=True, exclusive=None):
    """Add ``--snapshot`` (and ``--save-snapshot``) to ``parser``.

    :param exclusive: a mutually exclusive group (``--dry-run``'s) to put
        ``--save-snapshot`` in: a dry run has no state worth saving.
    """
    parser.add_argument(
        '--snapshot', metavar='FILE',
        help='Run against an embedded Placement (openstack-placement in '
             'process, SQLite in memory) loaded from this snapshot file '
             'instead of the cloud; needs no credentials.')
    if save:
        (exclusive or parser).add_argument(
            '--save-snapshot', metavar='OUT',
            help='With --snapshot: write the resulting Placement state to '
                 'OUT (same format)%s.'
                 % ('; not with --dry-run' if exclusive else ''))


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
        detail = _one_line(exc)
        raise errors.NvlinkError(
            'no %s credentials (%s): set OS_CLOUD (clouds.yaml) or '
            '--os-auth-url and the other --os-* options%s' % (
                what, detail, '; ' + hint if hint else ''))
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
    error (exit :data:`USAGE_ERROR`).
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
            '(--request-timeout): %s' % (min(timeout), _one_line(exc)))
    except ks_exc.ConnectionError as exc:
        raise errors.NvlinkError('cannot reach the identity service: %s'
                                 % _one_line(exc))
    except ks_exc.ClientException as exc:
        raise errors.NvlinkError('the identity service refused the '
                                 'credentials: %s' % _one_line(exc))
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


def _one_line(exc):
    return ' '.join(str(exc).split())


@contextlib.contextmanager
def placement(app, parsed_args):
    """Yield a :class:`PlacementClient`: embedded or live.

    With ``--snapshot`` the file is checked, then loaded into a fresh
    embedded Placement (in bulk, see
    :mod:`nvlink_placement.placement.snapshot_db`), and on success the
    state is written to ``--save-snapshot`` when given.
    """
    path = getattr(parsed_args, 'snapshot', None)
    save = getattr(parsed_args, 'save_snapshot', None)
    if save and not path:
        raise errors.UsageError('--save-snapshot needs --snapshot (a live '
                                'cloud is exported with "openstack nvlink '
                                'snapshot")')
    if save and os.path.exists(save) and os.path.exists(path) and \
            os.path.samefile(save, path):
        raise errors.UsageError(
            '--save-snapshot %s is the --snapshot input: give another file, '
            'so that the input stays what was read' % save)
    if not path:
        yield live_client(app, parsed_args)
        return
    with offline(path, save) as embedded_placement:
        yield embedded_placement.client
    if save:
        app.stderr.write(snapshot_written(save, embedded_placement.saved))


def snapshot_written(path, document):
    """The line saying a snapshot file was written, and what it holds."""
    return '%s: %s, %s\n' % (
        path, plural(len(document['resource_providers']),
                     'resource provider'),
        plural(len(document['allocations']), 'consumer'))


@contextlib.contextmanager
def offline(path, save=None):
    """Yield an entered :class:`EmbeddedPlacement` loaded from ``path``.

    On success the resulting state is written to ``save`` when given, and
    kept as the placement's ``saved`` attribute.
    """
    from nvlink_placement.placement import embedded
    embedded_placement = embedded.EmbeddedPlacement(snapshot.read_file(path))
    with embedded_placement:
        embedded_placement.client.requests.clear()
        yield embedded_placement
        if save:
            embedded_placement.saved = embedded_placement.export()
            snapshot.write_file(embedded_placement.saved, save)


def gpus_file_dirs(app):
    """The directories of ``--os-nvlink-gpus-file-dir`` (see :mod:`.plugin`).

    A topology's ``gpus_file`` may come from them besides the topology
    file's own directory.
    """
    return getattr(app.options, 'os_nvlink_gpus_file_dir', None) or ()


def load_topology(app, path):
    """Load the topology file ``path`` (:func:`loader.load`)."""
    return loader.load(path, gpus_file_dirs(app))


def progress(total, description, enabled=None):
    """A tqdm progress bar on a terminal (stderr), or None."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled or total <= 1:
        return None
    import tqdm
    return tqdm.tqdm(total=total, desc=description, unit='host',
                     file=sys.stderr, leave=False)


class InOrder(columns.FormattableColumn):
    """A list shown in its own order, not sorted like osc_lib's ListColumn.

    Keeps physical ids and addresses aligned; JSON and YAML get the list.
    """

    def human_readable(self):
        return ', '.join(str(item) for item in self._value)

    def machine_readable(self):
        return list(self._value)
