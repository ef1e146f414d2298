"""The documents the operator hands ``flavor verify`` and ``simulate``.

Pure but for reading the files. Two of them:

- the ``[pci] alias`` configuration (``--alias-config``): a JSON/YAML
  list of alias objects, or nova.conf text; the alias fields and their
  normalization follow Nova's alias parsing (``nova/pci/request.py``)
  and resource class naming
  (``nova/compute/pci_placement_translator.py``), as
  :func:`nvlink_placement.flavors.request.resource_class_name` and
  :func:`~nvlink_placement.flavors.request.trait_name` apply them;
- the flavors file (``--flavors``): flavors as ``flavor generate -f
  json|yaml`` prints them (or ``openstack flavor show -f json``),
  bounded as Nova's flavor API schemas bound them.

Each is validated whole, with errors naming the file, the flavor or
alias and the field. The query Nova builds from them is
:mod:`.request`.
"""

from nvlink_placement import documents
from nvlink_placement import errors
from nvlink_placement.flavors import generate
from nvlink_placement.flavors import request

# Longest resource class or trait name (placement/schemas/common.py) and
# flavor name, extra spec key or value (Nova's flavor API schemas).
MAX_NAME = 255
# Extra specs per flavor, and request groups a flavor names itself
# (resources<S>: / trait<S>: suffixes). Nova and Placement set no number,
# but Nova sends each group to Placement, which solves them jointly: a
# flavor file with 100,000 groups took minutes and hundreds of MB before
# Placement refused it. Real flavors carry a few dozen extra specs and a
# group per device set, fewer than ``request.MAX_ALIAS_COUNT``.
MAX_EXTRA_SPECS = 256
MAX_FLAVOR_GROUPS = request.MAX_ALIAS_COUNT
_FLAVOR_FIELDS = ('vcpus', 'ram', 'disk')
_OPTIONAL_FIELDS = ('ephemeral', 'swap')


def _name_checked(name, what, where):
    if len(name) > MAX_NAME:
        raise errors.NvlinkError('%s: %s %s is longer than %d characters'
                                 % (where, what, documents.short(name),
                                    MAX_NAME))
    return name


def alias_from_spec(spec, source='alias'):
    """Build an :class:`Alias` from one ``[pci] alias`` JSON object.

    :raises NvlinkError: when it is not an object with a string ``name``,
        a field this module reads is not a string, it names no device
        class, or a resource class or trait name is too long for
        Placement.
    """
    if not isinstance(spec, dict) or not isinstance(spec.get('name'), str):
        raise errors.NvlinkError('%s: an alias is a JSON object with a '
                                 '"name" (got %s)'
                                 % (source, documents.short(spec)))
    name = spec['name'].strip()
    where = '%s: alias %s' % (source, documents.short(name))
    for field in ('resource_class', 'vendor_id', 'product_id', 'traits'):
        if spec.get(field) is not None and not isinstance(spec[field], str):
            raise errors.NvlinkError('%s: %s must be a string, got %s'
                                     % (where, field,
                                        documents.short(spec[field])))
    vendor, product = spec.get('vendor_id'), spec.get('product_id')
    if not spec.get('resource_class') and not (vendor and product):
        raise errors.NvlinkError(
            '%s: alias %s needs resource_class or vendor_id and product_id '
            '(Nova derives the Placement resource class from them)'
            % (source, documents.short(name)))
    traits = tuple(sorted({_name_checked(request.trait_name(t), 'trait', where)
                           for t in (spec.get('traits') or '').split(',')
                           if t.strip()}))
    return request.Alias(name, _name_checked(request.resource_class_name(
        spec.get('resource_class'), vendor, product), 'resource class',
        where), traits)


def _is_alias_list(document):
    if isinstance(document, dict):
        return 'name' in document
    return (isinstance(document, list) and bool(document) and
            all(isinstance(d, dict) for d in document))


def parse_alias_config(text, source='alias config'):
    """Parse ``[pci] alias`` values.

    Accepts a JSON/YAML list of alias objects (or one object), or
    nova.conf text: every ``alias = {...}`` in section ``[pci]`` (or
    before any section), JSON continued on indented lines; other lines
    are ignored. YAML and JSON are read by :mod:`nvlink_placement.documents`.

    :returns: dict alias name -> :class:`Alias`.
    :raises NvlinkError: for bad JSON, no alias, or a name given twice
        (PCI in Placement supports one spec per alias); for text that is
        neither nova.conf nor an acceptable YAML document, the YAML error.
    """
    try:
        document, problem = documents.parse_yaml(text, source), None
    except documents.DocumentError as exc:
        document, problem = None, exc
    if _is_alias_list(document):
        specs = document if isinstance(document, list) else [document]
    else:
        specs = _ini_aliases(text, source)
        if not specs and problem is not None:
            raise problem
    aliases = {}
    for spec in specs:
        alias = alias_from_spec(spec, source)
        if alias.name in aliases:
            raise errors.NvlinkError(
                '%s: alias %s is defined twice; with PCI in Placement an '
                'alias has exactly one spec'
                % (source, documents.short(alias.name)))
        aliases[alias.name] = alias
    if not aliases:
        raise errors.NvlinkError('%s: no [pci] alias found' % source)
    return aliases


def _ini_aliases(text, source):
    section, values, current = None, [], None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if current is not None and line[:1].isspace() and stripped:
            current[1].append(stripped)
            continue
        current = None
        if not stripped or stripped[0] in '#;':
            continue
        if stripped.startswith('['):
            section = stripped.strip('[]').strip().lower()
            continue
        key, sep, value = stripped.partition('=')
        if sep and key.strip() == 'alias' and section in (None, 'pci'):
            current = (number, [value.strip()])
            values.append(current)
    specs = []
    for number, parts in values:
        try:
            specs.append(documents.parse_json(' '.join(parts), source))
        except documents.DocumentError as exc:
            raise errors.NvlinkError(
                '%s: line %d: alias is not JSON: %s'
                % (source, number, exc.reason.replace('invalid JSON: ', '',
                                                      1)))
    return specs


def read_alias_config(path):
    """:func:`parse_alias_config` of the file at ``path``.

    :raises NvlinkError: naming the file (see :func:`documents.read_text`).
    """
    return parse_alias_config(documents.read_text(path), path)


def alias_names(flavors):
    """Sorted names of the PCI aliases ``flavors`` ask for."""
    names = set()
    for flavor in flavors:
        value = flavor['extra_specs'].get(generate.ALIAS_KEY, '')
        names.update(item.split(':')[0].strip()
                     for item in value.split(',') if item.strip())
    return sorted(names)


def flavor_from_dict(data, source='flavor'):
    """Validate one flavor as ``flavor generate -f json|yaml`` prints it.

    Also accepts ``properties`` (``openstack flavor show -f json``) for
    ``extra_specs`` and optional ``ephemeral`` / ``swap``. Bounds are
    Nova's flavor API ones: sizes up to :data:`MAX_INT`, names, extra
    spec keys and values up to :data:`MAX_NAME` characters; and at most
    :data:`MAX_EXTRA_SPECS` extra specs naming at most
    :data:`MAX_FLAVOR_GROUPS` request groups.

    :returns: dict with ``name, vcpus, ram, disk, ephemeral, swap,
        extra_specs`` (extra spec values as strings).
    :raises NvlinkError: naming the flavor and the field.
    """
    if not isinstance(data, dict):
        raise errors.NvlinkError('%s: a flavor is a mapping, got %s'
                                 % (source, documents.short(data)))
    name = data.get('name')
    where = '%s: flavor %s' % (source, documents.clip(name) if (
        isinstance(name, str) and name) else '(no name)')
    if not isinstance(name, str) or not name:
        raise errors.NvlinkError('%s: needs a name' % where)
    flavor = {'name': _name_checked(name, 'name', where)}
    for field in _FLAVOR_FIELDS + _OPTIONAL_FIELDS:
        value = data.get(field)
        if value in ('', None) and field in _OPTIONAL_FIELDS:
            value = 0
        if field not in data and field not in _OPTIONAL_FIELDS:
            raise errors.NvlinkError('%s: %s is missing (a non-negative '
                                     'integer, as in "openstack flavor '
                                     'show")' % (where, field))
        if isinstance(value, bool) or not isinstance(value, int) or not (
                0 <= value <= request.MAX_INT):
            raise errors.NvlinkError('%s: %s must be a non-negative integer '
                                     'up to %d, got %s'
                                     % (where, field, request.MAX_INT,
                                        documents.short(value)))
        flavor[field] = value
    specs = data.get('extra_specs', data.get('properties', {}))
    if not isinstance(specs, dict):
        raise errors.NvlinkError('%s: extra_specs must be a mapping' % where)
    if len(specs) > MAX_EXTRA_SPECS:
        raise errors.NvlinkError('%s: %d extra specs; a flavor may have at '
                                 'most %d' % (where, len(specs),
                                              MAX_EXTRA_SPECS))
    _groups_checked(specs, where)
    flavor['extra_specs'] = {}
    for key, value in specs.items():
        if isinstance(value, (dict, list)) or value is None:
            raise errors.NvlinkError('%s: extra_specs %s must be a string, '
                                     'got %s' % (where, documents.short(key),
                                                 documents.kind(value)))
        flavor['extra_specs'][_name_checked(str(key), 'extra spec', where)] = (
            _name_checked(str(value), 'extra spec value', where))
    return flavor


def _groups_checked(specs, where):
    """Refuse more than :data:`MAX_FLAVOR_GROUPS` suffixed request groups.

    :raises NvlinkError: naming the count and the first suffixes.
    """
    suffixes = set()
    for key in specs:
        match = request.GRANULAR_KEY.match(str(key))
        if match and match.group('suffix'):
            suffixes.add(match.group('suffix'))
    if len(suffixes) > MAX_FLAVOR_GROUPS:
        raise errors.NvlinkError(
            '%s: %d request groups (resources<N>: and trait<N>: suffixes '
            '%s ...); a flavor may name at most %d, and Nova sends each to '
            'Placement' % (where, len(suffixes), ', '.join(
                documents.short(s) for s in sorted(suffixes)[:3]),
                MAX_FLAVOR_GROUPS))


def _refuse_other_document(document, path):
    """Refuse a topology or snapshot given as a flavors file.

    :raises NvlinkError: naming the file, what it looks like and the
        option that takes it.
    """
    if not isinstance(document, dict) or 'name' in document:
        return
    if 'resource_providers' in document:
        what = 'a Placement snapshot, not flavors (give it with --snapshot)'
    elif 'hosts' in document or 'boards' in document:
        what = 'a topology, not flavors (give it with --topology)'
    elif not set(document) & set(_FLAVOR_FIELDS + ('extra_specs',
                                                   'properties')):
        what = 'not flavors (%s)' % ('a mapping with keys %s' % ', '.join(
            documents.short(k) for k in list(document)[:5])
            if document else 'an empty mapping')
    else:
        return
    raise errors.NvlinkError(
        '%s: this is %s; --flavors takes flavors as "openstack nvlink flavor '
        'generate ... -f json" prints them: a list of {"name", "vcpus", '
        '"ram", "disk", "extra_specs"}' % (path, what))


def read_flavors(path):
    """The flavors of a YAML or JSON file: one flavor or a list of them.

    :returns: list of dicts from :func:`flavor_from_dict`.
    :raises NvlinkError: naming the file (and the flavor and field).
    """
    document = documents.load(path)
    _refuse_other_document(document, path)
    if isinstance(document, dict):
        document = [document]
    if not isinstance(document, list):
        printed = None
        if isinstance(document, str):
            text = document.lstrip()
            printed = ('openstack commands ("flavor generate '
                       '--print-commands" output)'
                       if text.startswith('openstack ') else
                       'a table ("flavor generate" output without -f)'
                       if text.startswith('+-') else None)
        if printed:
            raise errors.NvlinkError(
                '%s: holds %s, not flavors: give --flavors what "openstack '
                'nvlink flavor generate ... -f json" (or -f yaml) prints'
                % (path, printed))
        raise errors.NvlinkError('%s: expected a flavor or a list of '
                                 'flavors, got %s'
                                 % (path, documents.kind(document)))
    return [flavor_from_dict(item, path) for item in document]
