"""Pure parts of monitoring: host-name hints, repair texts, metrics."""

import collections
import os

import fixtures
from oslotest import base
from prometheus_client import parser as prom_parser

from nvlink_placement import errors
from nvlink_placement import hostnames
from nvlink_placement.plan import actions as act
from nvlink_placement.plan import repair
from nvlink_placement.report import metrics
from nvlink_placement import textfile

NODES = ['gpu-node-17.example.com', 'gpu-node-18.example.com', 'GPU-Node-19',
         'compute-01', 'compute-02']


class TestHostnames(base.BaseTestCase):

    def test_rules_in_order(self):
        self.assertEqual(['gpu-node-17.example.com'],
                         hostnames.suggest('gpu-node-17', NODES))
        self.assertEqual(['gpu-node-17.example.com'],
                         hostnames.suggest('GPU-NODE-17.example.com', NODES))
        self.assertEqual(['GPU-Node-19'],
                         hostnames.suggest('gpu-node-19.example.com', NODES))
        self.assertEqual(['compute-01'],
                         hostnames.suggest('COMPUTE-01', NODES))
        self.assertEqual(['compute-01', 'compute-02'],
                         hostnames.suggest('compute01', NODES))
        self.assertEqual([], hostnames.suggest('storage-7', NODES))
        self.assertEqual([], hostnames.suggest('compute-01', ['compute-01']))

    def test_did_you_mean(self):
        self.assertEqual(" (did you mean 'compute-01' or 'compute-02'?)",
                         hostnames.did_you_mean('compute01', NODES))
        self.assertEqual('', hostnames.did_you_mean('x', NODES))

    def test_known_hint(self):
        self.assertEqual(" (did you mean 'gpu-node-17.example.com'?)",
                         hostnames.known_hint('gpu-node-17', NODES))
        many = ['node-%02d' % i for i in range(12)]
        self.assertEqual(' (hosts: %s and 2 more)'
                         % ', '.join(repr(n) for n in many[:10]),
                         hostnames.known_hint('storage-7', many))
        # Names are quoted: a newline in one cannot split the message.
        self.assertEqual(" (hosts: 'a\\nb')",
                         hostnames.known_hint('x', ['a\nb']))

    def test_close_spelling_budget(self):
        # Thousands of unknown hosts (the wrong cloud): only the first few
        # get the linear close-spelling search; the indexed rules stay.
        names = hostnames.Names(NODES, fuzzy_budget=1)
        self.assertEqual(['compute-01', 'compute-02'],
                         names.suggest('compute01'))
        self.assertEqual([], names.suggest('compute01'))
        self.assertEqual(['gpu-node-17.example.com'],
                         names.suggest('gpu-node-17'))
        self.assertEqual(['compute-01'], names.suggest('COMPUTE-01'))
        self.assertEqual(' (it has no hosts)',
                         hostnames.known_hint('x', []))


class TestRepairText(base.BaseTestCase):

    context = repair.Context('topo dir/t.yaml', frozenset(['c1']),
                             hosts=('c1',),
                             global_options=('--os-nvlink-gpus-file-dir',
                                             '/srv/maps'))

    def test_commands(self):
        prefix = ("openstack --os-nvlink-gpus-file-dir /srv/maps nvlink "
                  "reshape --topology 'topo dir/t.yaml'")
        self.assertEqual(prefix + ' --host c1', repair.text(act.Action(
            'c1', act.MOVE_PROVIDER, 'c1_0000:01:00.0',
            drift=act.WRONG_PARENT), self.context))
        self.assertEqual(prefix + ' --host c1', repair.text(act.Action(
            '', act.CREATE_TRAIT, 'CUSTOM_PCI_GROUP2',
            drift=act.MISSING_TRAIT), self.context))
        self.assertEqual(
            'openstack --os-nvlink-gpus-file-dir /srv/maps nvlink flatten '
            '--host c9', repair.text(act.Action(
                'c9', act.DELETE_PROVIDER, 'c9_nvlink-group-of-2-a',
                drift=act.UNEXPECTED_GROUP), self.context))

    def test_not_automatic(self):
        unhealthy = repair.text(act.Action(
            'c1', '', 'c1_0000:01:00.0', drift=act.MISSING_RESERVATION),
            self.context)
        self.assertTrue(unhealthy.startswith(repair.MANUAL), unhealthy)
        self.assertIn('reserved = total on the inventory of c1_0000:01:00.0',
                      unhealthy)
        split = repair.text(act.Action(
            'c1', '', 'c1_0000:01:00.0, c1_0000:02:00.0',
            drift=act.SPLIT_ALLOCATION, consumer='u-1'), self.context)
        self.assertTrue(split.startswith(
            'not automatic: move instance u-1 into one NVLink domain: '
            'openstack server migrate u-1'), split)


def _samples(text):
    return {(s.name,) + tuple(sorted(s.labels.items())): s.value
            for family in prom_parser.text_string_to_metric_families(text)
            for s in family.samples}


class TestMetrics(base.BaseTestCase):

    def test_render_parses_back(self):
        text = metrics.render(
            True, 1.5, last_success=1700000000.25,
            rows=[('c1', 'wrong-parent'), ('c1', 'wrong-parent'),
                  ('', 'missing-trait'), ('we"ird\\', 'unknown-gpu')],
            hosts=['c1', 'c2', 'we"ird\\'], not_in_topology=4)
        m = _samples(text)
        self.assertEqual(1, m[('nvlink_placement_check_success',)])
        self.assertEqual(1.5, m[('nvlink_placement_check_duration_seconds',)])
        self.assertEqual(1700000000.25, m[
            ('nvlink_placement_check_last_success_timestamp_seconds',)])
        self.assertEqual(3, m[('nvlink_placement_hosts_checked',)])
        self.assertEqual(1, m[('nvlink_placement_hosts_in_sync',)])
        self.assertEqual(4, m[('nvlink_placement_hosts_not_in_topology',)])
        self.assertEqual(2, m[('nvlink_placement_host_drift', ('host', 'c1'),
                               ('kind', 'wrong-parent'))])
        self.assertEqual(1, m[('nvlink_placement_host_drift',
                               ('host', 'we"ird\\'), ('kind', 'unknown-gpu'))])
        self.assertEqual(10, len([k for k in m
                                 if k[0] == 'nvlink_placement_drift']))
        self.assertEqual(1700000000.25, metrics.last_success(text))
        described = collections.Counter()
        for line in text.splitlines():
            if line.startswith('# HELP ') or line.startswith('# TYPE '):
                self.assertTrue(line.split()[2].startswith(
                    'nvlink_placement_'), line)
                described[line.split()[2]] += 1
        # A HELP and a TYPE line for every metric with samples.
        self.assertEqual({k[0]: 2 for k in m}, dict(described))

    def test_failure_without_plan(self):
        text = metrics.render(False, 0.25)
        m = _samples(text)
        self.assertEqual({('nvlink_placement_check_success',): 0,
                          ('nvlink_placement_check_duration_seconds',): 0.25},
                         m)
        self.assertIsNone(metrics.last_success(text))
        self.assertIsNone(metrics.last_success(None))


class TestTextfile(base.BaseTestCase):

    def test_write_replaces_and_leaves_no_temporary(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'x.prom')
        textfile.write(path, 'a 1\n')
        textfile.write(path, 'a 2\n')
        self.assertEqual('a 2\n', textfile.read(path))
        self.assertEqual(['x.prom'], os.listdir(tmp))
        self.assertEqual(0o644, os.stat(path).st_mode & 0o777)
        self.assertIsNone(textfile.read(os.path.join(tmp, 'none')))
        error = self.assertRaises(errors.NvlinkError, textfile.write,
                                  os.path.join(tmp, 'no', 'x.prom'), 'a 1\n')
        self.assertIn('cannot write %s' % os.path.join(tmp, 'no', 'x.prom'),
                      str(error))
