"""The ``GET /allocation_candidates`` query Nova builds from a flavor.

Pure. Mirrors, for the keys that matter to GPU flavors, what the Nova
scheduler sends (sources: ``nova/scheduler/utils.py``
``ResourceRequest.from_request_spec`` / ``to_querystring``,
``nova/objects/request_spec.py`` ``RequestGroup`` and
``generate_request_groups_from_pci_requests``,
``nova/compute/pci_placement_translator.py`` resource class naming,
``nova/scheduler/request_filter.py``
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

The flavor and the ``[pci] alias`` values come from the operator's
files, read by :mod:`.inputs`; the GPU classes of a topology are
:mod:`.aliases`.

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
# Devices one alias may ask for: more than any server holds (an HGX-2
# board has 16 GPUs). Each becomes a request group: without a bound a
# typo such as h100:99999999999999999999 exhausts memory.
MAX_ALIAS_COUNT = 64
_AMOUNT = re.compile(r'^\s*[0-9]+\s*$')

# nova/scheduler/utils.py: granular extra spec keys.
GRANULAR_KEY = re.compile(
    r'^(?P<kind>resources|trait)(?P<suffix>[a-zA-Z0-9_-]{1,64})?'
    r':(?P<name>.+)$')
# Keys that change the Placement query in ways this module does not model.
_UNMODELLED = ('accel:device_profile', 'hw:pmem')
_STANDARD_TRAITS = frozenset(os_traits.get_traits())


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

    :param flavor: dict from
        :func:`nvlink_placement.flavors.inputs.flavor_from_dict`.
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
        match = GRANULAR_KEY.match(key)
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
