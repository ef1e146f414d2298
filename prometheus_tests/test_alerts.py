"""The shipped alert rules, evaluated by a real Prometheus.

A real Placement (gunicorn) holds two HGX H100 hosts; ``openstack nvlink
check --prometheus-textfile`` writes into the textfile directory of a real
node exporter, which a real Prometheus scrapes every second, evaluating
``etc/prometheus/nvlink-placement.rules.yml`` every second with its
``for:`` durations cut to 2 s (thresholds as shipped). The alerts are
read from Prometheus's HTTP API (``/api/v1/alerts``): a planted drift
fires and its repair resolves it; filling the cloud until no 8-GPU
instance fits fires the capacity and stranded-GPU alerts, and deleting
those instances resolves them; a check that
cannot reach Placement fires the failing alert; before any check the
staleness alert fires. Every expression of the dashboard answers.
"""

import os
import time
import uuid

from oslotest import base
import yaml

from nvlink_placement.placement import client as pc
from prometheus_tests import servers
from tests.functional import base as fbase
from tests.functional import cli
from tests.functional import test_prometheus_files as files
from tests import novalike
from tests import placement_server

#: Longest wait for Prometheus to see a change (scrape 1 s, evaluation
#: 1 s, for: 2 s).
WAIT = 30
FOR = '2s'
HOST = 'compute-01'
RC = novalike.GPU_RC


def fast_rules():
    """The shipped rules with every ``for:`` cut to :data:`FOR`."""
    with open(files.RULES) as f:
        rules = yaml.safe_load(f)
    for group in rules['groups']:
        for rule in group['rules']:
            if 'for' in rule:
                rule['for'] = FOR
    return rules


class TestAlerts(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        missing = [n for n, found in (
            ('prometheus', servers.binary('prometheus')),
            ('prometheus-node-exporter', servers.binary(
                *servers.NODE_EXPORTER))) if not found]
        if missing:
            self.skipTest('not installed: %s (Debian: apt-get install '
                          'prometheus prometheus-node-exporter)'
                          % ', '.join(missing))
        document = novalike.document({HOST: novalike.BOARD1,
                                      'compute-02': novalike.BOARD2})
        self.uuids = novalike.names_in(document)
        server = placement_server.PlacementServer(snapshot=document).start()
        self.addCleanup(server.stop)
        self.placement = server
        self.client = pc.PlacementClient(server.adapter())
        self.exporter = self.useFixture(servers.NodeExporter())
        self.prometheus = self.useFixture(servers.Prometheus(
            self.exporter.url.split('//', 1)[1], fast_rules()))
        self.prom = os.path.join(self.exporter.textfile_dir,
                                 'nvlink_placement.prom')
        self.instance = {('instance', self.exporter.url.split('//', 1)[1]),
                         ('job', 'node')}

    def nvlink(self, *argv, endpoint=None):
        return cli.run(self, 'nvlink', *argv, '--os-auth-type',
                       'admin_token', '--os-token', 'admin',
                       '--os-endpoint', endpoint or self.placement.url)

    def check(self, expect, endpoint=None):
        result = self.nvlink('check', '--topology', fbase.H100_TOPOLOGY,
                             '--prometheus-textfile', self.prom,
                             '--retry-window', '0', endpoint=endpoint)
        self.assertEqual(expect, result.code, result.stderr)

    def wait(self, what, predicate):
        """Poll Prometheus's alerts until ``predicate(alerts)``; them."""
        deadline = time.monotonic() + WAIT
        while True:
            alerts = self.prometheus.alerts()
            if predicate(alerts):
                return alerts
            if time.monotonic() > deadline:
                self.fail('%s: not within %ds; alerts: %s; prometheus: %s'
                          % (what, WAIT, alerts, self.prometheus.logs()))
            time.sleep(0.25)

    def firing(self, alertname, **labels):
        """The key of an alert as :meth:`Prometheus.alerts` gives it."""
        return (alertname, frozenset(
            self.instance | set(labels.items())))

    def test_drift_fires_and_resolves_capacity_runs_out(self):
        # Before any check: no metric at all, so the check is stale.
        stale = ('NvlinkPlacementCheckStale',
                 frozenset({('severity', 'warning')}))
        self.wait('stale before the first check',
                  lambda a: a.get(stale, (None,))[0] == 'firing')
        self.assertEqual(0, self.nvlink('reshape', '--topology',
                                        fbase.H100_TOPOLOGY).code)
        self.check(0)
        self.wait('in sync: nothing firing', lambda a: not a)
        rules = self.prometheus.api('rules')['groups'][0]['rules']
        self.assertEqual((6, {'ok'}), (len(rules),
                                       {r['health'] for r in rules}))

        # Drift: a GPU moved back under its compute node.
        gpu = '%s_0000:4C:00.0' % HOST
        self.client.request('PUT', '/resource_providers/%s' % self.uuids[
            gpu], version='1.37', body={
                'name': gpu, 'parent_provider_uuid': self.uuids[HOST]})
        self.check(2)
        drift = self.firing('NvlinkPlacementDrift', kind='wrong-parent',
                            severity='warning')
        alerts = self.wait('drift fires',
                           lambda a: a.get(drift, (None,))[0] == 'firing')
        self.assertEqual(('firing', 1.0), alerts[drift])
        self.assertEqual([drift], list(alerts))
        # Every dashboard expression answers with data in this Prometheus
        # (the hosts-with-drift table needs some drift).
        for where, expression in files.dashboard_expressions().items():
            data = self.prometheus.api('query',
                                       query=files.as_promql(expression))
            self.assertTrue(data['result'], '%s: %s' % (where, expression))

        self.assertEqual(0, self.nvlink('reshape', '--topology',
                                        fbase.H100_TOPOLOGY, '--host',
                                        HOST).code)
        self.check(0)
        self.wait('drift resolves', lambda a: not a)

        # Fill the cloud until no 8-GPU instance fits: one 1-GPU instance
        # on each host. 14 of the 16 GPUs are then free but stranded for
        # size 8, and the 3 free GPUs of each quad touched for size 4
        # (6 of 16); the quads not touched still hold one 4-GPU instance
        # each (2: not below the threshold).
        consumers = [str(uuid.uuid4()), str(uuid.uuid4())]
        for consumer, (host, address) in zip(consumers, (
                (HOST, '0000:4C:00.0'), ('compute-02', '0000:3A:00.0'))):
            novalike.allocate(self.client, consumer, {
                self.uuids['%s_%s' % (host, address)]: {RC: 1}})
        self.check(0)
        low = self.firing('NvlinkCapacityLow', resource_class=RC, size='8',
                          severity='warning')
        stranded = self.firing('NvlinkStrandedGpus', resource_class=RC,
                               size='8', severity='info')
        quads = self.firing('NvlinkStrandedGpus', resource_class=RC,
                            size='4', severity='info')
        wanted = (low, stranded, quads)
        alerts = self.wait('capacity alerts fire', lambda a: all(
            a.get(k, (None,))[0] == 'firing' for k in wanted))
        self.assertEqual({low: ('firing', 0.0),
                          stranded: ('firing', 14 / 16),
                          quads: ('firing', 6 / 16)}, alerts)

        # The instances deleted: every alert resolves.
        for consumer in consumers:
            self.client.request('DELETE', '/allocations/%s' % consumer,
                                expect=(204,))
        self.check(0)
        self.wait('capacity alerts resolve', lambda a: not a)

    def test_failing_check_fires(self):
        self.check(2)      # flat: drift, but a success
        closed = 'http://127.0.0.1:%d' % placement_server.free_port()
        self.check(1, endpoint=closed)
        failing = self.firing('NvlinkPlacementCheckFailing',
                              severity='warning')
        self.wait('failing check fires',
                  lambda a: a.get(failing, (None,))[0] == 'firing')
