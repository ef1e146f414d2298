"""Reading the files an operator names on the command line."""

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
