"""One safe reader for the YAML and JSON files other people write.

Topologies and their GPU maps come from compute hosts, flavors and alias
configs from other tools, and the partition hook reads its mapping file as
root. Whatever such a file holds, reading it takes bounded time and memory
and fails with one :class:`DocumentError` naming the file and the line or
key path:

- a regular file of at most :data:`MAX_BYTES`, in UTF-8 (a UTF-8
  byte-order mark is skipped);
- nested at most :data:`MAX_DEPTH` levels;
- keys appear once per mapping (YAML and JSON both allow repeats and keep
  the last one silently);
- integers have at most :data:`MAX_DIGITS` digits (Python refuses to turn
  more than 4300 into an int; no value of ours needs more than 10);
- YAML: the safe tags only (``yaml.SafeLoader``); no aliases (``*name``),
  which let a few hundred bytes expand into gigabytes ("billion laughs");
  keys are strings: YAML 1.1 reads unquoted ``1234``, ``yes``, ``null``
  as an integer, a boolean, null, which would pass as host names and
  break later; PCI addresses (``0000:19:00.0``) stay strings instead of
  YAML 1.1 base-60 numbers.

YAML is parsed by libyaml where PyYAML has it (about five times faster)
and by PyYAML's Python parser where the two could differ; both give the
same documents and messages (:func:`parse_yaml`). Values shown in
messages are cut short (:func:`short`). Standard library
only, except that YAML parsing imports PyYAML when it is needed: the
partition hook reads JSON with nothing but Python.
"""

import functools
import json
import os
import re
import reprlib
import stat

from nvlink_placement import errors

MAX_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 32
MAX_DIGITS = 30
# Characters of a value shown in a message, and of a key in a key path
# (host names reach 253).
SHORT = 60
SHORT_KEY = 256
_BOMS = ((b'\xff\xfe\x00\x00', 'UTF-32'), (b'\x00\x00\xfe\xff', 'UTF-32'),
         (b'\xff\xfe', 'UTF-16'), (b'\xfe\xff', 'UTF-16'))
_UTF8_BOM = b'\xef\xbb\xbf'
_PLAIN_KEY = re.compile(r'^[A-Za-z0-9_-]+$')
# YAML 1.1 reads an unquoted 0000:19:00.0 as a base-60 float (1140.0).
_PCI_LIKE = re.compile(r'^[0-9a-fA-F]+(?::[0-9a-fA-F]+){1,2}\.[0-7]$')
# Text libyaml is not given: anything but printable ASCII and newlines
# (PyYAML's reader refuses some characters libyaml reads), tabs and "?"
# (PyYAML refuses some uses libyaml reads), directives, tags, anchors and
# aliases (refused or rare: read by PyYAML, for its messages).
_NOT_FOR_LIBYAML = re.compile(r'[^\n\x20-\x7e]|[?%!&*]')
_YAML_TYPES = {'int': 'an integer', 'float': 'a number',
               'bool': 'a boolean', 'null': 'null', 'timestamp': 'a date',
               'merge': 'a merge key (<<, which needs aliases)',
               'binary': 'binary data', 'value': 'a value key (=)'}


class DocumentError(errors.NvlinkError):
    """A file cannot be read or is not an acceptable document.

    :ivar location: ``<file>``, ``<file>: line L column C`` or
        ``<file>: <key path>``.
    :ivar reason: what is wrong.
    """

    def __init__(self, location, reason):
        self.location = location
        self.reason = reason
        super().__init__('%s: %s' % (location, reason))


_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxstring = SHORT
_SHORT_REPR.maxother = SHORT
_SHORT_REPR.maxlong = SHORT
_SHORT_REPR.maxlevel = 2
for _name in ('maxdict', 'maxlist', 'maxtuple', 'maxset', 'maxfrozenset'):
    setattr(_SHORT_REPR, _name, 4)


def short(value):
    """``repr(value)`` cut to about :data:`SHORT` characters.

    Bounded in time and size whatever ``value`` is (``reprlib``): a
    message never renders a whole document, and control characters are
    escaped, so a value cannot forge a log line.
    """
    try:
        return _SHORT_REPR.repr(value)
    except ValueError:  # an int of more digits than Python prints
        return '<a number of more than %d digits>' % MAX_DIGITS


def kind(value):
    """What ``value`` is, in words: ``a list``, ``a string``, ``null``..."""
    if value is None:
        return 'null'
    for types, name in ((bool, 'a boolean'), ((int, float), 'a number'),
                        (str, 'a string'), (list, 'a list'),
                        (dict, 'a mapping')):
        if isinstance(value, types):
            return name
    return 'a %s' % type(value).__name__


_TYPE_NAMES = {'object': 'a mapping', 'array': 'a list', 'string': 'a string',
               'integer': 'an integer', 'number': 'a number',
               'boolean': 'true or false', 'null': 'null'}


def _got(value):
    if value is None:
        return 'null'
    if isinstance(value, (dict, list)) and not value:
        return 'an empty %s' % kind(value)[2:]
    if isinstance(value, int) and not isinstance(value, bool):
        return 'an integer %s' % short(value)
    return '%s %s' % (kind(value), short(value))


def surely_valid(compiled, document):
    """Whether a compiled validator accepts ``document`` (True or False).

    ``compiled`` is a ``jsonschema_rs`` validator of one of the project's
    schemas; the readers ask it first and run jsonschema (for its
    messages, which name the key path) only when the answer is False.
    jsonschema-rs is stricter than jsonschema in two known ways: ``$``
    in a ``pattern`` does not match before a final newline, and NaN or
    an infinity is not a number; such a document gets False here and
    jsonschema decides. A tuple is an array to it (not to jsonschema):
    the readers' documents hold lists only. What JSON cannot hold (a key
    that is not a string, a set, bytes) it refuses with ValueError:
    False too.
    ``tests/unit/test_compiled_schema.py`` compares the two on the
    schemas and mutated documents.
    """
    try:
        return compiled.is_valid(document)
    except ValueError:
        return False


def schema_message(error):
    """A jsonschema error in plain words, without Python's reprs.

    ``None is not of type 'object'`` becomes ``expected a mapping, got
    null``, ``'version' is a required property`` ``missing required key
    'version'``; limits and patterns keep jsonschema's wording (values
    cut short). The caller adds the location.
    """
    validator, expected = error.validator, error.validator_value
    value = error.instance
    if validator == 'type':
        names = [expected] if isinstance(expected, str) else list(expected)
        return 'expected %s, got %s' % (
            ' or '.join(_TYPE_NAMES.get(n, n) for n in names), _got(value))
    if validator == 'required' and isinstance(value, dict):
        missing = [key for key in expected if key not in value]
        return 'missing required key%s %s' % (
            's' if len(missing) > 1 else '',
            ', '.join(short(key) for key in missing))
    if validator == 'additionalProperties' and isinstance(value, dict):
        known = set((error.schema or {}).get('properties', {}))
        extra = sorted((k for k in value if k not in known), key=str)
        return 'unknown key%s %s' % ('s' if len(extra) > 1 else '',
                                     ', '.join(short(k) for k in extra[:5]))
    if validator in ('enum', 'const'):
        choices = expected if validator == 'enum' else [expected]
        return 'expected %s, got %s' % (
            ' or '.join(short(c) for c in choices), _got(value))
    if validator in ('minItems', 'maxItems') and isinstance(value, list):
        return 'expected at %s %d item%s, got %d' % (
            'least' if validator == 'minItems' else 'most', expected,
            '' if expected == 1 else 's', len(value))
    if validator in ('minLength', 'maxLength') and isinstance(value, str):
        return 'expected at %s %d character%s, got %d' % (
            'least' if validator == 'minLength' else 'most', expected,
            '' if expected == 1 else 's', len(value))
    if validator == 'minProperties' and isinstance(value, dict):
        return 'expected at least %d key%s, got %d' % (
            expected, '' if expected == 1 else 's', len(value))
    if validator == 'uniqueItems':
        return 'items repeat in %s' % short(value)
    shown = repr(value)
    if len(shown) <= SHORT:
        return error.message
    return error.message.replace(shown, short(value))


def clip(text, limit=SHORT):
    """``text`` cut to ``limit`` characters (``...`` marks a cut)."""
    return text if len(text) <= limit else text[:limit] + '...'


def keypath(parts):
    """A key path: ``hosts.compute-01.gpus["0000:19:00.0"][0]``.

    Keys longer than :data:`SHORT_KEY` characters are cut.
    """
    out = ''
    for part in parts:
        if isinstance(part, int) and not isinstance(part, bool):
            out += '[%d]' % part
            continue
        part = clip(str(part), SHORT_KEY)
        if _PLAIN_KEY.match(part):
            out += ('.' if out else '') + part
        else:
            out += '[%s]' % json.dumps(part)
    return out


def _at(source, parts):
    return '%s: %s' % (source, keypath(parts)) if parts else source


def _decode(data, path):
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise DocumentError(path, 'the file is %s (it starts with a '
                                'byte-order mark), not UTF-8: convert it, '
                                'e.g. iconv -f %s -t UTF-8' % (name, name))
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM):]
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError as exc:
        line = data.count(b'\n', 0, exc.start) + 1
        column = exc.start - (data.rfind(b'\n', 0, exc.start) + 1) + 1
        raise DocumentError('%s: line %d column %d' % (path, line, column),
                            'not UTF-8 (byte 0x%02x): the file must be '
                            'UTF-8 text' % data[exc.start])


def read_text(path, max_bytes=MAX_BYTES):
    """The text of the regular file ``path``, decoded as UTF-8.

    A FIFO or device is refused before it is read (it could block or
    never end).

    :raises DocumentError: unreadable, not a regular file, larger than
        ``max_bytes``, or not UTF-8 (with the line and column).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise DocumentError(path, exc.strerror or str(exc))
    except ValueError:  # a NUL character
        raise DocumentError(short(path), 'not a file name')
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        # Before fdopen, which refuses a directory with its own message
        # ("[Errno 21] Is a directory: 3", the descriptor, not the path).
        os.close(fd)
        raise DocumentError(path, 'is a directory, not a file'
                            if stat.S_ISDIR(mode) else 'not a regular file')
    with os.fdopen(fd, 'rb') as handle:
        try:
            data = handle.read(max_bytes + 1)
        except OSError as exc:
            raise DocumentError(path, exc.strerror or str(exc))
    if len(data) > max_bytes:
        raise DocumentError(path, 'larger than %d bytes: not a file this '
                            'tool reads' % max_bytes)
    return _decode(data, path)


def load(path, max_bytes=MAX_BYTES):
    """Read and parse a YAML or JSON file.

    JSON for a ``.json`` name or text starting with ``{``, else YAML.

    :raises DocumentError: see :func:`read_text`, :func:`parse_json` and
        :func:`parse_yaml`.
    """
    text = read_text(path, max_bytes)
    if path.endswith('.json') or text.lstrip().startswith('{'):
        return parse_json(text, path)
    return parse_yaml(text, path)


# JSON ---------------------------------------------------------------------

class _Repeated(dict):
    """A JSON object that had a key twice (reported with its key path)."""

    repeated = None


class _LongNumber(str):
    """The digits of a JSON integer too long to convert."""


def _json_int(digits):
    if len(digits.lstrip('-')) > MAX_DIGITS:
        return _LongNumber(digits)
    return int(digits)


def _check_json(value, source, parts):
    if len(parts) > MAX_DEPTH:
        raise DocumentError(_at(source, parts[:MAX_DEPTH]),
                            'nested deeper than %d levels' % MAX_DEPTH)
    if isinstance(value, _LongNumber):
        raise DocumentError(_at(source, parts), 'a number of %d digits '
                            '(at most %d)' % (len(value.lstrip('-')),
                                              MAX_DIGITS))
    if isinstance(value, _Repeated):
        raise DocumentError(_at(source, parts), 'duplicate key %s'
                            % short(value.repeated))
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, item in items:
        _check_json(item, source, parts + [key])


def parse_json(text, source):
    """``json.loads`` with the checks of this module.

    :raises DocumentError: ``<source>: line L column C: invalid JSON:
        ...``, or naming the key path of a repeated key, a nesting too
        deep or a number too long.
    """
    def pairs_hook(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                repeated = _Repeated()
                repeated.repeated = key
                return repeated
            seen.add(key)
        return dict(pairs)

    try:
        document = json.loads(text, object_pairs_hook=pairs_hook,
                              parse_int=_json_int)
    except json.JSONDecodeError as exc:
        raise DocumentError('%s: line %d column %d' % (source, exc.lineno,
                                                       exc.colno),
                            'invalid JSON: %s' % exc.msg)
    except RecursionError:
        raise DocumentError(source, 'nested deeper than %d levels'
                            % MAX_DEPTH)
    _check_json(document, source, [])
    return document


# YAML ---------------------------------------------------------------------

def _line(mark):
    return 'line %d column %d' % (mark.line + 1, mark.column + 1)


@functools.lru_cache(maxsize=None)
def _yaml_loaders():
    """The YAML loader classes, built on first use (PyYAML is optional).

    :returns: ``(python, fast)``: ``python`` reads with PyYAML's pure
        Python reader, scanner and parser; ``fast`` takes the same events
        from libyaml (``yaml.cyaml.CParser``, several times faster), or is
        ``None`` where PyYAML was built without it. Both compose the nodes
        with the same checks in Python, so they refuse the same documents
        with the same messages; only a document libyaml finds invalid is
        read again by ``python``, for PyYAML's own message.
    """
    import yaml
    from yaml import composer

    str_tag = 'tag:yaml.org,2002:str'

    class Checks(composer.Composer):
        """Composing only documents this module accepts."""

        source = '<document>'

        def compose_document(self):
            self.parts = []
            return super().compose_document()

        def _fail(self, parts, reason):
            raise DocumentError(_at(self.source, parts), reason)

        def compose_node(self, parent, index):
            if index is not None:
                self.parts.append(index.value if isinstance(
                    index, yaml.ScalarNode) else index)
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent):
                self._fail(self.parts, '%s: YAML aliases (*%s) are not '
                           'accepted: write the value out (a GPU map can '
                           'be shared with gpus_file)'
                           % (_line(event.start_mark), event.anchor))
            is_key = isinstance(parent, yaml.MappingNode) and index is None
            if is_key and not isinstance(event, yaml.ScalarEvent):
                self._fail(self.parts, '%s: a key must be a string, not a '
                           '%s' % (_line(event.start_mark), 'list' if
                                   isinstance(event, yaml.SequenceStartEvent)
                                   else 'mapping'))
            if len(self.parts) > MAX_DEPTH:
                self._fail(self.parts[:MAX_DEPTH],
                           'nested deeper than %d levels' % MAX_DEPTH)
            node = super().compose_node(parent, index)
            if is_key:
                self._check_key(node)
            elif isinstance(node, yaml.MappingNode):
                self._check_repeats(node)
            elif node.tag.endswith(':int') and isinstance(
                    node, yaml.ScalarNode) and len(node.value) > MAX_DIGITS:
                self._fail(self.parts, 'a number of %d characters (at most '
                           '%d digits)' % (len(node.value), MAX_DIGITS))
            if index is not None:
                self.parts.pop()
            return node

        def _check_key(self, node):
            if node.tag == str_tag:
                return
            kind = _YAML_TYPES.get(node.tag.rpartition(':')[2],
                                   'tagged %s' % node.tag)
            self._fail(self.parts, '%s: key %s is not a string: YAML reads '
                       'it as %s; quote it' % (_line(node.start_mark),
                                               short(node.value), kind))

        def _check_repeats(self, node):
            first = {}
            for key, _ in node.value:
                if key.value in first:
                    self._fail(self.parts, 'duplicate key %s (lines %d and '
                               '%d)' % (short(key.value), first[key.value],
                                        key.start_mark.line + 1))
                first[key.value] = key.start_mark.line + 1

    class Loader(Checks, yaml.SafeLoader):
        """SafeLoader composing only documents this module accepts."""

    for digit in '0123456789':
        Loader.add_implicit_resolver(str_tag, _PCI_LIKE, [digit])
        resolvers = Loader.yaml_implicit_resolvers[digit]
        resolvers.insert(0, resolvers.pop())
    if not getattr(yaml, '__with_libyaml__', False):
        return Loader, None
    from yaml import constructor
    from yaml import cyaml
    from yaml import resolver

    class FastLoader(Checks, cyaml.CParser, constructor.SafeConstructor,
                     resolver.Resolver):
        """``Loader`` with libyaml's events (composed by ``Checks``)."""

        yaml_implicit_resolvers = Loader.yaml_implicit_resolvers

        def __init__(self, stream):
            cyaml.CParser.__init__(self, stream)
            composer.Composer.__init__(self)
            constructor.SafeConstructor.__init__(self)
            resolver.Resolver.__init__(self)

    return Loader, FastLoader


def _compose(loader_class, text, source):
    loader = loader_class(text)
    try:
        loader.source = source
        return loader.get_single_data()
    finally:
        loader.dispose()


def parse_yaml(text, source, libyaml=True):
    """``yaml.safe_load`` with the checks of this module.

    libyaml reads the document where PyYAML has it, unless the text holds
    what the two parsers may read differently (see
    :data:`_NOT_FOR_LIBYAML`); a document libyaml or the checks refuse is
    read again by PyYAML's Python parser, whose verdict and message are
    the ones given (:func:`_yaml_loaders`). ``tests/unit/
    test_fuzz_inputs.py`` compares the two on mutated files.

    :param libyaml: False: PyYAML's Python parser only (what libyaml's
        reading is compared with).
    :raises DocumentError: ``<source>: line L column C: invalid YAML:
        ...``, or naming the key path (and line) of an alias, a key that
        is not a string or repeats, a nesting too deep or a number too
        long.
    """
    import yaml

    python, fast = _yaml_loaders()
    if libyaml and fast is not None and not _NOT_FOR_LIBYAML.search(text):
        try:
            return _compose(fast, text, source)
        except (yaml.YAMLError, DocumentError, ValueError, TypeError,
                OverflowError):
            pass
    try:
        # The reader refuses control characters while it is built.
        return _compose(python, text, source)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        reason = ' '.join(str(exc.problem or exc.context).split())
        if exc.context and exc.problem:
            reason += ' (%s)' % ' '.join(exc.context.split())
        raise DocumentError('%s: %s' % (source, _line(mark)) if mark
                            else source, 'invalid YAML: %s' % reason)
    except yaml.YAMLError as exc:
        raise DocumentError(source, 'invalid YAML: %s'
                            % ' '.join(str(exc).split())[:200])
    except (ValueError, TypeError, OverflowError) as exc:
        # A constructor refused a value, e.g. a date 2024-13-45.
        raise DocumentError(source, 'invalid YAML value: %s'
                            % ' '.join(str(exc).split())[:200])
