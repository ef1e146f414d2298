"""Reading the files an operator names, and locating errors in them."""

import json

from nvlink_placement import errors


def read_text(path, what):
    """Return the text of ``path``.

    :param what: what the file is, for the message (``'mapping file'``).
    :raises NvlinkError: naming the file when it cannot be read.
    """
    try:
        with open(path, encoding='utf-8') as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise errors.NvlinkError('cannot read %s %s: %s'
                                 % (what, path,
                                    getattr(exc, 'strerror', None) or exc))


def line_error(source, lineno, message):
    """Return an NvlinkError located at ``<source>: line <lineno>``."""
    return errors.NvlinkError('%s: line %d: %s' % (source, lineno, message))


def parse_json(text, source, **options):
    """``json.loads(text, **options)`` with errors naming file and line.

    :raises NvlinkError: ``<source>: line L column C: invalid JSON: ...``.
    """
    try:
        return json.loads(text, **options)
    except ValueError as exc:
        raise errors.NvlinkError('%s: line %d column %d: invalid JSON: %s'
                                 % (source, exc.lineno, exc.colno, exc.msg))


def seconds(text):
    """A positive number of seconds (float) from ``text``.

    :raises ValueError: for anything else.
    """
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise ValueError('expected a number of seconds above 0, got %r'
                         % text)
    return value
