"""Capacity metrics cost no Placement request per host.

100 reshaped HGX H100 hosts behind a real Placement (gunicorn), each
running a 2-GPU instance; ``check`` over HTTP through a counting proxy
(:mod:`tests.fault_proxy`, every request passed), with and without
``--prometheus-textfile``: the same requests. Elsewhere the textfile
adds at most the free-GPU listing: one request for the resource classes
and one per custom class, whatever the number of hosts (only a topology
without any NVLink group pays that: with groups ``check`` lists the free
GPUs anyway, to find split instances).
"""

import json
import logging
import os
import uuid

import fixtures
from oslotest import base
import yaml

from nvlink_placement.placement import embedded
from nvlink_placement.placement import snapshot
from nvlink_placement.plan import desired
from nvlink_placement.plan import run
from nvlink_placement.topology import loader
from tests import fault_proxy
from tests.functional import cli
from tests.functional import test_capacity_metrics
from tests import novalike
from tests import placement_server

HOSTS = ['gpu-%03d' % i for i in range(100)]
TEMPLATE = 'gpu-template'
# Modules 1 and 3: one pair of BOARD1.
PAIR = sorted(a for a, m in novalike.BOARD1.items() if m in (1, 3))


def busy_template():
    """One reshaped host running a 2-GPU instance in a pair (a snapshot).

    Reshaped in an embedded Placement: copying it is faster than
    reshaping 100 hosts.
    """
    document = novalike.document({TEMPLATE: novalike.BOARD1})
    names = novalike.names_in(document)
    held = {names['%s_%s' % (TEMPLATE, a.upper())]: {
        'resources': {novalike.GPU_RC: 1}} for a in PAIR}
    held[names[TEMPLATE]] = {'resources': {'VCPU': 8}}
    document['allocations'][str(uuid.uuid5(uuid.NAMESPACE_DNS, TEMPLATE))] = {
        'project_id': 'p', 'user_id': 'u', 'consumer_type': 'INSTANCE',
        'allocations': held}
    parsed = loader.parse(topology({TEMPLATE}), '<test>')
    placement = embedded.EmbeddedPlacement(document)
    with placement as client:
        run.run(client, [desired.from_topology(h)
                         for h in parsed.hosts.values()])
        return placement.export()


def topology(hosts):
    return {'version': 1, 'hosts': {
        h: {'board': novalike.H100, 'gpus': dict(novalike.BOARD1)}
        for h in sorted(hosts)}}


def copies(template, hosts):
    """``template`` once per host: names and uuids made its own."""
    text = json.dumps(template)
    old = [rp['uuid'] for rp in template['resource_providers']]
    old += list(template['allocations'])
    providers, consumers = [], {}
    for host in hosts:
        copy = text.replace(TEMPLATE, host)
        for u in old:
            copy = copy.replace(u, str(uuid.uuid5(uuid.UUID(u), host)))
        one = json.loads(copy)
        providers.extend(one['resource_providers'])
        consumers.update(one['allocations'])
    return snapshot.document(providers, consumers)


class TestNoReadPerHost(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        # The captured log keeps warnings only: at DEBUG, 221 requests on
        # 100 hosts make a 10 MB attachment, past subunit's packet limit.
        for handler in logging.getLogger().handlers:
            handler.setLevel(logging.WARNING)
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.topology = os.path.join(self.tmp, 'topology.yaml')
        with open(self.topology, 'w') as f:
            yaml.safe_dump(topology(HOSTS), f)
        server = placement_server.PlacementServer(
            snapshot=copies(busy_template(), HOSTS)).start()
        self.addCleanup(server.stop)
        self.proxy = fault_proxy.FaultProxy(server.url).start()
        self.addCleanup(self.proxy.stop)

    def requests(self, *more):
        """Requests one ``check`` makes through the proxy; its result."""
        before = len(self.proxy.log)
        result = cli.run(self, 'nvlink', 'check', '--topology',
                         self.topology, '--os-auth-type', 'admin_token',
                         '--os-token', 'admin', '--os-endpoint',
                         self.proxy.url, '-f', 'json', *more)
        self.assertEqual(0, result.code, result.stderr)
        return len(self.proxy.log) - before

    def test_same_requests_with_and_without_the_textfile(self):
        prom = os.path.join(self.tmp, 'nvlink.prom')
        without = self.requests()
        with_metrics = self.requests('--prometheus-textfile', prom)
        # Planning, the free listing, then per host its node's
        # allocations and its one instance: more than 200.
        self.assertGreater(without, 200)
        self.assertEqual(without, with_metrics)
        m = test_capacity_metrics.metrics(prom)
        rc = (('resource_class', novalike.GPU_RC),)
        self.assertEqual(
            (800, 600, 100, 0),
            (m[('nvlink_placement_gpus',) + rc],
             m[('nvlink_placement_free_gpus',) + rc],
             # Per host: quad 5-8 free, quad 1-4 holds the instance.
             m[('nvlink_placement_free_domains',) + rc + (('size', '4'),)],
             m[('nvlink_placement_free_domains',) + rc + (('size', '8'),)]))
        # No series per host: 5 about the run, 10 drift kinds, 13 capacity
        # (as at 2 hosts, tests.functional.test_capacity_metrics).
        self.assertEqual(28, len(m))
