"""Keep passwords, passcodes and tokens out of the ``-v`` / ``--debug`` log.

osc_lib logs what it was given through
``oslo_utils.strutils.mask_password``, which misses secrets:

- ``START with options: ...`` (INFO, ``osc_lib.shell``) is
  ``" ".join(argv)``: ``--os-password X`` and ``--os-token X`` stay, a
  value with a space (``--os-password 'PWone PWtwo'``) is cut at the space
  and ``--os-passcode X`` (TOTP) is not masked at all;
- ``options: Namespace(...)``, ``cloud cfg: {...}`` (DEBUG,
  ``osc_lib.shell``), ``auth_config_hook(): {...}``
  (``osc_lib.cli.client_config``) and ``Using parameters {...}``
  (``osc_lib.clientmanager``) show ``passcode='...'``, ``code``, and a
  number given as a password in ``clouds.yaml``.

The filter here, installed on those loggers when OSC imports our plugin
(before it logs), rewrites such records:

- the START line is rebuilt from the argument list itself (the running
  shell's ``command_options``, else ``sys.argv[1:]``, whichever osc_lib
  joined): the whole argument after a secret option is ``***``, and
  ``--opt=value`` becomes ``--opt=***``. Should neither match, every word
  after a secret option up to the next ``-``-word is masked;
- in the other lines the value of every secret key (``name='...'``,
  ``'name': '...'``, a number) becomes ``'***'``.

A secret option is one of keystoneauth1's ``secret=True`` options
(:data:`SECRET_OPTIONS`, abbreviations included: argparse accepts
``--os-passc``), or any option whose name says password, passcode, token,
secret or key. A secret key is one of their destinations
(:data:`SECRET_KEYS`) or one that ends in ``password``, ``passcode``,
``secret`` or ``token``.

Credentials inside a URL (``--os-endpoint http://user:secret@host``) are
masked in every log record of the process, whatever library logs it
(keystoneauth's ``REQ: curl ...`` lines, cliff's error line, a traceback):
:func:`install` wraps the log record factory with
:func:`nvlink_placement.redact.url_credentials`. Other libraries' debug
lines are otherwise theirs (keystoneauth does not log its token request
and logs tokens in headers as ``{SHA256}`` digests); see
``doc/source/operator-guide.rst``.
"""

import io
import logging
import re
import sys
import traceback

from oslo_utils import strutils

from nvlink_placement import redact

#: Loggers whose records may carry the secrets given to osc_lib.
LOGGERS = ('osc_lib.shell', 'osc_lib.cli.client_config',
           'osc_lib.clientmanager')
MASK = '***'
#: The command-line options of keystoneauth1's ``secret=True`` plugin
#: options (and their deprecated names), as osc_lib registers them
#: (``tests.unit.test_input_files`` checks every installed plugin).
SECRET_OPTIONS = ('--os-access-token', '--os-application_credential_secret',
                  '--os-authorization-code', '--os-client-secret',
                  '--os-code', '--os-oauth2_client_secret', '--os-passcode',
                  '--os-password', '--os-token')
#: Their destinations: the keys of osc_lib's namespace and auth dicts.
SECRET_KEYS = ('access_token', 'application_credential_secret',
               'client_secret', 'code', 'oauth2_client_secret', 'passcode',
               'password', 'token')
_START = 'START with options:'
_OPTION_WORDS = re.compile(r'password|passcode|token|secret|key',
                           re.IGNORECASE)
# --os*** is what mask_password leaves of some secret option names.
_OPTION = r'--os\*\*\*|--[A-Za-z0-9_-]+'
# In free text: an option, its value ("=v", or " v" unless v is an option;
# argparse takes "-5" as a value) and the words up to the next -word.
_SECRET_IN_TEXT = re.compile(
    r'(?<!\S)(%s)(?:(=)\S*|(\s+)(?!-\D)\S+)((?:\s+(?!-)\S+)*)' % _OPTION)
_KEY = r'(?:%s|[A-Za-z0-9_]*(?:password|passcode|secret|token))' % '|'.join(
    SECRET_KEYS)
# name='v' (a Namespace), 'name': 'v' (a dict), and bare values (numbers).
_SECRET_IN_REPR = re.compile(
    r'''(?<![\w-])((['"]?)%s\2\s*[:=]\s*)'''
    r'''([bBrRuU]{0,2}(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|'''
    r'''(?!None\b|\*\*\*)[^\s,'"(){}\[\]]+)''' % _KEY, re.IGNORECASE)
_MIN_PREFIX = len('--os-') + 1


def _normal(option):
    return option.replace('_', '-').lower()


_SECRET_PREFIXES = tuple(_normal(o) for o in SECRET_OPTIONS)


def is_secret_option(option):
    """True when the value of ``option`` (``--name``) is a secret.

    Also an abbreviation argparse may take for a secret option
    (``--os-passc``), and ``--os***``.
    """
    if option == '--os***':
        return True
    if not option.startswith('--') or option == '--':
        return False
    if _OPTION_WORDS.search(option):
        return True
    name = _normal(option)
    return len(name) >= _MIN_PREFIX and any(
        full.startswith(name) for full in _SECRET_PREFIXES)


def mask_argv(argv):
    """``argv`` with the value of each secret option replaced by ``***``.

    The whole argument after ``--opt`` goes, and the part after ``=`` of
    ``--opt=value``.
    """
    out, hide = [], False
    for arg in map(redact.url_credentials, argv):
        if hide:
            out.append(MASK)
            hide = False
        else:
            option, equals, _ = arg.partition('=')
            if is_secret_option(option):
                if equals:
                    arg = option + equals + MASK
                else:
                    hide = True
            out.append(arg)
    return out


def mask(text):
    """``text`` with the secret values it shows replaced by ``***``.

    For text without the argument list: after a secret option
    (:func:`is_secret_option`) every word up to the next one that starts
    with ``-`` is masked (a value may hold spaces), and the value of each
    secret key of a ``Namespace`` or ``dict`` repr.
    """
    def option(match):
        if not is_secret_option(match.group(1)):
            return match.group(0)
        return match.group(1) + (match.group(2) or match.group(3)) + MASK
    text = _SECRET_IN_TEXT.sub(option, redact.url_credentials(text))
    return _SECRET_IN_REPR.sub(lambda m: m.group(1) + "'%s'" % MASK, text)


def _candidates():
    """Argument lists osc_lib may have joined: the shell's, then ours.

    The shell is the ``self`` of a calling frame (osc_lib logs the line
    from ``OpenStackShell.initialize_app``).
    """
    try:
        from osc_lib import shell
        frame = sys._getframe(1)
        while frame is not None:
            owner = frame.f_locals.get('self')
            if isinstance(owner, shell.OpenStackShell):
                yield list(owner.command_options or [])
            frame = frame.f_back
    except Exception:   # never let the log line fail the command
        pass
    yield sys.argv[1:]


def mask_start(logged):
    """The START line's ``logged`` argument list, masked.

    Rebuilt from the list osc_lib joined (``mask_password`` of the joined
    list gives ``logged``), else :func:`mask` of ``logged``.
    """
    for argv in _candidates():
        if all(isinstance(a, str) for a in argv) and strutils.mask_password(
                ' '.join(argv)) == logged:
            return ' '.join(mask_argv(argv))
    return mask(logged)


class SecretMask(logging.Filter):
    """A filter that masks the secrets in each record's message."""

    def filter(self, record):
        args = record.args
        if (isinstance(record.msg, str) and record.msg.startswith(_START) and
                isinstance(args, tuple) and len(args) == 1 and
                isinstance(args[0], str)):
            record.args = (mask_start(args[0]),)
            return True
        message = record.getMessage()
        masked = mask(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def _masked(value):
    """``value``, or its text with URL credentials masked when it has any."""
    text = value if isinstance(value, str) else None
    if text is None and isinstance(value, BaseException):
        text = str(value)
    if text is None:
        return value
    masked = redact.url_credentials(text)
    return value if masked == text else masked


def _mask_record(record):
    """Mask URL credentials in a record's message, arguments, traceback."""
    record.msg = _masked(record.msg)
    if isinstance(record.args, tuple):
        record.args = tuple(_masked(a) for a in record.args)
    elif isinstance(record.args, dict):
        record.args = {k: _masked(v) for k, v in record.args.items()}
    if record.exc_info and record.exc_info[0] is not None:
        # What logging.Formatter.formatException would write, masked: the
        # formatter uses exc_text when it is set.
        out = io.StringIO()
        traceback.print_exception(*record.exc_info, file=out)
        record.exc_text = redact.url_credentials(out.getvalue().rstrip('\n'))
    return record


class _MaskingFactory(object):
    """A log record factory that masks URL credentials (:func:`install`)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped

    def __call__(self, *args, **kwargs):
        return _mask_record(self.wrapped(*args, **kwargs))


def install(names=LOGGERS):
    """Add one :class:`SecretMask` to each logger of ``names`` (idempotent).

    Also wraps the process's log record factory, once, so that no record
    shows credentials inside a URL.

    :param names: a logger name or a list of them.
    """
    for name in [names] if isinstance(names, str) else names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, SecretMask) for f in logger.filters):
            logger.addFilter(SecretMask())
    factory = logging.getLogRecordFactory()
    if not isinstance(factory, _MaskingFactory):
        logging.setLogRecordFactory(_MaskingFactory(factory))
