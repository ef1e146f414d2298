"""flavor verify's member-trait listings from the embedded Placement's tables.

Offline, ``flavor verify`` takes the free GPUs that carry each member trait
as the alias' free GPUs (a Placement listing) intersected with the
providers that carry the trait (the tables), instead of one listing per
trait. On a generated cloud whose GPUs carry the member traits Nova writes
and a third of whose GPUs are in use, the sets must be the ones
Placement's own listings give.
"""

import urllib.parse

from oslotest import base

from nvlink_placement.flavors import generate
from nvlink_placement.flavors import inputs
from nvlink_placement.flavors import request
from nvlink_placement.flavors import verify
from nvlink_placement.placement import embedded
from nvlink_placement.placement import snapshot
from nvlink_placement.topology import loader
from tests import cloud_corpus


class TestMemberListingsFromTables(base.BaseTestCase):

    def test_same_sets_as_placements_listings(self):
        topology_doc, document, info = cloud_corpus.generate(
            12, seed=5, sharing_every=None)
        snapshot.validate(document)
        hosts = list(loader.parse(topology_doc, '<corpus>').hosts.values())
        aliases = {'h100': request.Alias('h100', cloud_corpus.RC)}
        queries = [request.build(inputs.flavor_from_dict(f.as_dict()),
                                 aliases)
                   for f in generate.generate(hosts, 'h100',
                                              sizes=[1, 2, 4, 8]).flavors]
        with embedded.EmbeddedPlacement(document) as client:
            through_api = {}
            for query in queries:
                verify.verify(client, query, hosts, listings=through_api)
            from_tables = {}
            verify.prefetch(client, queries, from_tables,
                            carriers=client.placement.trait_carriers)
            members = {url: trait for url in from_tables
                       for trait in urllib.parse.parse_qs(
                           urllib.parse.urlsplit(url).query).get(
                               'required', [''])[0].split(',')
                       if '_MEMBER' in trait}
            carriers = client.placement.trait_carriers(set(members.values()))
        # 2 + 4 + 8 member traits; the 1-GPU flavor has none.
        self.assertEqual(14, len(members))
        for url in members:
            self.assertEqual(through_api[url], from_tables[url], url)
        # GPUs in use carry their member traits too: the listings are the
        # free ones only, which the carriers alone are not.
        self.assertGreater(info['gpus_used'], 0)
        self.assertTrue(any(carriers[trait] - from_tables[url]
                            for url, trait in members.items()))
        self.assertTrue(all(from_tables[url] for url in members))
