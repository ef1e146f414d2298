"""Sphinx directives for monitoring.rst, made from the shipped code and files.

``.. nvlink-metrics::`` is the metric reference: one row per metric of
``nvlink_placement.report.metrics.METRICS`` (name, labels, help text), so
the page changes with the code. ``.. nvlink-dashboard-panels::`` lists
the panels of ``etc/grafana/nvlink-placement.json`` with their
descriptions and queries.
"""

import json
import os

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

from nvlink_placement.report import metrics

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
DASHBOARD = os.path.join(ROOT, 'etc', 'grafana', 'nvlink-placement.json')


class _Generated(SphinxDirective):

    def lines(self):
        raise NotImplementedError

    def run(self):
        node = nodes.section()
        node.document = self.state.document
        source = self.get_source_info()[0]
        self.state.nested_parse(StringList(self.lines(), source), 0, node)
        return node.children


class Metrics(_Generated):
    """The metric reference (every metric is a gauge)."""

    def lines(self):
        out = ['.. list-table::', '   :header-rows: 1',
               '   :widths: 40 20 40', '',
               '   * - metric', '     - labels', '     - meaning']
        for name, (labels, text) in metrics.METRICS.items():
            shown = ', '.join('``%s``' % label for label in labels)
            out += ['   * - ``%s%s``' % (metrics.PREFIX, name),
                    '     - %s' % (shown or '(none)'),
                    '     - %s' % text]
        return out


class DashboardPanels(_Generated):
    """Each dashboard panel: title, description, queries."""

    def lines(self):
        self.env.note_dependency(DASHBOARD)
        with open(DASHBOARD) as f:
            dashboard = json.load(f)
        out = []
        for panel in dashboard['panels']:
            if panel['type'] == 'row':
                out += ['*%s* (row)' % panel['title'], '']
                continue
            out += ['**%s** (%s)' % (panel['title'], panel['type']),
                    '    %s' % panel['description'], '']
            for target in panel['targets']:
                out += ['    .. code-block:: promql', '',
                        '        %s' % target['expr'], '']
        return out


def setup(app):
    app.add_directive('nvlink-metrics', Metrics)
    app.add_directive('nvlink-dashboard-panels', DashboardPanels)
    return {'parallel_read_safe': True, 'parallel_write_safe': True}
