"""A quick "valid" for documents a JSON schema accepts.

jsonschema (Draft 2020-12) takes about 0.6 s of CPU to check a 1000-host
topology and 0.4 s for the outline of a 9000-provider snapshot, in every
command that reads them. Nearly every file is valid, and only an invalid
one needs jsonschema's errors (for the messages). :func:`compile` turns
a schema into plain functions that say whether a document is valid, as
jsonschema would for the keywords the project's schemas use; the loaders
call jsonschema only when the answer is not a sure yes
(:func:`accepts`). ``tests/unit/test_quickschema.py`` compares the two on
the schemas and mutated documents.

Each keyword applies as jsonschema applies it (``properties`` only to a
mapping, ``pattern`` with ``re.search``, ``integer`` includes 2.0 but
not ``True``, ``const`` tells ``True`` from 1). Where this module would
have to guess (a number that is neither int nor float, ``uniqueItems``
over items that are not all strings), it gives up and jsonschema decides.
"""

import numbers
import re

#: Keywords that say nothing about validity.
_ANNOTATIONS = frozenset(('$schema', 'title', 'description'))


class _Unsure(Exception):
    """This module cannot tell; jsonschema decides."""


def _is_number(value):
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    if isinstance(value, numbers.Number):
        raise _Unsure()
    return False


_TYPES = {
    'object': lambda v: isinstance(v, dict),
    'array': lambda v: isinstance(v, list),
    'string': lambda v: isinstance(v, str),
    'boolean': lambda v: isinstance(v, bool),
    'null': lambda v: v is None,
    'number': _is_number,
    'integer': lambda v: not isinstance(v, bool) and (
        isinstance(v, int) or (isinstance(v, float) and v.is_integer())),
}

_TRUE, _FALSE = object(), object()


def _unbool(value):
    return _TRUE if value is True else _FALSE if value is False else value


def _equal_to(constant):
    """``equal(instance, constant)`` of jsonschema, for a scalar constant."""
    if not (constant is None or isinstance(constant, (str, int, float))):
        raise ValueError('const/enum value %r' % (constant,))
    unbooled = _unbool(constant)

    def equal(value):
        if value is constant:
            return True
        if isinstance(value, str) or isinstance(constant, str):
            return value == constant
        return _unbool(value) == unbooled
    return equal


def _unique(values):
    if not all(isinstance(v, str) for v in values):
        raise _Unsure()
    return len(set(values)) == len(values)


def compile(schema):
    """A function ``check(instance) -> bool`` for ``schema`` (a dict).

    ``check`` may raise :class:`_Unsure`; call it through
    :func:`accepts`.

    :raises ValueError: ``schema`` uses a keyword (or a form of one) this
        module does not handle.
    """
    if not isinstance(schema, dict):
        raise ValueError('schema %r' % (schema,))
    checks = []
    for keyword, value in schema.items():
        if keyword in _ANNOTATIONS:
            continue
        make = _KEYWORDS.get(keyword)
        if make is None:
            raise ValueError('keyword %r' % keyword)
        checks.append(make(value, schema))
    if len(checks) == 1:
        return checks[0]

    def check(instance):
        for one in checks:
            if not one(instance):
                return False
        return True
    return check


def _type(types, schema):
    names = [types] if isinstance(types, str) else list(types)
    tests = [_TYPES[n] for n in names]
    if len(tests) == 1:
        return tests[0]
    return lambda v: any(test(v) for test in tests)


def _properties(properties, schema):
    children = [(key, compile(sub)) for key, sub in properties.items()]

    def check(v):
        if not isinstance(v, dict):
            return True
        for key, child in children:
            if key in v and not child(v[key]):
                return False
        return True
    return check


def _additional(additional, schema):
    if 'patternProperties' in schema:
        raise ValueError('patternProperties')
    known = frozenset(schema.get('properties', ()))
    if additional is False:
        return lambda v: not isinstance(v, dict) or all(
            key in known for key in v)
    if additional is True:
        return lambda v: True
    child = compile(additional)

    def check(v):
        if not isinstance(v, dict):
            return True
        for key, item in v.items():
            if key not in known and not child(item):
                return False
        return True
    return check


def _required(required, schema):
    return lambda v: not isinstance(v, dict) or all(
        key in v for key in required)


def _property_names(names, schema):
    child = compile(names)
    return lambda v: not isinstance(v, dict) or all(child(k) for k in v)


def _items(items, schema):
    if 'prefixItems' in schema:
        raise ValueError('prefixItems')
    child = compile(items)

    def check(v):
        if not isinstance(v, list):
            return True
        for item in v:
            if not child(item):
                return False
        return True
    return check


def _const(constant, schema):
    return _equal_to(constant)


def _enum(values, schema):
    tests = [_equal_to(value) for value in values]
    return lambda v: any(test(v) for test in tests)


def _bound(compare):
    def make(limit, schema):
        return lambda v: not _is_number(v) or compare(v, limit)
    return make


def _count(kind, compare):
    def make(limit, schema):
        return lambda v: not isinstance(v, kind) or compare(len(v), limit)
    return make


def _pattern(pattern, schema):
    search = re.compile(pattern).search
    return lambda v: not isinstance(v, str) or search(v) is not None


def _unique_items(unique, schema):
    if not unique:
        return lambda v: True
    return lambda v: not isinstance(v, list) or _unique(v)


def _any_of(schemas, schema):
    children = [compile(sub) for sub in schemas]
    return lambda v: any(child(v) for child in children)


def _one_of(schemas, schema):
    children = [compile(sub) for sub in schemas]
    return lambda v: sum(1 for child in children if child(v)) == 1


_KEYWORDS = {
    'type': _type,
    'properties': _properties,
    'additionalProperties': _additional,
    'required': _required,
    'propertyNames': _property_names,
    'items': _items,
    'const': _const,
    'enum': _enum,
    'minimum': _bound(lambda v, limit: not v < limit),
    'maximum': _bound(lambda v, limit: not v > limit),
    'minLength': _count(str, lambda n, limit: n >= limit),
    'maxLength': _count(str, lambda n, limit: n <= limit),
    'minItems': _count(list, lambda n, limit: n >= limit),
    'maxItems': _count(list, lambda n, limit: n <= limit),
    'minProperties': _count(dict, lambda n, limit: n >= limit),
    'pattern': _pattern,
    'uniqueItems': _unique_items,
    'anyOf': _any_of,
    'oneOf': _one_of,
}


def accepts(check, instance):
    """Whether ``check`` (from :func:`compile`) surely accepts ``instance``.

    False when the instance is invalid or this module cannot tell
    (then jsonschema decides, and gives the messages).
    """
    try:
        return check(instance)
    except (_Unsure, RecursionError):
        return False
