"""How a command reports a usage error, and prints its ``--help``.

Usage errors, argparse's (an unknown or missing option, a bad value) and
ours (:class:`errors.UsageError`: options that do not go together), print
the usage and exit :data:`USAGE_ERROR` (3), with hints for a mistyped
option or a stray file argument. ``--help`` prints the command's
reStructuredText docstring as plain text (:func:`helptext.plain`).
"""

import argparse
import difflib
import os
import sys

from cliff import _argparse as cliff_argparse

from nvlink_placement import errors
from nvlink_placement import helptext


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


class UsageErrors(object):
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


class PlainHelp(object):
    """What every command of the plugin shares: plain-text ``--help``."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.formatter_class = _PlainHelpFormatter
        return parser
