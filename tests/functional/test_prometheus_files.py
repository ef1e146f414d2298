"""The shipped Prometheus rules and Grafana dashboard, checked by promtool.

``etc/prometheus/nvlink-placement.rules.yml`` must load (``promtool check
rules``) and pass its unit tests (``promtool test rules``: input series,
expected alerts, the ``for:`` durations and the staleness cases). Every
expression of the rules and of the dashboard must parse and name only
metrics that ``check --prometheus-textfile`` writes, so renaming a metric
breaks a test here.
"""

import json
import os
import re

import fixtures
from oslotest import base
import yaml

from nvlink_placement.report import metrics
from tests.functional import base as fbase
from tests import promtool

PROMETHEUS = os.path.join(fbase.ROOT, 'etc', 'prometheus')
RULES = os.path.join(PROMETHEUS, 'nvlink-placement.rules.yml')
RULE_TESTS = os.path.join(PROMETHEUS, 'nvlink-placement.rules.test.yml')
DASHBOARD = os.path.join(fbase.ROOT, 'etc', 'grafana',
                         'nvlink-placement.json')
NAME = re.compile(r'\b%s[a-z0-9_]+' % metrics.PREFIX)
WRITTEN = {metrics.PREFIX + name for name in metrics.METRICS}


def rule_expressions(path=RULES):
    """``{alert name: expression}`` of a rule file."""
    with open(path) as f:
        doc = yaml.safe_load(f)
    return {rule['alert']: rule['expr'] for group in doc['groups']
            for rule in group['rules']}


def dashboard_expressions(path=DASHBOARD):
    """``{where: expression}``: every panel target and variable query."""
    with open(path) as f:
        doc = json.load(f)
    found = {}
    for panel in doc['panels']:
        for i, target in enumerate(panel.get('targets', ())):
            found['panel %r target %d' % (panel['title'], i)] = \
                target['expr']
    for variable in doc['templating']['list']:
        if variable['type'] == 'query':
            query = variable['query']
            found['variable %s' % variable['name']] = (
                query['query'] if isinstance(query, dict) else query)
    return found


def as_promql(expression):
    """A dashboard expression with Grafana's variables filled in.

    ``label_values(metric, label)`` (a variable query) becomes the metric;
    ``$var`` and ``${var}`` a match-anything regex; ``$__rate_interval``
    and ``$__interval`` five minutes.
    """
    match = re.match(r'^label_values\((.*),\s*[a-z_]+\)$', expression)
    if match:
        expression = match.group(1)
    expression = re.sub(r'\$__(rate_)?interval', '5m', expression)
    return re.sub(r'\$\{?[a-z_]+\}?', '.*', expression)


class TestRules(base.BaseTestCase):

    def test_promtool_check_rules(self):
        code, output = promtool.run(self, 'check', 'rules', RULES)
        self.assertEqual(0, code, output)
        self.assertIn('SUCCESS: 6 rules found', output)

    def test_promtool_rule_unit_tests(self):
        code, output = promtool.run(self, 'test', 'rules', RULE_TESTS)
        self.assertEqual(0, code, output)
        self.assertIn('SUCCESS', output)

    def test_unit_tests_catch_a_shorter_for(self):
        # The unit tests are real: 20 minutes instead of 30 fails them.
        tmp = self.useFixture(fixtures.TempDir()).path
        with open(RULES) as f:
            text = f.read()
        with open(os.path.join(tmp, os.path.basename(RULES)), 'w') as f:
            f.write(text.replace('for: 30m', 'for: 20m', 1))
        with open(RULE_TESTS) as f, open(os.path.join(
                tmp, os.path.basename(RULE_TESTS)), 'w') as g:
            g.write(f.read())
        code, output = promtool.run(
            self, 'test', 'rules', os.path.join(tmp, os.path.basename(
                RULE_TESTS)))
        self.assertEqual(1, code, output)
        self.assertIn('alertname: NvlinkPlacementDrift, time: 31m', output)

    def test_rules_name_only_written_metrics(self):
        expressions = rule_expressions()
        self.assertEqual({
            'NvlinkPlacementDrift', 'NvlinkPlacementMemberTraitDrift',
            'NvlinkPlacementCheckFailing', 'NvlinkPlacementCheckStale',
            'NvlinkCapacityLow', 'NvlinkStrandedGpus'}, set(expressions))
        for alert, expression in expressions.items():
            names = set(NAME.findall(expression))
            self.assertTrue(names, alert)
            self.assertEqual(set(), names - WRITTEN, alert)


class TestDashboard(base.BaseTestCase):

    def test_every_panel_has_a_description_and_a_query(self):
        with open(DASHBOARD) as f:
            doc = json.load(f)
        panels = [p for p in doc['panels'] if p['type'] != 'row']
        self.assertEqual(11, len(panels))
        for panel in panels:
            self.assertTrue(panel['description'], panel['title'])
            self.assertTrue(panel['targets'], panel['title'])

    def test_expressions_name_only_written_metrics(self):
        expressions = dashboard_expressions()
        self.assertEqual(14, len(expressions))
        for where, expression in expressions.items():
            names = set(NAME.findall(expression))
            self.assertTrue(names, where)
            self.assertEqual(set(), names - WRITTEN, where)

    def test_expressions_parse(self):
        # promtool parses each expression as a recording rule's.
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'dashboard.rules.yml')
        expressions = dashboard_expressions()
        with open(path, 'w') as f:
            yaml.safe_dump({'groups': [{'name': 'dashboard', 'rules': [
                {'record': 'nvlink_placement:dashboard_%d' % i,
                 'expr': as_promql(e)}
                for i, e in enumerate(expressions.values())]}]}, f)
        code, output = promtool.run(self, 'check', 'rules', path)
        self.assertEqual(0, code, output)
        self.assertIn('SUCCESS: %d rules found' % len(expressions), output)

    def test_a_broken_expression_is_caught(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'broken.rules.yml')
        with open(path, 'w') as f:
            yaml.safe_dump({'groups': [{'name': 'dashboard', 'rules': [
                {'record': 'x', 'expr': as_promql(
                    'sum by (size (nvlink_placement_free_domains)')}]}]},
                f)
        code, output = promtool.run(self, 'check', 'rules', path)
        self.assertEqual(1, code, output)
