"""Bulk load and export on the embedded Placement, read back by the API."""

import copy
import datetime
import logging
import os

import fixtures
from oslotest import base as oslo_base
from placement.db.sqlalchemy import models
import sqlalchemy as sa

from nvlink_placement import errors
from nvlink_placement.placement import client as pc
from nvlink_placement.placement import embedded
from nvlink_placement.placement import snapshot
from nvlink_placement.placement import snapshot_api
from nvlink_placement.placement import snapshot_db
from tests.functional import base
from tests.functional import writes
from tests import novalike
from tests import placement_server

RC = novalike.GPU_RC
INSTANCE = 'a0a0a0a0-0000-4000-8000-000000000001'
UNTYPED = 'a0a0a0a0-0000-4000-8000-000000000002'
AGGREGATE = 'a9a9a9a9-0000-4000-8000-000000000001'


def varied():
    """Two Nova-like hosts with what real clouds hold beyond the basics.

    A typed and an untyped consumer across several providers, an
    aggregate on a node, an operator's reserved GPU, an allocated
    one-time-use GPU (reserved = total after the allocation) and a
    consumer generation other than 1.
    """
    document = novalike.document({'compute-01': novalike.BOARD1,
                                  'compute-02': novalike.BOARD2})
    names = novalike.names_in(document)
    by_name = {rp['name']: rp for rp in document['resource_providers']}
    by_name['compute-01']['aggregates'] = [AGGREGATE]
    by_name['compute-02_0000:18:00.0']['inventories'][RC]['reserved'] = 1
    otu = by_name['compute-02_0000:DB:00.0']
    otu['inventories'][RC]['reserved'] = 1
    otu['traits'] = sorted(otu['traits'] + ['HW_PCI_ONE_TIME_USE'])
    document['allocations'] = {
        INSTANCE: snapshot.consumer_entry(
            'p1', 'u1', {names['compute-01']: {'VCPU': 16, 'MEMORY_MB': 4096},
                         names['compute-01_0000:4C:00.0']: {RC: 1},
                         names['compute-01_0000:5D:00.0']: {RC: 1}},
            generation=4, consumer_type='INSTANCE'),
        UNTYPED: snapshot.consumer_entry(
            'p2', 'u2', {names['compute-02']: {'VCPU': 8},
                         names['compute-02_0000:DB:00.0']: {RC: 1}},
            generation=1, consumer_type=snapshot.UNTYPED)}
    snapshot.validate(document)
    return document


class TestBulkLoad(base.PlacementTestCase):

    def setUp(self):
        super().setUp()
        self.document = varied()
        self.placement.load(self.document)
        self.names = novalike.names_in(self.document)

    def test_exports_give_back_the_document(self):
        self.assertEqual(self.document, self.placement.export())
        self.assertEqual(self.document, snapshot_api.export(self.client))

    def test_rows_carry_a_creation_time_sqlalchemy_reads(self):
        # The rows go in through the driver's executemany: created_at is
        # stored in the dialect's text form and read back as a datetime.
        with self.placement.engine.connect() as conn:
            stamps = conn.execute(sa.select(
                models.ResourceProvider.created_at)).scalars().all()
            raw = conn.exec_driver_sql(
                'SELECT created_at FROM resource_providers').scalars().all()
        self.assertEqual(len(self.document['resource_providers']),
                         len(stamps))
        now = datetime.datetime.now(datetime.timezone.utc).replace(
            tzinfo=None)
        for stamp in stamps:
            self.assertIsInstance(stamp, datetime.datetime)
            self.assertLess(abs((now - stamp).total_seconds()), 600)
        self.assertRegex(raw[0], r'^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}$')

    def test_provider_roots_are_what_the_listing_says(self):
        listing = self.client.get('/resource_providers')
        self.assertEqual(
            {rp['uuid']: (rp['name'], rp['root_provider_uuid'])
             for rp in listing['resource_providers']},
            self.placement.provider_roots())
        gpu = self.names['compute-01_0000:4C:00.0']
        self.assertEqual(('compute-01_0000:4C:00.0',
                          self.names['compute-01']),
                         self.placement.provider_roots()[gpu])

    def test_the_api_reads_what_was_loaded(self):
        node = self.names['compute-01']
        gpu = self.names['compute-01_0000:4C:00.0']
        rp = self.client.get('/resource_providers/%s' % gpu)
        self.assertEqual((node, node), (rp['parent_provider_uuid'],
                                        rp['root_provider_uuid']))
        self.assertEqual(sorted(set(novalike.PCI_TRAITS) | set(
            novalike.member_traits(novalike.BOARD1)['0000:4c:00.0'])),
            sorted(self.client.get('/resource_providers/%s/traits' % gpu,
                                   version='1.6')['traits']))
        self.assertEqual({RC: 1}, self.client.get(
            '/resource_providers/%s/usages' % gpu)['usages'])
        self.assertEqual({'VCPU': 16, 'MEMORY_MB': 4096, 'DISK_GB': 0},
                         self.client.get('/resource_providers/%s/usages'
                                         % node)['usages'])
        self.assertEqual([AGGREGATE], self.client.get(
            '/resource_providers/%s/aggregates' % node)['aggregates'])
        inventory = self.client.get('/resource_providers/%s/inventories'
                                    % node)['inventories']['MEMORY_MB']
        self.assertEqual({'total': 2063784, 'reserved': 512, 'min_unit': 1,
                          'max_unit': 2063784, 'step_size': 1,
                          'allocation_ratio': 1.0}, inventory)
        consumer = self.client.get('/allocations/%s' % UNTYPED,
                                   version='1.38')
        self.assertEqual(('p2', 'u2', 1, 'unknown'), (
            consumer['project_id'], consumer['user_id'],
            consumer['consumer_generation'], consumer['consumer_type']))
        self.assertEqual('INSTANCE', self.client.get(
            '/allocations/%s' % INSTANCE, version='1.38')['consumer_type'])
        self.assertEqual(2 + 16, len(self.client.get(
            '/resource_providers')['resource_providers']))
        self.assertEqual([RC], [
            rc['name'] for rc in self.client.get(
                '/resource_classes', version='1.7')['resource_classes']
            if rc['name'].startswith('CUSTOM_')])

    def test_allocation_candidates_see_usage_and_reservations(self):
        body = self.candidates(resources='%s:1' % RC, limit=100)
        # 16 GPUs: 2 allocated, 1 reserved by the operator, 1 one-time-use
        # reserved after its allocation.
        self.assertEqual(12, len(body['allocation_requests']))
        body = self.candidates(resources='%s:1' % RC, member_of=AGGREGATE,
                               limit=100)
        self.assertEqual(6, len(body['allocation_requests']))

    def test_writes_through_the_api_keep_generations(self):
        gpu = self.names['compute-01_0000:19:00.0']
        traits = self.client.get('/resource_providers/%s/traits' % gpu,
                                 version='1.6')
        self.client.request('PUT', '/resource_providers/%s/traits' % gpu,
                            version='1.6', body={
                                'traits': ['CUSTOM_X'],
                                'resource_provider_generation':
                                    traits['resource_provider_generation']},
                            expect=(400,))
        self.client.request('PUT', '/traits/CUSTOM_X', version='1.6',
                            expect=(201,))
        stale = self.client.request(
            'PUT', '/resource_providers/%s/traits' % gpu, version='1.23',
            body={'traits': ['CUSTOM_X'],
                  'resource_provider_generation':
                      traits['resource_provider_generation'] + 1},
            expect=(409,))
        self.assertEqual('placement.concurrent_update',
                         stale['errors'][0]['code'])
        self.client.request('PUT', '/resource_providers/%s/traits' % gpu,
                            version='1.6', body={
                                'traits': ['CUSTOM_X'],
                                'resource_provider_generation':
                                    traits['resource_provider_generation']})
        # A new allocation next to the loaded ones, then a full node.
        novalike.allocate(self.client, 'b0b0b0b0-0000-4000-8000-000000000001',
                          {gpu: {RC: 1}})
        self.client.request(
            'PUT', '/allocations/b0b0b0b0-0000-4000-8000-000000000002',
            version='1.38', expect=(409,), body={
                'allocations': {gpu: {'resources': {RC: 1}}},
                'project_id': 'p', 'user_id': 'u',
                'consumer_generation': None, 'consumer_type': 'INSTANCE'})
        # The loaded consumer's generation is the one Placement checks.
        body = {'allocations': {}, 'project_id': 'p1', 'user_id': 'u1',
                'consumer_type': 'INSTANCE'}
        self.client.request('PUT', '/allocations/%s' % INSTANCE,
                            version='1.38', expect=(409,),
                            body=dict(body, consumer_generation=3))
        self.client.request('PUT', '/allocations/%s' % INSTANCE,
                            version='1.38', expect=(204,),
                            body=dict(body, consumer_generation=4))

    def test_over_capacity_after_a_lowered_ratio_round_trips(self):
        # Placement lets an inventory shrink under its usage (it logs a
        # warning); such a state exports and reads back, with a warning
        # naming the consumer (TestOverCapacity loads it).
        node = self.names['compute-01']
        url = '/resource_providers/%s/inventories' % node
        body = self.client.get(url)
        body['inventories']['VCPU'].update(total=8, max_unit=8,
                                           allocation_ratio=1.0)
        self.client.request('PUT', url, body=body, version='1.26')
        exported = self.placement.export()
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'prod.json')
        snapshot.write_file(exported, path)
        logs = self.useFixture(fixtures.FakeLogger(level=logging.WARNING))
        self.assertEqual(exported, snapshot.read_file(path))
        self.assertEqual(
            '%s: allocations["%s"].allocations["%s"].resources.VCPU: '
            "over capacity: 16 VCPU allocated on 'compute-01' (by %s) but "
            'its inventory holds total 8 x allocation_ratio 1.0; Placement '
            'keeps such allocations, nothing more fits there\n'
            % (path, INSTANCE, node, INSTANCE), logs.output)

    def test_a_second_load_of_the_same_trees_is_refused(self):
        with writes.nothing_written(self, self.placement):
            exc = self.assertRaises(errors.NvlinkError, self.placement.load,
                                    self.document)
        self.assertIn('cannot load the snapshot: Placement already has '
                      'provider %s (compute-01)' % self.names['compute-01'],
                      str(exc))

    def test_more_trees_next_to_loaded_ones(self):
        names = self.seed_hosts({'compute-03': novalike.BOARD1})
        self.assertEqual(3 + 24, len(self.client.get(
            '/resource_providers')['resource_providers']))
        self.assertEqual(names['compute-03'], self.client.get(
            '/resource_providers/%s' % names['compute-03_0000:4C:00.0'])[
            'root_provider_uuid'])
        exported = self.placement.export(['compute-03'])
        self.assertEqual(novalike.document({'compute-03': novalike.BOARD1}),
                         exported)


class TestSameStateAsNova(oslo_base.BaseTestCase):
    """Bulk-loaded trees equal the trees Nova's requests create."""

    def test_seed_requests_and_bulk_load_agree(self):
        boards = {'compute-01': novalike.BOARD1,
                  'compute-02': novalike.BOARD2}
        with embedded.EmbeddedPlacement() as client:
            # Through the API (a plain client bypasses the bulk path).
            plain = pc.PlacementClient(client.adapter, lock=client.lock)
            for host, board in boards.items():
                novalike.seed_host(plain, host, board)
            # The resource class per host, inventories and traits per RP,
            # and the 14 member traits of the layout per host.
            self.assertEqual(2 + 18 + 18 + 2 * 14, plain.requests['PUT'])
            seeded = client.placement.export()
        with embedded.EmbeddedPlacement(novalike.document(boards)) as client:
            self.assertEqual(seeded, client.placement.export())


class TestPreloadedServer(oslo_base.BaseTestCase):

    def test_http_placement_serves_a_preloaded_snapshot(self):
        document = varied()
        server = placement_server.PlacementServer(snapshot=document).start()
        self.addCleanup(server.stop)
        client = pc.PlacementClient(server.adapter())
        self.assertEqual(document, snapshot_api.export(client, workers=4))
        self.assertEqual('INSTANCE', client.get(
            '/allocations/%s' % INSTANCE, version='1.38')['consumer_type'])
        # Without a token (--os-auth-type none): 401, and what to do.
        from keystoneauth1 import adapter
        from keystoneauth1 import session
        bare = pc.PlacementClient(adapter.Adapter(
            session.Session(), service_type='placement',
            endpoint_override=server.url), retry_window=0)
        exc = self.assertRaises(errors.PlacementError, bare.get,
                                '/resource_providers')
        self.assertEqual(401, exc.status)
        self.assertIn('takes --os-auth-type admin_token --os-token admin '
                      '--os-endpoint URL)', str(exc))


class TestOverCapacity(oslo_base.BaseTestCase):
    """An inventory below its usage loads as it is, bulk and by the API."""

    def over_capacity(self):
        document = varied()
        node = next(rp for rp in document['resource_providers']
                    if rp['name'] == 'compute-01')
        node['inventories']['VCPU'].update(total=8, max_unit=8,
                                           allocation_ratio=1.0)
        self.assertTrue(snapshot.over_capacity(document))
        return document, node

    def test_bulk(self):
        document, _ = self.over_capacity()
        with embedded.EmbeddedPlacement(document) as client:
            self.assertEqual(document, client.placement.export())

    def test_through_the_api(self):
        self.useFixture(fixtures.MockPatchObject(
            snapshot_db, 'KNOWN_REVISIONS', frozenset()))
        document, node = self.over_capacity()
        with embedded.EmbeddedPlacement(document) as client:
            exported = client.placement.export()
            self.assertEqual(8, client.get(
                '/resource_providers/%s/inventories/VCPU'
                % node['uuid'])['total'])
        # The API gives new consumers generation 1: all else is the same.
        expected = copy.deepcopy(document)
        del expected['allocations'][INSTANCE]['consumer_generation']
        self.assertEqual(expected, exported)


class TestApiFallback(oslo_base.BaseTestCase):
    """An unknown schema revision loads through the API, with a warning."""

    def test_unknown_revision(self):
        self.useFixture(fixtures.MockPatchObject(
            snapshot_db, 'KNOWN_REVISIONS', frozenset()))
        logs = self.useFixture(fixtures.FakeLogger(level=logging.WARNING))
        document = varied()
        placement = embedded.EmbeddedPlacement(document)
        with placement as client:
            # 18 providers and 2 POST /allocations: typed, untyped.
            self.assertEqual(20, client.requests['POST'])
            exported = placement.export()
        self.assertIn('Placement database schema revision a082b8bb98d0 is '
                      'not one this version of nvlink-placement knows',
                      logs.output)
        self.assertIn('loading the snapshot through the Placement API',
                      logs.output)
        # The API gives new consumers generation 1: all else is the same.
        expected = copy.deepcopy(document)
        del expected['allocations'][INSTANCE]['consumer_generation']
        self.assertEqual(expected, exported)

    def test_revision_of_the_installed_placement(self):
        self.assertEqual('a082b8bb98d0', snapshot_db.installed_revision())
