"""Rows, timeline and picture of simulation results (pure).

The picture is a small SVG written here, without a plotting library: per
layout, GPUs in use over time, and free NVLink domains of each size over
time.
"""

import dataclasses
from xml.sax import saxutils

from cliff import columns

from nvlink_placement.simulate import stats

COLUMNS = ('layout', 'seed', 'flavor', 'gpus', 'requested', 'placed',
           'no_valid_host', 'fragmentation_loss', 'no_capacity',
           'spanning_domains', 'spanning_share')
_COLOURS = {'flat': '#c0392b', 'flat-numa': '#d68910',
            'reshaped': '#2471a3'}
_DASHES = ('', '6,3', '2,2', '8,2,2,2')
WIDTH, PANEL, MARGIN = 720, 220, 50


class Figure(columns.FormattableColumn):
    """A cell of the figures table: a :class:`stats.Interval`.

    Tables show ``mean (low-high)``; ``-f json`` and ``-f yaml`` give
    ``{mean, low, high, seeds}``. The interval is cut to the figure's
    range (no count below 0, no share beyond 0-100 %).
    """

    def __init__(self, value, unit=''):
        if value.low is not None:
            value = dataclasses.replace(
                value, low=max(0.0, value.low), high=min(
                    100.0, value.high) if unit == '%' else value.high)
        super().__init__(value)
        self.unit = unit

    def human_readable(self):
        value = self._value
        if value.mean is None:
            return '-'
        text = '%.1f%s' % (value.mean, self.unit)
        if value.low is not None:
            text += ' (%.1f-%.1f)' % (value.low, value.high)
        return text

    def machine_readable(self):
        value = self._value

        def rounded(number):
            return None if number is None else round(number, 3)
        return {'mean': rounded(value.mean), 'low': rounded(value.low),
                'high': rounded(value.high), 'seeds': value.n}


def share(part, whole):
    """``part / whole`` rounded to 3 places; 0.0 when ``whole`` is 0."""
    return round(part / float(whole), 3) if whole else 0.0


def rows(runs):
    """One row per seed, layout and flavor size (:data:`COLUMNS`).

    :param runs: list (per seed) of lists of :class:`engine.Result`.
    """
    out = []
    for results in runs:
        for result in results:
            for size, counts in sorted(result.counts.items()):
                out.append((result.layout, result.seed, result.flavors[size],
                            size, counts.requested, counts.placed,
                            counts.no_valid_host, counts.fragmentation_loss,
                            counts.no_capacity, counts.spanning,
                            share(counts.spanning, counts.placed)))
    return out


def gpu_hours(timeline):
    """GPU-hours in use between the first and the last event.

    :param timeline: ``(time, GPUs in use, free domains)`` after each event.
    """
    return sum((b[0] - a[0]) * a[1] for a, b in zip(timeline, timeline[1:]))


def mean_in_use(timeline):
    """Time-weighted mean of GPUs in use between the first and last event."""
    if len(timeline) < 2:
        return float(timeline[0][1]) if timeline else 0.0
    span = timeline[-1][0] - timeline[0][0]
    return gpu_hours(timeline) / span if span else float(timeline[-1][1])


def one_domain_share(counts):
    """Percent of the placed servers whose GPUs are one NVLink domain."""
    if not counts.placed:
        return None
    return 100.0 * (counts.placed - counts.spanning) / counts.placed


def figures(runs):
    """The figures that decide, per layout, over the seeds.

    :param runs: list (per seed) of lists of :class:`engine.Result`, the
        layouts in the same order in each.
    :returns: ``(columns, rows)``: ``('figure', <layout>...)`` and one row
        per figure, each cell a :class:`Figure`.
    """
    layouts = [r.layout for r in runs[0]]
    by_layout = [[seed[i] for seed in runs] for i in range(len(layouts))]
    sizes = sorted(runs[0][0].counts)
    total = runs[0][0].total_gpus
    wanted = []
    for size in sizes:
        if size > 1:
            wanted.append(('%d-GPU servers on one NVLink domain' % size, '%',
                           lambda r, s=size: one_domain_share(r.counts[s])))
    for size in sizes:
        wanted += [
            ('%d-GPU boots requested' % size, '',
             lambda r, s=size: r.counts[s].requested),
            ('%d-GPU boots refused, no capacity' % size, '',
             lambda r, s=size: r.counts[s].no_capacity),
            ('%d-GPU boots refused, fragmentation' % size, '',
             lambda r, s=size: r.counts[s].fragmentation_loss)]
    wanted += [('GPU-hours served', '', lambda r: gpu_hours(r.timeline)),
               ('mean GPUs busy (of %d)' % total, '',
                lambda r: mean_in_use(r.timeline))]
    out = []
    for name, unit, value in wanted:
        out.append((name,) + tuple(
            Figure(stats.interval([value(r) for r in results]), unit)
            for results in by_layout))
    return ('figure',) + tuple(layouts), out


def timeline_document(results):
    """The timelines as a JSON-ready dict: layout -> list of points."""
    return {r.layout: [{'time': round(t, 4), 'gpus_in_use': used,
                        'free_domains': {str(s): n for s, n in
                                         sorted(free.items())}}
                       for t, used, free in r.timeline] for r in results}


def _polyline(points, colour, dash):
    text = ' '.join('%.1f,%.1f' % p for p in points)
    extra = ' stroke-dasharray="%s"' % dash if dash else ''
    return ('<polyline fill="none" stroke="%s" stroke-width="1.5"%s '
            'points="%s"/>' % (colour, extra, text))


def _panel(top, title, series, end_time, high):
    """One panel of the picture, ``top`` pixels down.

    :param series: list of ``(label, colour, dash, [(time, value)])``.
    """
    left, width = MARGIN, WIDTH - 2 * MARGIN
    height = PANEL - 40
    high = max(high, 1)
    parts = ['<text x="%d" y="%d" font-size="13">%s</text>'
             % (left, top + 14, saxutils.escape(title)),
             '<rect x="%d" y="%d" width="%d" height="%d" fill="none" '
             'stroke="#888"/>' % (left, top + 20, width, height),
             '<text x="%d" y="%d" font-size="10" text-anchor="end">%d</text>'
             % (left - 4, top + 28, high),
             '<text x="%d" y="%d" font-size="10" text-anchor="end">0</text>'
             % (left - 4, top + 20 + height),
             '<text x="%d" y="%d" font-size="10" text-anchor="end">%.0f h'
             '</text>' % (left + width, top + 32 + height, end_time)]

    def xy(time, value):
        x = left + (time / end_time * width if end_time else 0)
        return x, top + 20 + height - value / float(high) * height
    legend_y = top + 14
    for number, (label, colour, dash, points) in enumerate(series):
        if points:
            steps = []
            for (t0, v0), (t1, _) in zip(points, points[1:] + points[-1:]):
                steps.extend([xy(t0, v0), xy(t1, v0)])
            parts.append(_polyline(steps, colour, dash))
        x = left + 230 + number * 150
        parts.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" '
                     'stroke-width="2"%s/>' % (
                         x, legend_y - 4, x + 20, legend_y - 4, colour,
                         ' stroke-dasharray="%s"' % dash if dash else ''))
        parts.append('<text x="%d" y="%d" font-size="11">%s</text>' % (
            x + 24, legend_y, saxutils.escape(label)))
    return parts


def svg(results, title='nvlink simulate'):
    """The SVG text: GPUs in use, then free domains per size, over time."""
    end_time = max((r.timeline[-1][0] for r in results if r.timeline),
                   default=0.0)
    sizes = sorted({s for r in results for _, _, free in r.timeline
                    for s in free})
    parts = []
    top = 30
    used = [(r.layout, _COLOURS.get(r.layout, '#555'), '',
             [(t, u) for t, u, _ in r.timeline]) for r in results]
    parts += _panel(top, 'GPUs in use', used, end_time,
                    max((r.total_gpus for r in results), default=1))
    top += PANEL
    for size in sizes:
        series = [(r.layout, _COLOURS.get(r.layout, '#555'),
                   _DASHES[0], [(t, f.get(size, 0)) for t, _, f in
                                r.timeline]) for r in results]
        high = max((v for _, _, _, pts in series for _, v in pts), default=1)
        parts += _panel(top, 'free %d-GPU NVLink domains' % size, series,
                        end_time, high)
        top += PANEL
    height = top + 10
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
            'font-family="sans-serif">\n<text x="%d" y="18" font-size="15">'
            '%s</text>\n%s\n</svg>\n' % (WIDTH, height, MARGIN,
                                         saxutils.escape(title),
                                         '\n'.join(parts)))
