"""Figures over seeds: intervals, shares, GPU-hours (crafted results)."""

import fixtures
from oslotest import base

from nvlink_placement.simulate import engine
from nvlink_placement.simulate import estimate
from nvlink_placement.simulate import report
from nvlink_placement.simulate import stats
from nvlink_placement.simulate import workload as wl


def result(layout, seed, placed, spanning, timeline, frag=0, none=0):
    counts = {1: engine.Counts(requested=5, placed=5),
              2: engine.Counts(requested=placed + frag + none, placed=placed,
                               no_valid_host=frag + none,
                               fragmentation_loss=frag, no_capacity=none,
                               spanning=spanning)}
    return engine.Result(layout, {1: 'one', 2: 'two'}, counts, timeline, [],
                         16, seed)


class TestStats(base.BaseTestCase):

    def test_interval(self):
        # Mean 3, s = sqrt(2.5), t(0.975, 4) = 2.776: half width
        # 2.776 * 1.58114 / sqrt(5) = 1.96296.
        found = stats.interval([1, 2, 3, 4, 5])
        self.assertEqual(3.0, found.mean)
        self.assertAlmostEqual(1.03704, found.low, places=4)
        self.assertAlmostEqual(4.96296, found.high, places=4)
        self.assertEqual(5, found.n)

    def test_one_value_no_interval_none_left_out(self):
        self.assertEqual(stats.Interval(7.0, None, None, 1),
                         stats.interval([None, 7]))
        self.assertEqual(stats.Interval(None, None, None, 0),
                         stats.interval([None]))

    def test_quantiles(self):
        self.assertEqual(12.706, stats.t975(1))
        self.assertEqual(2.093, stats.t975(19))
        self.assertEqual(2.042, stats.t975(35))
        self.assertEqual(2.021, stats.t975(45))
        self.assertEqual(1.980, stats.t975(1000))

    def test_quantiles_at_and_between_the_listed_degrees(self):
        # NIST/SEMATECH e-Handbook 1.3.6.7.2, two-sided 95 %: the listed
        # values, and between two listed rows the smaller df's (wider).
        for df, quantile in ((2, 4.303), (10, 2.228), (29, 2.045),
                             (30, 2.042), (31, 2.042), (39, 2.042),
                             (40, 2.021), (41, 2.021), (59, 2.021),
                             (60, 2.000), (61, 2.000), (119, 2.000),
                             (120, 1.980), (121, 1.980)):
            self.assertEqual(quantile, stats.t975(df), df)

    def test_interval_between_listed_degrees(self):
        # 36 values 0, 1, 0, 1, ...: mean 0.5, s = sqrt(9 / 35), df 35
        # uses t(30) = 2.042: half width 2.042 * 0.50709 / 6 = 0.17258.
        found = stats.interval([0, 1] * 18)
        self.assertAlmostEqual(0.32742, found.low, places=4)
        self.assertAlmostEqual(0.67258, found.high, places=4)


class TestFigures(base.BaseTestCase):

    def test_figures_side_by_side(self):
        # GPUs in use 4 for 2 h, then 8 for 1 h: 16 GPU-hours, 5.33 mean.
        timeline = [(0.0, 4, {}), (2.0, 8, {}), (3.0, 0, {})]
        runs = [[result('flat', 1, 4, 3, timeline, none=1),
                 result('reshaped', 1, 4, 0, timeline, frag=2)],
                [result('flat', 2, 2, 1, timeline, none=3),
                 result('reshaped', 2, 0, 0, timeline, frag=1)]]
        names, rows = report.figures(runs)
        self.assertEqual(('figure', 'flat', 'reshaped'), names)
        table = {row[0]: [c.machine_readable() for c in row[1:]]
                 for row in rows}
        # flat: 1 of 4 and 1 of 2 on one domain: 25 % and 50 %.
        flat, reshaped = table['2-GPU servers on one NVLink domain']
        self.assertEqual(37.5, flat['mean'])
        self.assertEqual(2, flat['seeds'])
        # reshaped placed none in seed 2: one value, no interval.
        self.assertEqual({'mean': 100.0, 'low': None, 'high': None,
                          'seeds': 1}, reshaped)
        self.assertEqual([2.0, 0.0], [
            c['mean'] for c in table['2-GPU boots refused, no capacity']])
        self.assertEqual([0.0, 1.5], [
            c['mean'] for c in table['2-GPU boots refused, fragmentation']])
        self.assertEqual(16.0, table['GPU-hours served'][0]['mean'])
        self.assertEqual(5.333, table['mean GPUs busy (of 16)'][0]['mean'])
        cell = next(r for r in rows if r[0] == '2-GPU boots refused, '
                    'no capacity')[1]
        # Mean 2, s = 1.414, t(1) = 12.706: the interval stops at 0.
        self.assertEqual('2.0 (0.0-14.7)', cell.human_readable())

    def test_share_intervals_stay_within_0_and_100(self):
        # Shares 100 % and 50 %: mean 75, s = 35.355, t(1) = 12.706:
        # 75 -+ 12.706 * 25 = 317.65, cut to 0-100 %; a count at 0 only.
        share = report.Figure(stats.interval([100.0, 50.0]), '%')
        self.assertEqual({'mean': 75.0, 'low': 0.0, 'high': 100.0,
                          'seeds': 2}, share.machine_readable())
        self.assertEqual('75.0% (0.0-100.0)', share.human_readable())
        count = report.Figure(stats.interval([100.0, 50.0]))
        self.assertEqual({'mean': 75.0, 'low': 0.0, 'high': 392.65,
                          'seeds': 2}, count.machine_readable())
        # Inside the range nothing is cut: 40, 50, 60 %, s = 10,
        # t(2) = 4.303: 50 -+ 24.843.
        inside = report.Figure(stats.interval([40.0, 50.0, 60.0]), '%')
        self.assertEqual({'mean': 50.0, 'low': 25.157, 'high': 74.843,
                          'seeds': 3}, inside.machine_readable())

    def test_share_of_nothing_placed(self):
        self.assertIsNone(report.one_domain_share(engine.Counts()))


class TestEstimate(base.BaseTestCase):

    def workload(self, events):
        return wl.parse({
            'version': 1, 'seed': 1, 'events': events,
            'arrival': {'distribution': 'fixed', 'value': 1},
            'lifetime': {'distribution': 'fixed', 'value': 1},
            'flavors': [{'gpus': 1, 'weight': 1}]}, 'w.yaml')

    def test_warns_above_threshold(self):
        logger = self.useFixture(fixtures.FakeLogger())
        # 60 runs x (4 + 2 x 0.2 + 1e6 x (0.05 + 2 x 0.002)) CPU s.
        seconds = estimate.warn(self.workload(1000000), 60, 2)
        self.assertAlmostEqual(3240264.0, seconds, places=3)
        self.assertIn('simulate: 1000000 events x 60 runs (layouts x seeds) '
                      'on 2 hosts take about 900.1 CPU hours', logger.output)

    def test_hosts_count(self):
        # 100 hosts, 2000 events, one run: 4 + 20 + 2000 x (0.05 + 0.2).
        self.assertAlmostEqual(524.0, estimate.cpu_seconds(2000, 1, 100))
        self.assertEqual('9 CPU minutes', estimate.describe(524.0))

    def test_quiet_below(self):
        logger = self.useFixture(fixtures.FakeLogger())
        estimate.warn(self.workload(400), 60, 2)
        self.assertEqual('', logger.output)
