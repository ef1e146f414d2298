"""Run work that may hang in a child process, and give up at a deadline.

A libnvfm call is C code entered through ctypes: nothing interrupts it,
so a Fabric Manager that never answers would hold the VM start for as
long as it pleases, whatever ``fm_timeout`` says. A worker thread with a
timeout does not help: the stuck thread stays inside the library, and
the process then has to exit around it (the library's destructors run
while it is still inside). So the work runs in a forked child: the hook
waits for it at most until the deadline, then kills it (SIGKILL) and
reaps it. libnvfm is never loaded into the hook process itself, and a
crash in it (a signal) is reported like any other failure.

The child reports over a pipe, one JSON object per line: ``{"step":
"..."}`` before each stage (so a timeout can say what it was waiting
for), then ``{"result": ...}`` or ``{"error": "..."}``.

The hook has one bound on how long it holds up a VM start: a
:class:`Deadline` set when it starts (``fm_deadline`` seconds), which
the wait for the host lock (:mod:`nvlink_placement.hook.lock`) and then
the child share.
"""

import collections

import json
import os
import select
import signal
import time

from nvlink_placement import errors


# Under this, time spent before the work (the lock wait) is not named.
NOTABLE_WAIT = 0.1


class DeadlineExceeded(errors.NvlinkError):
    """The work did not finish in time and was stopped."""


class Deadline(collections.namedtuple('Deadline', 'at seconds')):
    """A point in time (``time.monotonic()``) the hook must not pass.

    :ivar at: the monotonic clock value; :ivar seconds: the setting it
        comes from (``fm_deadline``), for messages.
    """

    __slots__ = ()

    @classmethod
    def start(cls, seconds, started=None):
        """``seconds`` from ``started`` (``time.monotonic()``; None: now)."""
        return cls((time.monotonic() if started is None else started) +
                   seconds, seconds)

    def left(self):
        """Seconds until :attr:`at`, 0 once it has passed."""
        return max(0.0, self.at - time.monotonic())


def _child(work, out):
    def step(text):
        out.write(json.dumps({'step': text}) + '\n')
        out.flush()
    try:
        report = {'result': work(step)}
    except errors.NvlinkError as exc:
        report = {'error': str(exc)}
    except BaseException as exc:  # report it: never a traceback in libvirt
        report = {'error': 'unexpected %s: %s' % (type(exc).__name__, exc)}
    out.write(json.dumps(report) + '\n')
    out.flush()


def _read_until(fd, deadline):
    """Bytes from ``fd`` up to EOF, or (data, False) at the deadline."""
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return b''.join(chunks), False
        chunk = os.read(fd, 65536)
        if not chunk:
            return b''.join(chunks), True
        chunks.append(chunk)


def _too_late(what, seconds, left, waited, doing):
    """The error for work stopped (``left`` > 0) or never started."""
    after = (' after %.1f s waiting for another nvlink-partition-hook'
             % waited if waited >= NOTABLE_WAIT else '')
    if left <= 0:
        return DeadlineExceeded('fm_deadline (%g s) passed%s, before %s '
                                'could be asked' % (seconds, after, what))
    if not after:
        return DeadlineExceeded('%s did not answer within %g s%s: stopped '
                                'waiting (fm_deadline)' % (what, seconds,
                                                           doing))
    return DeadlineExceeded(
        '%s did not answer%s in the %.1f s left of fm_deadline (%g s)%s: '
        'stopped waiting' % (what, doing, left, seconds, after))


def run(work, seconds, what, until=None, waited=0.0):
    """``work(step)`` in a child process, for at most ``seconds``.

    :param work: callable taking ``step(text)`` (call it before each
        stage) and returning JSON-serializable data.
    :param seconds: the time allowed (``fm_deadline``).
    :param what: what the work talks to, for messages (``'Fabric
        Manager'``).
    :param until: a :class:`Deadline` that started earlier (the hook's):
        the work gets only what is left of it. None: ``seconds`` from now.
    :param waited: seconds of ``until`` spent waiting for the host lock,
        for messages.
    :returns: what ``work`` returned.
    :raises DeadlineExceeded: when it did not finish in time (the child
        is killed, or never started when no time is left), naming the
        stage it was in.
    :raises NvlinkError: with the message of an error ``work`` raised, or
        when the child died without reporting.
    """
    until = Deadline.start(seconds) if until is None else until
    left = until.left()
    if left <= 0:
        raise _too_late(what, seconds, 0.0, waited, '')
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: do the work, report, never return
        code = 0
        try:
            os.close(read_fd)
            with os.fdopen(write_fd, 'w') as out:
                _child(work, out)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    data, finished = b'', False
    try:
        data, finished = _read_until(read_fd, until.at)
    finally:  # whatever happened here, the child does not outlive us
        os.close(read_fd)
        if not finished:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    reports = []
    for line in data.decode('utf-8', 'replace').splitlines():
        try:
            report = json.loads(line)
        except ValueError:  # cut short by the kill
            continue
        if isinstance(report, dict):
            reports.append(report)
    steps = [r['step'] for r in reports if 'step' in r]
    doing = ' while %s' % steps[-1] if steps else ''
    if not finished:
        raise _too_late(what, seconds, left, waited, doing)
    end = reports[-1] if reports else {}
    if 'result' in end:
        return end['result']
    if 'error' in end:
        raise errors.NvlinkError(end['error'])
    raise errors.NvlinkError('the process talking to %s %s%s' % (
        what, 'was killed by signal %d' % os.WTERMSIG(status)
        if os.WIFSIGNALED(status) else
        'exited with status %d' % os.WEXITSTATUS(status), doing))
