"""Snapshot files (DESIGN.md section 6): export, validate, load.

A snapshot holds resource providers (uuid, name, parent, inventories,
traits) and the allocations on them. :func:`export` reads it from any
Placement (read only); :func:`load_into` recreates it in an empty one
(UUIDs preserved, parents first, all allocations in one
``POST /allocations``).
"""

import json
import urllib.parse

import jsonschema

from nvlink_placement import errors
from nvlink_placement.placement import naming
from nvlink_placement.placement import state as state_mod

FORMAT = 'nvlink-placement-snapshot'
VERSION = 1

_INVENTORY = {
    'type': 'object',
    'additionalProperties': False,
    'required': ['total'],
    'properties': {k: {'type': 'integer'} for k in (
        'total', 'reserved', 'min_unit', 'max_unit', 'step_size')} | {
        'allocation_ratio': {'type': 'number'}},
}

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
                'uuid': {'type': 'string', 'minLength': 1},
                'name': {'type': 'string', 'minLength': 1, 'maxLength': 200},
                'parent_provider_uuid': {'type': ['string', 'null']},
                'inventories': {'type': 'object',
                                'additionalProperties': _INVENTORY},
                'traits': {'type': 'array', 'items': {'type': 'string'}},
            }}},
        'allocations': {'type': 'object', 'additionalProperties': {
            'type': 'object',
            'additionalProperties': False,
            'required': ['allocations', 'project_id', 'user_id'],
            'properties': {
                'project_id': {'type': 'string'},
                'user_id': {'type': 'string'},
                'consumer_type': {'type': 'string'},
                'allocations': {'type': 'object', 'additionalProperties': {
                    'type': 'object', 'required': ['resources'],
                    'additionalProperties': False,
                    'properties': {'resources': {
                        'type': 'object',
                        'additionalProperties': {'type': 'integer',
                                                 'minimum': 1}}}}},
            }}},
    },
}

# Resource classes and traits that Placement always knows (os-traits and
# os-resource-classes); anything else must be created before use.
_CUSTOM = 'CUSTOM_'


def read_file(path):
    """Read and validate a snapshot file.

    :returns: the snapshot dict.
    :raises NvlinkError: naming the file and the JSON path of the problem.
    """
    try:
        with open(path, encoding='utf-8') as f:
            document = json.load(f)
    except OSError as exc:
        raise errors.NvlinkError('%s: %s' % (path, exc.strerror or exc))
    except ValueError as exc:
        raise errors.NvlinkError('%s: not a JSON snapshot: %s' % (path, exc))
    validate(document, path)
    return document


def validate(document, source='<snapshot>'):
    """Check schema and references (parents and allocation targets)."""
    problems = []
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for error in sorted(validator.iter_errors(document),
                        key=lambda e: list(map(str, e.absolute_path))):
        where = ''.join('[%s]' % json.dumps(p) if isinstance(p, str)
                        else '[%d]' % p for p in error.absolute_path)
        problems.append('%s: %s%s' % (source, where or '(top level)',
                                      ': ' + error.message))
    if not problems:
        uuids = [rp['uuid'] for rp in document['resource_providers']]
        names = [rp['name'] for rp in document['resource_providers']]
        for what, values in (('uuid', uuids), ('name', names)):
            dups = sorted({v for v in values if values.count(v) > 1})
            if dups:
                problems.append('%s: provider %s repeats: %s'
                                % (source, what, ', '.join(dups)))
        known = set(uuids)
        for i, rp in enumerate(document['resource_providers']):
            parent = rp.get('parent_provider_uuid')
            if parent and parent not in known:
                problems.append('%s: resource_providers[%d] (%s): parent %s '
                                'is not in the snapshot'
                                % (source, i, rp['name'], parent))
        for consumer, alloc in document.get('allocations', {}).items():
            for rp_uuid in alloc['allocations']:
                if rp_uuid not in known:
                    problems.append('%s: allocations[%s]: provider %s is not '
                                    'in the snapshot'
                                    % (source, json.dumps(consumer), rp_uuid))
    if problems:
        raise errors.NvlinkError('\n'.join(problems))


def _parents_first(providers):
    by_uuid = {rp['uuid']: rp for rp in providers}
    ordered, placed = [], set()

    def place(rp, path=()):
        if rp['uuid'] in placed:
            return
        if rp['uuid'] in path:
            raise errors.NvlinkError('snapshot: provider %s is its own '
                                     'ancestor' % rp['name'])
        parent = rp.get('parent_provider_uuid')
        if parent:
            place(by_uuid[parent], path + (rp['uuid'],))
        placed.add(rp['uuid'])
        ordered.append(rp)

    for rp in providers:
        place(rp)
    return ordered


def load_into(client, document):
    """Recreate a validated snapshot in an empty Placement.

    Requests: one PUT per custom trait and resource class; per provider one
    POST, one PUT of its traits and one of its inventories (when it has
    them); one ``POST /allocations`` for all consumers.
    """
    providers = _parents_first(document['resource_providers'])
    classes = sorted({rc for rp in providers
                      for rc in rp.get('inventories', {})
                      if rc.startswith(_CUSTOM)})
    traits = sorted({t for rp in providers for t in rp.get('traits', ())
                     if t.startswith(_CUSTOM)})
    for rc in classes:
        client.request('PUT', '/resource_classes/%s' % rc, version='1.7',
                       expect=(201, 204))
    for trait in traits:
        client.request('PUT', '/traits/%s' % trait, version='1.6',
                       expect=(201, 204))
    for rp in providers:
        body = client.request('POST', '/resource_providers', version='1.20',
                              body={'uuid': rp['uuid'], 'name': rp['name'],
                                    'parent_provider_uuid':
                                        rp.get('parent_provider_uuid')})
        generation = body['generation']
        if rp.get('traits'):
            body = client.request(
                'PUT', '/resource_providers/%s/traits' % rp['uuid'],
                version='1.6',
                body={'traits': sorted(rp['traits']),
                      'resource_provider_generation': generation})
            generation = body['resource_provider_generation']
        if rp.get('inventories'):
            client.request(
                'PUT', '/resource_providers/%s/inventories' % rp['uuid'],
                version='1.26',
                body={'inventories': rp['inventories'],
                      'resource_provider_generation': generation})
    allocations = {}
    for consumer, alloc in document.get('allocations', {}).items():
        entry = {'allocations': alloc['allocations'],
                 'project_id': alloc['project_id'],
                 'user_id': alloc['user_id'],
                 'consumer_generation': None}
        if 'consumer_type' in alloc:
            entry['consumer_type'] = alloc['consumer_type']
        allocations[consumer] = entry
    if allocations:
        client.request('POST', '/allocations', body=allocations,
                       version='1.38' if any(
                           'consumer_type' in a for a in allocations.values())
                       else '1.28', expect=(204,))


def export(client, hosts=None):
    """Read the trees of ``hosts`` (or of every tree with a PCI RP).

    Read only. Allocations are kept for the exported providers only.

    :param hosts: compute node names; each must be a root provider.
    :returns: snapshot dict (parents before children).
    :raises NvlinkError: for an unknown host.
    """
    current = state_mod.read(client, [naming.PCI_TRAIT])
    roots = current.select_roots(hosts)
    selected = [p for root in roots for p in current.tree(root)]
    selected.sort(key=lambda p: (current.depth(p), p.name))
    providers = []
    consumers = {}
    for p in selected:
        inv = client.get('/resource_providers/%s/inventories' % p.uuid)
        traits, _ = state_mod.provider_traits(client, p.uuid)
        providers.append({
            'uuid': p.uuid, 'name': p.name,
            'parent_provider_uuid': p.parent_uuid,
            'inventories': {rc: {k: v[k] for k in sorted(v)}
                            for rc, v in sorted(inv['inventories'].items())},
            'traits': sorted(traits)})
        used = client.get('/resource_providers/%s/allocations' % p.uuid)
        for consumer, alloc in used['allocations'].items():
            consumers.setdefault(consumer, {})[p.uuid] = {
                'resources': alloc['resources']}
    allocations = {}
    version = '1.38'   # consumer_type; older servers get 1.12
    for consumer in sorted(consumers):
        url = '/allocations/%s' % urllib.parse.quote(consumer)
        try:
            body = client.get(url, version=version)
        except errors.PlacementError as exc:
            if exc.status != 406:
                raise
            version = '1.12'
            body = client.get(url, version=version)
        entry = {'project_id': body.get('project_id'),
                 'user_id': body.get('user_id'),
                 'allocations': consumers[consumer]}
        if body.get('consumer_type'):
            entry['consumer_type'] = body['consumer_type']
        allocations[consumer] = entry
    return {'format': FORMAT, 'version': VERSION,
            'resource_providers': providers, 'allocations': allocations}


def write_file(document, path):
    """Write a snapshot as indented, key-sorted JSON."""
    try:
        with open(path, 'w', encoding='utf-8') as f:
            json.dump(document, f, indent=2, sort_keys=True)
            f.write('\n')
    except OSError as exc:
        raise errors.NvlinkError('%s: %s' % (path, exc.strerror or exc))
