"""quickschema says what jsonschema says, on the project's schemas.

The seeds are the example topologies, GPU maps and snapshots; each case
changes one to three places of a seed (a value replaced by one of another
type or an edge value, a key removed or added, a list item repeated) and
asks both. Where quickschema answers (it is not unsure), the answer must
be jsonschema's; a document it accepts must be valid.
"""

import copy
import json
import os
import random

import jsonschema
from oslotest import base

from nvlink_placement import documents
from nvlink_placement.placement import snapshot
from nvlink_placement import quickschema
from nvlink_placement.topology import schema

SEED = 34
CASES = 400
EXAMPLES = os.path.join(os.path.dirname(__file__), '..', '..', 'etc',
                        'examples')
VALUES = (None, True, False, 0, 1, -1, 1.0, 2.5, float('nan'), 2 ** 31,
          2 ** 64, '', 'x', '1', ' 7 ', 'CUSTOM_X', 'custom_x', 'A' * 300,
          'ok', 'unhealthy', 'unknown', 'nvlink-placement-snapshot',
          '0000:19:00.0', [], ['a'], ['a', 'a'], [1], [1, True], [[1, 2]],
          {}, {'total': 1}, {'members': ['a']}, {'members': [0], 'mesh': 1},
          {'status': 'ok'}, {'module_id': 3})


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


class TestQuickSchema(base.BaseTestCase):

    def compare(self, name, schema_, seed):
        check = quickschema.compile(schema_)
        validator = jsonschema.Draft202012Validator(schema_)
        self.assertTrue(quickschema.accepts(check, seed), name)
        rng = random.Random('%d/%s' % (SEED, name))
        answered = invalid = 0
        for index in range(CASES):
            document = mutate(seed, rng)
            valid = validator.is_valid(document)
            invalid += not valid
            try:
                quick = check(document)
            except quickschema._Unsure:
                continue
            answered += 1
            self.assertEqual(valid, quick, 'case %d of %s: %s' % (
                index, name, documents.short(document)))
        # Most cases are answered, and many are invalid.
        self.assertGreater(answered, CASES * 0.8, name)
        self.assertGreater(invalid, CASES // 4, name)

    def test_topologies(self):
        for name in ('hgx-h100.yaml', 'hgx-b200.yaml',
                     'pcie-bridge-pairs.yaml'):
            self.compare(name, schema.TOPOLOGY,
                         documents.load(os.path.join(EXAMPLES, name)))
        self.compare('gpu map', schema.MODULE_MAPPING, documents.load(
            os.path.join(EXAMPLES, 'mappings', 'compute-02.json')))

    def test_snapshots(self):
        for name in ('hgx-h100-snapshot.json', 'direct-nvlink-snapshot.json'):
            with open(os.path.join(EXAMPLES, name)) as handle:
                document = json.load(handle)
            # Fewer providers: mutations then reach the allocations too.
            document['resource_providers'] = document[
                'resource_providers'][:12]
            self.compare(name, snapshot.SCHEMA, document)

    def test_jsonschema_semantics(self):
        for schema_, instance, valid in (
                ({'type': 'integer'}, 2.0, True),
                ({'type': 'integer'}, True, False),
                ({'type': 'number'}, False, False),
                ({'const': 1}, True, False),
                ({'const': 1}, 1.0, True),
                ({'enum': ['ok']}, 'ok', True),
                ({'minimum': 0}, float('nan'), True),
                ({'minimum': 0}, 'not a number', True),
                ({'pattern': '^a'}, 'ba', False),
                ({'pattern': 'a'}, 'ba', True),
                ({'minLength': 1}, [], True),
                ({'propertyNames': {'minLength': 1}}, {'': 1}, False),
                ({'additionalProperties': False, 'properties': {'a': {}}},
                 {'a': 1, 'b': 2}, False),
                ({'oneOf': [{'type': 'integer'}, {'minimum': 0}]}, 3, False),
                ({'oneOf': [{'type': 'integer'}, {'minimum': 0}]}, -3, True),
                ({'uniqueItems': True}, ['a', 'a'], False)):
            self.assertEqual(
                valid, jsonschema.Draft202012Validator(schema_).is_valid(
                    instance), (schema_, instance))
            self.assertEqual(valid, quickschema.compile(schema_)(instance),
                             (schema_, instance))

    def test_unsure_and_unknown(self):
        # Items that are not all strings: jsonschema decides.
        check = quickschema.compile({'uniqueItems': True})
        self.assertFalse(quickschema.accepts(check, [1, True]))
        self.assertRaises(quickschema._Unsure, check, [1, True])
        self.assertRaises(ValueError, quickschema.compile,
                          {'patternProperties': {}})
        self.assertRaises(ValueError, quickschema.compile, {'$ref': '#'})
