"""Replace a small text file atomically, for readers that poll it.

The Prometheus node exporter reads its textfile directory at every scrape;
a file written in place can be read half-written. :func:`write` writes a
temporary file in the same directory, flushes it to disk, and renames it
over the target (atomic on POSIX within one file system). Standard library
only.

Why not a library: the standard library has no atomic replace of a file
(``tempfile`` plus ``os.replace`` is the recipe used here); the
``atomicwrites`` package is archived by its author, ``oslo.utils``'
``fileutils`` writes temporary files but does not replace a target, and
``oslo.concurrency`` locks but does not write. None takes the ``stop``
event (an interrupted command leaves the old file as it was) or checks a
target is writable before any work (:func:`check_writable`).
"""

import os
import tempfile

from nvlink_placement import errors

#: Largest earlier file :func:`read` looks at.
MAX_BYTES = 16 * 1024 * 1024


def write(path, text, mode=0o644, stop=None):
    """Replace ``path`` with ``text`` atomically.

    :param stop: a ``threading.Event``; when it is set before the rename
        (SIGINT, SIGTERM), the temporary file is removed and ``path`` is
        left as it was.
    :raises NvlinkError: naming the file, when it cannot be written (the
        old file, if any, is left as it was).
    :raises Interrupted: ``stop`` was set.
    """
    directory = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(
            dir=directory, prefix='.%s.' % os.path.basename(path),
            suffix='.tmp')
        with os.fdopen(fd, 'w', encoding='utf-8') as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if stop is not None and stop.is_set():
            raise errors.Interrupted()
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise errors.NvlinkError('cannot write %s: %s'
                                 % (path, exc.strerror or exc))
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def check_writable(path):
    """Make sure :func:`write` can replace ``path``, before any work.

    The directory must exist and take a new file (tried with an empty
    temporary file, removed at once); ``path`` must not be a directory.

    :raises NvlinkError: naming the file and what is wrong.
    """
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise errors.NvlinkError('cannot write %s: directory %s does not '
                                 'exist' % (path, directory))
    if os.path.isdir(path):
        raise errors.NvlinkError('cannot write %s: it is a directory'
                                 % path)
    try:
        fd, tmp = tempfile.mkstemp(
            dir=directory, prefix='.%s.' % os.path.basename(path),
            suffix='.tmp')
    except OSError as exc:
        raise errors.NvlinkError('cannot write %s: %s' % (
            path, exc.strerror or exc))
    os.close(fd)
    os.unlink(tmp)


def read(path):
    """The text of ``path``, or None when it does not exist or is unreadable.

    Reads at most :data:`MAX_BYTES`.
    """
    try:
        with open(path, encoding='utf-8', errors='replace') as f:
            return f.read(MAX_BYTES)
    except OSError:
        return None
