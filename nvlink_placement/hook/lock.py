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
import time

from nvlink_placement import errors

LOCK_FILE = 'hook.lock'
POLL_SECONDS = 0.05


class HostLock:
    """``with HostLock(directory, timeout):`` holds ``<directory>/hook.lock``.

    :param directory: created (mode 0755) when missing.
    :param timeout: seconds to wait for another holder before giving up.
    :raises NvlinkError: on entry, when the file cannot be opened or the
        lock is still held after ``timeout`` seconds.
    """

    def __init__(self, directory, timeout):
        self.path = os.path.join(directory, LOCK_FILE)
        self._directory = directory
        self._timeout = timeout
        self._fd = None

    def __enter__(self):
        try:
            os.makedirs(self._directory, mode=0o755, exist_ok=True)
        except OSError as exc:
            raise errors.NvlinkError('cannot create the lock directory %s: '
                                     '%s' % (self._directory,
                                             exc.strerror or exc))
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                         0o644)
        except OSError as exc:
            raise errors.NvlinkError('cannot open the lock file %s: %s'
                                     % (self.path, exc.strerror or exc))
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    os.close(fd)
                    raise errors.NvlinkError('cannot lock %s: %s'
                                             % (self.path, exc.strerror))
            if time.monotonic() >= deadline:
                os.close(fd)
                raise errors.NvlinkError(
                    'another nvlink-partition-hook has held %s for more than '
                    '%g s (is one stuck talking to Fabric Manager?)'
                    % (self.path, self._timeout))
            time.sleep(POLL_SECONDS)
        self._fd = fd
        return self

    def __exit__(self, *exc_info):
        os.close(self._fd)  # closing the last descriptor releases the lock
        self._fd = None
