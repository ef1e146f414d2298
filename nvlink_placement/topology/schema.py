"""JSON schema of the topology file, format version 1 (design.rst s3).

Extensions over the hand-written form (added for host inspection, accepted
everywhere): a GPU value may be a mapping with ``module_id`` and inspection
details, a group may be a mapping ``{members, source, mesh}``, and a host
may list ``nvswitches`` and ``notes``. A board group may be a mapping
``{members, mesh}`` too. ``mesh: true`` says any N of the members are
linked (see :mod:`nvlink_placement.topology.model`); without it a group
means what it always meant, so version 1 files keep their meaning.
"""

# Module ids are small; the bound keeps int() of a 5000-digit string away.
_MODULE_ID = {
    'oneOf': [{'type': 'integer', 'minimum': 0, 'maximum': 2 ** 31 - 1},
              {'type': 'string', 'pattern': r'^\s*[0-9]{1,10}\s*$'}],
}

_HEALTH = {
    'type': 'object',
    'additionalProperties': False,
    'required': ['status'],
    'properties': {
        'status': {'enum': ['ok', 'degraded', 'unhealthy']},
        'reasons': {'type': 'array', 'items': {'type': 'string'}},
    },
}

_GPU_DETAILS = {
    'type': 'object',
    'additionalProperties': False,
    'properties': {
        'module_id': _MODULE_ID,
        'vendor_id': {'type': 'string'},
        'device_id': {'type': 'string'},
        'resource_class': {'type': 'string',
                           'pattern': '^CUSTOM_[A-Z0-9_]+$'},
        'numa_node': {'oneOf': [{'type': 'integer', 'minimum': 0},
                                {'const': 'unknown'}]},
        'iommu_group': {'type': ['string', 'integer', 'null']},
        'driver': {'type': ['string', 'null']},
        'health': _HEALTH,
        'excluded': {'type': 'string'},
    },
}

_ADDRESS_LIST = {'type': 'array', 'minItems': 1,
                 'items': {'type': 'string'}}

_GROUP = {
    'oneOf': [
        _ADDRESS_LIST,
        {'type': 'object', 'additionalProperties': False,
         'required': ['members'],
         'properties': {
             'members': _ADDRESS_LIST,
             'source': {'enum': ['file', 'fm', 'topo-matrix', 'board']},
             'mesh': {'type': 'boolean'},
         }},
    ],
}

_HOST = {
    'type': 'object',
    'additionalProperties': False,
    'properties': {
        'board': {'type': 'string', 'minLength': 1},
        'gpus': {
            'type': 'object',
            'additionalProperties': {
                'oneOf': [_MODULE_ID, _GPU_DETAILS]},
        },
        'gpus_file': {'type': 'string', 'minLength': 1},
        'groups': {'type': 'array', 'items': _GROUP},
        'nvswitches': {'type': 'array', 'items': {'type': 'string'}},
        'notes': {'type': 'array', 'items': {'type': 'string'}},
    },
}

_MODULE_LIST = {'type': 'array', 'minItems': 1,
                'items': {'type': 'integer', 'minimum': 0}}

_BOARD_GROUP = {
    'oneOf': [
        _MODULE_LIST,
        {'type': 'object', 'additionalProperties': False,
         'required': ['members'],
         'properties': {
             'members': _MODULE_LIST,
             'mesh': {'type': 'boolean'},
         }},
    ],
}

_BOARD = {
    'type': 'object',
    'additionalProperties': False,
    'required': ['gpus', 'groups'],
    'properties': {
        'gpus': {'type': 'array', 'minItems': 1,
                 'items': {'type': 'integer', 'minimum': 0}},
        'groups': {'type': 'array', 'items': _BOARD_GROUP},
    },
}

TOPOLOGY = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'title': 'nvlink-placement topology, format version 1',
    'type': 'object',
    'additionalProperties': False,
    'required': ['version', 'hosts'],
    'properties': {
        'version': {'const': 1},
        'group_trait_prefix': {'type': 'string',
                               'pattern': '^CUSTOM_[A-Z0-9_]+$'},
        'boards': {'type': 'object', 'additionalProperties': _BOARD},
        'hosts': {'type': 'object',
                  'propertyNames': {'minLength': 1},
                  'additionalProperties': _HOST},
    },
}

# gpu-pci-module-mapping.json: flat {"<bdf>": <module id>}.
MODULE_MAPPING = {
    'type': 'object',
    'additionalProperties': _MODULE_ID,
}
