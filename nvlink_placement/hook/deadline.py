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
"""

import json
import os
import select
import signal
import time

from nvlink_placement import errors


class DeadlineExceeded(errors.NvlinkError):
    """The work did not finish in time and was stopped."""


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


def run(work, seconds, what):
    """``work(step)`` in a child process, for at most ``seconds``.

    :param work: callable taking ``step(text)`` (call it before each
        stage) and returning JSON-serializable data.
    :param what: what the work talks to, for messages (``'Fabric
        Manager'``).
    :returns: what ``work`` returned.
    :raises DeadlineExceeded: when it did not finish in time (the child
        is killed), naming the stage it was in.
    :raises NvlinkError: with the message of an error ``work`` raised, or
        when the child died without reporting.
    """
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
        data, finished = _read_until(read_fd, time.monotonic() + seconds)
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
        raise DeadlineExceeded('%s did not answer within %g s%s: stopped '
                               'waiting (fm_deadline)' % (what, seconds,
                                                          doing))
    end = reports[-1] if reports else {}
    if 'result' in end:
        return end['result']
    if 'error' in end:
        raise errors.NvlinkError(end['error'])
    raise errors.NvlinkError('the process talking to %s %s%s' % (
        what, 'was killed by signal %d' % os.WTERMSIG(status)
        if os.WIFSIGNALED(status) else
        'exited with status %d' % os.WEXITSTATUS(status), doing))
