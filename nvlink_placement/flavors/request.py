"""The ``GET /allocation_candidates`` query Nova builds from a flavor.

Pure. Mirrors, for the keys that matter to GPU flavors, what the Nova
scheduler sends (sources: ``nova/scheduler/utils.py``
``ResourceRequest.from_request_spec`` / ``to_querystring``,
``nova/objects/request_spec.py`` ``RequestGroup`` and
``generate_request_groups_from_pci_requests``, ``nova/pci/request.py``
alias parsing, ``nova/compute/pci_placement_translator.py`` resource
class naming, ``nova/scheduler/request_filter.py``
``compute_status_filter`` and ``owner_nova_filter``; the named-alias and
``placement:`` keys are the MOSK extension of design.rst s6). What
differs between Nova releases is :mod:`.release`:

- The unsuffixed group: ``VCPU`` = vcpus (``PCPU`` with
  ``hw:cpu_policy=dedicated``), ``MEMORY_MB`` = ram, ``DISK_GB`` = disk +
  ephemeral + swap rounded up to GB (an image-backed server), overridden
  by ``resources:<RC>``, zeros dropped.
- ``root_required``: ``!COMPUTE_STATUS_DISABLED`` (mandatory pre-filter,
  on the root provider since Nova 21) and, with Nova 34's owner filter,
  ``OWNER_NOVA``.
- ``resources$S:<RC>`` and ``trait$S:<T>`` make suffixed groups.
- ``pci_passthrough:alias = A:N`` makes N groups ``<request_id>-<i>``
  (a random UUID upstream; a stable one here), ``A:N:P`` makes them
  ``P-<i>``; each asks ``<RC>:1`` of the alias' resource class and
  requires the alias' traits, plus ``OWNER_NOVA`` with the owner filter
  (assumed for MOSK's named groups too: they are PCI request groups).
  With ``[filter_scheduler] allow_pci_traits_in_flavor`` (MOSK), a
  flavor's ``trait<P-i>:<T>`` keys join the named group ``P-i`` (its
  member trait, :mod:`nvlink_placement.topology.members`).
- ``group_policy`` / ``placement:group_policy``; with two or more
  suffixed groups and no policy Nova uses ``none`` when at most one of
  them came from the flavor. ``placement:same_subtree`` is passed on,
  its suffixes sorted as ``to_querystring`` sorts them.
- ``limit`` = ``[scheduler] max_placement_results`` (1000), microversion
  1.36; parameters sorted and URL-encoded as ``to_querystring`` does.

A resourceless group from the flavor (``trait_nvlN:...``) is sent without
a ``resources_nvlN`` parameter, as Placement 1.36 expects; upstream Nova
34's ``RequestGroup.to_queryparams`` would send an empty
``resources_nvlN=``, which Placement refuses (HTTP 400), so only the MOSK
extension can use such a group.
"""

import dataclasses
import math
import re
import urllib.parse
import uuid

import os_resource_classes
import os_traits

from nvlink_placement import documents
from nvlink_placement import errors
from nvlink_placement.flavors import generate
from nvlink_placement.flavors import release as release_mod

MICROVERSION = '1.36'
DEFAULT_LIMIT = 1000
# Placement's largest amount and limit (placement/db/constants.py MAX_INT,
# the bound of its inventory schemas); Nova bounds flavor vcpus, ram and
# disk by the same number (nova/db/constants.py).
MAX_INT = 0x7FFFFFFF
# Longest resource class or trait name (placement/schemas/common.py) and
# flavor name, extra spec key or value (Nova's flavor API schemas).
MAX_NAME = 255
# Devices one alias may ask for: more than any server holds (an HGX-2
# board has 16 GPUs). Each becomes a request group: without a bound a
# typo such as h100:99999999999999999999 exhausts memory.
MAX_ALIAS_COUNT = 64
# Extra specs per flavor, and request groups a flavor names itself
# (resources<S>: / trait<S>: suffixes). Nova and Placement set no number,
# but Nova sends each group to Placement, which solves them jointly: a
# flavor file with 100,000 groups took minutes and hundreds of MB before
# Placement refused it. Real flavors carry a few dozen extra specs and a
# group per device set, fewer than MAX_ALIAS_COUNT.
MAX_EXTRA_SPECS = 256
MAX_FLAVOR_GROUPS = MAX_ALIAS_COUNT
_AMOUNT = re.compile(r'^\s*[0-9]+\s*$')

# nova/scheduler/utils.py: granular extra spec keys.
_XS_KEY = re.compile(
    r'^(?P<kind>resources|trait)(?P<suffix>[a-zA-Z0-9_-]{1,64})?'
    r':(?P<name>.+)$')
# Keys that change the Placement query in ways this module does not model.
_UNMODELLED = ('accel:device_profile', 'hw:pmem')
_STANDARD_TRAITS = frozenset(os_traits.get_traits())
_FLAVOR_FIELDS = ('vcpus', 'ram', 'disk')
_OPTIONAL_FIELDS = ('ephemeral', 'swap')


@dataclasses.dataclass(frozen=True)
class Alias:
    """One ``[pci] alias`` as Placement sees it.

    :ivar resource_class: normalized resource class.
    :ivar traits: tuple of normalized required traits.
    """
    name: str
    resource_class: str
    traits: tuple = ()


@dataclasses.dataclass(frozen=True)
class GpuClass:
    """GPUs of one resource class in a topology.

    :ivar vendor_id: / :ivar product_id: lower-case hex from host
        inspection, or None.
    :ivar hosts: sorted tuple of host names.
    """
    resource_class: str
    vendor_id: str
    product_id: str
    hosts: tuple


@dataclasses.dataclass(frozen=True)
class Request:
    """A flavor's allocation candidates query.

    :ivar size: GPUs the flavor asks for (the alias count).
    :ivar gpu_groups: suffixes of the per-GPU request groups.
    :ivar params: list of ``(key, value)``, sorted as Nova sends them.
    :ivar limit: the ``limit`` parameter.
    :ivar nova: the :class:`~nvlink_placement.flavors.release.NovaQuery`
        it follows.
    """
    flavor: str
    alias: Alias
    size: int
    gpu_groups: tuple
    params: tuple
    limit: int
    nova: release_mod.NovaQuery = release_mod.NovaQuery()

    @property
    def querystring(self):
        """The URL-encoded query, byte for byte what Nova sends."""
        return urllib.parse.urlencode(self.params)

    @property
    def url(self):
        return '/allocation_candidates?' + self.querystring

    @property
    def display(self):
        """The query with ``,`` and ``:`` left readable."""
        return '&'.join('%s=%s' % kv for kv in self.params)


def resource_class_name(requested=None, vendor_id=None, product_id=None):
    """Nova's resource class for a PCI device or alias.

    ``requested`` (a ``resource_class`` tag) is upper-cased and, unless
    standard or ``CUSTOM_``, normalized (``os_resource_classes``);
    otherwise ``CUSTOM_PCI_<VENDOR>_<PRODUCT>`` upper case.
    """
    if requested:
        rc = requested.upper()
        if (rc not in os_resource_classes.STANDARDS and
                not os_resource_classes.is_custom(rc)):
            rc = os_resource_classes.normalize_name(rc)
        return rc
    return ('CUSTOM_PCI_%s_%s' % (vendor_id, product_id)).upper()


def trait_name(name):
    """Nova's normalization of an alias trait (same rule as classes)."""
    name = name.strip().upper()
    if name in _STANDARD_TRAITS or os_traits.is_custom(name):
        return name
    return os_traits.normalize_name(name)


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
    traits = tuple(sorted({_name_checked(trait_name(t), 'trait', where)
                           for t in (spec.get('traits') or '').split(',')
                           if t.strip()}))
    return Alias(name, _name_checked(resource_class_name(
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


def aliases_for(flavors, hosts, alias_config=None, resource_class=None):
    """The ``[pci] alias`` values the flavors are judged with.

    :param alias_config: a file of Nova's alias values
        (:func:`read_alias_config`); without it each alias the flavors
        name gets the one resource class of ``hosts``
        (:func:`topology_resource_class`, ``resource_class`` first).
    :returns: dict alias name -> :class:`Alias`.
    :raises NvlinkError: naming the file, or the classes found.
    """
    if alias_config:
        return read_alias_config(alias_config)
    rc = topology_resource_class(hosts, resource_class)
    return {name: Alias(name, rc) for name in alias_names(flavors)}


def gpu_class(gpu):
    """Resource class of a :class:`Gpu` from its inspection details.

    Its ``resource_class``, else ``CUSTOM_PCI_<VENDOR>_<PRODUCT>`` from
    ``vendor_id`` / ``device_id``, else None.
    """
    details = gpu.details
    vendor, product = details.get('vendor_id'), details.get('device_id')
    if details.get('resource_class') or (vendor and product):
        return resource_class_name(details.get('resource_class'), vendor,
                                   product)
    return None


def gpu_classes(hosts):
    """Resource classes of the usable GPUs of ``hosts``.

    A GPU's class is its ``resource_class`` from host inspection, else
    ``CUSTOM_PCI_<VENDOR>_<PRODUCT>`` from its ids, else unknown.

    :returns: dict resource class -> :class:`GpuClass`; GPUs of no known
        class are left out.
    """
    found = {}
    for host in hosts:
        for address in generate.usable_gpus(host):
            gpu = host.gpus[address]
            rc = gpu_class(gpu)
            if rc is None:
                continue
            found.setdefault(rc, (gpu.details.get('vendor_id'),
                                  gpu.details.get('device_id'), set()))[
                2].add(host.name)
    classes = {rc: GpuClass(rc, v and v.lower(), p and p.lower(),
                            tuple(sorted(h)))
               for rc, (v, p, h) in sorted(found.items())}
    return classes


def topology_resource_class(hosts, resource_class=None):
    """The one resource class of the GPUs of ``hosts``.

    :param resource_class: an explicit class (normalized and returned).
    :raises NvlinkError: when the topology has none or several.
    """
    if resource_class:
        return resource_class_name(resource_class)
    classes = gpu_classes(hosts)
    if not classes:
        raise errors.NvlinkError(
            'the topology holds no GPU resource class (no vendor/device '
            'ids from host inspection): give --resource-class, e.g. '
            'CUSTOM_PCI_10DE_2330, or --alias-config')
    if len(classes) > 1:
        raise errors.NvlinkError(
            'the GPUs are of several resource classes (%s): pick the hosts '
            'of one class with --host, or give --resource-class or '
            '--alias-config' % '; '.join(
                '%s on %s' % (c.resource_class, ', '.join(c.hosts))
                for c in classes.values()))
    return next(iter(classes))


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
                0 <= value <= MAX_INT):
            raise errors.NvlinkError('%s: %s must be a non-negative integer '
                                     'up to %d, got %s'
                                     % (where, field, MAX_INT,
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
        match = _XS_KEY.match(str(key))
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


def alias_names(flavors):
    """Sorted names of the PCI aliases ``flavors`` ask for."""
    names = set()
    for flavor in flavors:
        value = flavor['extra_specs'].get(generate.ALIAS_KEY, '')
        names.update(item.split(':')[0].strip()
                     for item in value.split(',') if item.strip())
    return sorted(names)


class _Group(object):
    def __init__(self):
        self.resources = {}
        self.required = set()
        self.forbidden = set()

    def params(self, suffix):
        out = []
        if self.resources:
            out.append(('resources' + suffix, ','.join(
                sorted('%s:%d' % rc for rc in self.resources.items()))))
        if self.required or self.forbidden:
            out.append(('required' + suffix, ','.join(
                sorted(self.required) +
                ['!' + t for t in sorted(self.forbidden)])))
        return out


def build(flavor, aliases, limit=DEFAULT_LIMIT, nova=None):
    """The query Nova sends for ``flavor``.

    :param flavor: dict from :func:`flavor_from_dict`.
    :param aliases: dict alias name -> :class:`Alias`.
    :param nova: :class:`nvlink_placement.flavors.release.NovaQuery`
        (default: Nova 34 with the owner filter).
    :returns: :class:`Request`.
    :raises NvlinkError: for a flavor that asks no or several PCI aliases,
        an alias not configured, a malformed key or value, a key whose
        effect on the query is not modelled, or an amount, a device count
        or a limit beyond Placement's bounds (:data:`MAX_INT`,
        :data:`MAX_ALIAS_COUNT`).
    """
    name, specs = flavor['name'], flavor['extra_specs']

    def fail(message):
        raise errors.NvlinkError('flavor %s: %s' % (name, message))

    if isinstance(limit, bool) or not 1 <= limit <= MAX_INT:
        fail('limit %s: expected 1 to %d' % (documents.short(limit),
                                             MAX_INT))

    for key in _UNMODELLED:
        if key in specs:
            fail('%s changes the Placement query in a way flavor verify '
                 'does not model' % key)
    groups = {'': _Group()}
    unsuffixed = groups['']
    unsuffixed.resources.update({
        'VCPU': flavor['vcpus'], 'MEMORY_MB': flavor['ram'],
        'DISK_GB': (flavor['disk'] + flavor['ephemeral'] +
                    math.ceil(flavor['swap'] / 1024.0))})
    _cpu_policy(specs, flavor['vcpus'], unsuffixed, fail)
    if specs.get('hw:pci_numa_affinity_policy') == 'socket':
        unsuffixed.required.add(os_traits.COMPUTE_SOCKET_PCI_NUMA_AFFINITY)
    from_flavor = set()
    for key, value in sorted(specs.items()):
        match = _XS_KEY.match(key)
        if not match:
            continue
        suffix = match.group('suffix') or ''
        group = groups.setdefault(suffix, _Group())
        if suffix:
            from_flavor.add(suffix)
        if match.group('kind') == 'resources':
            amount = _decimal(value, MAX_INT)
            if amount is None or amount > MAX_INT:
                fail('%s=%r: the amount must be an integer from 0 to %d '
                     '(Placement\'s largest)' % (key, value, MAX_INT))
            group.resources[match.group('name')] = amount
        elif value == 'required':
            group.required.add(match.group('name'))
        elif value == 'forbidden':
            group.forbidden.add(match.group('name'))
        else:
            fail('%s=%r: a trait is "required" or "forbidden"'
                 % (key, value))
    nova = nova or release_mod.NovaQuery()
    alias, size, gpu_groups = _pci_groups(name, specs, aliases, groups, fail,
                                          nova.pci_traits_in_flavor)
    for suffix in gpu_groups:
        groups[suffix].required.update(nova.gpu_required)
    for suffix in list(groups):
        group = groups[suffix]
        group.resources = {rc: n for rc, n in group.resources.items() if n}
        for rc, amount in sorted(group.resources.items()):
            if amount > MAX_INT:
                fail('it asks %d %s in one request group; Placement takes '
                     'at most %d' % (amount, rc, MAX_INT))
        if suffix and not (group.resources or group.required or
                           group.forbidden):
            del groups[suffix]
    params = [('limit', limit)]
    policy = _group_policy(specs, fail)
    suffixed = [s for s in groups if s]
    from_flavor -= set(gpu_groups)
    if policy is None and len(suffixed) >= 2 and len(from_flavor) <= 1:
        policy = 'none'
    if policy is not None:
        params.append(('group_policy', policy))
    params.append(('root_required', ','.join(
        sorted(nova.root_required) +
        ['!' + t for t in sorted(nova.root_forbidden)])))
    for suffix, group in groups.items():
        params.extend(group.params(suffix))
    if generate.SUBTREE_KEY in specs:
        params.append(('same_subtree', ','.join(sorted(
            s.strip() for s in specs[generate.SUBTREE_KEY].split(',')))))
    return Request(name, alias, size, tuple(gpu_groups),
                   tuple(sorted(params)), limit, nova)


def _decimal(text, cap):
    """The decimal ``text`` as an int, ``cap + 1`` when above ``cap``.

    None when ``text`` is not a decimal number. Never converts more
    digits than ``cap`` has.
    """
    if not _AMOUNT.match(text):
        return None
    digits = text.strip().lstrip('0') or '0'
    if len(digits) > len(str(cap)):
        return cap + 1
    return min(int(digits), cap + 1)


def _cpu_policy(specs, vcpus, group, fail):
    policy = specs.get('hw:cpu_policy', 'shared')
    if policy == 'mixed':
        fail('hw:cpu_policy=mixed is not modelled by flavor verify')
    if policy != 'dedicated':
        return
    pcpus = vcpus + (1 if specs.get('hw:emulator_threads_policy') ==
                     'isolate' else 0)
    del group.resources['VCPU']
    group.resources['PCPU'] = pcpus
    thread = specs.get('hw:cpu_thread_policy')
    if thread == 'isolate':
        group.forbidden.add(os_traits.HW_CPU_HYPERTHREADING)
    elif thread == 'require':
        group.required.add(os_traits.HW_CPU_HYPERTHREADING)


def _pci_groups(name, specs, aliases, groups, fail, nova_traits=True):
    value = specs.get(generate.ALIAS_KEY)
    if not value:
        fail('no %s: it asks for no GPU' % generate.ALIAS_KEY)
    items = [i.strip() for i in value.split(',')]
    if len(items) != 1:
        fail('%s=%r asks for several aliases; flavor verify checks one GPU '
             'alias per flavor' % (generate.ALIAS_KEY, value))
    fields = [f.strip() for f in items[0].split(':')]
    count = _decimal(fields[1], MAX_ALIAS_COUNT) if len(fields) in (2, 3) \
        else None
    if not count:
        fail('%s=%r: expected alias:count or alias:count:prefix'
             % (generate.ALIAS_KEY, value))
    if count > MAX_ALIAS_COUNT:
        fail('%s=%r: more devices than any host holds (at most %d)'
             % (generate.ALIAS_KEY, value, MAX_ALIAS_COUNT))
    alias_name = fields[0]
    if alias_name not in aliases:
        fail('alias %r is not configured (known: %s)'
             % (alias_name, ', '.join(sorted(aliases)) or 'none'))
    alias = aliases[alias_name]
    prefix = fields[2] if len(fields) == 3 else str(uuid.uuid5(
        uuid.NAMESPACE_URL, 'nvlink-placement/%s/%s' % (name, alias_name)))
    gpu_groups = []
    for index in range(count):
        suffix = '%s-%d' % (prefix, index)
        if not generate.SUFFIX.match(suffix):
            fail('request group suffix %r is not a valid Placement suffix'
                 % suffix)
        group = groups.get(suffix)
        if group is not None and (group.resources or not nova_traits):
            fail('request group %r is named by the alias and by another '
                 'extra spec%s' % (suffix, '' if group.resources else (
                     ' (traits join a named PCI group only with '
                     '[filter_scheduler] allow_pci_traits_in_flavor)')))
        group = groups.setdefault(suffix, _Group())
        group.resources[alias.resource_class] = 1
        group.required.update(alias.traits)
        gpu_groups.append(suffix)
    return alias, count, gpu_groups


def _group_policy(specs, fail):
    values = {specs[k] for k in ('group_policy', generate.POLICY_KEY)
              if k in specs}
    if len(values) > 1:
        fail('group_policy and %s disagree' % generate.POLICY_KEY)
    policy = values.pop() if values else None
    if policy not in (None, 'none', 'isolate'):
        fail('group policy %r: expected none or isolate' % policy)
    return policy
