"""The workload file of ``openstack nvlink simulate``, and its events.

Pure. A workload says what users ask of a GPU cloud, independent of the
flavors' extra specs (those come from the flavors file, so the same
workload runs against any layout)::

    version: 1
    seed: 42                 # same seed, same events, same results
    events: 2000             # boots and deletes replayed, in time order
    arrival:                 # time between two boot requests (hours)
      distribution: exponential
      mean: 0.5
    lifetime:                # how long a server lives (hours)
      distribution: exponential
      mean: 48
    flavors:                 # the mix: GPUs per server and its weight
      - gpus: 1
        weight: 6
      - gpus: 2
        weight: 3
      - gpus: 4
        weight: 1
        lifetime: {distribution: fixed, value: 24}   # optional, per size

``distribution`` is ``exponential`` (``mean``) or ``fixed`` (``value``).
Boots arrive as a Poisson process; each picks a size by weight and draws
its lifetime; its delete is due at arrival + lifetime. The events are the
boots and deletes in time order (a delete before a boot at the same
time), cut after ``events`` of them; servers still alive at the end stay.
A boot that gets NoValidHost has no delete.

Every draw comes from one ``random.Random(seed)`` in a fixed order, so a
seed gives the same events on every machine and Python 3 release
(``random`` guarantees the sequence of ``random()`` for a seed).
"""

import dataclasses
import heapq
import math
import random

import jsonschema

from nvlink_placement import documents
from nvlink_placement import errors

VERSION = 1
EXPONENTIAL = 'exponential'
FIXED = 'fixed'
#: Bounds that keep a run finite: events, sizes in the mix.
MAX_EVENTS = 1000000
MAX_GPUS = 64
#: Largest mean or value of a time distribution (hours: about 114 years),
#: and largest weight. Both keep every sum the run makes finite: the
#: clock stays below ``MAX_EVENTS`` draws of at most 37 means each
#: (:meth:`Distribution.draw`), the weights' total below 64 weights.
MAX_HOURS = 1e6
MAX_WEIGHT = 1e9

_DISTRIBUTION = {
    'type': 'object',
    'additionalProperties': False,
    'required': ['distribution'],
    'properties': {
        'distribution': {'enum': [EXPONENTIAL, FIXED]},
        'mean': {'type': 'number', 'exclusiveMinimum': 0,
                 'maximum': MAX_HOURS},
        'value': {'type': 'number', 'exclusiveMinimum': 0,
                  'maximum': MAX_HOURS},
    },
}

SCHEMA = {
    'type': 'object',
    'additionalProperties': False,
    'required': ['version', 'seed', 'events', 'arrival', 'lifetime',
                 'flavors'],
    'properties': {
        'version': {'const': VERSION},
        'seed': {'type': 'integer', 'minimum': 0},
        'events': {'type': 'integer', 'minimum': 1, 'maximum': MAX_EVENTS},
        'arrival': _DISTRIBUTION,
        'lifetime': _DISTRIBUTION,
        'flavors': {
            'type': 'array', 'minItems': 1,
            'items': {
                'type': 'object',
                'additionalProperties': False,
                'required': ['gpus', 'weight'],
                'properties': {
                    'gpus': {'type': 'integer', 'minimum': 1,
                             'maximum': MAX_GPUS},
                    'weight': {'type': 'number', 'exclusiveMinimum': 0,
                               'maximum': MAX_WEIGHT},
                    'lifetime': _DISTRIBUTION,
                },
            },
        },
    },
}
_VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


@dataclasses.dataclass(frozen=True)
class Distribution:
    """``exponential`` with ``mean``, or ``fixed`` at ``mean``."""
    kind: str
    mean: float

    def draw(self, rng):
        if self.kind == FIXED:
            return self.mean
        # Inverse transform on random() (not expovariate): the sequence of
        # random() is what Python guarantees per seed.
        return -self.mean * math.log(1.0 - rng.random())

    def describe(self):
        return '%s %g h' % ('mean' if self.kind == EXPONENTIAL else 'fixed',
                            self.mean)


@dataclasses.dataclass(frozen=True)
class Workload:
    """A validated workload file.

    :ivar mix: tuple of ``(gpus, weight, lifetime Distribution)``, in file
        order.
    """
    source: str
    seed: int
    events: int
    arrival: Distribution
    lifetime: Distribution
    mix: tuple

    @property
    def sizes(self):
        """GPU counts of the mix, ascending and unique."""
        return sorted({gpus for gpus, _, _ in self.mix})


@dataclasses.dataclass(frozen=True)
class Event:
    """A boot or a delete.

    :ivar index: the server's number (0-based, in arrival order).
    :ivar time: hours since the start.
    :ivar kind: ``boot`` or ``delete``.
    :ivar gpus: GPUs of its flavor.
    """
    time: float
    kind: str
    index: int
    gpus: int


BOOT = 'boot'
DELETE = 'delete'


def _distribution(data, where):
    kind = data['distribution']
    field = 'mean' if kind == EXPONENTIAL else 'value'
    if field not in data:
        raise errors.NvlinkError('%s: %s: the %s distribution needs %r'
                                 % (where[0], documents.keypath(where[1]),
                                    kind, field))
    other = 'value' if field == 'mean' else 'mean'
    if other in data:
        raise errors.NvlinkError('%s: %s.%s: the %s distribution takes %r, '
                                 'not %r' % (where[0],
                                             documents.keypath(where[1]),
                                             other, kind, field, other))
    return Distribution(kind, float(data[field]))


def _not_finite(node, path=()):
    """Key paths and values of the NaNs and infinities in ``node``.

    YAML's ``.nan`` and ``.inf`` (and JSON's ``NaN``, ``Infinity``) load as
    floats that pass a schema's number bounds: NaN compares false with
    every bound.
    """
    if isinstance(node, float) and not math.isfinite(node):
        return [(list(path), node)]
    if isinstance(node, dict):
        items = node.items()
    elif isinstance(node, list):
        items = enumerate(node)
    else:
        return []
    found = []
    for key, value in items:
        found += _not_finite(value, path + (key,))
    return found


def parse(document, source='<workload>'):
    """Validate a loaded workload document.

    Numbers must be finite and within the schema's bounds
    (:data:`MAX_HOURS`, :data:`MAX_WEIGHT`, :data:`MAX_EVENTS`), so no
    sum the run makes overflows.

    :returns: :class:`Workload`.
    :raises NvlinkError: naming ``source`` and the key path of every
        schema problem.
    """
    bad = _not_finite(document)
    if bad:
        raise errors.NvlinkError('\n'.join(
            '%s: %s: expected a finite number, got %s' % (
                source, documents.keypath(path) or 'top level', value)
            for path, value in bad))
    problems = []
    for error in sorted(_VALIDATOR.iter_errors(document),
                        key=lambda e: documents.keypath(e.absolute_path)):
        where = documents.keypath(error.absolute_path) or 'top level'
        problems.append('%s: %s: %s' % (source, where,
                                        documents.schema_message(error)))
    if problems:
        raise errors.NvlinkError('\n'.join(problems))
    lifetime = _distribution(document['lifetime'], (source, ['lifetime']))
    mix = []
    for index, item in enumerate(document['flavors']):
        own = item.get('lifetime')
        mix.append((item['gpus'], float(item['weight']), _distribution(
            own, (source, ['flavors', index, 'lifetime'])) if own
            else lifetime))
    sizes = [gpus for gpus, _, _ in mix]
    for index, gpus in enumerate(sizes):
        if sizes.index(gpus) != index:
            raise errors.NvlinkError(
                '%s: flavors[%d].gpus: %d GPUs are in the mix twice (at '
                'flavors[%d] too): give one entry per size'
                % (source, index, gpus, sizes.index(gpus)))
    return Workload(source, document['seed'], document['events'],
                    _distribution(document['arrival'], (source, ['arrival'])),
                    lifetime, tuple(mix))


def load(path):
    """:func:`parse` the YAML or JSON file at ``path``."""
    return parse(documents.load(path), path)


def events(workload):
    """The workload's events in time order (a generator, :class:`Event`).

    Deletes are produced for every boot; the caller skips those of boots
    that failed. Draw order per boot: inter-arrival time, size, lifetime.
    """
    rng = random.Random(workload.seed)
    total = sum(weight for _, weight, _ in workload.mix)
    due = []            # heap of (time, index, gpus) deletes
    clock, index, produced = 0.0, 0, 0
    next_boot = clock + workload.arrival.draw(rng)
    while produced < workload.events:
        if due and due[0][0] <= next_boot:
            time, number, gpus = heapq.heappop(due)
            yield Event(time, DELETE, number, gpus)
        else:
            pick = rng.random() * total
            for gpus, weight, lifetime in workload.mix:
                pick -= weight
                if pick < 0:
                    break
            heapq.heappush(due, (next_boot + lifetime.draw(rng), index,
                                 gpus))
            yield Event(next_boot, BOOT, index, gpus)
            index += 1
            next_boot += workload.arrival.draw(rng)
        produced += 1
