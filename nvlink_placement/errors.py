"""Exceptions shared by every layer.

Every error a user can cause is an :class:`NvlinkError` (or a subclass): the
CLI prints its message and exits 1, without a traceback. Messages name the
file, key path or resource provider involved.
"""

from nvlink_placement import redact

#: Exit status of a usage error (unknown or missing option, bad option
#: value, options that do not go together), for every command and console
#: script: Nagios' UNKNOWN. 0 is success (in sync), 1 an error, 2 drift
#: (``check``).
USAGE_ERROR = 3


class NvlinkError(Exception):
    """A user-facing error with a complete, self-explaining message.

    Credentials inside a URL that the message names are masked
    (:func:`redact.url_credentials`), in the message and in tracebacks.
    """

    def __str__(self):
        return redact.url_credentials(super().__str__())


class UsageError(NvlinkError):
    """Options that do not go together, or a bad option value.

    Like an argparse error, the command prints its usage and exits
    :data:`USAGE_ERROR`, not 1.
    """


class TopologyError(NvlinkError):
    """A topology file (or fragment) is invalid.

    :param problems: list of ``(location, message)`` tuples, where location is
        ``"<file>: <key path>"``.
    """

    def __init__(self, problems):
        self.problems = list(problems)
        lines = ['%s: %s' % (loc, msg) if loc else msg
                 for loc, msg in self.problems]
        super().__init__('\n'.join(lines))


class PlanError(NvlinkError):
    """The desired tree cannot be reached safely; nothing was written.

    :param problems: list of messages, one per problem found.
    :param note: what happened, after "the plan is invalid" (none for a
        command that never writes).
    """

    def __init__(self, problems, note='nothing was written'):
        self.problems = list(problems)
        self.note = note
        super().__init__(
            'the plan is invalid%s:\n' % ('; ' + note if note else '') +
            '\n'.join('  - %s' % p for p in self.problems))


class PlacementError(NvlinkError):
    """Placement answered with an error we do not recover from.

    :param status: HTTP status code (int) or None for transport errors.
    :param code: Placement error code (``errors[].code``, microversion 1.23+)
        such as ``placement.concurrent_update``, or None.
    """

    def __init__(self, message, status=None, code=None):
        self.status = status
        self.code = code
        super().__init__(message)


class Interrupted(Exception):
    """A stop was requested: SIGINT or SIGTERM.

    Raised instead of sending the next request or making the next write
    (:mod:`nvlink_placement.interrupt`).

    Not an :class:`NvlinkError`: no handler of errors takes it for a
    failure of one host or one request; the command that installed the
    stop says how far it got and exits 130 or 143.
    """
