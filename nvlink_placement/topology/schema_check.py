"""A document checked against a topology schema, in the operator's words.

The loader's first check (:mod:`.loader`), for a topology file and for
the GPU maps it names (:data:`.schema.TOPOLOGY`,
:data:`.schema.MODULE_MAPPING`): a compiled validator (jsonschema-rs)
says whether the document is valid; for one it does not accept,
jsonschema's errors become messages naming the key path (an unknown key
with its close spelling, the mapping form of a ``oneOf``, the format
version), and :func:`accepted_part` keeps what the schema accepted so
that the semantic checks still report everything else.
"""

import copy
import difflib

import jsonschema
import jsonschema_rs

from nvlink_placement import documents
from nvlink_placement.topology import schema

#: The compiled validators (jsonschema-rs) of the two schemas, by id.
COMPILED = {id(s): jsonschema_rs.Draft202012Validator(s)
            for s in (schema.TOPOLOGY, schema.MODULE_MAPPING)}


def problems(document, validator_schema):
    """Schema problems as ``(key path parts, message, is_unknown_key)``.

    :param validator_schema: :data:`.schema.TOPOLOGY` or
        :data:`.schema.MODULE_MAPPING` (another schema is checked by
        jsonschema alone).
    :returns: a list sorted by key path; empty when the document is valid.

    The compiled validator (:func:`documents.surely_valid`) answers for a
    valid document; jsonschema runs only for one it does not accept, for
    its messages (and its verdict: a document jsonschema accepts has no
    problems).
    """
    compiled = COMPILED.get(id(validator_schema))
    if compiled is not None and documents.surely_valid(compiled, document):
        return []
    validator = jsonschema.Draft202012Validator(validator_schema)
    found = []
    for error in validator.iter_errors(document):
        where = list(error.absolute_path)
        if (error.validator == 'additionalProperties' and
                isinstance(error.instance, dict)):
            known = set(error.schema.get('properties', {}))
            for key in sorted(set(error.instance) - known, key=str):
                close = difflib.get_close_matches(str(key), sorted(known), 1)
                found.append((where + [key], 'unknown key' + (
                    ' (did you mean %r?)' % close[0] if close else ''), True))
            continue
        if error.validator == 'oneOf':
            inner, message = _one_of_message(error)
            where += inner
        elif error.validator == 'const' and where == ['version']:
            message = ('unsupported format version %s (this tool reads '
                       'version 1)' % documents.short(error.instance))
        else:
            message = _message(error)
        if not where and error.validator == 'required':
            message += ' at top level'
        elif not where:
            message = 'top level: %s%s' % (
                message, ' (the file is empty)' if document is None else '')
        found.append((where, message, False))
    found.sort(key=lambda p: documents.keypath(p[0]))
    return found


def located(document, validator_schema):
    """:func:`problems` as ``(key path text, message)``, for a GPU map."""
    return [(documents.keypath(parts), message)
            for parts, message, _ in problems(document, validator_schema)]


def accepted_part(document, found):
    """The part of ``document`` the schema accepted, or None.

    Unknown keys are dropped and hosts with other schema errors left out,
    so the semantic checks still run on everything else and one run
    reports every problem. None when the problems are not confined to
    hosts (the version, boards, the document's shape).
    """
    blocking = [parts for parts, _, unknown in found if not unknown]
    if any(len(parts) < 2 or parts[0] != 'hosts' for parts in blocking):
        return None
    accepted = copy.deepcopy(document)
    for parts, _, unknown in found:
        if unknown:
            node = accepted
            for part in parts[:-1]:
                node = node[part]
            node.pop(parts[-1], None)
    for host in {parts[1] for parts in blocking}:
        accepted['hosts'].pop(host, None)
    return accepted


def _message(error):
    """jsonschema's error in plain words (see documents.schema_message)."""
    return documents.schema_message(error)


def _one_of_message(error):
    """A ``oneOf`` failure (a list, or a mapping of the same thing).

    For a mapping the errors of the mapping form are reported (jsonschema's
    ``best_match`` would pick the list form's "expected a list"), at the
    key inside the mapping, with a close spelling of an unknown key.

    :returns: ``(key path parts below the error's, message)``.
    """
    value = error.instance
    if isinstance(value, dict):
        mapping_form = [
            sub for sub in error.context
            if error.validator_value[sub.relative_schema_path[0]].get(
                'type') == 'object']
        sub = jsonschema.exceptions.best_match(mapping_form or error.context)
        if sub.validator == 'additionalProperties':
            known = sorted(sub.schema.get('properties', {}))
            extra = sorted(set(sub.instance) - set(known), key=str)
            close = difflib.get_close_matches(str(extra[0]), known, 1)
            return [], 'unknown key(s) %s%s%s' % (
                ', '.join(documents.short(k) for k in extra[:5]),
                ' and %d more' % (len(extra) - 5) if len(extra) > 5 else '',
                ' (did you mean %r?)' % close[0]
                if close and len(extra) == 1 else '')
        return (list(sub.absolute_path)[len(error.absolute_path):],
                _message(sub))
    return [], ('%s is not valid here: expected %s' % (
        documents.short(value),
        ' or '.join(_describe(s) for s in error.validator_value)))


def _describe(sub):
    if 'oneOf' in sub:
        return ' or '.join(_describe(s) for s in sub['oneOf'])
    if sub.get('type') == 'integer':
        return 'a non-negative integer'
    if 'pattern' in sub and sub.get('type') == 'string':
        return 'a decimal string' if '[0-9]' in sub['pattern'] else 'a string'
    if sub.get('type') == 'array':
        return 'a list'
    if sub.get('type') == 'object':
        return 'a mapping'
    if 'const' in sub:
        return repr(sub['const'])
    return 'a %s' % sub.get('type', 'value')
