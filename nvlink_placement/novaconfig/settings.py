"""Nova and Placement settings to pair with the reshaped tree.

Pure. Sources: ``nova/conf/pci.py`` (``[pci] alias`` is read by nova-api
and, for move operations, nova-compute; ``device_spec``;
``report_in_placement`` cannot be turned off once on),
``nova/conf/scheduler.py`` (``[filter_scheduler] pci_in_placement`` on
nova-api, nova-scheduler and nova-conductor; the default
``enabled_filters``; ``[scheduler] max_placement_results`` = 1000),
placement's ``[placement] max_allocation_candidates``,
``allocation_candidates_generation_strategy`` and ``[workarounds]
optimize_for_wide_provider_trees``; the candidate explosion numbers are
design.rst s6's measurements (Launchpad bugs 2070257, 2126751).
"""

import collections
import dataclasses
import json

from nvlink_placement import errors
from nvlink_placement.flavors import aliases as aliases_mod
from nvlink_placement.flavors import generate
from nvlink_placement.flavors import request
from nvlink_placement.topology import members as members_mod
from nvlink_placement.topology import model
from nvlink_placement.topology import pci

COLUMNS = ('service', 'section', 'option', 'value', 'reason')
COMPUTE = 'nova-compute'
COMPUTE_ON = 'nova-compute (%s)'
ALIAS_SERVICES = 'nova-api, nova-compute'
CONTROL = 'nova-api, nova-scheduler, nova-conductor'
SCHEDULER = 'nova-scheduler'
PLACEMENT = 'placement-api'
FLAVOR = 'flavors of %d GPU(s)'
FLAVOR_OF = 'flavors of %d GPU(s) of alias %s'
EXTRA_SPECS = 'extra_specs'

#: The services (program names) each service label stands for.
SERVICE_NAMES = {
    COMPUTE: ('nova-compute',),
    ALIAS_SERVICES: ('nova-api', 'nova-compute'),
    CONTROL: ('nova-api', 'nova-scheduler', 'nova-conductor'),
    SCHEDULER: ('nova-scheduler',),
    PLACEMENT: ('placement-api',),
}

# Nova's default [filter_scheduler] enabled_filters.
NOVA_DEFAULT_FILTERS = ('ComputeFilter', 'ComputeCapabilitiesFilter',
                        'ImagePropertiesFilter',
                        'ServerGroupAntiAffinityFilter',
                        'ServerGroupAffinityFilter')
WIDE_HOST_GPUS = 8     # identical GPUs per host that make a tree "wide"
WIDE_FLAVOR_GPUS = 4   # flavors asking more than this explode
SHOWN = 10             # labels named in one reason of a table
EXCLUDING_REASON = (
    'this GPU by address (with its member traits where it has any): the '
    'host\'s topology excludes a GPU (vGPU or MIG in use), so it gets no '
    'generic entry, which would match that GPU too')

WIDE_REASON = (
    'host(s) %s have %d or more GPUs of one class and flavors ask up to %d: '
    'N separate GPU groups make Placement enumerate up to 8!/(8-N)! '
    'permutations per host. Measured on openstack-placement 16.0.0, one '
    'flat 8-GPU host, default settings: N=4 0.35 s per 2 hosts, N=6 78 s, '
    'N=8 unfinished after 3.5 minutes; with these settings N=8 takes 2.4 s')


#: Nova's [scheduler] max_placement_results default: the limit of every
#: allocation candidates query.
MAX_PLACEMENT_RESULTS = 1000
REACH_REASON = (
    'the topology has %d GPUs, more free GPU sets than the 1000 candidates '
    'Nova asks for: in its default order Placement builds every candidate '
    'and the first 1000 come from some of the hosts (measured, 1000 HGX '
    'H100 hosts, openstack-placement 16.0.0: the 1-GPU flavor reached 666 '
    'hosts, the 2-GPU 690); breadth-first takes one candidate per host '
    'before a second, so Nova sees every host with a free set (up to 1000), '
    'and the generation stops at the limit. Both options exist from '
    'Placement 2023.2 on (backported with the fix of bug 2070257)')

# placement.conf settings for wide trees: (section, option, value, why).
WIDE_SETTINGS = (
    ('placement', 'max_allocation_candidates', '1000', None),
    ('placement', 'allocation_candidates_generation_strategy',
     'breadth-first', 'spread the 1000 candidates over hosts instead of '
     'exhausting the first one'),
    ('workarounds', 'optimize_for_wide_provider_trees', 'True',
     'prune equivalent permutations of identical GPUs (not in '
     'openstack-placement 11.0.1, 2024.1, which ignores it)'),
)


def wide_warning(wide, largest):
    """The wide-tree warning as short lines, naming the settings.

    :param wide: names of the hosts from :func:`wide_hosts`.
    :param largest: GPUs of the largest flavor.
    """
    lines = ['%s: %d or more GPUs of one class, and flavors ask up to %d: '
             'Placement may enumerate' % (_names(wide), WIDE_HOST_GPUS,
                                          largest),
             'up to 8!/(8-N)! GPU permutations per host (flat 8-GPU host, '
             'defaults: N=6 78 s, N=8 unfinished after 3.5 min).',
             'Set in placement.conf (N=8 then takes 2.4 s; see "openstack '
             'nvlink nova-config"):']
    lines += ['  [%s] %s = %s' % setting[:3] for setting in WIDE_SETTINGS]
    return '\n'.join(lines)


@dataclasses.dataclass(frozen=True)
class Setting:
    """One configuration line and why.

    :ivar service: where it goes (``nova-compute``, ``placement-api``,
        ``flavors of N GPU(s)`` for flavor extra specs ...; a label of
        :data:`SERVICE_NAMES`, or ``nova-compute (<host>, ...)``).
    :ivar hosts: the host names a ``nova-compute (<host>, ...)`` row is
        for, in topology order; empty for a row that is for every host of
        its service.
    """
    service: str
    section: str
    option: str
    value: str
    reason: str
    hosts: tuple = ()


def alias_classes(hosts, alias, vendor_id=None, product_id=None,
                  resource_class=None, scope=None):
    """The aliases of ``hosts``, one per GPU model, with PCI ids.

    :param alias: one ``--alias`` value or a list of them
        (:func:`nvlink_placement.flavors.aliases.assign`).
    :param scope: every topology host (see :func:`aliases.assign`).
    :returns: list of :class:`~nvlink_placement.flavors.aliases.AliasClass`
        in topology order, each with ids.
    :raises NvlinkError: as :func:`aliases.assign`, and when the topology
        holds no ids and none were given.
    """
    specs = [alias] if isinstance(alias, str) else list(alias)
    found = aliases_mod.assign(hosts, specs, vendor_id, product_id,
                               resource_class, scope)
    if not found[0].vendor_id or not found[0].product_id:
        raise errors.NvlinkError(
            'the topology holds no GPU vendor/product ids (a hand-written '
            'file; host inspection adds them): give --vendor-id and '
            '--product-id (or --alias NAME=VENDOR:PRODUCT), e.g. 10de and '
            '2330 for H100 SXM')
    return found


def wide_hosts(hosts):
    """Names of hosts with :data:`WIDE_HOST_GPUS` or more GPUs of a class.

    GPUs of unknown class count as one class.
    """
    wide = []
    for host in hosts:
        counts = collections.Counter(
            aliases_mod.gpu_class(host.gpus[a])
            for a in generate.usable_gpus(host))
        if counts and max(counts.values()) >= WIDE_HOST_GPUS:
            wide.append(host.name)
    return wide


def host_specs(hosts, spec, trait_prefix=model.DEFAULT_TRAIT_PREFIX,
               members=True):
    """The ``[pci] device_spec`` entries of each host before any generic one.

    Nova uses the first entry a device matches (``nova/pci/whitelist.py``
    ``Whitelist.device_assignable``), so these go before the generic
    ``spec`` entry. Per usable GPU, by PCI address:

    - with ``members``, a GPU with member traits
      (:mod:`nvlink_placement.topology.members`, on the host's GPUs of
      its model: on a host of two models, each model's whole host is its
      own GPUs): ``spec`` plus its ``address`` and ``traits``
      (comma-separated; Nova keeps ``CUSTOM_`` names as written,
      ``pci_placement_translator.get_traits``);
    - on a host whose topology excludes a GPU (vGPU or MIG in use), every
      other usable GPU too (``spec`` plus its ``address``): such a host
      gets no generic entry, which would match the excluded GPU as well
      (:func:`excluding`).

    :param spec: the generic entry (dict), or a callable from a
        :class:`~nvlink_placement.topology.model.Gpu` to the generic entry
        of its model (a fleet or host of several models).
    :returns: list of ``(host names, [entry JSON, ...])``, hosts with the
        same entries (the same board wiring at the same addresses) merged,
        in topology order; hosts without entries left out.
    """
    spec_of = spec if callable(spec) else (lambda gpu: spec)
    merged = collections.OrderedDict()
    for host in hosts:
        traits = (members_mod.traits(host, trait_prefix) if members
                  else {})
        plain = bool(excluding([host]))
        entries = []
        for address in sorted(host.usable(), key=pci.address_sort_key):
            if traits.get(address):
                entries.append(json.dumps(dict(
                    spec_of(host.gpus[address]), address=address,
                    traits=','.join(traits[address]))))
            elif plain:
                entries.append(json.dumps(dict(spec_of(host.gpus[address]),
                                               address=address)))
        if entries:
            merged.setdefault(tuple(entries), []).append(host.name)
    return [(names, list(entries)) for entries, names in merged.items()]


def excluding(hosts):
    """Names of the hosts whose topology excludes a GPU, in order.

    Such a host gets no generic ``device_spec`` entry: it would match the
    excluded GPU (a GPU serving vGPU or MIG), Nova would report a provider
    for it and a 1-GPU flavor could be given it.
    """
    return [h.name for h in hosts
            if any(g.excluded for g in h.gpus.values())]


def host_device_specs(rows, names):
    """Each host's complete ``[pci] device_spec`` list from :func:`settings`.

    :param names: the host names (topology order).
    :returns: dict host name -> list of entry JSON texts, in the order
        Nova must read them; a host without GPUs to pass through has an
        empty list.
    """
    specs = {name: [] for name in names}
    for row in rows:
        if (row.section, row.option) != ('pci', 'device_spec'):
            continue
        for name in row.hosts or names:
            if name in specs:
                specs[name].append(row.value)
    return specs


def settings(hosts, alias, sizes=None, vendor_id=None, product_id=None,
             resource_class=None, dialect=generate.MOSK,
             trait_prefix=model.DEFAULT_TRAIT_PREFIX, shown=None,
             scope=None):
    """Everything to configure, as :class:`Setting` rows.

    Each host's ``[pci] device_spec`` is the list of the ``device_spec``
    rows whose :attr:`Setting.hosts` name it or are empty, in row order
    (:func:`host_device_specs`): its per-GPU entries (:func:`host_specs`),
    then the generic entry of each GPU model, in topology order, unless
    the host excludes a GPU. A fleet of several GPU models gets one
    ``[pci] alias`` row per model (Nova's ``alias`` is a multi-valued
    option: one JSON object per line), in topology order, on the same
    services.

    :param alias: an alias name, or the list of ``--alias`` values
        (``NAME`` or ``NAME=VENDOR:PRODUCT``,
        :func:`nvlink_placement.flavors.aliases.assign`).
    :param sizes: flavor sizes (default :func:`generate.default_sizes`),
        judged per model as ``flavor generate`` does
        (:func:`generate.judge_sizes`).
    :param resource_class: explicit ``resource_class`` tag for
        device_spec and alias (one model only); by default only a class
        from host inspection that differs from
        ``CUSTOM_PCI_<VENDOR>_<PRODUCT>``.
    :param dialect: :data:`generate.MOSK` adds the per-GPU device_spec
        entries with member traits (:func:`host_specs`) and
        ``allow_pci_traits_in_flavor``; :data:`generate.UPSTREAM` has no
        use for them.
    :param shown: how many host names a service or reason names before
        "and N more" (a table for people); None (default) names all, as
        every machine-readable output must.
    :param scope: every topology host when ``hosts`` are some of them
        (``--host``): aliases are named on it (:func:`aliases.assign`).
    :raises NvlinkError: for a bad alias (:func:`alias_classes`) or a
        refused size.
    """
    found = alias_classes(hosts, alias, vendor_id, product_id,
                          resource_class, scope)
    specs, kinds = {}, {}
    for one in found:
        generate.check_alias(one.name)
        spec = {'vendor_id': one.vendor_id, 'product_id': one.product_id}
        if one.resource_class != request.resource_class_name(
                None, one.vendor_id, one.product_id):
            spec['resource_class'] = one.resource_class
        specs[one.name] = spec
        kinds.update(generate.judge_sizes(
            aliases_mod.hosts_of(hosts, one), sizes, dialect)[0])
    by_class = {one.resource_class: specs[one.name] for one in found}
    default = specs[found[0].name]

    def spec_of(gpu):
        return by_class.get(aliases_mod.gpu_class(gpu), default)
    # No device_type: Nova then matches any (nova/pci/request.py). A GPU
    # with SR-IOV capability (Hopper on, for vGPU) is type-PF, older ones
    # type-PCI; a wrong type would match no GPU at all.
    rows = []
    named = dialect == generate.MOSK and any(
        k != generate.SINGLE for k in kinds.values())
    excluded = excluding(hosts)
    for names, entries in host_specs(hosts, spec_of, trait_prefix, named):
        where = COMPUTE_ON % _names(names, shown)
        rows += [Setting(
            where, 'pci', 'device_spec', entry,
            EXCLUDING_REASON if set(names) <= set(excluded) else
            'member traits of this GPU (before the generic entry: Nova '
            'uses the first that matches); the multi-GPU flavors '
            'require them, and Nova rewrites a PCI provider\'s traits '
            'from device_spec on every refresh', tuple(names))
            for entry in entries]
    rest = [h.name for h in hosts if h.name not in excluded]
    for one in found:
        spec = specs[one.name]
        reason = ('the GPUs Nova may pass through; Placement resource '
                  'class %s' % one.resource_class)
        if len(found) > 1:
            reason += ' (alias %s, on %s)' % (one.name,
                                              _names(one.hosts, shown))
        if not excluded:
            rows.append(Setting(COMPUTE, 'pci', 'device_spec',
                                json.dumps(spec), reason))
        elif rest:
            rows.append(Setting(
                COMPUTE_ON % _names(rest, shown), 'pci', 'device_spec',
                json.dumps(spec), reason + '; not on %s, whose '
                'topology excludes GPUs' % _names(excluded, shown),
                tuple(rest)))
    rows.append(Setting(
        COMPUTE, 'pci', 'report_in_placement', 'True',
        'one resource provider per GPU (cannot be turned off again)'))
    for one in found:
        reason = ('the alias the flavors name; one spec per alias with PCI '
                  'in Placement')
        if len(found) > 1:
            reason += ('; one alias per GPU model (resource class %s, on '
                       '%s)' % (one.resource_class, _names(one.hosts, shown)))
        rows.append(Setting(ALIAS_SERVICES, 'pci', 'alias', json.dumps(
            dict({'name': one.name}, **specs[one.name])), reason))
    rows += [
        Setting(CONTROL, 'filter_scheduler', 'pci_in_placement', 'True',
                'schedule PCI devices through Placement, so flavors can '
                'name NVLink group subtrees'),
        Setting(SCHEDULER, 'filter_scheduler', 'enabled_filters',
                ','.join(NOVA_DEFAULT_FILTERS + ('PciPassthroughFilter',)),
                'Nova\'s defaults plus PciPassthroughFilter (keep any '
                'filters you added)'),
        Setting(SCHEDULER, 'scheduler', 'max_placement_results', '1000',
                'Nova\'s default; the limit of every allocation candidates '
                'query (flavor verify uses it too)'),
    ]
    if named:
        rows.append(Setting(
            CONTROL, 'filter_scheduler', 'allow_pci_traits_in_flavor',
            'True', 'the flavors\' trait_<alias>-<i> keys join the named '
            'PCI request groups (MOSK named-alias extension)'))
    wide = wide_hosts(hosts)
    unnamed = [n for n, k in kinds.items()
               if k != generate.SINGLE and not named]
    gpus = sum(len(h.usable()) for h in hosts)
    placement = ()
    if wide and unnamed and max(unnamed) > WIDE_FLAVOR_GPUS:
        reason = WIDE_REASON % (_names(wide, shown), WIDE_HOST_GPUS,
                                max(unnamed))
        placement = WIDE_SETTINGS
    elif gpus > MAX_PLACEMENT_RESULTS:
        # Reach only: the generation limit and order, not the workaround.
        reason, placement = REACH_REASON % gpus, WIDE_SETTINGS[:2]
    rows += [Setting(PLACEMENT, section, option, value,
                     reason if i == 0 else why)
             for i, (section, option, value, why) in enumerate(placement)]
    for one in found:
        rows += numa_advice(
            aliases_mod.hosts_of(hosts, one), sorted(generate.judge_sizes(
                aliases_mod.hosts_of(hosts, one), sizes, dialect)[0]),
            shown, one.name if len(found) > 1 else None)
    return rows


def _names(labels, shown=SHOWN):
    """``labels`` joined, the first ``shown`` only (None: all)."""
    labels = list(labels)
    if shown is None or len(labels) <= shown:
        return ', '.join(labels)
    return '%s and %d more' % (', '.join(labels[:shown]),
                               len(labels) - shown)


def numa_advice(hosts, sizes, shown=None, alias=None):
    """Flavor extra specs for NUMA, per size, from the GPUs' NUMA nodes.

    Only where host inspection recorded ``numa_node`` for the GPUs.
    A size whose domains each sit on one node gets ``hw:numa_nodes=1`` and
    ``hw:pci_numa_affinity_policy=required``; a size with domains over k
    nodes gets ``hw:numa_nodes=k`` and ``preferred``, naming them.

    :param shown: as for :func:`settings`.
    :param alias: in a fleet of several GPU models, the alias of
        ``hosts``: the rows are then for ``flavors of N GPU(s) of alias
        A`` (:data:`FLAVOR_OF`).
    """
    rows = []
    for size in sizes:
        kind, _ = generate.classify(hosts, size)
        if kind is None:
            continue
        spans, unknown, widest = [], [], 1
        for host in hosts:
            for members, label in generate.domains(host, size).items():
                if label in host.gpus:
                    # One GPU: its address, the same on every host.
                    label = '%s %s' % (host.name, label)
                nodes = {host.gpus[a].details.get('numa_node')
                         for a in members}
                if not all(isinstance(n, int) and not isinstance(n, bool)
                           for n in nodes):
                    unknown.append(label)
                elif len(nodes) > 1:
                    spans.append('%s (nodes %s)' % (
                        label, ','.join(map(str, sorted(nodes)))))
                    widest = max(widest, len(nodes))
        known = sum(len(generate.domains(h, size)) for h in hosts) - len(
            unknown)
        if not known:
            continue
        note = ('; NUMA node unknown for %s' % _names(unknown, shown)
                if unknown else '')
        service = FLAVOR % size if alias is None else FLAVOR_OF % (
            size, alias)
        if spans:
            rows += [
                Setting(service, EXTRA_SPECS, 'hw:numa_nodes', str(widest),
                        'domains span NUMA nodes: %s; one guest NUMA node '
                        'per host node keeps memory local%s'
                        % (_names(spans, shown), note)),
                Setting(service, EXTRA_SPECS, 'hw:pci_numa_affinity_policy',
                        'preferred', 'prefer GPU-local CPUs but never '
                        'refuse a domain that spans nodes'),
            ]
        else:
            rows += [
                Setting(service, EXTRA_SPECS, 'hw:numa_nodes', '1',
                        'every %d-GPU domain sits on one NUMA node; the '
                        'vCPUs and memory must fit that node%s'
                        % (size, note)),
                Setting(service, EXTRA_SPECS, 'hw:pci_numa_affinity_policy',
                        'required', 'vCPUs and memory on the GPUs\' node'),
            ]
    return rows


def to_ini(rows):
    """Render :class:`Setting` rows as commented config fragments.

    One block per service; flavor advice as comments with the
    ``openstack flavor set`` property to use (at compute API 2.86, where
    Nova validates extra specs).
    """
    blocks = collections.OrderedDict()
    for row in rows:
        blocks.setdefault(row.service, []).append(row)
    out = []
    for service, settings_ in blocks.items():
        if settings_[0].section == EXTRA_SPECS:
            out.append('# %s: openstack --os-compute-api-version 2.86 '
                       'flavor set --property KEY=VALUE' % service)
            for row in settings_:
                out.append('#   %s=%s  (%s)' % (row.option, row.value,
                                                row.reason))
            out.append('')
            continue
        out.append('# %s on %s' % ('placement.conf' if service == PLACEMENT
                                   else 'nova.conf', service))
        section = reason = None
        for row in settings_:
            if row.section != section:
                section = reason = row.section
                out.append('[%s]' % section)
            if row.reason != reason:
                reason = row.reason
                out.append('# %s' % row.reason)
            out.append('%s = %s' % (row.option, row.value))
        out.append('')
    return '\n'.join(out)
