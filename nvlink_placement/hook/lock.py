"""The host-local lock that serializes partition hooks.

libvirt runs a hook for each guest it starts or stops, and starts guests
in parallel; two hooks must not read the partition table and act on it
at the same time. The lock is ``flock(2)`` on a file: the kernel drops it
when the holder exits, so a killed hook leaves no stale lock, and two
open file descriptions exclude each other even inside one process
(``flock`` locks belong to the open file description, unlike ``fcntl``
record locks, which belong to the process).
"""

import errno
import fcntl
import os
import stat
import time

from nvlink_placement import errors
from nvlink_placement.fabric import trust

LOCK_FILE = 'hook.lock'
POLL_SECONDS = 0.05


class HostLock:
    """``with HostLock(directory, timeout):`` holds ``<directory>/hook.lock``.

    The hook runs as root, so neither the directory nor the file may be
    a symbolic link or belong to anyone else: a link planted there would
    make root create or lock a file of the attacker's choosing. The
    directory is opened without following a link and checked like every
    file the hook trusts (:mod:`nvlink_placement.fabric.trust`, the path
    above it included); the file is opened relative to it with
    ``O_NOFOLLOW``, and must be a regular file owned by root and writable
    by root only.

    :param directory: created (mode 0755) when missing.
    :param timeout: seconds to wait for another holder before giving up.
    :param uids: trusted owners (default: :func:`trust.owners`).
    :param deadline: a :class:`deadline.Deadline` (the hook's overall
        bound) the wait never goes past, whatever ``timeout`` says.
    :raises NvlinkError: on entry, when the directory or file cannot be
        used or is not trusted, or the lock is still held after
        ``timeout`` seconds or at ``deadline``.
    :ivar waited: seconds spent waiting for the lock (after entry).
    """

    def __init__(self, directory, timeout, uids=None, deadline=None):
        self.path = os.path.join(directory, LOCK_FILE)
        self._directory = directory
        self._timeout = timeout
        self._uids = uids
        self._deadline = deadline
        self._fd = None
        self.waited = 0.0

    def _open(self):
        try:
            os.makedirs(self._directory, mode=0o755, exist_ok=True)
        except OSError as exc:
            raise errors.NvlinkError('cannot create the lock directory %s: '
                                     '%s' % (self._directory,
                                             exc.strerror or exc))
        trust.check(self._directory, 'lock directory', self._uids)
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            directory = os.open(self._directory, flags)
        except OSError as exc:
            raise errors.NvlinkError(
                'refusing the lock directory %s: %s' % (
                    self._directory, 'it is a symbolic link'
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR) else
                    exc.strerror or exc))
        try:
            return os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW |
                           os.O_NOCTTY | os.O_CLOEXEC, 0o644,
                           dir_fd=directory)
        except OSError as exc:
            raise errors.NvlinkError('cannot open the lock file %s: %s' % (
                self.path, 'it is a symbolic link' if exc.errno == errno.ELOOP
                else exc.strerror or exc))
        finally:
            os.close(directory)

    def _check(self, fd):
        status = os.fstat(fd)
        why = ('not a regular file' if not stat.S_ISREG(status.st_mode) else
               trust.problem(status, self._uids or trust.owners()))
        if why:
            os.close(fd)
            raise trust.Untrusted('refusing the lock file %s: it is %s'
                                  % (self.path, why))

    def __enter__(self):
        fd = self._open()
        self._check(fd)
        began = time.monotonic()
        stop = began + self._timeout
        by_deadline = (self._deadline is not None and
                       self._deadline.at < stop)
        if by_deadline:
            stop = self._deadline.at
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    os.close(fd)
                    raise errors.NvlinkError('cannot lock %s: %s'
                                             % (self.path, exc.strerror))
            now = time.monotonic()
            if now >= stop:
                os.close(fd)
                raise errors.NvlinkError(
                    'another nvlink-partition-hook %s (is one stuck talking '
                    'to Fabric Manager?)' % (
                        'held %s until fm_deadline (%g s) passed' % (
                            self.path, self._deadline.seconds)
                        if by_deadline else
                        'has held %s for more than %g s' % (
                            self.path, self._timeout)))
            time.sleep(min(POLL_SECONDS, stop - now))
        self.waited = time.monotonic() - began
        self._fd = fd
        return self

    def __exit__(self, *exc_info):
        os.close(self._fd)  # closing the last descriptor releases the lock
        self._fd = None
