"""Differential: the offline apply equals the REST path of a real Placement.

``reshape --snapshot`` reads allocations from the embedded Placement's
tables and writes its plan straight into them
(:mod:`nvlink_placement.plan.bulk`). Here the same cloud is loaded twice
into ``openstack-placement``: once reshaped through its REST API (every
read and write a request through its WSGI application, as against a live
cloud), once the offline way; then ``flatten --all`` the same two ways.
After each step the two must agree on everything Placement shows:

- the plan (actions and findings, split instances included);
- the saved snapshot, in its canonical order (new group providers are
  named by their name: their uuids are random on both paths);
- every provider's generation, parent and root (``GET
  /resource_providers``), and its listing order;
- after the reshape, the answer to ``GET /allocation_candidates`` of
  every generated flavor (its allocation requests, as providers and
  amounts, and the provider summaries).

Clouds: seeded :mod:`tests.cloud_corpus` clouds (every board kind with
mesh and 16-GPU boards, partial reshapes, every drift kind, sharing
providers with nested members, consumers of every type, split instances,
GPUs reserved by Nova and unhealthy ones) and the example snapshots.
"""

import json
import os

import fixtures
from oslotest import base

from nvlink_placement.flavors import aliases as aliases_mod
from nvlink_placement.flavors import generate
from nvlink_placement.flavors import inputs
from nvlink_placement.flavors import release
from nvlink_placement.flavors import request as request_mod
from nvlink_placement.placement import embedded
from nvlink_placement.placement import snapshot
from nvlink_placement.plan import bulk
from nvlink_placement.plan import desired
from nvlink_placement.plan import executor
from nvlink_placement.plan import run
from nvlink_placement.topology import loader
from tests import cloud_corpus
from tests.functional import base as fbase
from tests.functional import cli

SEEDS = (1, 2)
HOSTS = 13              # one of each variant, and a few flat ones
EXAMPLES = (('hgx-h100.yaml', 'hgx-h100-snapshot.json'),
            ('direct-nvlink.yaml', 'direct-nvlink-snapshot.json'))


def _flavor_requests(topology):
    hosts = list(topology.hosts.values())
    flavors = [inputs.flavor_from_dict({
        'name': f.name, 'vcpus': f.vcpus, 'ram': f.ram, 'disk': f.disk,
        'extra_specs': f.extra_specs})
        for f in generate.generate(hosts, 'gpu',
                                   trait_prefix=topology.trait_prefix).flavors]
    aliases = aliases_mod.aliases_for(flavors, hosts, None,
                                      cloud_corpus.RC)
    nova = release.choose(None, release.AUTO)
    return hosts, [request_mod.build(f, aliases, request_mod.DEFAULT_LIMIT,
                                     nova) for f in flavors]


class _Path(object):
    """One path: an embedded Placement loaded with the cloud.

    Embedded Placements are one at a time per process: each path runs
    all its steps, then the next path runs.
    """

    def __init__(self, document, offline, topology_hosts, requests):
        self.document = document
        self.offline = offline
        self.topology_hosts = topology_hosts
        self.requests = requests
        self.old = {rp['uuid'] for rp in snapshot.canonical(
            document)['resource_providers']}

    def steps(self, steps):
        """``[(plan, observed)]`` of each ``(hosts, run kwargs)`` step.

        Allocation candidates are asked after the first step only.
        """
        results = []
        with embedded.EmbeddedPlacement(self.document) as client:
            self.client = client
            tables = client.placement if self.offline else None
            for hosts, kwargs in steps:
                result = run.run(client, hosts, tables=tables, **kwargs)
                planned = (
                    [a.row() + (a.drift,) for a in result.actions],
                    [a.row() + (a.drift, a.consumer)
                     for a in result.findings],
                    [(f.host, f.error, f.done) for f in result.failures])
                results.append((planned, self.observed(not results)))
        return results

    def names(self):
        listed = self.client.get('/resource_providers',
                                 version='1.14')['resource_providers']
        return {rp['uuid']: rp['name'] for rp in listed}

    def observed(self, candidates=True):
        """Everything compared, new providers' uuids replaced by names."""
        names = self.names()

        def same(uuid):
            if uuid is None or uuid in self.old:
                return uuid
            return 'new:%s' % names.get(uuid, uuid)
        exported = self.client.placement.export()
        for rp in exported['resource_providers']:
            rp['uuid'] = same(rp['uuid'])
            rp['parent_provider_uuid'] = same(rp['parent_provider_uuid'])
        listed = [(rp['name'], rp['generation'],
                   names.get(rp['parent_provider_uuid']),
                   names[rp['root_provider_uuid']])
                  for rp in self.client.get(
                      '/resource_providers',
                      version='1.14')['resource_providers']]
        answers = []
        for query in self.requests if candidates else ():
            body = self.client.get(query.url,
                                   version=request_mod.MICROVERSION)
            answers.append((
                query.flavor,
                sorted(sorted((names[u], sorted(a['resources'].items()))
                              for u, a in r['allocations'].items())
                       for r in body['allocation_requests']),
                sorted((names[u], sorted(
                    (rc, sorted(v.items()))
                    for rc, v in s['resources'].items()))
                    for u, s in body['provider_summaries'].items())))
        return {'snapshot': exported, 'providers': listed,
                'candidates': answers}


class TestOfflineApplyEqualsRest(base.BaseTestCase):

    def compare(self, topology, document, what):
        desired_hosts = [desired.from_topology(
            h, trait_prefix=topology.trait_prefix)
            for h in topology.hosts.values()]
        topology_hosts, requests = _flavor_requests(topology)
        self.assertTrue(requests, what)
        # reshape, then undo it: flatten (moves, deletions, releases).
        steps = [(desired_hosts, {'allocations': run.CHANGED_HOSTS}),
                 ([desired.flat(h.name) for h in desired_hosts], {})]
        rest = _Path(document, False, topology_hosts, requests).steps(steps)
        fast = _Path(document, True, topology_hosts, requests).steps(steps)
        for label, (planned, seen), (fast_planned, fast_seen) in zip(
                ('reshape', 'flatten'), rest, fast):
            self.assertEqual(planned, fast_planned, '%s: %s: plans differ'
                             % (what, label))
            self.assertTrue(planned[0], '%s: %s writes nothing'
                            % (what, label))
            self.assertEqual([], planned[2], what)
            for key in ('snapshot', 'providers', 'candidates'):
                self.assertEqual(seen[key], fast_seen[key],
                                 '%s: %s: %s differ' % (what, label, key))
        return rest[0][0]

    def test_generated_clouds(self):
        drift = set()
        for seed in SEEDS:
            hosts_doc, document, info = cloud_corpus.generate(
                HOSTS, seed, boards=cloud_corpus.MIXED, drift_hosts=1,
                split=0.3, sharing_every=5)
            topology = loader.parse(hosts_doc, 'seed %d' % seed)
            actions, findings, _ = self.compare(topology, document,
                                                'seed %d' % seed)
            drift |= {row[-1] for row in actions}
            drift |= {row[-2] for row in findings}
        # The corpus holds what the comparison is meant to cover.
        self.assertEqual({'missing-group', 'missing-trait', 'wrong-parent',
                          'unexpected-group', 'missing-reservation',
                          'stale-reservation', 'unknown-gpu',
                          'split-allocation'}, drift)

    def test_example_snapshots(self):
        for topology_file, snapshot_file in EXAMPLES:
            topology = loader.load(os.path.join(fbase.EXAMPLES,
                                                topology_file))
            document = snapshot.read_file(os.path.join(fbase.EXAMPLES,
                                                       snapshot_file))
            self.compare(topology, document, snapshot_file)


class TestRefusedWrites(base.BaseTestCase):
    """A write Placement refuses stops its host at the same action."""

    def test_group_with_a_child_is_not_deleted(self):
        topology = loader.load(fbase.H100_TOPOLOGY)
        desired_hosts = [desired.from_topology(h)
                         for h in topology.hosts.values()]
        with embedded.EmbeddedPlacement(
                snapshot.read_file(fbase.H100_SNAPSHOT)) as client:
            self.assertEqual([], run.run(client, desired_hosts).failures)
            reshaped = client.placement.export()
        flat = [desired.flat(h.name) for h in desired_hosts]
        group = next(rp['uuid'] for rp in reshaped['resource_providers']
                     if rp['name'] == 'compute-01_nvlink-group-of-2-a')

        def flatten(offline):
            with embedded.EmbeddedPlacement(reshaped) as client:
                tables = client.placement if offline else None
                current, plan = run.read_and_plan(client, flat,
                                                  tables=tables)
                # Written after the plan: Placement refuses to delete a
                # provider with a child.
                client.request('POST', '/resource_providers', body={
                    'name': 'intruder', 'parent_provider_uuid': group},
                    version='1.20')
                if offline:
                    failures = bulk.apply(client.placement, plan.actions,
                                          current)
                else:
                    failures = executor.apply(client, plan.actions, current)
                names = {rp['uuid']: rp['name'] for rp in client.get(
                    '/resource_providers',
                    version='1.14')['resource_providers']}
                exported = client.placement.export()
                return ([(f.host, f.done) for f in failures],
                        sorted((rp['name'], names.get(
                            rp['parent_provider_uuid']))
                            for rp in exported['resource_providers']),
                        [f.error for f in failures])
        rest, fast = flatten(False), flatten(True)
        self.assertEqual(rest[:2], fast[:2])
        # compute-01 stopped at the group's deletion, compute-02 went on.
        self.assertEqual('compute-01', rest[0][0][0])
        self.assertEqual(1, len(rest[0]))
        self.assertIn(('intruder', 'compute-01_nvlink-group-of-2-a'),
                      fast[1])
        self.assertNotIn('compute-02_nvlink-group-of-8-a',
                         [name for name, _ in fast[1]])
        self.assertIn('child', fast[2][0])


class TestCommandLine(base.BaseTestCase):
    """``reshape --snapshot --save-snapshot`` takes the offline path."""

    def test_saved_snapshot_is_the_rest_paths(self):
        topology = loader.load(fbase.H100_TOPOLOGY)
        document = snapshot.read_file(fbase.H100_SNAPSHOT)
        with embedded.EmbeddedPlacement(document) as client:
            run.run(client, [desired.from_topology(h)
                             for h in topology.hosts.values()],
                    allocations=run.CHANGED_HOSTS)
            rest = client.placement.export()
        out = os.path.join(self.useFixture(fixtures.TempDir()).path,
                           'reshaped.json')
        result = cli.run(self, '-v', 'nvlink', 'reshape', '--topology',
                         fbase.H100_TOPOLOGY, '--snapshot',
                         fbase.H100_SNAPSHOT, '--save-snapshot', out)
        self.assertEqual(0, result.code, result.stderr)
        self.assertIn("wrote the plan to the embedded Placement's tables in "
                      "one transaction: 12 providers created", result.stderr)
        with open(out) as f:
            saved = json.load(f)

        def by_name(doc):
            names = {rp['uuid']: rp['name']
                     for rp in doc['resource_providers']}
            return [dict(rp, uuid=rp['name'], parent_provider_uuid=names.get(
                rp['parent_provider_uuid'])) for rp in
                doc['resource_providers']], doc['allocations']
        self.assertEqual(by_name(rest), by_name(saved))
