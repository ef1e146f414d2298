"""Snapshot files: strict reading and the checks made before any load."""

import copy
import importlib.metadata
import json
import os

import fixtures
from oslotest import base

from nvlink_placement import errors
from nvlink_placement.placement import snapshot
from nvlink_placement.placement import snapshot_capacity

CN = '94d2d7ee-cd1e-5ba7-b08a-d93eccd8bcaa'
GPU = '41781b87-395c-596e-9768-a03561f44243'
CONSUMER = '6f2c3a52-5b1e-4c4a-9f8e-0d6b2f1e7a10'
OTHER = '7e3d4b63-6c2f-4d5b-8a9f-1e7c3a2f8b21'
RC = 'CUSTOM_PCI_10DE_2330'


def example():
    """A small valid snapshot: node, one GPU, one instance on both."""
    return {
        'format': 'nvlink-placement-snapshot', 'version': 1,
        'resource_providers': [
            {'uuid': CN, 'name': 'compute-01', 'parent_provider_uuid': None,
             'inventories': {'VCPU': {'total': 8, 'allocation_ratio': 4.0}},
             'traits': ['COMPUTE_NODE', 'OWNER_NOVA'],
             'aggregates': ['a0e1c2d3-0000-4000-8000-000000000001']},
            {'uuid': GPU, 'name': 'compute-01_0000:4C:00.0',
             'parent_provider_uuid': CN,
             'inventories': {RC: {'total': 1, 'max_unit': 1}},
             'traits': ['COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA']}],
        'allocations': {
            CONSUMER: {'project_id': 'p', 'user_id': 'u',
                       'consumer_generation': 3, 'consumer_type': 'unknown',
                       'allocations': {CN: {'resources': {'VCPU': 4}},
                                       GPU: {'resources': {RC: 1}}}}}}


def newer(distribution):
    """The advice for a name the installed library may not know yet."""
    return ('a snapshot of a newer cloud can hold standard ones that %s %s, '
            'installed here, does not know: upgrade it'
            % (distribution, importlib.metadata.version(distribution)))


class TestRead(base.BaseTestCase):

    def write(self, data):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'snap.json')
        with open(path, 'wb') as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        return path

    def error(self, data):
        path = self.write(data)
        exc = self.assertRaises(errors.NvlinkError, snapshot.read_file, path)
        return path, str(exc)

    def test_example_file_loads(self):
        document = example()
        self.assertEqual(document,
                         snapshot.read_file(self.write(json.dumps(document))))

    def test_consumer_given_twice(self):
        text = json.dumps(example())
        entry = json.dumps(example()['allocations'][CONSUMER])
        text = text.replace('"allocations": {"%s"' % CONSUMER,
                            '"allocations": {"%s": %s, "%s"'
                            % (CONSUMER, entry, CONSUMER))
        path, message = self.error(text)
        self.assertEqual('%s: allocations: key "%s" is given twice'
                         % (path, CONSUMER), message)

    def test_nested_key_given_twice(self):
        text = json.dumps(example()).replace(
            '"total": 1,', '"total": 1, "total": 2,')
        path, message = self.error(text)
        self.assertEqual('%s: resource_providers[1].inventories.%s: key '
                         '"total" is given twice' % (path, RC), message)

    def test_nan_infinity_and_huge_numbers(self):
        for bad, what in (('NaN', 'NaN is not a JSON number'),
                          ('-Infinity', '-Infinity is not a JSON number'),
                          ('1e999', 'number 1e999 is out of range')):
            text = json.dumps(example()).replace('4.0', bad)
            path, message = self.error(text)
            self.assertIn('%s: not a JSON snapshot: %s' % (path, what),
                          message)
        text = json.dumps(example()).replace('"total": 8', '"total": %d'
                                             % 10 ** 30)
        path, message = self.error(text)
        self.assertEqual('%s: resource_providers[0].inventories.VCPU.total: '
                         '%d is greater than the maximum of 2147483647'
                         % (path, 10 ** 30), message)

    def test_not_utf8(self):
        data = json.dumps(example()).encode().replace(b'compute-01',
                                                      b'compute-\xff1', 1)
        path, message = self.error(data)
        self.assertIn('%s: not UTF-8 text (byte 0xff at offset' % path,
                      message)

    def test_nesting_too_deep(self):
        path, message = self.error('[' * 200000 + ']' * 200000)
        self.assertEqual('%s: not a snapshot: JSON nested too deeply'
                         % path, message)

    def test_not_json(self):
        path, message = self.error('{"format": ')
        self.assertIn('%s: not a JSON snapshot: Expecting value' % path,
                      message)

    def test_missing_file(self):
        exc = self.assertRaises(errors.NvlinkError, snapshot.read_file,
                                '/nonexistent/snap.json')
        self.assertEqual('/nonexistent/snap.json: No such file or directory',
                         str(exc))


class TestValidate(base.BaseTestCase):

    def problems(self, document):
        exc = self.assertRaises(errors.NvlinkError, snapshot.validate,
                                document, 's.json')
        return str(exc).splitlines()

    def test_valid(self):
        document = example()
        self.assertIsNone(snapshot.validate(document, 's.json'))
        self.assertEqual(example(), document)    # read, not rewritten
        # Every part of it was read: the same document with one value of
        # that part broken is refused, naming it.
        for path, breaks, why in (
                (['resource_providers', 0, 'aggregates', 0], 'nope',
                 "resource_providers[0].aggregates[0]: 'nope' is not a "
                 "uuid"),
                (['resource_providers', 1, 'traits', 0], 'NOT_A_TRAIT',
                 "resource_providers[1].traits[0]: unknown standard trait "
                 "'NOT_A_TRAIT' (custom ones start with CUSTOM_; %s)"
                 % newer('os-traits')),
                (['resource_providers', 1, 'parent_provider_uuid'], OTHER,
                 "resource_providers[1].parent_provider_uuid: parent %s of "
                 "'compute-01_0000:4C:00.0' is not in the snapshot" % OTHER),
                (['allocations', CONSUMER, 'allocations', CN, 'resources'],
                 {'MEMORY_MB': 1},
                 'allocations["%s"].allocations["%s"].resources.MEMORY_MB: '
                 "provider 'compute-01' has no MEMORY_MB inventory"
                 % (CONSUMER, CN))):
            broken = example()
            where = broken
            for key in path[:-1]:
                where = where[key]
            where[path[-1]] = breaks
            self.assertEqual(['s.json: ' + why], self.problems(broken))

    def test_total_zero(self):
        document = example()
        document['resource_providers'][1]['inventories'][RC]['total'] = 0
        self.assertEqual(['s.json: resource_providers[1].inventories.%s.'
                          'total: 0 is less than the minimum of 1' % RC],
                         self.problems(document))

    def test_unknown_standard_names_and_bad_custom_names(self):
        document = example()
        cn = document['resource_providers'][0]
        cn['traits'].append('COMPUTE_NOT_A_TRAIT')
        cn['inventories']['VCPUS'] = {'total': 1}
        cn['inventories']['CUSTOM_'] = {'total': 1}
        self.assertEqual([
            "s.json: resource_providers[0].inventories.CUSTOM_: bad custom "
            "resource class name 'CUSTOM_' (CUSTOM_ and then A-Z, 0-9, _)",
            "s.json: resource_providers[0].inventories.VCPUS: unknown "
            "standard resource class 'VCPUS' (custom ones start with "
            "CUSTOM_; %s)" % newer('os-resource-classes'),
            "s.json: resource_providers[0].traits[2]: unknown standard "
            "trait 'COMPUTE_NOT_A_TRAIT' (custom ones start with CUSTOM_; "
            "%s)" % newer('os-traits')],
            sorted(self.problems(document)))

    def test_lower_case_names_fail_the_schema(self):
        document = example()
        document['resource_providers'][0]['traits'].append('custom_x')
        self.assertEqual(["s.json: resource_providers[0].traits[2]: "
                          "'custom_x' does not match '^[A-Z0-9_]+$'"],
                         self.problems(document))

    def test_uuids(self):
        document = example()
        document['resource_providers'][0]['uuid'] = 'compute-01'
        document['resource_providers'][1]['parent_provider_uuid'] = \
            'compute-01'
        document['allocations'] = {'instance-1': {
            'project_id': 'p', 'user_id': 'u',
            'allocations': {GPU: {'resources': {RC: 1}}}}}
        self.assertEqual(
            ["s.json: allocations[\"instance-1\"]: key 'instance-1' does "
             "not match '^[0-9a-fA-F-]{36}$'"], self.problems(document))
        del document['allocations']
        self.assertEqual(
            ["s.json: resource_providers[0].uuid: 'compute-01' is not a "
             "uuid",
             "s.json: resource_providers[1].parent_provider_uuid: "
             "'compute-01' is not a uuid"], self.problems(document))

    def test_over_capacity_is_a_real_state(self):
        # Placement lets an inventory shrink under its usage: the file is
        # valid, strained (loaded relaxed through the API) and warned of.
        document = example()
        document['allocations'][OTHER] = copy.deepcopy(
            document['allocations'][CONSUMER])
        snapshot.validate(document, 's.json')
        self.assertEqual({(GPU, RC)}, snapshot_capacity.strained(document))
        self.assertEqual([
            "s.json: allocations[\"%s\"].allocations[\"%s\"].resources.%s: "
            "over capacity: 2 %s allocated on 'compute-01_0000:4C:00.0' (by "
            "%s, %s) but its inventory holds total 1 x allocation_ratio 1.0; "
            "Placement keeps such allocations, nothing more fits there"
            % (OTHER, GPU, RC, RC, CONSUMER, OTHER)],
            snapshot.over_capacity(document, 's.json'))
        self.assertEqual([], snapshot.over_capacity(example()))

    def test_reserved_after_allocation_is_a_real_state(self):
        # Nova reserves an allocated one-time-use device; this tool an
        # unhealthy GPU in use. Placement holds it; so does a snapshot.
        document = example()
        document['resource_providers'][1]['inventories'][RC]['reserved'] = 1
        snapshot.validate(document)
        self.assertEqual({(GPU, RC)}, snapshot_capacity.strained(document))
        self.assertEqual(set(), snapshot_capacity.strained(example()))

    def test_allocation_needs_inventory_and_provider(self):
        document = example()
        alloc = document['allocations'][CONSUMER]['allocations']
        alloc[GPU]['resources']['VCPU'] = 1
        alloc[OTHER] = {'resources': {'VCPU': 1}}
        self.assertEqual(
            ["s.json: allocations[\"%s\"].allocations[\"%s\"].resources."
             "VCPU: provider 'compute-01_0000:4C:00.0' has no VCPU "
             "inventory" % (CONSUMER, GPU),
             "s.json: allocations[\"%s\"].allocations[\"%s\"]: provider %s "
             "is not in the snapshot" % (CONSUMER, OTHER, OTHER)],
            self.problems(document))

    def test_consumer_type_and_generation(self):
        document = example()
        entry = document['allocations'][CONSUMER]
        entry['consumer_type'] = 'INSTANCE'
        snapshot.validate(document)
        entry['consumer_type'] = 'instance'
        entry['consumer_generation'] = -1
        problems = self.problems(document)
        self.assertEqual(2, len(problems))
        self.assertIn('s.json: allocations["%s"].consumer_generation: -1 is '
                      'less than the minimum of 0' % CONSUMER, problems)

    def test_repeated_uuid_and_name(self):
        document = example()
        document['resource_providers'].append(
            dict(document['resource_providers'][1], traits=[]))
        self.assertEqual([
            's.json: resource_providers[2].name: name '
            "'compute-01_0000:4C:00.0' is also resource_providers[1] (names "
            'are unique in Placement)',
            's.json: resource_providers[2].uuid: uuid %s is also '
            'resource_providers[1]' % GPU], sorted(self.problems(document)))

    def test_one_uuid_spelled_twice_is_one_provider(self):
        # Placement stores str(UUID(x)): the upper-case spelling of GPU is
        # GPU, and Placement would refuse the second POST with 409.
        document = example()
        document['resource_providers'].append(
            dict(document['resource_providers'][1], name='other',
                 uuid=GPU.upper().replace('-', '')))
        self.assertEqual([
            's.json: resource_providers[2].uuid: uuid %s is also '
            'resource_providers[1] (written %s there: one uuid, which '
            'Placement stores as %s)'
            % (GPU.upper().replace('-', ''), GPU, GPU)],
            self.problems(document))

    def test_one_provider_spelled_twice_in_an_allocation(self):
        document = example()
        allocations = document['allocations'][CONSUMER]['allocations']
        allocations[GPU.upper()] = {'resources': {RC: 1}}
        self.assertEqual([
            's.json: allocations["%s"].allocations["%s"]: provider %s is '
            'also listed as %s (one uuid spelled twice)'
            % (CONSUMER, GPU.upper(), GPU.upper(), GPU)],
            self.problems(document))

    def test_text_placement_cannot_store(self):
        # A lone surrogate is valid JSON ("\ud800") but has no UTF-8 form.
        document = example()
        document['resource_providers'][0]['name'] = 'compute-\ud800'
        document['allocations'][CONSUMER]['project_id'] = '\udfff'
        document['allocations'][CONSUMER]['user_id'] = 'u\ud83d'
        self.assertEqual([
            's.json: allocations["%s"].project_id: "\\udfff" holds the lone '
            'surrogate U+DFFF at character 0, which has no UTF-8 form: '
            'Placement cannot store it' % CONSUMER,
            's.json: allocations["%s"].user_id: "u\\ud83d" holds the lone '
            'surrogate U+D83D at character 1, which has no UTF-8 form: '
            'Placement cannot store it' % CONSUMER,
            's.json: resource_providers[0].name: "compute-\\ud800" holds '
            'the lone surrogate U+D800 at character 8, which has no UTF-8 '
            'form: Placement cannot store it'],
            sorted(self.problems(document)))

    def test_reserved_above_total(self):
        document = example()
        document['resource_providers'][0]['inventories']['VCPU'][
            'reserved'] = 9
        self.assertEqual(['s.json: resource_providers[0].inventories.VCPU.'
                          'reserved: reserved 9 is more than total 8'],
                         self.problems(document))

    def chain(self, n, cycle=False):
        uuids = ['%08x-0000-4000-8000-000000000000' % i for i in range(n)]
        providers = [{'uuid': u, 'name': 'p%d' % i,
                      'parent_provider_uuid': uuids[i - 1] if i else (
                          uuids[-1] if cycle else None)}
                     for i, u in enumerate(uuids)]
        providers.reverse()
        return {'format': 'nvlink-placement-snapshot', 'version': 1,
                'resource_providers': providers}

    def test_deep_chain_is_a_clear_error(self):
        snapshot.validate(self.chain(snapshot.MAX_DEPTH + 1))
        self.assertEqual(
            ["s.json: resource_providers[2966]: provider 'p33' is 33 levels "
             "below its root (at most 32 are accepted; this chain goes 2999 "
             "deep)"], self.problems(self.chain(3000)))

    def test_parent_cycle(self):
        problems = self.problems(self.chain(3, cycle=True))
        self.assertEqual(["s.json: resource_providers[0]."
                          "parent_provider_uuid: parent cycle: p2 -> p1 -> "
                          "p0 -> p2"], problems)

    def test_missing_parent(self):
        document = example()
        document['resource_providers'][1]['parent_provider_uuid'] = OTHER
        self.assertEqual(["s.json: resource_providers[1]."
                          "parent_provider_uuid: parent %s of "
                          "'compute-01_0000:4C:00.0' is not in the snapshot"
                          % OTHER], self.problems(document))

    def test_many_problems_are_counted(self):
        document = example()
        document['resource_providers'][0]['traits'] = [
            'NOT_%d' % i for i in range(40)]
        problems = self.problems(document)
        self.assertEqual(snapshot.MAX_PROBLEMS + 1, len(problems))
        self.assertEqual('s.json: ... and 15 more problems', problems[-1])


class TestCanonicalUuids(base.BaseTestCase):
    """Provider uuids are read in the form Placement stores."""

    SPELLINGS = (CN.upper(), CN.replace('-', ''), '{%s}' % CN,
                 'urn:uuid:%s' % CN, CN.upper().replace('-', ''))

    def test_every_spelling_becomes_placements(self):
        for spelling in self.SPELLINGS:
            document = example()
            document['resource_providers'][0]['uuid'] = spelling
            document['resource_providers'][1]['parent_provider_uuid'] = \
                spelling.lower()
            allocations = document['allocations'][CONSUMER]['allocations']
            allocations[spelling] = allocations.pop(CN)
            snapshot.validate(document)
            self.assertEqual(example(), snapshot.canonical(document),
                             spelling)

    def test_aggregates_and_consumers_are_kept_as_written(self):
        # Placement stores both verbatim (PUT .../aggregates, POST
        # /allocations), and member_of compares them as written.
        document = example()
        document['resource_providers'][0]['aggregates'] = [
            'A0E1C2D3-0000-4000-8000-000000000001']
        document['allocations'] = {CONSUMER.upper(): document[
            'allocations'][CONSUMER]}
        self.assertIs(document, snapshot.canonical(document))

    def test_read_file_gives_the_canonical_form(self):
        document = example()
        document['resource_providers'][1]['uuid'] = GPU.upper()
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            's.json')
        with open(path, 'w') as f:
            json.dump(document, f)
        read = snapshot.read_file(path)
        self.assertEqual(GPU, read['resource_providers'][1]['uuid'])
        self.assertEqual(example(), read)


class TestCanonicalForm(base.BaseTestCase):

    def test_untyped_consumer_has_no_type(self):
        entry = snapshot.consumer_entry('p', 'u', {GPU: {RC: 1}}, 2,
                                        snapshot.UNTYPED)
        self.assertEqual({'project_id': 'p', 'user_id': 'u',
                          'consumer_generation': 2,
                          'allocations': {GPU: {'resources': {RC: 1}}}},
                         entry)
        # Generation 1, what a consumer loaded without the key gets.
        self.assertNotIn('consumer_generation', snapshot.consumer_entry(
            'p', 'u', {GPU: {RC: 1}}, 1))
        self.assertEqual('MIGRATION', snapshot.consumer_entry(
            'p', 'u', {}, None, 'MIGRATION')['consumer_type'])

    def test_parents_first_then_names(self):
        document = example()
        providers = list(reversed(document['resource_providers']))
        ordered = snapshot.document(providers, {})['resource_providers']
        self.assertEqual([CN, GPU], [p['uuid'] for p in ordered])

    def test_json_path(self):
        self.assertEqual('resource_providers[12].inventories.CUSTOM_X.total',
                         snapshot.json_path(('resource_providers', 12,
                                             'inventories', 'CUSTOM_X',
                                             'total')))
        self.assertEqual('allocations["%s"]' % CONSUMER,
                         snapshot.json_path(('allocations', CONSUMER)))
        self.assertEqual('(top level)', snapshot.json_path(()))
