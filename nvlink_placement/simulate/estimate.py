"""How much CPU time a simulation will take, said before it starts.

Almost all of a run's time is its embedded Placement answering each boot's
``GET /allocation_candidates``, which grows with the hosts it lists. The
cost per event and host was measured on one core of the development
machine (``doc/source/performance.rst``): a run costs about
``START_S + events * (EVENT_S + hosts * EVENT_HOST_S)`` CPU seconds.
"""

import logging

LOG = logging.getLogger(__name__)

#: CPU seconds to start one run's process and Placement.
START_S = 4.0
#: CPU seconds per event, and per event and simulated host.
EVENT_S = 0.02
EVENT_HOST_S = 0.003
#: Above this many CPU seconds in all, :func:`warn` says so.
WARN_S = 3600.0


def cpu_seconds(events, runs, hosts):
    """Estimated CPU seconds of ``runs`` runs of ``events`` events."""
    return runs * (START_S + events * (EVENT_S + hosts * EVENT_HOST_S))


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
