"""Reading the files an operator names, and locating errors in them."""

from nvlink_placement import documents
from nvlink_placement import errors


def read_text(path, what):
    """Return the text of ``path`` (see :func:`documents.read_text`).

    :param what: what the file is, for the message (``'mapping file'``).
    :raises NvlinkError: naming the file when it cannot be read, is not a
        regular file, is too large or is not UTF-8.
    """
    try:
        return documents.read_text(path)
    except documents.DocumentError as exc:
        raise errors.NvlinkError('cannot read %s %s' % (what, exc))


def line_error(source, lineno, message):
    """Return an NvlinkError located at ``<source>: line <lineno>``.

    ``message`` is cut to 500 characters: it may quote the line.
    """
    return errors.NvlinkError('%s: line %d: %s' % (
        source, lineno, documents.clip(str(message), 500)))


def parse_json(text, source):
    """:func:`documents.parse_json`: errors name the file and the line.

    :raises NvlinkError: ``<source>: line L column C: invalid JSON: ...``,
        or the key path of a repeated key, a nesting too deep or a number
        too long.
    """
    return documents.parse_json(text, source)


# The longest wait any option or setting may ask for.
MAX_SECONDS = 3600


def seconds(text):
    """A number of seconds (float) above 0, at most :data:`MAX_SECONDS`.

    :raises ValueError: for anything else (also ``inf`` and ``nan``).
    """
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= MAX_SECONDS:
        raise ValueError('expected a number of seconds above 0 and at most '
                         '%d, got %s' % (MAX_SECONDS, documents.short(text)))
    return value
