"""Which files the root hook may trust: owner and mode checks.

The hook runs as root in libvirt's VM start path. A file it reads or
loads (its configuration, the mapping file, ``fm_library``) steers what
it does as root, so, as sudo does for sudoers and sshd for
authorized_keys, it refuses a file that someone else could have written:
the file and every directory above it must be owned by root (or by the
user running the hook, when that is not root, as in tests) and not
writable by group or others. A directory writable by all with the sticky
bit (``/tmp``) passes: only the owner of an entry may rename or remove
it there, and the entry itself is checked next. Symbolic links are
followed, and the directories of both the path as given and the path
they lead to are checked.
"""

import os
import stat

from nvlink_placement import errors


class Untrusted(errors.NvlinkError):
    """A file or directory others could have written."""


def owners():
    """The trusted owners: root and the user running the hook."""
    return frozenset((0, os.geteuid()))


def problem(status, uids):
    """Why ``status`` (an ``os.stat_result``) is not trusted, or None."""
    if status.st_uid not in uids:
        return 'owned by uid %d, not by root' % status.st_uid
    if stat.S_ISLNK(status.st_mode):
        return None   # its mode means nothing; its directory counts
    writable = status.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if writable and not (stat.S_ISDIR(status.st_mode) and
                         status.st_mode & stat.S_ISVTX):
        return 'writable by %s (mode %04o)' % (
            'group and others' if writable == stat.S_IWGRP | stat.S_IWOTH
            else 'group' if writable == stat.S_IWGRP else 'others',
            stat.S_IMODE(status.st_mode))
    return None


def _ancestors(path):
    """``path`` and each directory above it, from ``/`` down."""
    parts = []
    while True:
        parts.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            return reversed(parts)
        path = parent


def check(path, what, uids=None):
    """Refuse ``path`` unless it and its directories are trusted.

    :param what: what the file is, for the message (``'mapping file'``).
    :param uids: trusted owners (default: :func:`owners`).
    :raises Untrusted: ``refusing <what> <path>: <dir> is owned by uid
        1000, not by root``; the file not existing is left to its reader.
    """
    uids = owners() if uids is None else uids
    given = os.path.abspath(path)
    for name in dict.fromkeys(list(_ancestors(given)) +
                              list(_ancestors(os.path.realpath(given)))):
        try:
            status = os.lstat(name)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise Untrusted('refusing %s %s: cannot check %s: %s'
                            % (what, path, name, exc.strerror or exc))
        why = problem(status, uids)
        if why:
            raise Untrusted('refusing %s %s: %s is %s (it must be root\'s '
                            'and writable by root only)'
                            % (what, path, 'it' if name == given else name,
                               why))
