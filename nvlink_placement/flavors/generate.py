"""Flavor specs that keep a VM's GPUs inside one NVLink domain.

Pure: from :class:`nvlink_placement.topology.model.Host` objects to
:class:`FlavorSpec` objects. The keys follow design.rst s6, extended
by member traits (:mod:`nvlink_placement.topology.members`); for N GPUs of
alias ``A`` whose N-GPU domains carry trait ``<prefix>N`` (``mosk``
dialect)::

    pci_passthrough:alias            = A:N:_A
    trait_nvlN:<prefix>N             = required
    trait_A-<i>:<prefix>N_MEMBER<i>  = required     (i = 0 .. N-1)
    placement:same_subtree           = _A-0,...,_A-<N-1>,_nvlN
    placement:group_policy           = none

Nova turns the alias into one request group per GPU, suffixed
``_A-<i>`` (the third alias field names them; a downstream MOSK
extension); ``trait_nvlN`` makes the resourceless group ``_nvlN`` that
only a group resource provider satisfies, and ``same_subtree`` makes it
the ancestor of every GPU. ``trait_A-<i>`` joins the member trait to GPU
group ``i`` (``[filter_scheduler] allow_pci_traits_in_flavor``), so each
free domain is one allocation candidate instead of N! permutations. The
whole-host flavor carries the alias and member keys and the policy, no
subtree; 1-GPU flavors only ``pci_passthrough:alias = A:1``.

Upstream Nova accepts only ``alias:count`` (``nova/pci/request.py``
unpacks ``name, count = spec.split(':')``) and suffixes each GPU's group
with a random UUID (``<request_id>-<i>``), so no flavor key can refer to
them: the ``upstream`` dialect refuses every size but 1 and whole-host,
and its whole-host flavor (``alias:N``, no member traits) makes Placement
enumerate the N! orders of the host's GPUs (see ``nova-config``).
"""

import dataclasses
import re

from nvlink_placement import errors
from nvlink_placement.topology import members
from nvlink_placement.topology import model

MOSK = 'mosk'
UPSTREAM = 'upstream'
DIALECTS = (MOSK, UPSTREAM)

DEFAULT_NAME_TEMPLATE = 'gpu.{alias}.{size}x'
DEFAULT_VCPUS_PER_GPU = 16
DEFAULT_RAM_PER_GPU = 131072   # MiB
DEFAULT_DISK = 100             # GB

# The largest vcpus, ram (MiB) or disk (GB) Nova's flavor API accepts
# (nova/api/openstack/compute/schemas/flavor_manage.py: db MAX_INT).
MAX_AMOUNT = 0x7FFFFFFF

ALIAS_KEY = 'pci_passthrough:alias'
SUBTREE_KEY = 'placement:same_subtree'
POLICY_KEY = 'placement:group_policy'

#: What a size means: one GPU, one NVLink domain below the compute node
#: (a group resource provider), or every GPU of a host.
SINGLE = 'single'
DOMAIN = 'domain'
WHOLE_HOST = 'whole-host'

# Request group suffixes, Placement microversion 1.33
# (placement/schemas/common.py GROUP_PAT).
SUFFIX = re.compile(r'^[a-zA-Z0-9_-]{1,64}$')
# An alias name must survive Nova's parsing of the alias extra spec:
# items split on ',', fields on ':', spaces stripped.
_ALIAS_NAME = re.compile(r'^[^:,\s]+$')

COLUMNS = ('name', 'vcpus', 'ram', 'disk', 'extra_specs')

UPSTREAM_REASON = (
    'upstream Nova cannot name the request groups of a PCI alias (it '
    'suffixes each GPU\'s group with a random UUID), so no flavor key can '
    'keep the %d GPUs in one NVLink domain: such a flavor would silently '
    'get GPUs from different domains. Upstream can express only 1-GPU and '
    'whole-host flavors; use --dialect mosk with a Nova that has the '
    'named-alias extension (alias:count:prefix, placement:same_subtree): '
    'MOSK, or upstream Nova 29.4.0, 31.3.1, 33.0.2 or 34.0.0 with the '
    'nova-patches/ series of nvlink-placement.')


@dataclasses.dataclass(frozen=True)
class FlavorSpec:
    """A flavor to create.

    :ivar size: GPUs per instance.
    :ivar kind: :data:`SINGLE`, :data:`DOMAIN` or :data:`WHOLE_HOST`.
    :ivar ram: MiB; :ivar disk: GB (root disk).
    :ivar extra_specs: dict key -> str value, in display order.
    """
    name: str
    size: int
    kind: str
    vcpus: int
    ram: int
    disk: int
    extra_specs: dict

    def as_dict(self):
        """The flavor as ``flavor generate -f json`` prints it."""
        return {'name': self.name, 'vcpus': self.vcpus, 'ram': self.ram,
                'disk': self.disk, 'extra_specs': dict(self.extra_specs)}


@dataclasses.dataclass
class Generated:
    """Result of :func:`generate`.

    :ivar flavors: list of :class:`FlavorSpec`, by size.
    :ivar skipped: list of ``(size, reason)``: default sizes left out
        (only with the upstream dialect and no explicit sizes).
    :ivar notes: list of warnings about hosts a flavor cannot use.
    """
    flavors: list
    skipped: list
    notes: list


def usable_gpus(host):
    """Addresses of the GPUs of ``host`` not excluded from NVLink groups."""
    return host.usable()


def domains(host, size):
    """The fixed NVLink domains of ``size`` GPUs on ``host``.

    See :meth:`nvlink_placement.topology.model.Host.fixed_domains`; any
    ``size`` GPUs of a mesh are domains too
    (:meth:`~nvlink_placement.topology.model.Host.meshes`).
    """
    return host.fixed_domains(size)


def domain_sizes(hosts):
    """Sorted sizes whose traits group resource providers of ``hosts`` carry.

    A mesh's size equal to its host's GPU count is left out: that is the
    whole-host flavor, which needs no subtree (design.rst s6).
    """
    return sorted({n for h in hosts for g in h.groups for n in g.sizes
                   if not g.mesh or n < len(h.gpus)})


def whole_host_sizes(hosts):
    """Sorted usable GPU counts of ``hosts`` (hosts without GPUs left out)."""
    return sorted({len(usable_gpus(h)) for h in hosts if usable_gpus(h)})


def default_sizes(hosts):
    """1, every domain size and every whole-host size, sorted."""
    return sorted({1} | set(domain_sizes(hosts)) |
                  set(whole_host_sizes(hosts)))


def _existing_sizes_text(hosts):
    return ', '.join(map(str, default_sizes(hosts)))


def classify(hosts, size, dialect=MOSK):
    """What ``size`` means on ``hosts``.

    :returns: ``(kind, None)`` or ``(None, reason)`` when refused.
    """
    if size < 1:
        return None, 'sizes are GPU counts, at least 1'
    if size == 1:
        return SINGLE, None
    if size in domain_sizes(hosts):
        if dialect == UPSTREAM:
            return None, UPSTREAM_REASON % size
        return DOMAIN, None
    if size in whole_host_sizes(hosts):
        bigger = sorted(h.name for h in hosts if len(usable_gpus(h)) > size)
        if bigger:
            return None, (
                '%d GPUs are the whole of host(s) %s, but host(s) %s have '
                'more GPUs and no %d-GPU NVLink domain: Nova could give '
                'such a flavor %d GPUs from different domains there' % (
                    size, ', '.join(h.name for h in hosts
                                    if len(usable_gpus(h)) == size),
                    ', '.join(bigger), size, size))
        return WHOLE_HOST, None
    return None, ('no NVLink domain of %d GPUs in the topology; sizes that '
                  'exist: %s' % (size, _existing_sizes_text(hosts)))


def gpu_suffix(alias, index):
    """Suffix of the request group of the ``index``-th GPU: ``_A-<i>``."""
    return '_%s-%d' % (alias, index)


def domain_suffix(size):
    """Suffix of the resourceless group of a ``size`` domain: ``_nvlN``."""
    return '_nvl%d' % size


def member_keys(alias, size, trait_prefix=model.DEFAULT_TRAIT_PREFIX):
    """``trait_A-<i>:<prefix>N_MEMBER<i> = required`` for each GPU group.

    Group ``i`` may only be member ``i`` of an N-GPU domain
    (:mod:`nvlink_placement.topology.members`), so each free domain is one
    allocation candidate. Nova joins these keys to the named PCI request
    groups with ``[filter_scheduler] allow_pci_traits_in_flavor = True``.
    """
    return {'trait%s:%s' % (gpu_suffix(alias, i),
                            members.member_trait(trait_prefix, size, i)):
            'required' for i in range(size)}


def extra_specs(alias, size, kind, trait_prefix=model.DEFAULT_TRAIT_PREFIX,
                dialect=MOSK):
    """The extra specs of a flavor of ``size`` GPUs of ``alias``.

    :param kind: from :func:`classify`.
    :param dialect: :data:`MOSK` names the GPU groups and gives each its
        member trait (a whole-host flavor too: one candidate per free
        host instead of ``N!``); :data:`UPSTREAM` (only sizes 1 and
        whole-host) sends ``alias:count``.
    :returns: dict key -> value (str), in display order.
    """
    if kind == SINGLE or dialect == UPSTREAM:
        return {ALIAS_KEY: '%s:%d' % (alias, size)}
    specs = {ALIAS_KEY: '%s:%d:_%s' % (alias, size, alias)}
    if kind == DOMAIN:
        specs['trait%s:%s%d' % (domain_suffix(size), trait_prefix,
                                size)] = 'required'
    specs.update(member_keys(alias, size, trait_prefix))
    if kind == DOMAIN:
        specs[SUBTREE_KEY] = ','.join(
            [gpu_suffix(alias, i) for i in range(size)] +
            [domain_suffix(size)])
    specs[POLICY_KEY] = 'none'
    return specs


def check_alias(alias, sizes=()):
    """Refuse alias names Nova or Placement cannot carry.

    :param sizes: domain sizes (their group suffixes must be valid).
    :raises NvlinkError: naming the alias and the rule.
    """
    if not _ALIAS_NAME.match(alias or ''):
        raise errors.NvlinkError(
            'alias %r: an alias name must be non-empty and hold no ":", '
            '"," or spaces (Nova splits the pci_passthrough:alias value on '
            'them)' % (alias,))
    for size in sizes:
        suffix = gpu_suffix(alias, size - 1)
        if not SUFFIX.match(suffix):
            raise errors.NvlinkError(
                'alias %r: request group suffix %r is not a valid Placement '
                'suffix ([a-zA-Z0-9_-], at most 64 characters); choose a '
                'shorter alias of letters, digits, "_" and "-"'
                % (alias, suffix))


def parse_sizes(text):
    """``'1,2,4,8'`` -> ``[1, 2, 4, 8]`` (sorted, unique).

    :raises NvlinkError: for anything but positive integers.
    """
    sizes = set()
    for item in (text or '').split(','):
        item = item.strip()
        if not item.isdigit() or int(item) < 1:
            raise errors.NvlinkError(
                '--sizes %r: expected positive integers separated by '
                'commas, e.g. 1,2,4,8' % (text,))
        sizes.add(int(item))
    return sorted(sizes)


def flavor_name(template, alias, size):
    """Format ``template`` with ``{alias}`` and ``{size}``."""
    try:
        return template.format(alias=alias, size=size)
    except (KeyError, IndexError, ValueError) as exc:
        raise errors.NvlinkError(
            '--name-template %r: %s; use the fields {alias} and {size}'
            % (template, exc))


def judge_sizes(hosts, sizes=None, dialect=MOSK, scope=None):
    """The flavor sizes ``hosts`` can serve, and what each is.

    :param sizes: GPU counts asked for; None means :func:`default_sizes`
        of ``hosts``.
    :param scope: every host the flavors' query can reach (the
        topology's hosts with GPUs of the same class, ``hosts`` among
        them); each size is classified on these (:func:`classify`), so a
        size that is the whole of a selected host but a domain elsewhere
        is no whole-host flavor. None: ``hosts``.
    :returns: ``(kinds, refused)``: dict size -> kind (:func:`classify`)
        in size order, and a list of ``(size, reason)`` for default sizes
        the dialect refuses.
    :raises NvlinkError: for any refused size of explicit ``sizes``,
        every refusal listed.
    """
    explicit = sizes is not None
    wanted = sorted(set(sizes)) if explicit else default_sizes(hosts)
    kinds, refused = {}, []
    for size in wanted:
        kind, reason = classify(hosts if scope is None else scope, size,
                                dialect)
        if kind is None:
            refused.append((size, reason))
        else:
            kinds[size] = kind
    if explicit and refused:
        raise errors.NvlinkError('\n'.join(
            'size %d refused: %s' % item for item in refused))
    return kinds, refused


def generate(hosts, alias, sizes=None, dialect=MOSK,
             trait_prefix=model.DEFAULT_TRAIT_PREFIX,
             name_template=DEFAULT_NAME_TEMPLATE,
             vcpus_per_gpu=DEFAULT_VCPUS_PER_GPU,
             ram_per_gpu=DEFAULT_RAM_PER_GPU, disk=DEFAULT_DISK,
             scope=None):
    """Flavor specs for ``alias`` on ``hosts``.

    :param hosts: list of :class:`nvlink_placement.topology.model.Host`
        whose GPUs the alias names.
    :param sizes: GPU counts; None means :func:`default_sizes`, from which
        sizes the dialect refuses are skipped (and reported) instead of
        failing.
    :param scope: every host the query can reach, see
        :func:`judge_sizes` (None: ``hosts``).
    :returns: :class:`Generated`.
    :raises NvlinkError: for an explicitly requested size that is refused
        (every refusal listed), a bad alias, name template or amount.
    """
    if dialect not in DIALECTS:
        raise errors.NvlinkError('unknown dialect %r (choose %s)'
                                 % (dialect, ' or '.join(DIALECTS)))
    if not any(usable_gpus(h) for h in hosts):
        raise errors.NvlinkError('the selected hosts have no GPUs')
    for what, value, least in (('--vcpus-per-gpu', vcpus_per_gpu, 1),
                               ('--ram-per-gpu', ram_per_gpu, 1),
                               ('--disk', disk, 0)):
        if value < least:
            raise errors.NvlinkError('%s must be at least %d, not %d'
                                     % (what, least, value))
        if value > MAX_AMOUNT:
            raise errors.NvlinkError('%s must be at most %d (Nova\'s limit '
                                     'for a flavor)' % (what, MAX_AMOUNT))
    kinds, refused = judge_sizes(hosts, sizes, dialect, scope)
    check_alias(alias, [s for s, k in kinds.items()
                        if k != SINGLE and dialect == MOSK])
    flavors, names = [], {}
    for size, kind in kinds.items():
        name = flavor_name(name_template, alias, size)
        if name in names:
            raise errors.NvlinkError(
                '--name-template %r gives sizes %d and %d the same name %r; '
                'include {size}' % (name_template, names[name], size, name))
        names[name] = size
        for what, per_gpu in (('vcpus', vcpus_per_gpu),
                              ('ram', ram_per_gpu)):
            if per_gpu * size > MAX_AMOUNT:
                raise errors.NvlinkError(
                    'the %d-GPU flavor would get %s %d, above Nova\'s limit '
                    'of %d: lower --%s-per-gpu' % (
                        size, what, per_gpu * size, MAX_AMOUNT,
                        'vcpus' if what == 'vcpus' else 'ram'))
        flavors.append(FlavorSpec(
            name=name, size=size, kind=kind, vcpus=vcpus_per_gpu * size,
            ram=ram_per_gpu * size, disk=disk,
            extra_specs=extra_specs(alias, size, kind, trait_prefix,
                                    dialect)))
    return Generated(flavors, refused, _notes(hosts, kinds))


def _notes(hosts, kinds):
    notes = []
    for size, kind in kinds.items():
        if kind != DOMAIN:
            continue
        left_out = [h.name for h in hosts
                    if not any(g.serves(size) for g in h.groups) and
                    len(usable_gpus(h)) >= size]
        if left_out:
            notes.append(
                'size %d asks for a %d-GPU NVLink group provider; host(s) %s '
                'have none, so this flavor never lands there'
                % (size, size, ', '.join(left_out)))
    return notes
