"""Base class for tests on a real, embedded Placement."""

import json
import os
import urllib.parse

import fixtures
from oslotest import base

from nvlink_placement.placement import embedded
from nvlink_placement.plan import desired
from nvlink_placement.plan import run
from nvlink_placement.topology import loader
from tests import novalike

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, 'etc', 'examples')
H100_TOPOLOGY = os.path.join(EXAMPLES, 'hgx-h100.yaml')
H100_SNAPSHOT = os.path.join(EXAMPLES, 'hgx-h100-snapshot.json')


class PlacementFixture(fixtures.Fixture):
    """A fresh embedded Placement.

    ``placement`` is the :class:`EmbeddedPlacement` (bulk ``load`` and
    ``export``), ``client`` its PlacementClient.
    """

    def __init__(self, document=None):
        super().__init__()
        self.document = document

    def _setUp(self):
        self.placement = embedded.EmbeddedPlacement(self.document)
        self.client = self.placement.__enter__()
        self.addCleanup(self.placement.__exit__, None, None, None)


class PlacementTestCase(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        fixture = self.useFixture(PlacementFixture())
        self.placement = fixture.placement
        self.client = fixture.client

    def write_file(self, name, text):
        """Write ``text`` into a temp dir; return the path."""
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def seed_example(self):
        """The two H100 hosts of the example, as Nova reports them."""
        self.names = self.seed_hosts({'compute-01': novalike.BOARD1,
                                      'compute-02': novalike.BOARD2})

    def seed_hosts(self, hosts, **kwargs):
        """Bulk-load Nova-like trees (:func:`novalike.document`).

        :returns: dict RP name -> uuid.
        """
        document = novalike.document(hosts, **kwargs)
        self.placement.load(document)
        return novalike.names_in(document)

    def reshape(self, topology_path=H100_TOPOLOGY, hosts=(), apply=True):
        topology = loader.load(topology_path)
        wanted = [desired.from_topology(h) for h in topology.select(hosts)]
        return run.run(self.client, wanted, apply=apply)

    def dump(self):
        """The exported trees as canonical JSON text.

        Trees with a Nova PCI provider only, without global traits or
        generations: "nothing was written" is judged by
        :func:`tests.functional.writes.nothing_written` instead.
        """
        return json.dumps(self.placement.export(), sort_keys=True)

    def candidates(self, **query):
        """GET /allocation_candidates at 1.36; returns the body."""
        return self.client.get('/allocation_candidates?' +
                               urllib.parse.urlencode(query),
                               version='1.36')

    def gpu_sets(self, body, rc=novalike.GPU_RC):
        """Allocation requests as a set of frozensets of RP names."""
        by_uuid = self._names_by_uuid()
        result = set()
        for request in body['allocation_requests']:
            result.add(frozenset(
                by_uuid[u] for u, a in request['allocations'].items()
                if rc in a['resources']))
        return result

    def _names_by_uuid(self):
        body = self.client.get('/resource_providers')['resource_providers']
        self._parent_of = {rp['uuid']: rp['parent_provider_uuid']
                           for rp in body}
        return {rp['uuid']: rp['name'] for rp in body}

    def parents(self):
        """dict RP name -> parent RP name (None for roots)."""
        names = self._names_by_uuid()
        return {name: names.get(self._parent_of[uuid])
                for uuid, name in names.items()}
