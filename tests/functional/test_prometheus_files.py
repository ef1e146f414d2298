"""The shipped monitoring files: Prometheus rules, dashboard, systemd units.

``etc/prometheus/nvlink-placement.rules.yml`` must load (``promtool check
rules``) and pass its unit tests (``promtool test rules``: input series,
expected alerts, the ``for:`` durations and the staleness cases). Every
expression of the rules and of the dashboard must parse and name only
metrics that ``check --prometheus-textfile`` writes, so renaming a metric
breaks a test here. The systemd service's command line runs as written
(on a snapshot instead of the cloud).
"""

import configparser
import json
import os
import re
import shlex
import shutil
import subprocess

import fixtures
from oslotest import base
import yaml

from nvlink_placement.report import metrics
from tests.functional import base as fbase
from tests.functional import cli
from tests import promtool

PROMETHEUS = os.path.join(fbase.ROOT, 'etc', 'prometheus')
RULES = os.path.join(PROMETHEUS, 'nvlink-placement.rules.yml')
RULE_TESTS = os.path.join(PROMETHEUS, 'nvlink-placement.rules.test.yml')
DASHBOARD = os.path.join(fbase.ROOT, 'etc', 'grafana',
                         'nvlink-placement.json')
SYSTEMD = os.path.join(fbase.ROOT, 'etc', 'systemd')
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

    def rule_tests_on(self, old, new, occurrence=0):
        """``promtool test rules`` on the rules with one text changed.

        :param occurrence: which occurrence of ``old`` (0: the first).
        :returns: ``(exit status, output)``.
        """
        tmp = self.useFixture(fixtures.TempDir()).path
        with open(RULES) as f:
            text = f.read()
        parts = text.split(old)
        self.assertGreater(len(parts), occurrence + 1, old)
        text = (old.join(parts[:occurrence + 1]) + new +
                old.join(parts[occurrence + 1:]))
        with open(os.path.join(tmp, os.path.basename(RULES)), 'w') as f:
            f.write(text)
        with open(RULE_TESTS) as f, open(os.path.join(
                tmp, os.path.basename(RULE_TESTS)), 'w') as g:
            g.write(f.read())
        return promtool.run(self, 'test', 'rules', os.path.join(
            tmp, os.path.basename(RULE_TESTS)))

    def test_unit_tests_catch_a_shorter_for(self):
        # The unit tests are real: 20 minutes instead of 30 fails them.
        code, output = self.rule_tests_on('for: 30m', 'for: 20m')
        self.assertEqual(1, code, output)
        self.assertIn('alertname: NvlinkPlacementDrift, time: 31m', output)

    def test_unit_tests_pin_every_threshold_from_both_sides(self):
        # Each threshold and duration moved a little either way (or the
        # comparison made inclusive) fails the unit tests: their input
        # series sit on the threshold and one step past it.
        for old, new, occurrence in (
                ('!="member-traits"} > 0', '!="member-traits"} > 1', 0),
                ('kind="member-traits"} > 0', 'kind="member-traits"} > 1',
                 0),
                ('check_success == 0', 'check_success == 1', 0),
                ('> 3600', '> 3540', 0),
                ('> 3600', '> 3660', 0),
                ('> 3600', '>= 3600', 0),
                ('free_domains < 2', 'free_domains < 1', 0),
                ('free_domains < 2', 'free_domains < 3', 0),
                ('free_domains < 2', 'free_domains <= 2', 0),
                ('nvlink_placement_gpus > 0.25',
                 'nvlink_placement_gpus > 0.24', 0),
                ('nvlink_placement_gpus > 0.25',
                 'nvlink_placement_gpus > 0.26', 0),
                ('nvlink_placement_gpus > 0.25',
                 'nvlink_placement_gpus >= 0.25', 0),
                ('for: 30m', 'for: 29m', 0),
                ('for: 30m', 'for: 31m', 0),
                ('for: 30m', 'for: 29m', 1),
                ('for: 30m', 'for: 31m', 1),
                ('for: 30m', 'for: 29m', 2),
                ('for: 30m', 'for: 31m', 2),
                ('for: 15m', 'for: 14m', 0),
                ('for: 15m', 'for: 16m', 0),
                ('for: 1h', 'for: 59m', 0),
                ('for: 1h', 'for: 61m', 0)):
            code, output = self.rule_tests_on(old, new, occurrence)
            self.assertEqual(1, code, (old, new, occurrence, output))
            self.assertIn('FAILED', output, (old, new, occurrence))

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


def unit(name):
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str
    parser.read(os.path.join(SYSTEMD, name))
    return parser


class TestSystemdUnits(base.BaseTestCase):

    def test_the_service_command_runs(self):
        service = unit('nvlink-placement-check.service')
        self.assertEqual('oneshot', service['Service']['Type'])
        self.assertEqual('2', service['Service']['SuccessExitStatus'])
        argv = shlex.split(service['Service']['ExecStart'])
        self.assertEqual(['/usr/bin/openstack', 'nvlink', 'check'], argv[:3])
        options = {a: argv[i + 1] for i, a in enumerate(argv)
                   if a in ('--topology', '--prometheus-textfile')}
        prom = options['--prometheus-textfile']
        self.assertEqual(service['Service']['ReadWritePaths'],
                         os.path.dirname(prom))
        # The same options on the example snapshot, writing to a temp dir.
        tmp = self.useFixture(fixtures.TempDir()).path
        mine = os.path.join(tmp, os.path.basename(prom))
        swap = {options['--topology']: fbase.H100_TOPOLOGY, prom: mine}
        result = cli.run(self, *[swap.get(a, a) for a in argv[1:]],
                         '--snapshot', fbase.H100_SNAPSHOT)
        self.assertEqual(2, result.code, result.stderr)   # flat: drift
        self.assertIsInstance(json.loads(result.stdout), list)
        with open(mine) as f:
            self.assertIn('nvlink_placement_check_success 1\n', f.read())

    def test_the_timer_starts_the_service_every_5_minutes(self):
        timer = unit('nvlink-placement-check.timer')
        self.assertEqual('5min', timer['Timer']['OnUnitActiveSec'])
        self.assertEqual('timers.target', timer['Install']['WantedBy'])
        self.assertNotIn('Unit', timer['Timer'])    # the same-named service

    def test_systemd_analyze_verify(self):
        analyze = shutil.which('systemd-analyze')
        if analyze is None:
            self.skipTest('no systemd-analyze')
        tmp = self.useFixture(fixtures.TempDir()).path
        paths = []
        for name in sorted(os.listdir(SYSTEMD)):
            shutil.copy(os.path.join(SYSTEMD, name), tmp)
            paths.append(os.path.join(tmp, name))
        result = subprocess.run([analyze, 'verify'] + paths,
                                capture_output=True, text=True, timeout=60)
        # openstack is not installed at /usr/bin here: the one complaint.
        complaints = [line for line in (result.stdout + result.stderr)
                      .splitlines() if line.strip() and
                      '/usr/bin/openstack is not executable' not in line]
        self.assertEqual([], complaints)
