"""Snapshot files (design.rst s7, format version 1): read, check, write.

A snapshot holds resource providers (uuid, name, parent, inventories,
traits, aggregates) and the allocations of the consumers on them. This
module owns the file: strict JSON reading, the schema, the rules Placement
would enforce on load (checked here, before anything is written, with the
file name and JSON path of each problem) and the canonical form both
exporters write (:func:`document`), so the same state always gives the
same bytes.

Version 1 grew compatibly: ``aggregates`` on a provider and
``consumer_generation`` on a consumer are optional (the latter written
when not 1); ``consumer_type`` may be ``"unknown"``, what Placement
reports (microversion 1.38+) for a consumer written without a type, and
an untyped consumer is exported without the key, as servers older than
1.38 report it.
"""

import copy
import importlib.metadata
import json
import logging
import os
import re
import uuid as uuid_lib

import jsonschema
import jsonschema_rs
import os_resource_classes
import os_traits
from oslo_utils import uuidutils

from nvlink_placement import documents
from nvlink_placement import errors
from nvlink_placement.placement import snapshot_capacity
from nvlink_placement import textfile

LOG = logging.getLogger(__name__)

FORMAT = 'nvlink-placement-snapshot'
VERSION = 1

#: What Placement reports as ``consumer_type`` for an untyped consumer.
UNTYPED = 'unknown'
#: The generation of a consumer created by one allocation write; a consumer
#: without ``consumer_generation`` is loaded with it.
FIRST_GENERATION = 1
#: Placement's column limits: MAX_INT (placement/db/constants.py) is
#: :data:`nvlink_placement.placement.snapshot_capacity.MAX_INT`, with the
#: inventory defaults; the single-precision float of ``allocation_ratio``.
MAX_FLOAT = 3.40282e+38
#: Deepest provider chain accepted (root = depth 0). Placement has no hard
#: limit, but real trees are shallow: Nova's compute node, NUMA node,
#: PCI/PF and VF providers, plus two NVLink group levels, stay below 8.
#: A chain of 32 or more is a generated or corrupted file; refusing it
#: early keeps every tree walk (here and in Placement, which walks
#: ancestors level by level on re-parenting) short.
MAX_DEPTH = 32
#: Problems listed before the rest are only counted.
MAX_PROBLEMS = 25

_NAME = r'^[A-Z0-9_]+$'              # placement/schemas/common.py
_CUSTOM = re.compile(r'^CUSTOM_[A-Z0-9_]+$')
_CONSUMER = r'^[0-9a-fA-F-]{36}$'    # POST /allocations consumer keys
_INT = {'type': 'integer', 'maximum': snapshot_capacity.MAX_INT}

_INVENTORY = {
    'type': 'object',
    'additionalProperties': False,
    'required': ['total'],
    'properties': {
        'total': dict(_INT, minimum=1),
        'reserved': dict(_INT, minimum=0),
        'min_unit': dict(_INT, minimum=1),
        'max_unit': dict(_INT, minimum=1),
        'step_size': dict(_INT, minimum=1),
        'allocation_ratio': {'type': 'number', 'minimum': 0,
                             'maximum': MAX_FLOAT},
    },
}

_NAMED = {'type': 'string', 'maxLength': 255, 'pattern': _NAME}

SCHEMA = {
    'type': 'object',
    'additionalProperties': False,
    'required': ['format', 'version', 'resource_providers'],
    'properties': {
        'format': {'const': FORMAT},
        'version': {'const': VERSION},
        'resource_providers': {'type': 'array', 'items': {
            'type': 'object',
            'additionalProperties': False,
            'required': ['uuid', 'name'],
            'properties': {
                'uuid': {'type': 'string'},
                'name': {'type': 'string', 'minLength': 1, 'maxLength': 200},
                'parent_provider_uuid': {'type': ['string', 'null']},
                'inventories': {'type': 'object',
                                'propertyNames': _NAMED,
                                'additionalProperties': _INVENTORY},
                'traits': {'type': 'array', 'uniqueItems': True,
                           'items': _NAMED},
                'aggregates': {'type': 'array', 'uniqueItems': True,
                               'items': {'type': 'string'}},
            }}},
        'allocations': {
            'type': 'object',
            'propertyNames': {'pattern': _CONSUMER},
            'additionalProperties': {
                'type': 'object',
                'additionalProperties': False,
                'required': ['allocations', 'project_id', 'user_id'],
                'properties': {
                    'project_id': {'type': 'string', 'minLength': 1,
                                   'maxLength': 255},
                    'user_id': {'type': 'string', 'minLength': 1,
                                'maxLength': 255},
                    'consumer_type': {'anyOf': [{'const': UNTYPED},
                                                _NAMED]},
                    'consumer_generation': dict(_INT, minimum=0),
                    'allocations': {
                        'type': 'object', 'minProperties': 1,
                        'additionalProperties': {
                            'type': 'object', 'required': ['resources'],
                            'additionalProperties': False,
                            'properties': {'resources': {
                                'type': 'object', 'minProperties': 1,
                                'propertyNames': _NAMED,
                                'additionalProperties': dict(
                                    _INT, minimum=1)}}}},
                }}},
    },
}
_PROVIDER = SCHEMA['properties']['resource_providers']['items']
_PROVIDER_VALIDATOR = jsonschema.Draft202012Validator(_PROVIDER)
# The document with each provider only checked to be an object: providers
# are checked one distinct shape at a time (:func:`_schema_problems`).
_OUTLINE = dict(SCHEMA, properties=dict(
    SCHEMA['properties'],
    resource_providers={'type': 'array', 'items': {'type': 'object'}}))
_OUTLINE_VALIDATOR = jsonschema.Draft202012Validator(_OUTLINE)
_IDENTITY = ('uuid', 'name', 'parent_provider_uuid')
_COMPILED = jsonschema_rs.Draft202012Validator(SCHEMA)


# -- reading ---------------------------------------------------------------

class _Duplicates(dict):
    """A JSON object that named some keys twice (``keys_twice``)."""

    keys_twice = ()


def _no_constant(name):
    raise ValueError('%s is not a JSON number' % name)


def _finite(text):
    value = float(text)
    if value in (float('inf'), float('-inf')):
        raise ValueError('number %s is out of range' % text)
    return value


def loads(text, source='<snapshot>'):
    """Parse snapshot JSON strictly; return the document (not yet checked).

    Stricter than :func:`json.loads`: a key given twice in one object (a
    consumer uuid listed twice would silently lose one), ``NaN``,
    ``Infinity`` and numbers beyond a double are refused, and nesting too
    deep for the parser is an error instead of a ``RecursionError``.

    :raises NvlinkError: naming ``source`` and, for a repeated key, its
        JSON path.
    """
    twice = []

    def pairs_hook(pairs):
        result = dict(pairs)
        if len(result) != len(pairs):
            seen = set()
            result = _Duplicates(result)
            result.keys_twice = sorted({k for k, _ in pairs
                                        if k in seen or seen.add(k)})
            twice.append(result)
        return result

    try:
        document = json.loads(text, object_pairs_hook=pairs_hook,
                              parse_constant=_no_constant,
                              parse_float=_finite)
    except RecursionError:
        raise errors.NvlinkError('%s: not a snapshot: JSON nested too '
                                 'deeply' % source)
    except ValueError as exc:
        if not text.strip():
            raise errors.NvlinkError(
                '%s: the file is empty; a snapshot is the JSON file that '
                '"openstack nvlink snapshot -o FILE" writes' % source)
        raise errors.NvlinkError('%s: not a JSON snapshot: %s%s' % (
            source, exc, ' (this looks like a topology file: give it to '
            '--topology)' if _looks_like_topology(text) else ''))
    if twice:
        raise errors.NvlinkError('\n'.join(
            '%s: %s: key %s is given twice' % (source, path, json.dumps(key))
            for path, value in _walk(document)
            if isinstance(value, _Duplicates) for key in value.keys_twice))
    return document


def _looks_like_topology(text):
    """Whether ``text`` reads like a YAML topology (``hosts:`` at top)."""
    return any(line.startswith(('hosts:', 'version: 1'))
               for line in text.splitlines())


def _walk(value):
    """``(json path, value)`` of every object and array, without recursion."""
    stack = [((), value)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            yield json_path(path), value
            stack.extend((path + (k,), v) for k, v in value.items())
        elif isinstance(value, list):
            yield json_path(path), value
            stack.extend((path + (i,), v) for i, v in enumerate(value))


def read_file(path):
    """Read, parse and check a snapshot file.

    :returns: the snapshot dict, provider uuids in Placement's form
        (:func:`canonical`).
    :raises NvlinkError: naming the file and the JSON path of each problem.
    """
    try:
        with open(path, 'rb') as f:
            data = f.read()
    except OSError as exc:
        raise errors.NvlinkError('%s: %s' % (path, exc.strerror or exc))
    try:
        text = data.decode('utf-8')
    except UnicodeDecodeError as exc:
        raise errors.NvlinkError(
            '%s: not UTF-8 text (byte 0x%02x at offset %d); a snapshot is '
            'JSON in UTF-8' % (path, data[exc.start], exc.start))
    document = loads(text, path)
    validate(document, path)
    document = canonical(document)
    for line in over_capacity(document, path):
        LOG.warning('%s', line)
    return document


def dumps(document):
    """A snapshot as :func:`write_file` writes it (indented, sorted JSON)."""
    return json.dumps(document, indent=2, sort_keys=True) + '\n'


def write_file(document, path, stop=None):
    """Write a snapshot as indented, key-sorted JSON (:func:`dumps`).

    Written to a temporary file next to ``path``, then renamed over it:
    ``path`` is never left half-written (an earlier file stays as it was
    on any failure). A ``path`` that exists and is no regular file (a
    device such as ``/dev/null``, a pipe) is written in place.

    :param stop: a ``threading.Event``; when it is set before the rename
        (SIGINT, SIGTERM), the temporary file is removed and ``path`` is
        not written.
    :raises NvlinkError: ``path`` cannot be written.
    :raises Interrupted: ``stop`` was set.
    """
    if os.path.exists(path) and not os.path.isfile(path):
        try:
            with open(path, 'w', encoding='utf-8') as f:
                f.write(dumps(document))
        except OSError as exc:
            raise errors.NvlinkError('%s: %s' % (path, exc.strerror or exc))
        return
    textfile.write(path, dumps(document), stop=stop)


# -- checking --------------------------------------------------------------

def json_path(parts):
    """A JSON path as messages show it.

    ``('resource_providers', 12, 'inventories')`` ->
    ``resource_providers[12].inventories``; keys that are not identifiers
    are quoted: ``allocations["6f2c..."]``.
    """
    text = ''
    for part in parts:
        if isinstance(part, int):
            text += '[%d]' % part
        elif re.match(r'^[A-Za-z_][A-Za-z0-9_]*$', part):
            text += ('.' if text else '') + part
        else:
            text += '[%s]' % json.dumps(part)
    return text or '(top level)'


def validate(document, source='<snapshot>'):
    """Check a parsed snapshot against the schema and Placement's rules.

    Everything Placement would refuse on load is found here, before any
    write: names and uuids in Placement's forms, standard trait and
    resource class names that exist (os-traits, os-resource-classes),
    unique provider uuids (compared in the form Placement stores, see
    :func:`provider_uuid`) and names, text that Placement can store (no
    lone surrogate in a name, project or user id), parents that exist, no
    parent cycle, at most :data:`MAX_DEPTH` levels, allocations only on
    inventory the provider has.

    An allocation beyond the inventory's capacity or outside
    ``min_unit``/``max_unit``/``step_size`` is accepted: Placement holds
    such states when an inventory changes after the allocation (Nova sets
    ``reserved = total`` on an allocated one-time-use device; this tool
    reserves unhealthy GPUs; an operator lowers an allocation ratio under
    what runs, see :func:`over_capacity`).

    :raises NvlinkError: listing each problem as ``source: JSON path:
        what is wrong``.
    """
    listing = _provider_listing(document)
    if listing:
        raise errors.NvlinkError('%s: %s' % (source, listing))
    problems = _schema_problems(document) or _rules(document)
    if problems:
        lines = ['%s: %s: %s' % (source, json_path(where), what)
                 for where, what in problems[:MAX_PROBLEMS]]
        if len(problems) > MAX_PROBLEMS:
            lines.append('%s: ... and %d more problems'
                         % (source, len(problems) - MAX_PROBLEMS))
        raise errors.NvlinkError('\n'.join(lines))


#: What a snapshot is, for a file that is another listing of providers.
WHAT_A_SNAPSHOT_IS = (
    'a snapshot holds the trees of resource providers with their '
    'inventories, traits and aggregates, and the allocations on them '
    '(doc/source/snapshot-format.rst); write one with "openstack nvlink '
    'snapshot -o FILE" against the cloud, or "openstack nvlink snapshot '
    '--from-topology TOPOLOGY -o FILE" without one')


def _provider_listing(document):
    """Why ``document`` is a provider listing, not a snapshot, or None.

    ``openstack resource provider list -f json`` prints a list of
    providers (uuid, name, generation); ``GET /resource_providers``
    answers ``{"resource_providers": [...]}`` without ``format``. Neither
    holds inventories or allocations, so the schema's messages (and the
    data they quote) would not help.
    """
    if isinstance(document, list) and document and all(
            isinstance(item, dict) and 'uuid' in item and 'name' in item
            for item in document):
        return ('a list of %d resource provider%s (as "openstack resource '
                'provider list -f json" prints it), not a snapshot: %s'
                % (len(document), '' if len(document) == 1 else 's',
                   WHAT_A_SNAPSHOT_IS))
    if (isinstance(document, dict) and 'format' not in document and
            isinstance(document.get('resource_providers'), list) and
            'allocations' not in document):
        return ('a listing of resource providers (as "GET '
                '/resource_providers" answers it), not a snapshot: it has no '
                '"format": "%s"; %s' % (FORMAT, WHAT_A_SNAPSHOT_IS))
    return None


def _schema_problems(document):
    """:data:`SCHEMA` errors as ``(path, message)``, sorted by path.

    Thousands of providers share a few shapes (every GPU of a model looks
    the same but for uuid, name and parent), and jsonschema takes about
    half a millisecond per provider: each distinct shape is checked once.
    The compiled validator (:func:`documents.surely_valid`) answers for a
    valid document; jsonschema runs only for one it does not accept.
    """
    if documents.surely_valid(_COMPILED, document):
        return []
    problems = [_schema_problem((), e)
                for e in _OUTLINE_VALIDATOR.iter_errors(document)]
    if problems:
        return sorted(problems, key=lambda p: [str(x) for x in p[0]])
    valid = set()
    for i, rp in enumerate(document['resource_providers']):
        name = rp.get('name')
        parent = rp.get('parent_provider_uuid')
        shape = (tuple(sorted(rp)), isinstance(rp.get('uuid'), str),
                 isinstance(name, str) and 0 < len(name) <= 200,
                 parent is None or isinstance(parent, str),
                 json.dumps({k: v for k, v in rp.items()
                             if k not in _IDENTITY}, sort_keys=True))
        if shape in valid:
            continue
        found = [_schema_problem(('resource_providers', i), e)
                 for e in _PROVIDER_VALIDATOR.iter_errors(rp)]
        if found:
            problems.extend(sorted(found,
                                   key=lambda p: [str(x) for x in p[0]]))
        else:
            valid.add(shape)
    return problems


def _schema_problem(prefix, error):
    """``(path, message)`` of a jsonschema error below ``prefix``.

    A bad key (``propertyNames``) is reported at the key itself:
    ``allocations["instance-1"]``, not at the mapping that holds it.
    """
    where = prefix + tuple(error.absolute_path)
    if 'propertyNames' in error.schema_path:
        return where + (error.instance,), 'key %s' % (
            documents.schema_message(error))
    return where, documents.schema_message(error)


_STANDARD_TRAITS = None


def _standard_name_problem(name, standard, what):
    if name in standard:
        return None
    if name.startswith('CUSTOM_'):
        return None if _CUSTOM.match(name) else (
            'bad custom %s name %r (CUSTOM_ and then A-Z, 0-9, _)'
            % (what, name))
    library = 'os-traits' if what == 'trait' else 'os-resource-classes'
    return ('unknown standard %s %r (custom ones start with CUSTOM_; a '
            'snapshot of a newer cloud can hold standard ones that %s %s, '
            'installed here, does not know: upgrade it)'
            % (what, name, library, _version(library)))


def _version(distribution):
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return '(version unknown)'


def _rules(document):
    """Placement's rules beyond the schema: list of ``(path, message)``."""
    global _STANDARD_TRAITS
    if _STANDARD_TRAITS is None:
        _STANDARD_TRAITS = frozenset(os_traits.get_traits())
    classes = frozenset(os_resource_classes.STANDARDS)
    problems = []
    providers = document['resource_providers']
    by_uuid = {}
    names = {}
    for i, rp in enumerate(providers):
        where = ('resource_providers', i)
        for key in ('uuid', 'parent_provider_uuid'):
            value = rp.get(key)
            if value is not None and not uuidutils.is_uuid_like(value):
                problems.append((where + (key,), '%s is not a uuid'
                                 % documents.short(value)))
        uuid = provider_uuid(rp['uuid'])
        if uuid in by_uuid:
            first = providers[by_uuid[uuid]]['uuid']
            problems.append((where + ('uuid',), 'uuid %s is also '
                             'resource_providers[%d]%s'
                             % (rp['uuid'], by_uuid[uuid],
                                '' if first == rp['uuid'] else
                                ' (written %s there: one uuid, which '
                                'Placement stores as %s)' % (first, uuid))))
        by_uuid.setdefault(uuid, i)
        for key in ('name',):
            problem = _unstorable(rp[key])
            if problem:
                problems.append((where + (key,), problem))
        if rp['name'] in names:
            problems.append((where + ('name',), 'name %r is also '
                             'resource_providers[%d] (names are unique in '
                             'Placement)' % (rp['name'], names[rp['name']])))
        names.setdefault(rp['name'], i)
        for rc in rp.get('inventories', {}):
            problem = _standard_name_problem(rc, classes, 'resource class')
            if problem:
                problems.append((where + ('inventories', rc), problem))
        for j, trait in enumerate(rp.get('traits', ())):
            problem = _standard_name_problem(trait, _STANDARD_TRAITS,
                                             'trait')
            if problem:
                problems.append((where + ('traits', j), problem))
        for j, aggregate in enumerate(rp.get('aggregates', ())):
            if not uuidutils.is_uuid_like(aggregate):
                problems.append((where + ('aggregates', j),
                                 '%s is not a uuid'
                                 % documents.short(aggregate)))
        for rc, inv in rp.get('inventories', {}).items():
            inv = dict(snapshot_capacity.INVENTORY_DEFAULTS, **inv)
            if inv['reserved'] > inv['total']:
                problems.append((where + ('inventories', rc, 'reserved'),
                                 'reserved %d is more than total %d'
                                 % (inv['reserved'], inv['total'])))
    problems.extend(_tree_problems(providers, by_uuid))
    problems.extend(_allocation_problems(document.get('allocations', {}),
                                         providers, by_uuid))
    return problems


def _unstorable(text):
    """Why Placement cannot store ``text``, or None.

    Placement's tables hold UTF-8 text: a lone UTF-16 surrogate (JSON
    ``"\\ud800"``, which :func:`json.loads` accepts) has no UTF-8 form,
    and a write holding one fails inside the database driver.
    """
    try:
        text.encode('utf-8')
    except UnicodeEncodeError as exc:
        return ('%s holds the lone surrogate U+%04X at character %d, which '
                'has no UTF-8 form: Placement cannot store it'
                % (json.dumps(text), ord(text[exc.start]), exc.start))
    return None


def provider_uuid(value):
    """A provider uuid in the form Placement stores: ``str(UUID(value))``.

    Placement's ``POST /resource_providers`` rewrites the uuid so
    (``placement/handlers/resource_provider.py``): upper case, no dashes,
    braces or ``urn:uuid:`` all become ``8-4-4-4-12`` lower case; other
    values (None, a non-uuid) come back as they are.
    """
    if value is None:
        return None
    try:
        return str(uuid_lib.UUID(value))
    except (TypeError, ValueError, AttributeError):
        return value


def canonical(document):
    """``document`` with every provider uuid in Placement's stored form.

    Provider uuids, parent uuids and the provider keys of allocations are
    rewritten by :func:`provider_uuid` (a copy is returned, or
    ``document`` itself when all are canonical already). Aggregate uuids
    and consumer uuids are kept as written: Placement stores those
    verbatim.

    :param document: a snapshot that :func:`validate` accepted.
    """
    def bad(value):
        return value is not None and provider_uuid(value) != value

    if not (any(bad(rp['uuid']) or bad(rp.get('parent_provider_uuid'))
                for rp in document['resource_providers']) or
            any(bad(rp_uuid)
                for alloc in document.get('allocations', {}).values()
                for rp_uuid in alloc['allocations'])):
        return document
    result = copy.deepcopy(document)
    for rp in result['resource_providers']:
        rp['uuid'] = provider_uuid(rp['uuid'])
        if rp.get('parent_provider_uuid') is not None:
            rp['parent_provider_uuid'] = provider_uuid(
                rp['parent_provider_uuid'])
    for alloc in result.get('allocations', {}).values():
        alloc['allocations'] = {provider_uuid(k): v for k, v in
                                alloc['allocations'].items()}
    return result


def depths(parent_of):
    """Depth of every provider (root = 0), walking parents without recursion.

    :param parent_of: dict uuid -> parent uuid or None.
    :returns: ``(depth, broken)``: dict uuid -> depth for every provider
        whose chain reaches a root; dict uuid -> ``('cycle', [uuids])`` or
        ``('missing', parent uuid)`` for the first provider of each broken
        chain found (the others of that chain get no depth).
    """
    depth = {}
    broken = {}
    done = set()
    for start in parent_of:
        chain = []
        on_chain = set()
        uuid = start
        while uuid is not None and uuid not in done:
            if uuid in on_chain:
                broken[start] = ('cycle', chain[chain.index(uuid):] + [uuid])
                break
            if uuid not in parent_of:
                broken[chain[-1]] = ('missing', uuid)
                break
            chain.append(uuid)
            on_chain.add(uuid)
            uuid = parent_of[uuid]
        else:
            if uuid is None or uuid in depth:
                base = -1 if uuid is None else depth[uuid]
                for offset, u in enumerate(reversed(chain)):
                    depth[u] = base + 1 + offset
        done.update(chain)
    return depth, broken


def _tree_problems(providers, by_uuid):
    """Missing parents, cycles and chains deeper than :data:`MAX_DEPTH`."""
    parent_of = {provider_uuid(rp['uuid']):
                 provider_uuid(rp.get('parent_provider_uuid'))
                 for rp in providers}
    depth, broken = depths(parent_of)
    problems = []
    for uuid, (kind, detail) in broken.items():
        where = ('resource_providers', by_uuid[uuid], 'parent_provider_uuid')
        if kind == 'missing':
            problems.append((where, 'parent %s of %r is not in the snapshot'
                             % (documents.clip(str(detail)),
                                providers[by_uuid[uuid]]['name'])))
        else:
            problems.append((where, 'parent cycle: %s' % ' -> '.join(
                providers[by_uuid[u]]['name'] for u in detail)))
    deepest = max(depth.values(), default=0)
    for uuid, level in depth.items():
        if level == MAX_DEPTH + 1:
            problems.append((
                ('resource_providers', by_uuid[uuid]),
                'provider %r is %d levels below its root (at most %d are '
                'accepted; this chain goes %d deep)'
                % (providers[by_uuid[uuid]]['name'], level, MAX_DEPTH,
                   deepest)))
    return sorted(problems)


def _allocation_problems(allocations, providers, by_uuid):
    problems = []
    for consumer, alloc in allocations.items():
        for key in ('project_id', 'user_id'):
            problem = _unstorable(alloc[key])
            if problem:
                problems.append((('allocations', consumer, key), problem))
        spelled = {}
        for rp_uuid, entry in alloc['allocations'].items():
            where = ('allocations', consumer, 'allocations', rp_uuid)
            if provider_uuid(rp_uuid) in spelled:
                problems.append((where, 'provider %s is also listed as %s '
                                 '(one uuid spelled twice)' % (
                                     rp_uuid,
                                     spelled[provider_uuid(rp_uuid)])))
            spelled[provider_uuid(rp_uuid)] = rp_uuid
            if provider_uuid(rp_uuid) not in by_uuid:
                problems.append((where, 'provider %s is not in the snapshot'
                                 % documents.clip(rp_uuid)))
                continue
            rp = providers[by_uuid[provider_uuid(rp_uuid)]]
            for rc in entry['resources']:
                if rc not in rp.get('inventories', {}):
                    problems.append((where + ('resources', rc),
                                     'provider %r has no %s inventory'
                                     % (rp['name'], rc)))
    return problems


def over_capacity(document, source='<snapshot>'):
    """Warnings for usage above ``total * allocation_ratio``.

    Such a snapshot loads as it is
    (:func:`nvlink_placement.placement.snapshot_capacity.over_capacity`).

    :returns: list of lines ``source: JSON path: what``, at most
        :data:`MAX_PROBLEMS` and a count of the rest.
    """
    found = snapshot_capacity.over_capacity(document)
    lines = ['%s: %s: %s' % (source, json_path(where), what)
             for where, what in found[:MAX_PROBLEMS]]
    if len(found) > MAX_PROBLEMS:
        lines.append('%s: ... and %d more inventories over capacity'
                     % (source, len(found) - MAX_PROBLEMS))
    return lines


# -- the canonical form ----------------------------------------------------

def provider_entry(uuid, name, parent_uuid, inventories, traits,
                   aggregates=()):
    """One provider as exported: every inventory field, sorted lists.

    :param inventories: ``{rc: {field: value}}`` with the six fields.
    """
    entry = {'uuid': uuid, 'name': name, 'parent_provider_uuid': parent_uuid,
             'inventories': {rc: {k: inv[k] for k in sorted(inv)}
                             for rc, inv in sorted(inventories.items())},
             'traits': sorted(traits)}
    if aggregates:
        entry['aggregates'] = sorted(aggregates)
    return entry


def consumer_entry(project_id, user_id, allocations, generation=None,
                   consumer_type=None):
    """One consumer as exported.

    Defaults are left out, as for older files: an untyped consumer has no
    ``consumer_type``, a consumer at generation 1 (written once, which is
    what loading gives one without the key) no ``consumer_generation``.

    :param allocations: ``{rp uuid: {rc: amount}}``.
    """
    entry = {'project_id': project_id, 'user_id': user_id,
             'allocations': {rp: {'resources': dict(sorted(res.items()))}
                             for rp, res in sorted(allocations.items())}}
    if generation not in (None, FIRST_GENERATION):
        entry['consumer_generation'] = generation
    if consumer_type and consumer_type != UNTYPED:
        entry['consumer_type'] = consumer_type
    return entry


def document(providers, consumers):
    """The snapshot dict: providers parents first (by depth, then name).

    :param providers: list of :func:`provider_entry` dicts (a tree:
        parents present, no cycle).
    :param consumers: dict consumer uuid -> :func:`consumer_entry` dict.
    """
    depth, _ = depths({p['uuid']: p['parent_provider_uuid']
                       for p in providers})
    return {'format': FORMAT, 'version': VERSION,
            'resource_providers': sorted(
                providers, key=lambda p: (depth[p['uuid']], p['name'])),
            'allocations': dict(sorted(consumers.items()))}


def left_out(trees, cut):
    """What an export of some trees did not hold.

    :param trees: names of the root providers whose trees were not
        exported.
    :param cut: dict consumer uuid -> number of providers outside the
        exported trees that it also has allocations on.
    :returns: ``{'trees': sorted names, 'consumers': {uuid: count}}``.
    """
    return {'trees': sorted(trees), 'consumers': dict(sorted(cut.items()))}


def left_out_lines(path, omitted, why='not selected'):
    """Lines saying what the snapshot ``path`` left out (may be empty).

    :param why: why the trees were left out, after "N trees".
    """
    lines = []
    trees = omitted.get('trees', [])
    if trees:
        lines.append('%s: left out %d tree%s %s: %s%s' % (
            path, len(trees), '' if len(trees) == 1 else 's', why,
            ', '.join(trees[:10]),
            ' and %d more' % (len(trees) - 10) if len(trees) > 10 else ''))
    cut = omitted.get('consumers', {})
    if cut:
        names = sorted(cut)
        lines.append(
            '%s: %d consumer%s keep%s only %s allocations inside the '
            'exported trees (also allocated on providers left out): %s%s'
            % (path, len(cut), '' if len(cut) == 1 else 's',
               's' if len(cut) == 1 else '',
               'its' if len(cut) == 1 else 'their',
               ', '.join(names[:5]),
               ' and %d more' % (len(names) - 5) if len(names) > 5 else ''))
    return lines


def parents_first(providers):
    """Providers of a validated document, each parent before its children."""
    depth, _ = depths({p['uuid']: p.get('parent_provider_uuid')
                       for p in providers})
    return sorted(providers, key=lambda p: depth[p['uuid']])
