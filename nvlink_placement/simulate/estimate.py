"""How much CPU time a simulation will take, said before it starts.

Almost all of a run's time is its embedded Placement answering each boot's
``GET /allocation_candidates``, which grows with the hosts it lists, and
loading the starting state. From the measurements in
``doc/source/performance.rst`` (2-core development machine: 100 HGX H100
hosts, 0.243 CPU s per event and about 25 s to start; 2 hosts, about 0.05
CPU s per event and 4 s to start) a run costs about
``START_S + hosts * START_HOST_S + events * (EVENT_S + hosts *
EVENT_HOST_S)`` CPU seconds: an estimate to warn with, not a promise.
"""

import logging

LOG = logging.getLogger(__name__)

#: CPU seconds to start one run's process and Placement, and per host.
START_S = 4.0
START_HOST_S = 0.2
#: CPU seconds per event, and per event and simulated host.
EVENT_S = 0.05
EVENT_HOST_S = 0.002
#: Above this many CPU seconds in all, :func:`warn` says so.
WARN_S = 3600.0


def cpu_seconds(events, runs, hosts):
    """Estimated CPU seconds of ``runs`` runs of ``events`` events."""
    return runs * (START_S + hosts * START_HOST_S + events * (
        EVENT_S + hosts * EVENT_HOST_S))


def describe(seconds):
    """``'40 CPU minutes'``, ``'3.2 CPU hours'``."""
    if seconds < 3600:
        return '%d CPU minutes' % max(1, round(seconds / 60.0))
    return '%.1f CPU hours' % (seconds / 3600.0)


def warn(workload, runs, hosts):
    """Log a warning when the run is estimated above :data:`WARN_S`.

    :param runs: layouts times seeds.
    :returns: the estimate, CPU seconds.
    """
    seconds = cpu_seconds(workload.events, runs, hosts)
    if seconds > WARN_S:
        LOG.warning(
            'simulate: %d events x %d runs (layouts x seeds) on %d hosts '
            'take about %s (spread over the CPUs); fewer events (%s: '
            'events) or --seeds make it shorter', workload.events, runs,
            hosts, describe(seconds), workload.source)
    return seconds
