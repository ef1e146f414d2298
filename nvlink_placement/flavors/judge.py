"""Judge an allocation candidates answer: every candidate one NVLink domain.

Pure: :func:`check` takes what :mod:`.verify` read from Placement (the
answer to a flavor's query, :mod:`.request`, and a few provider
listings) and judges each allocation request:

- its GPUs (the allocations of the alias' resource class) sit on one
  host, a host of the topology, one unit on each of ``size`` distinct
  GPUs the topology knows and has not excluded;
- each GPU was free before (``provider_summaries``: capacity - used);
- the set is one NVLink domain of the flavor's size: a group of that
  nominal size with all its GPUs, any ``size`` GPUs of a mesh serving
  that size, a single GPU for size 1, or every usable GPU of the host when
  that is the size (the whole board).

It also lists the *missing* domains: domains whose GPUs are all free (a
``GET /resource_providers?resources=<RC>:1`` answer) on a compute node
with room for the unsuffixed resources, but that no candidate offers. For
a mesh it does not demand every subset: the mesh is missing when it has
``size`` free GPUs and no candidate lies inside it. A flavor that can never
land (a tree that was not reshaped, a subtree key without its resourceless
group) shows up there. When the answer holds ``limit`` candidates it may
be cut short, so missing domains are then not checked (a warning says so).

The providers without Nova 34's owner trait (:func:`without_owner`) and
a query Placement refused (:func:`refused`) are named here too, from the
listings and the refusal (Placement's ``No such trait(s)`` and ``No such
resource class`` messages).
"""

import dataclasses

from nvlink_placement.flavors import aliases
from nvlink_placement.flavors import release
from nvlink_placement.topology import members as members_mod
from nvlink_placement.topology import pci

COLUMNS = ('flavor', 'host', 'candidates', 'valid_sets', 'invalid_sets',
           'missing_sets', 'distinct_sets', 'duplicates', 'query')
SHOWN_PER_HOST = 5             # offending sets named per host and kind


@dataclasses.dataclass
class HostResult:
    """The candidates of one flavor on one host.

    :ivar candidates: allocation requests on this host.
    :ivar valid: set of frozensets of GPU addresses.
    :ivar invalid: dict frozenset of addresses (or RP names for GPUs the
        topology does not know) -> reason.
    :ivar missing: dict frozenset of addresses -> domain label.
    :ivar free_domain: True when the host has a free domain of the size
        (every GPU free, with the member traits the flavor requires),
        whether or not a candidate offers it.
    :ivar no_match: why the query cannot match any GPU of this topology
        host (no compute node of its name, no provider of its GPUs, or
        free GPUs none of which has the alias' class and traits); None
        when it can. Such a host proves nothing.
    :ivar other_class: why the host is no place for the flavor (its GPUs,
        by the topology's vendor/device ids, are all of models other than
        the alias'), or None. Such a host is not a failure.
    :ivar problems: the messages of :attr:`FlavorResult.problems` about
        this host.
    """
    host: str
    candidates: int = 0
    valid: set = dataclasses.field(default_factory=set)
    invalid: dict = dataclasses.field(default_factory=dict)
    missing: dict = dataclasses.field(default_factory=dict)
    free_domain: bool = False
    no_match: str = None
    other_class: str = None
    problems: list = dataclasses.field(default_factory=list)

    @property
    def distinct(self):
        """Distinct GPU sets among the candidates."""
        return len(self.valid) + len(self.invalid)

    @property
    def duplicates(self):
        """Candidates that repeat a GPU set already in the answer."""
        return self.candidates - self.distinct


@dataclasses.dataclass
class FlavorResult:
    """Verification of one flavor.

    :ivar hosts: list of :class:`HostResult`: every topology host in
        order, then hosts outside the topology that got candidates.
    :ivar problems: messages that make the check fail.
    :ivar warnings: messages that do not.
    :ivar no_match: True when the query matches no GPU of any host (a
        resource class Placement does not know, or no host of the alias'
        GPU model among those verified).
    """
    flavor: str
    query: str
    hosts: list
    problems: list
    warnings: list
    no_match: bool = False

    @property
    def ok(self):
        return not self.problems

    def rows(self):
        return [(self.flavor, h.host, h.candidates, len(h.valid),
                 len(h.invalid), len(h.missing), h.distinct, h.duplicates,
                 self.query)
                for h in self.hosts]

    def summary(self):
        """One line: candidates, distinct sets, duplicates, hosts reached.

        Hosts reached are those of the topology with at least one
        candidate, out of those with a free domain of the flavor's size.
        """
        hosts = self.hosts
        free = [h for h in hosts if h.free_domain]
        reached = [h for h in free if h.candidates]
        return ('%s: %d candidates, %d distinct GPU sets, %d duplicates; '
                'reached %d of %d hosts with a free domain' % (
                    self.flavor, sum(h.candidates for h in hosts),
                    sum(h.distinct for h in hosts),
                    sum(h.duplicates for h in hosts), len(reached),
                    len(free)))


def _fmt(addresses):
    return '[%s]' % ', '.join(sorted(addresses))


def _crossing(host, size, addresses):
    """Why ``addresses`` are not one domain of ``size`` on ``host``."""
    if not host.fixed_domains(size) and not host.meshes(size):
        return '%s has no NVLink domain of %d GPUs' % (host.name, size)
    parts = []
    for address in sorted(addresses, key=pci.address_sort_key):
        owner = [g.name for g in host.groups
                 if g.serves(size) and address in g.members]
        parts.append('%s in %s' % (address, owner[0] if owner else
                                   'no %d-GPU domain' % size))
    return 'not one NVLink domain of %d: %s' % (size, '; '.join(parts))


def _judge(host, size, rc, gpus, summaries, by_uuid):
    """``(key, reason or None)`` for one allocation request on ``host``.

    :param gpus: list of ``(rp uuid, amount)`` of the alias' class.
    """
    names = [by_uuid[u][0] for u, _ in gpus]
    prefix = host.name + '_'
    addresses = []
    for name in names:
        try:
            address = (pci.normalize_address(name[len(prefix):])
                       if name.startswith(prefix) else None)
        except ValueError:
            address = None
        addresses.append(address if address in host.gpus else None)
    if None in addresses:
        unknown = [n for n, a in zip(names, addresses) if a is None]
        return frozenset(names), ('GPU provider(s) %s are not GPUs of %s in '
                                  'the topology' % (', '.join(unknown),
                                                    host.name))
    key = frozenset(addresses)
    amount = sum(n for _, n in gpus)
    if amount != size or len(key) != size:
        return key, ('%d unit(s) on %d GPU(s), the flavor asks for one on '
                     'each of %d' % (amount, len(key), size))
    excluded = [a for a in addresses if host.gpus[a].excluded]
    if excluded:
        return key, 'GPU(s) %s are excluded from NVLink groups (%s)' % (
            ', '.join(excluded), host.gpus[excluded[0]].excluded)
    busy = []
    for (rp_uuid, n), address in zip(gpus, addresses):
        usage = summaries.get(rp_uuid, {}).get('resources', {}).get(rc, {})
        if usage.get('capacity', 0) - usage.get('used', 0) < n:
            busy.append(address)
    if busy:
        return key, 'GPU(s) %s are reserved or in use' % ', '.join(busy)
    if host.domain_label(key, size) is None:
        return key, _crossing(host, size, key)
    return key, None


def check(request, hosts, body, providers, free, eligible, only=False,
          configured=None, idle_gpus=None, others=()):
    """Judge an allocation candidates answer (pure).

    :param request: :class:`nvlink_placement.flavors.request.Request`.
    :param hosts: list of topology hosts.
    :param only: judge only the candidates on ``hosts`` (and those
        spanning hosts): candidates on any other host are left out
        instead of being invalid.
    :param body: ``GET /allocation_candidates`` answer (1.29+ summaries).
    :param providers: dict RP uuid -> ``(name, root uuid)`` of every
        provider.
    :param free: set of uuids of the GPU providers with room for one unit
        of the alias' class (and its traits).
    :param eligible: set of compute node uuids with room for the
        unsuffixed group, or None when not known.
    :param configured: for a flavor with member traits
        (:func:`member_indexes`), ``(uuid, index)`` of each free GPU
        provider carrying member trait ``index``; None: not known.
        A free domain whose GPUs lack it is named as such.
    :param idle_gpus: set of uuids of the GPU providers with a free unit
        of any class (:func:`nvlink_placement.placement.state.free_gpus`), or
        None when not known. A host with such GPUs of the topology none of
        which is in ``free`` gets :attr:`HostResult.no_match`.
    :param others: with ``only``, the topology's other hosts: their
        candidates are judged too (a flavor chosen for some hosts reaches
        every host with GPUs of its class), and only the invalid ones are
        kept.
    :returns: :class:`FlavorResult`.
    """
    size, rc = request.size, request.alias.resource_class
    # A provider created after the listing is named by its uuid.
    providers = dict(providers)
    for candidate in body.get('allocation_requests', []):
        for rp_uuid in candidate['allocations']:
            providers.setdefault(rp_uuid, (rp_uuid, rp_uuid))
    by_name = {name: uuid for uuid, (name, _) in providers.items()}
    results = {h.name: HostResult(h.name) for h in hosts}
    models = {aliases.gpu_class(h.gpus[a]) for h in list(hosts) +
              list(others) for a in h.usable()}
    if rc in models and len(models) > 1:
        # Several GPU models: a host's domains of this alias are those of
        # its GPUs of the alias' model (on a host of two models too).
        full = {h.name: h for h in hosts}
        hosts = [aliases.restrict(h, rc) for h in hosts]
        others = [aliases.restrict(h, rc) for h in others]
    else:
        full = None
    topology = {h.name: h for h in hosts}
    rest = {h.name: h for h in others if h.name not in topology}
    problems, warnings = [], []
    summaries = body.get('provider_summaries', {})
    for candidate in body.get('allocation_requests', []):
        allocations = candidate['allocations']
        roots = sorted({providers[u][1] for u in allocations})
        host_name = ','.join(providers[r][0] for r in roots)
        gpus = sorted((u, a['resources'][rc]) for u, a in allocations.items()
                      if rc in a['resources'])
        if only and len(roots) == 1 and host_name not in topology:
            if host_name not in rest:
                continue
            key, reason = _judge(rest[host_name], size, rc, gpus,
                                 summaries, providers)
            if not reason:
                continue
            result = results.setdefault(host_name, HostResult(host_name))
            result.candidates += 1
            result.invalid[key] = reason + ' (a host not selected)'
            continue
        result = results.setdefault(host_name, HostResult(host_name))
        result.candidates += 1
        if len(roots) > 1:
            key = frozenset(providers[u][0] for u, _ in gpus)
            result.invalid[key] = 'spans hosts %s' % host_name
        elif host_name not in topology:
            key = frozenset(providers[u][0] for u, _ in gpus)
            result.invalid[key] = 'host %s is not in the topology' % host_name
        else:
            key, reason = _judge(topology[host_name], size, rc, gpus,
                                 summaries, providers)
            if reason:
                result.invalid[key] = reason
            else:
                result.valid.add(key)
    truncated = len(body.get('allocation_requests', [])) >= request.limit
    wanted = member_indexes(request)
    for host in hosts:
        result = results[host.name]
        if not result.candidates and full is not None:
            result.other_class = _other_class(request, full[host.name])
            if result.other_class:
                continue
        result.no_match = _no_match(request, host, by_name, free,
                                    idle_gpus)
        if result.no_match:
            continue
        node = by_name.get(host.name)
        if eligible is not None and node not in eligible:
            continue
        index = members_mod.indexes(host) if wanted else {}

        def free_of(addresses):
            return frozenset(a for a in addresses if by_name.get(
                host.gpu_provider_name(a)) in free)
        for key, label in host.fixed_domains(size).items():
            if free_of(key) == key:
                result.free_domain = True
                if not truncated and key not in result.valid:
                    result.missing[key] = label + _lacking(
                        host, key, size, index, by_name, configured)
        for members, name in host.meshes(size).items():
            idle = free_of(members)
            if wanted:
                # Only one GPU of each member class is one candidate.
                fits = members_mod.reachable(
                    (index[a].get(size) for a in idle), size) > 0
            else:
                fits = len(idle) >= size
            if fits:
                result.free_domain = True
                if not truncated and not any(
                        key <= members for key in result.valid):
                    result.missing[idle] = '%s (any %d)' % (name, size)
    free_hosts = [r for r in results.values() if r.free_domain]
    reached = [r for r in free_hosts if r.candidates]
    if truncated:
        warnings.append(
            '%s: the answer holds limit=%d candidates and is cut short: it '
            'reached %d of the %d hosts with a free %d-GPU domain, so Nova '
            'chooses among those alone%s; free domains no candidate offers '
            'are not checked' % (
                request.flavor, request.limit, len(reached), len(free_hosts),
                size, '' if len(reached) == len(free_hosts) else (
                    ' (%d duplicates: flavors without member traits '
                    'enumerate permutations of the same GPUs)'
                    % sum(r.duplicates for r in results.values()))))
    for result in results.values():
        result.problems = _describe(request.flavor, result)
        problems.extend(result.problems)
    nowhere = bool(hosts) and all(results[h.name].other_class
                                  for h in hosts)
    if nowhere:
        problems.append(
            '%s: no match, nothing proven: none of the %s verified has a '
            'GPU of resource class %s, which alias %s asks for' % (
                request.flavor, 'host(s) %s' % _names([h.name for h in hosts])
                if only else '%d topology hosts' % len(hosts), rc,
                request.alias.name))
    return FlavorResult(request.flavor, request.display,
                        list(results.values()), problems, warnings,
                        no_match=nowhere)


def _other_class(request, host):
    """Why ``host`` is no place for ``request``'s alias, or None.

    From the topology: every usable GPU of the host has a known resource
    class (host inspection's ids), none of them the alias' one.
    """
    found = {aliases.gpu_class(host.gpus[a]) for a in host.usable()}
    if not found or None in found or request.alias.resource_class in found:
        return None
    return ('%s has no GPU of resource class %s (its GPUs are %s): not a '
            'place alias %s can land' % (
                host.name, request.alias.resource_class,
                ', '.join(sorted(found)), request.alias.name))


def _no_match(request, host, by_name, free, idle):
    """Why the query cannot match a GPU of ``host``, or None.

    None too for a host whose GPUs are all in use: it has nothing to
    offer, so 0 candidates there is the right answer.
    """
    if host.name not in by_name:
        return ('no compute node resource provider named %s in Placement '
                '(a snapshot or cloud of other hosts? give --host to '
                'verify the topology hosts it has)' % host.name)
    usable = host.usable()
    uuids = [by_name.get(host.gpu_provider_name(a)) for a in usable]
    if usable and not any(uuids):
        return ('none of the %d GPUs of %s in the topology is a resource '
                'provider in Placement (Nova names them %s; is [pci] '
                'report_in_placement on?)' % (
                    len(usable), host.name,
                    host.gpu_provider_name(usable[0])))
    if idle is None or any(u in free for u in uuids):
        return None
    idle_here = [u for u in uuids if u in idle]
    if not idle_here:
        return None
    alias = request.alias
    return ('the query matches none of the %d free GPUs of %s: none has a '
            'free unit of resource class %s%s, which alias %s asks for '
            '(a wrong --resource-class or --alias-config, or flavors of '
            'another GPU model?)' % (
                len(idle_here), host.name, alias.resource_class,
                ' with trait(s) %s' % ','.join(alias.traits)
                if alias.traits else '', alias.name))


def _lacking(host, addresses, size, index, by_name, configured):
    """`` (GPU(s) ... lack their member trait ...)`` or ''."""
    if configured is None or not index:
        return ''
    lacking = sorted(a for a in addresses if (by_name.get(
        host.gpu_provider_name(a)), index[a].get(size)) not in configured)
    if not lacking:
        return ''
    return (' (GPU(s) %s lack their %d-GPU member trait: nova-compute\'s '
            '[pci] device_spec does not set it; see "openstack nvlink '
            'nova-config --host %s")' % (', '.join(lacking), size, host.name))


def member_indexes(request):
    """The member trait each GPU group of ``request`` requires.

    :returns: dict GPU group suffix -> ``(trait, size, index)``; empty for
        a flavor without member traits (every group may be any GPU).
    """
    found = {}
    params = dict(request.params)
    for suffix in request.gpu_groups:
        for trait in params.get('required' + suffix, '').split(','):
            parsed = members_mod.parse_any(trait)
            if parsed and parsed[1] == request.size:
                found[suffix] = (trait,) + parsed[1:]
    return found


def _describe(flavor, result):
    if result.no_match:
        return ['%s on %s: no match, nothing proven: %s'
                % (flavor, result.host, result.no_match)]
    out = []
    for key, reason in sorted(result.invalid.items(),
                              key=lambda kv: sorted(kv[0]))[:SHOWN_PER_HOST]:
        out.append('%s on %s: invalid GPU set %s: %s'
                   % (flavor, result.host, _fmt(key), reason))
    if len(result.invalid) > SHOWN_PER_HOST:
        out.append('%s on %s: ... and %d more invalid sets' % (
            flavor, result.host, len(result.invalid) - SHOWN_PER_HOST))
    for key, label in sorted(result.missing.items(),
                             key=lambda kv: kv[1])[:SHOWN_PER_HOST]:
        out.append('%s on %s: free NVLink domain %s %s is never offered'
                   % (flavor, result.host, label, _fmt(key)))
    if len(result.missing) > SHOWN_PER_HOST:
        out.append('%s on %s: ... and %d more free domains never offered' % (
            flavor, result.host, len(result.missing) - SHOWN_PER_HOST))
    return out


def without_owner(request, hosts, providers, owners):
    """``(host, problem)`` per host whose providers lack the owner trait."""
    by_name = {name: uuid for uuid, (name, _) in providers.items()}
    trait = ','.join(request.nova.root_required)
    out = []
    for host in hosts:
        node = by_name.get(host.name)
        if node is None:
            continue
        lacking = [n for n in [host.name] + sorted(
            host.gpu_provider_name(a) for a, gpu in host.gpus.items()
            if not gpu.excluded) if n in by_name and by_name[n] not in owners]
        if lacking:
            out.append((host.name, (
                '%s on %s: provider(s) %s lack %s, which Nova %d requires '
                'once every nova-compute runs service version %d (modelled: '
                '%s); a Nova 34 nova-compute writes it. No candidate can come '
                'from there: a tree written by an older nova-compute, or a '
                'cloud mid-upgrade (give --nova-release or --owner-filter off '
                'to model it)' % (
                    request.flavor, host.name, _names(lacking), trait,
                    release.OWNER_FILTER_SINCE,
                    release.OWNER_SERVICE_VERSION, request.nova.describe()))))
    return out


def _names(names):
    shown = ', '.join(names[:SHOWN_PER_HOST])
    if len(names) > SHOWN_PER_HOST:
        shown += ' and %d more' % (len(names) - SHOWN_PER_HOST)
    return shown


def refused(request, hosts, exc):
    message = '%s: Placement refused the query: %s' % (request.flavor, exc)
    served = sorted({n for h in hosts for g in h.groups for n in g.sizes})
    if 'No such trait' in str(exc) and any(
            members_mod.parse_any(t) for t in _unknown_traits(str(exc))):
        message += (' (no GPU provider carries the member traits this '
                    'flavor requires: nova-compute\'s [pci] device_spec '
                    'does not set them yet; configure it as "openstack '
                    'nvlink nova-config --topology FILE" prints and restart '
                    'nova-compute. Flavors without trait_<alias>-<i> keys '
                    'keep working meanwhile)')
    elif 'No such trait' in str(exc) and served and (
            request.size not in served):
        message += (' (no NVLink domain of the topology serves %d GPUs, so '
                    'no group trait names that size; the domains serve %s '
                    'GPUs: give the flavor one of those sizes)'
                    % (request.size, ', '.join(map(str, served))))
    elif 'No such trait' in str(exc):
        message += (' (the group trait does not exist: the tree is not '
                    'reshaped; run "openstack nvlink reshape")')
    elif 'No such resource class' in str(exc):
        message += (' (no GPU of class %s is reported: check the alias\' '
                    'resource class and Nova\'s [pci] device_spec and '
                    'report_in_placement)' % request.alias.resource_class)
    return FlavorResult(request.flavor, request.display,
                        [HostResult(h.name) for h in hosts], [message], [],
                        no_match='No such resource class' in str(exc))


def _unknown_traits(text):
    """Trait names of Placement's ``No such trait(s): A, B.`` message."""
    _, _, names = text.partition('No such trait(s):')
    return [n.strip(' .') for n in names.split(',') if n.strip(' .')]
