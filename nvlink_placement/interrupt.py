"""SIGINT and SIGTERM during a command that writes: stop between writes.

A command that writes runs inside :func:`handled`. The first SIGINT
(Ctrl-C) or SIGTERM sets :attr:`Stop.event`; from then on the Placement
client sends no request (:class:`nvlink_placement.errors.Interrupted` is
raised instead) and the writers stop before their next write. The command
then says what was done and what was not, and exits
:attr:`Stop.exit_code`: 130 for SIGINT, 143 for SIGTERM (128 + the signal
number, what a shell reports for a process the signal ended).

The requests run in a daemon thread (:meth:`Stop.call`) while the main
thread waits for it, so a signal is acted on at once even while a request
hangs: the work gets :data:`GRACE` seconds to reach its next check (an
answer in flight is then counted); a request still unanswered after that
is abandoned, and :meth:`Stop.exit` ends the process without waiting for
it (a thread pool blocked in that request would hold the interpreter's
exit until the request timeout).
"""

import contextlib
import logging
import os
import signal
import sys
import threading

from nvlink_placement import errors

SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: Seconds the work may take, after the signal, to reach its next check.
GRACE = 2.0
#: Seconds between two looks at the stop while the main thread waits.
POLL = 0.1


class Stop(object):
    """A stop request: set by the first SIGINT or SIGTERM.

    :ivar event: ``threading.Event``, set once a stop is requested; the
        Placement client and the writers check it.
    :ivar signum: the first signal received (int), or None.
    :ivar abandoned: True when :meth:`call` returned with its work still
        running (a request in flight that did not end within
        :data:`GRACE` seconds).
    """

    def __init__(self):
        self.event = threading.Event()
        self.signum = None
        self.abandoned = False

    def requested(self):
        return self.event.is_set()

    @property
    def name(self):
        """``SIGINT`` or ``SIGTERM``."""
        return signal.Signals(self.signum).name

    @property
    def exit_code(self):
        """130 (SIGINT) or 143 (SIGTERM)."""
        return 128 + self.signum

    def handle(self, signum, frame):
        """The signal handler: request the stop, nothing else."""
        if self.signum is None:
            self.signum = signum
        self.event.set()

    def call(self, func, *args, **kwargs):
        """``func(*args, **kwargs)`` in a daemon thread, waited for here.

        :returns: what ``func`` returns.
        :raises: what ``func`` raises; :class:`errors.Interrupted` when a
            stop was requested and ``func`` did not end within
            :data:`GRACE` seconds of it (:attr:`abandoned` is then True).
        """
        outcome = {}
        done = threading.Event()

        def target():
            try:
                outcome['result'] = func(*args, **kwargs)
            except BaseException as exc:
                outcome['error'] = exc
            finally:
                done.set()
        threading.Thread(target=target, name='nvlink-work',
                         daemon=True).start()
        while not done.wait(POLL):
            if self.event.is_set():
                if not done.wait(GRACE):
                    self.abandoned = True
                    raise errors.Interrupted()
                break
        if 'error' in outcome:
            raise outcome['error']
        return outcome['result']

    def exit(self):
        """End the process now when :meth:`call` abandoned its work.

        Flushes standard output, standard error and the log handlers,
        then ``os._exit(exit_code)``: the abandoned request is not waited
        for. Returns when nothing was abandoned.
        """
        if not self.abandoned:
            return
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        logging.shutdown()
        os._exit(self.exit_code)


@contextlib.contextmanager
def handled():
    """Yield a :class:`Stop` that SIGINT and SIGTERM set.

    The earlier handlers are put back on leaving. Outside the main thread
    (where no handler can be installed) the stop is never set.
    """
    stop = Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {signum: signal.signal(signum, stop.handle)
                for signum in SIGNALS}
    try:
        yield stop
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
