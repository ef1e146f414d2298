"""The workload file: validation with file and key, seeded events."""

import os

import fixtures
from oslotest import base
import yaml

from nvlink_placement import errors
from nvlink_placement.simulate import workload as wl

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, '..', '..', '..', 'etc', 'examples')
EXAMPLE = os.path.join(EXAMPLES, 'workloads', 'gpu-mix.yaml')
VENUS = os.path.join(EXAMPLES, 'workloads', 'helios-venus.yaml')


def document(**changes):
    doc = {'version': 1, 'seed': 3, 'events': 8,
           'arrival': {'distribution': 'exponential', 'mean': 1},
           'lifetime': {'distribution': 'fixed', 'value': 2},
           'flavors': [{'gpus': 1, 'weight': 1},
                       {'gpus': 4, 'weight': 1, 'lifetime': {
                           'distribution': 'exponential', 'mean': 0.5}}]}
    doc.update(changes)
    return doc


class TestParse(base.BaseTestCase):

    def error(self, doc):
        return str(self.assertRaises(errors.NvlinkError, wl.parse, doc,
                                     'w.yaml'))

    def test_example_file(self):
        workload = wl.load(EXAMPLE)
        self.assertEqual(2026, workload.seed)
        self.assertEqual(400, workload.events)
        self.assertEqual([1, 2, 4], workload.sizes)
        self.assertEqual(wl.Distribution(wl.FIXED, 24.0), workload.mix[2][2])
        self.assertEqual(wl.Distribution(wl.EXPONENTIAL, 12.0),
                         workload.mix[0][2])

    def test_trace_example_matches_its_derivation(self):
        # The header derives the mix from the Helios Venus trace; the file
        # must say what the header says: 14.9 servers an hour asking for
        # 306 of the 400 GPUs of hgx-h100-50-numa.yaml on average.
        workload = wl.load(VENUS)
        self.assertEqual([1, 2, 4, 8], workload.sizes)
        self.assertEqual(wl.Distribution(wl.EXPONENTIAL, 0.0671),
                         workload.arrival)
        weights = {1: 0.518, 2: 0.056, 4: 0.074, 8: 0.687}
        lifetimes = {1: 2.43, 2: 8.31, 4: 4.44, 8: 4.34}
        self.assertEqual(
            [(g, weights[g], wl.Distribution(wl.EXPONENTIAL, lifetimes[g]))
             for g in (1, 2, 4, 8)], list(workload.mix))
        total = sum(weights.values())
        busy = sum(weights[g] / total * lifetimes[g] * g for g in weights)
        self.assertAlmostEqual(305.6, busy / 0.0671, delta=1)
        with open(os.path.join(EXAMPLES, 'hgx-h100-50-numa.yaml')) as f:
            hosts = yaml.safe_load(f)['hosts']
        self.assertEqual(50, len(hosts))
        self.assertEqual(400, sum(len(h['gpus']) for h in hosts.values()))
        self.assertTrue(all('numa_node' in gpu for h in hosts.values()
                            for gpu in h['gpus'].values()))

    def test_errors_name_file_and_key(self):
        self.assertEqual("w.yaml: events: expected an integer, got a "
                         "string '10'", self.error(document(events='10')))
        self.assertEqual(
            "w.yaml: flavors[1].gpus: expected an integer, got null",
            self.error(document(flavors=[{'gpus': 1, 'weight': 1},
                                         {'gpus': None, 'weight': 1}])))
        self.assertEqual("w.yaml: arrival.distribution: expected "
                         "'exponential' or 'fixed', got a string 'poisson'",
                         self.error(document(arrival={
                             'distribution': 'poisson', 'mean': 1})))
        self.assertEqual("w.yaml: top level: unknown key 'sed'",
                         self.error(dict(document(), sed=1)))
        self.assertEqual("w.yaml: arrival: the exponential distribution "
                         "needs 'mean'",
                         self.error(document(arrival={
                             'distribution': 'exponential', 'value': 1})))
        self.assertIn('w.yaml: flavors[1].gpus: 1 GPUs are in the mix twice',
                      self.error(document(flavors=[
                          {'gpus': 1, 'weight': 1},
                          {'gpus': 1, 'weight': 2}])))
        self.assertIn('w.yaml: flavors[0].weight:',
                      self.error(document(flavors=[{'gpus': 1,
                                                    'weight': 0}])))

    def test_numbers_must_be_finite(self):
        # YAML .nan and .inf load as floats that pass number bounds.
        self.assertEqual(
            "w.yaml: flavors[1].weight: expected a finite number, got nan",
            self.error(document(flavors=[{'gpus': 1, 'weight': 1},
                                         {'gpus': 2,
                                          'weight': float('nan')}])))
        self.assertEqual(
            "w.yaml: arrival.mean: expected a finite number, got inf\n"
            "w.yaml: lifetime.value: expected a finite number, got -inf",
            self.error(document(
                arrival={'distribution': 'exponential',
                         'mean': float('inf')},
                lifetime={'distribution': 'fixed', 'value': float('-inf')})))

    def test_yaml_nan_and_inf_in_a_file(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'w.yaml')
        with open(path, 'w') as f:
            f.write(yaml.safe_dump(document()).replace(
                'weight: 1\n', 'weight: .nan\n', 1))
        self.assertIn('%s: flavors[0].weight: expected a finite number, '
                      'got nan' % path, str(self.assertRaises(
                          errors.NvlinkError, wl.load, path)))

    def test_totals_cannot_overflow(self):
        # 1e308 + 1e308 is inf: each weight and time is bounded instead.
        message = self.error(document(flavors=[
            {'gpus': 1, 'weight': 1e308}, {'gpus': 2, 'weight': 1e308}]))
        self.assertEqual(
            ['w.yaml: flavors[0].weight: 1e+308 is greater than the '
             'maximum of 1000000000.0',
             'w.yaml: flavors[1].weight: 1e+308 is greater than the '
             'maximum of 1000000000.0'], message.splitlines())
        # A clock of events x 1e308 hours would overflow.
        self.assertEqual(
            'w.yaml: arrival.mean: 1e+308 is greater than the maximum of '
            '1000000.0', self.error(document(arrival={
                'distribution': 'exponential', 'mean': 1e308})))
        self.assertIn(
            'w.yaml: flavors[1].lifetime.mean: 2000000 is greater than',
            self.error(document(flavors=[
                {'gpus': 1, 'weight': 1},
                {'gpus': 4, 'weight': 1, 'lifetime': {
                    'distribution': 'exponential', 'mean': 2000000}}])))

    def test_largest_values_give_finite_times(self):
        doc = document(events=50,
                       arrival={'distribution': 'exponential',
                                'mean': wl.MAX_HOURS},
                       lifetime={'distribution': 'exponential',
                                 'mean': wl.MAX_HOURS},
                       flavors=[{'gpus': g, 'weight': wl.MAX_WEIGHT}
                                for g in range(1, wl.MAX_GPUS + 1)])
        times = [e.time for e in wl.events(wl.parse(doc))]
        self.assertEqual(50, len(times))
        self.assertTrue(all(t < 1e9 for t in times), max(times))

    def test_fixed_takes_value(self):
        self.assertEqual("w.yaml: lifetime.mean: the fixed distribution "
                         "takes 'value', not 'mean'",
                         self.error(document(lifetime={
                             'distribution': 'fixed', 'value': 1,
                             'mean': 2})))

    def test_every_problem_listed(self):
        message = self.error(document(seed=-1, events=0))
        self.assertEqual(['w.yaml: events: 0 is less than the minimum of 1',
                          'w.yaml: seed: -1 is less than the minimum of 0'],
                         message.splitlines())

    def test_file_errors_name_the_file(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'bad.yaml')
        with open(path, 'w') as f:
            yaml.safe_dump(document(version=2), f)
        self.assertEqual('%s: version: expected 1, got an integer 2' % path,
                         str(self.assertRaises(errors.NvlinkError, wl.load,
                                               path)))


class TestEvents(base.BaseTestCase):

    def test_seeded_sequence(self):
        events = [(round(e.time, 4), e.kind, e.index, e.gpus)
                  for e in wl.events(wl.parse(document()))]
        self.assertEqual([(0.2718, 'boot', 0, 4), (0.5027, 'delete', 0, 4),
                          (1.1979, 'boot', 1, 4), (1.2112, 'boot', 2, 4),
                          (1.2318, 'delete', 1, 4), (1.3613, 'delete', 2, 4),
                          (1.4782, 'boot', 3, 4), (1.7958, 'delete', 3, 4)],
                         events)

    def test_fixed_lifetime_and_count(self):
        doc = document(events=5, flavors=[{'gpus': 2, 'weight': 1}],
                       arrival={'distribution': 'fixed', 'value': 1.5})
        events = [(e.time, e.kind, e.index) for e in
                  wl.events(wl.parse(doc))]
        self.assertEqual([(1.5, 'boot', 0), (3.0, 'boot', 1),
                          (3.5, 'delete', 0), (4.5, 'boot', 2),
                          (5.0, 'delete', 1)], events)
