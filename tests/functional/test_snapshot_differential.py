"""Differential: both load paths, and a real Placement, keep a snapshot.

Generated legal snapshots (:mod:`tests.snapshot_corpus`, seeded) are
loaded into the embedded Placement in bulk (its tables) and through the
API fallback (request by request), and exported: each export must be the
document itself in the canonical form, the two the same but for consumer
generations (the API gives a new consumer generation 1). A fixed corpus is
also written over REST into a gunicorn Placement, exported live and
compared with the bulk export, and the same ``member_of`` and capacity
questions get the same answers from both.
"""

import urllib.parse

import fixtures
from oslotest import base

from nvlink_placement.placement import client as pc
from nvlink_placement.placement import embedded
from nvlink_placement.placement import snapshot
from nvlink_placement.placement import snapshot_api
from nvlink_placement.placement import snapshot_capacity
from nvlink_placement.placement import snapshot_db
from tests import placement_server
from tests import snapshot_corpus

SEEDS = range(3)
FIXED = 1001


def bulk_export(document):
    with embedded.EmbeddedPlacement(document) as client:
        return client.placement.export()


class TestBothLoadPaths(base.BaseTestCase):

    def api_export(self, document):
        patch = fixtures.MockPatchObject(snapshot_db, 'KNOWN_REVISIONS',
                                         frozenset())
        with patch:
            placement = embedded.EmbeddedPlacement(document)
            with placement as client:
                self.assertGreater(client.requests['POST'], 0)
                return placement.export()

    def test_generated_snapshots(self):
        for seed in SEEDS:
            document = snapshot_corpus.generate(seed)
            bulk = bulk_export(document)
            self.assertEqual(snapshot_corpus.expected(document), bulk, seed)
            self.assertEqual(
                snapshot_corpus.expected(document, generations=False),
                self.api_export(document), seed)
            # And the export loads back to itself.
            self.assertEqual(bulk, bulk_export(bulk), seed)

    def test_the_corpus_has_what_it_promises(self):
        documents = [snapshot_corpus.generate(seed) for seed in SEEDS]
        providers = [rp for d in documents for rp in d['resource_providers']]
        consumers = [c for d in documents
                     for c in d['allocations'].values()]
        self.assertTrue(any(rp.get('aggregates') and
                            rp['parent_provider_uuid'] for rp in providers))
        self.assertTrue(any('MISC_SHARES_VIA_AGGREGATE' in rp.get('traits', ())
                            for rp in providers))
        self.assertTrue(any(snapshot.provider_uuid(rp['uuid']) != rp['uuid']
                            for rp in providers))
        deepest = max(max(snapshot.depths(
            {rp['uuid']: rp['parent_provider_uuid']
             for rp in snapshot.canonical(d)['resource_providers']}
        )[0].values()) for d in documents)
        self.assertGreaterEqual(deepest, 3)
        self.assertEqual(set(snapshot_corpus.KINDS), {
            c.get('consumer_type') for c in consumers})
        self.assertEqual({None, 0, 1, 7}, {
            c.get('consumer_generation') for c in consumers})
        self.assertTrue(any(snapshot_capacity.strained(snapshot.canonical(d))
                            for d in documents))


class TestRealPlacement(base.BaseTestCase):
    """A fixed corpus written over REST into gunicorn, exported live."""

    QUERIES = ('member_of=in:%(aggregates)s',
               'member_of=%(aggregate)s&resources=DISK_GB:1',
               'resources=VCPU:1', 'resources=MEMORY_MB:1,VCPU:1',
               'required=MISC_SHARES_VIA_AGGREGATE',
               'required=!OWNER_NOVA&resources=DISK_GB:10')

    def test_fixed_corpus(self):
        document = snapshot_corpus.generate(FIXED)
        server = placement_server.PlacementServer().start()
        self.addCleanup(server.stop)
        live = pc.PlacementClient(server.adapter())
        snapshot_api.load(live, document)
        exported = snapshot_api.export(live, workers=2, every_tree=True)
        self.assertEqual(snapshot_corpus.expected(document,
                                                  generations=False),
                         exported)
        aggregates = sorted({a for rp in exported['resource_providers']
                             for a in rp.get('aggregates', ())})
        with embedded.EmbeddedPlacement(document) as client:
            for query in self.QUERIES:
                query = query % {
                    'aggregates': ','.join(aggregates),
                    'aggregate': aggregates[-1]}
                url = '/resource_providers?' + urllib.parse.quote(
                    query, safe='=&:,!')
                self.assertEqual(
                    sorted(rp['uuid'] for rp in live.get(
                        url, version='1.22')['resource_providers']),
                    sorted(rp['uuid'] for rp in client.get(
                        url, version='1.22')['resource_providers']), query)
