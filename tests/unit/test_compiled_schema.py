"""The compiled validator says what jsonschema says, on the project's schemas.

The readers of topologies, GPU maps and snapshots ask jsonschema-rs
whether a document is valid and run jsonschema only when it is not, for
the messages (:func:`nvlink_placement.documents.surely_valid`). A keyword
the compiled validator read differently would let an invalid file through
or cost every valid one the slow check: these tests ask both.

The seeds are the example topologies, GPU maps and snapshots; each case
changes one to three places of a seed (a value replaced by one of another
type or an edge value, a key removed or added, a list item repeated).
"""

import copy
import json
import math
import os
import random

import jsonschema
from oslotest import base

from nvlink_placement import documents
from nvlink_placement.placement import snapshot
from nvlink_placement.topology import schema
from nvlink_placement.topology import schema_check

SEED = 34
CASES = 400
EXAMPLES = os.path.join(os.path.dirname(__file__), '..', '..', 'etc',
                        'examples')
VALUES = (None, True, False, 0, 1, -1, 1.0, 2.5, float('nan'), 2 ** 31,
          2 ** 64, '', 'x', '1', ' 7 ', 'CUSTOM_X', 'custom_x', 'A' * 300,
          'ok', 'unhealthy', 'unknown', 'nvlink-placement-snapshot',
          '0000:19:00.0', [], ['a'], ['a', 'a'], [1], [1, True], [1, 1.0],
          [[1, 2]], {}, {'total': 1}, {'members': ['a']},
          {'members': [0], 'mesh': 1}, {'status': 'ok'}, {'module_id': 3})


def places(value, path=()):
    """Every ``(container path, key)`` of ``value``."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, item in items:
        yield path, key
        yield from places(item, path + (key,))


def non_finite(value):
    """Whether ``value`` holds NaN or an infinity anywhere."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, list):
        return False
    return any(non_finite(item) for item in value)


def mutate(document, rng):
    document = copy.deepcopy(document)
    for _ in range(rng.randint(1, 3)):
        found = list(places(document))
        if not found:
            break
        path, key = rng.choice(found)
        parent = document
        for part in path:
            parent = parent[part]
        kind = rng.choice(('value', 'value', 'delete', 'add', 'repeat'))
        if kind == 'value':
            parent[key] = copy.deepcopy(rng.choice(VALUES))
        elif kind == 'delete':
            del parent[key]
        elif kind == 'add' and isinstance(parent, dict):
            parent[rng.choice(('extra', 'mesh', 'status', 'traits',
                               'format'))] = rng.choice(VALUES)
        elif isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
    return document


class TestCompiledSchema(base.BaseTestCase):

    def compare(self, name, compiled, schema_, seed):
        validator = jsonschema.Draft202012Validator(schema_)
        self.assertTrue(documents.surely_valid(compiled, seed), name)
        rng = random.Random('%d/%s' % (SEED, name))
        invalid = stricter = 0
        for index in range(CASES):
            document = mutate(seed, rng)
            valid = validator.is_valid(document)
            invalid += not valid
            compiled_valid = documents.surely_valid(compiled, document)
            if valid and not compiled_valid and non_finite(document):
                stricter += 1
                continue
            self.assertEqual(valid, compiled_valid,
                             'case %d of %s: %s' % (
                                 index, name, documents.short(document)))
        # Many cases are invalid, so the schema's keywords are exercised;
        # the known difference is rare.
        self.assertGreater(invalid, CASES // 4, name)
        self.assertLess(stricter, CASES // 20, name)

    def test_topologies(self):
        # The validators the loader uses, on the schemas it uses them for.
        topology = schema_check.COMPILED[id(schema.TOPOLOGY)]
        for name in ('hgx-h100.yaml', 'hgx-b200.yaml',
                     'pcie-bridge-pairs.yaml'):
            self.compare(name, topology, schema.TOPOLOGY,
                         documents.load(os.path.join(EXAMPLES, name)))
        self.compare('gpu map',
                     schema_check.COMPILED[id(schema.MODULE_MAPPING)],
                     schema.MODULE_MAPPING, documents.load(
                         os.path.join(EXAMPLES, 'mappings',
                                      'compute-02.json')))

    def test_snapshots(self):
        for name in ('hgx-h100-snapshot.json', 'direct-nvlink-snapshot.json'):
            with open(os.path.join(EXAMPLES, name)) as handle:
                document = json.load(handle)
            # Fewer providers: mutations then reach the allocations too.
            document['resource_providers'] = document[
                'resource_providers'][:12]
            self.compare(name, snapshot._COMPILED, snapshot.SCHEMA,
                         document)

    def test_keyword_semantics(self):
        # Where the two could differ on a keyword the schemas use.
        import jsonschema_rs
        for schema_, instance, valid in (
                ({'type': 'integer'}, 2.0, True),
                ({'type': 'integer'}, True, False),
                ({'type': 'integer'}, 2 ** 64, True),
                ({'type': 'number'}, False, False),
                ({'const': 1}, True, False),
                ({'const': 1}, 1.0, True),
                ({'const': False}, 0, False),
                ({'enum': ['ok']}, 'ok', True),
                ({'minimum': 0}, float('nan'), True),
                ({'minimum': 0}, 'not a number', True),
                ({'maximum': 2 ** 31 - 1}, 2 ** 31, False),
                ({'pattern': '^a'}, 'ba', False),
                ({'pattern': 'a'}, 'ba', True),
                ({'pattern': r'^\s*[0-9]{1,10}\s*$'}, '\u0663', False),
                ({'minLength': 1}, [], True),
                ({'maxLength': 2}, '\U0001F600\U0001F600', True),
                ({'propertyNames': {'minLength': 1}}, {'': 1}, False),
                ({'additionalProperties': False, 'properties': {'a': {}}},
                 {'a': 1, 'b': 2}, False),
                ({'oneOf': [{'type': 'integer'}, {'minimum': 0}]}, 3, False),
                ({'oneOf': [{'type': 'integer'}, {'minimum': 0}]}, -3, True),
                ({'uniqueItems': True}, ['a', 'a'], False),
                ({'uniqueItems': True}, [1, True], True),
                ({'uniqueItems': True}, [1, 1.0], False)):
            self.assertEqual(
                valid, jsonschema.Draft202012Validator(schema_).is_valid(
                    instance), (schema_, instance))
            self.assertEqual(
                valid, documents.surely_valid(
                    jsonschema_rs.Draft202012Validator(schema_), instance),
                (schema_, instance))

    def test_stricter_only(self):
        # The known differences: the compiled validator refuses, so
        # jsonschema decides (and accepts).
        import jsonschema_rs
        for schema_, instance in (
                ({'pattern': '^[A-Z]+$'}, 'A\n'),
                ({'type': 'number'}, float('inf')),
                ({'type': 'number'}, float('nan')),
                ({'type': 'object'}, {1: 2})):
            self.assertTrue(jsonschema.Draft202012Validator(
                schema_).is_valid(instance))
            self.assertFalse(documents.surely_valid(
                jsonschema_rs.Draft202012Validator(schema_), instance))

    def test_stricter_ones_still_accepted(self):
        # A name jsonschema accepts and the compiled validator does not:
        # the snapshot is still read, through jsonschema's verdict.
        with open(os.path.join(EXAMPLES, 'hgx-h100-snapshot.json')) as f:
            document = json.load(f)
        rp = document['resource_providers'][0]
        self.assertIn('inventories', rp)
        rp['traits'] = sorted(set(rp.get('traits', [])) | {'CUSTOM_A\n'})
        self.assertFalse(documents.surely_valid(snapshot._COMPILED,
                                                document))
        self.assertEqual([], snapshot._schema_problems(document))
