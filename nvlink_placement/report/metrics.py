"""``check`` results as Prometheus metrics (node-exporter textfile format).

For the textfile collector of the Prometheus node exporter
(``--collector.textfile.directory``): plain text exposition format 0.0.4,
every metric a gauge named ``nvlink_placement_...`` with its HELP and TYPE
lines. Pure: :func:`render` makes the text, :func:`last_success` reads
the timestamp back from an earlier file.

Metrics (labels in braces):

``nvlink_placement_check_success``
    1 when the check ran to the end (in sync or drift), 0 on an error.
``nvlink_placement_check_last_success_timestamp_seconds``
    Unix time of the end of the last check that succeeded; an error keeps
    the earlier value (absent until a check succeeded).
``nvlink_placement_check_duration_seconds``
    How long this check took.
``nvlink_placement_hosts_checked``, ``nvlink_placement_hosts_in_sync``
    Compute hosts checked, and those of them without drift.
``nvlink_placement_hosts_not_in_topology``
    With ``--all``: flat compute nodes with Nova PCI providers that the
    topology does not list (not drift).
``nvlink_placement_drift{kind}``
    Drift found per kind, every kind present (0 when none): one per check
    row, but a missing group counts once (its two rows, create and set
    traits, are one group to add).
``nvlink_placement_host_drift{host, kind}``
    The same per host and kind; only the pairs with drift (``host`` is
    empty for the missing custom traits, which belong to no host).

Capacity, from :class:`nvlink_placement.report.capacity.Cloud` (labels
``resource_class`` and ``size``, the instance size in GPUs):
``nvlink_placement_gpus``, ``nvlink_placement_free_gpus``,
``nvlink_placement_free_domains``, ``nvlink_placement_stranded_gpus``,
``nvlink_placement_split_instances``.

Cardinality: a ``host`` label only on series of a host with drift
(``host_drift``); every other series is per kind, resource class or
size, so their number does not grow with the hosts. :data:`METRICS`
lists every metric with its labels and help text (the documentation's
metric reference is made from it).
"""

import re

from nvlink_placement.plan import actions as act

PREFIX = 'nvlink_placement_'

#: Every drift kind ``check`` reports, in the order the docs list them.
KINDS = (act.MISSING_GROUP, act.MISSING_TRAIT, act.WRONG_PARENT,
         act.UNEXPECTED_GROUP, act.MISSING_RESERVATION,
         act.STALE_RESERVATION, act.UNKNOWN_GPU, act.MEMBER_TRAITS,
         act.EXCLUDED_GPU, act.SPLIT_ALLOCATION)

LAST_SUCCESS = PREFIX + 'check_last_success_timestamp_seconds'

#: Every metric: name (without :data:`PREFIX`) -> ``(labels, help)``. All
#: are gauges.
METRICS = {
    'check_success': ((), '1 if the last nvlink check ran to the end (in '
                          'sync or drift), 0 if it failed.'),
    'check_last_success_timestamp_seconds': (
        (), 'Unix time at which the last successful nvlink check ended.'),
    'check_duration_seconds': ((), 'Duration of the last nvlink check in '
                                   'seconds.'),
    'hosts_checked': ((), 'Compute hosts the last nvlink check compared.'),
    'hosts_in_sync': ((), 'Compute hosts without drift in the last nvlink '
                          'check.'),
    'hosts_not_in_topology': ((), 'Flat compute nodes with Nova PCI '
                                  'providers that the topology does not '
                                  'list (check --all).'),
    'drift': (('kind',), 'Drift found by the last nvlink check, per kind (a '
                         'missing group counts once).'),
    'host_drift': (('host', 'kind'), 'Drift found by the last nvlink check, '
                                     'per host and kind (only pairs with '
                                     'drift).'),
    'gpus': (('resource_class',), 'GPU providers (Nova PCI resource '
                                  'providers) of the checked hosts.'),
    'free_gpus': (('resource_class',), 'GPUs of the checked hosts with a '
                                       'unit neither used nor reserved.'),
    'free_domains': (('resource_class', 'size'),
                     'Instances of size GPUs that still fit: free NVLink '
                     'domains of that size (a mesh counts the instances it '
                     'still holds; size 1: free GPUs).'),
    'stranded_gpus': (('resource_class', 'size'),
                      'Free GPUs that no instance of size GPUs can use (in '
                      'no free NVLink domain of that size).'),
    'split_instances': (('resource_class', 'size'),
                        'Instances of size GPUs holding GPUs of more than '
                        'one NVLink domain (split-allocation drift).'),
}

TYPE = 'gauge'


def _escape(value):
    return (value.replace('\\', '\\\\').replace('\n', '\\n')
            .replace('"', '\\"'))


def _number(value):
    if isinstance(value, float):
        return repr(value)
    return str(int(value))


class _Writer(object):

    def __init__(self):
        self.lines = []

    def metric(self, name, samples):
        """``samples``: list of ``(labels dict, value)``."""
        self.lines.append('# HELP %s%s %s' % (PREFIX, name,
                                              METRICS[name][1]))
        self.lines.append('# TYPE %s%s %s' % (PREFIX, name, TYPE))
        for labels, value in samples:
            text = ','.join('%s="%s"' % (k, _escape(v))
                            for k, v in sorted(labels.items()))
            self.lines.append('%s%s%s %s' % (
                PREFIX, name, '{%s}' % text if text else '',
                _number(value)))


def render(success, duration, last_success=None, rows=None, hosts=None,
           not_in_topology=None, capacity=None):
    """The textfile for one ``check`` run.

    :param success: True when the check ran to the end.
    :param duration: seconds the check took.
    :param last_success: Unix time of the last success (this run's end on
        success, the earlier file's value on error), or None.
    :param rows: ``(host, drift)`` pairs, one per drift found (a missing
        group once); None when unknown (an error before the plan).
    :param hosts: names of the hosts checked, or None when unknown.
    :param not_in_topology: count (``--all``), or None.
    :param capacity: :class:`nvlink_placement.report.capacity.Cloud`, or
        None (unknown: an error before it was counted).
    """
    out = _Writer()
    out.metric('check_success', [({}, 1 if success else 0)])
    if last_success is not None:
        out.metric('check_last_success_timestamp_seconds',
                   [({}, float(last_success))])
    out.metric('check_duration_seconds', [({}, float(duration))])
    if hosts is not None and rows is not None:
        drifting = {host for host, _ in rows}
        out.metric('hosts_checked', [({}, len(hosts))])
        out.metric('hosts_in_sync', [({}, len(set(hosts) - drifting))])
    if not_in_topology is not None:
        out.metric('hosts_not_in_topology', [({}, not_in_topology)])
    if rows is not None:
        per_kind = dict.fromkeys(KINDS, 0)
        per_host = {}
        for host, kind in rows:
            per_kind[kind] = per_kind.get(kind, 0) + 1
            per_host[host, kind] = per_host.get((host, kind), 0) + 1
        out.metric('drift', [({'kind': k}, n) for k, n in per_kind.items()])
        out.metric('host_drift', [({'host': h, 'kind': k}, n) for (h, k), n
                                  in sorted(per_host.items())])
    if capacity is not None:
        for name in ('gpus', 'free_gpus'):
            out.metric(name, [({'resource_class': rc}, n) for rc, n in
                              sorted(getattr(capacity, name).items())])
        for name in ('free_domains', 'stranded_gpus', 'split_instances'):
            out.metric(name, [
                ({'resource_class': rc, 'size': str(size)}, n)
                for (rc, size), n in sorted(getattr(capacity, name).items())])
    return '\n'.join(out.lines) + '\n'


_LAST_SUCCESS_LINE = re.compile(
    r'^%s\s+([0-9.eE+-]+)\s*$' % re.escape(LAST_SUCCESS), re.MULTILINE)


def written_here(text):
    """Whether ``text`` may be replaced by a new :func:`render`.

    True for a file :func:`render` wrote (it names
    ``nvlink_placement_check_success`` in a HELP line) and for an empty
    one; anything else is someone else's file.

    :param text: the file's text, or None when there is none.
    """
    return (not (text or '').strip() or
            ('\n# HELP %scheck_success ' % PREFIX) in '\n' + text)


def last_success(text):
    """The last-success timestamp of an earlier file's ``text``, or None."""
    match = _LAST_SUCCESS_LINE.search(text or '')
    if not match:
        return None
    try:
        return float(match.group(1))
    except ValueError:
        return None
