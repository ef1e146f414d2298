"""The topology model: hosts, their GPUs and their NVLink domains (groups).

Pure data, built by :mod:`nvlink_placement.topology.loader`. Group naming
and nesting follow DESIGN.md section 4.
"""

import dataclasses
import typing

from nvlink_placement.topology import pci

DEFAULT_TRAIT_PREFIX = 'CUSTOM_PCI_GROUP'
# Placement limits (placement/schemas/resource_provider.py, trait.py).
MAX_PROVIDER_NAME = 200
MAX_TRAIT_NAME = 255


@dataclasses.dataclass(frozen=True)
class Gpu:
    """One passthrough GPU of a host.

    :ivar address: canonical PCI address (``dddd:bb:dd.f``).
    :ivar module_id: int module id (= FM physical id) or None.
    :ivar details: dict of host inspection data (``resource_class``,
        ``numa_node``, ``health`` ...); empty for hand-written files.
    """
    address: str
    module_id: typing.Optional[int] = None
    details: dict = dataclasses.field(default_factory=dict, compare=False)

    @property
    def excluded(self):
        """Reason the GPU is kept out of NVLink groups, or None."""
        return self.details.get('excluded')

    @property
    def health(self):
        """``ok``, ``degraded`` or ``unhealthy`` (``ok`` when unknown)."""
        return (self.details.get('health') or {}).get('status', 'ok')


@dataclasses.dataclass(frozen=True)
class Group:
    """An NVLink domain that becomes a group resource provider.

    :ivar name: RP name ``<host>_nvlink-group-of-<size>-<letter>``.
    :ivar size: nominal domain size (GPUs in the full domain).
    :ivar trait: the size trait, e.g. ``CUSTOM_PCI_GROUP2``.
    :ivar members: tuple of canonical addresses, sorted.
    :ivar modules: tuple of module ids in member order (None where unknown).
    :ivar parent: name of the smallest enclosing group, or None (the
        compute node).
    :ivar source: where the domain came from (``board``, ``file``, ``fm``,
        ``topo-matrix``).
    """
    name: str
    size: int
    trait: str
    members: tuple
    modules: tuple
    parent: typing.Optional[str]
    source: str


@dataclasses.dataclass
class Host:
    """A compute host: ``name`` is Nova's hypervisor_hostname.

    :ivar gpus: dict canonical address -> :class:`Gpu`.
    :ivar groups: list of :class:`Group`, parents before children.
    """
    name: str
    board: typing.Optional[str]
    gpus: dict
    groups: list

    def parent_of_gpu(self, address):
        """Name of the smallest group holding ``address``, or None."""
        best = None
        for group in self.groups:
            if address in group.members and (
                    best is None or len(group.members) < len(best.members)):
                best = group
        return best.name if best else None

    def gpu_provider_name(self, address):
        """Nova's resource provider name for the GPU at ``address``."""
        return pci.nova_provider_name(self.name, address)


@dataclasses.dataclass
class Topology:
    """A loaded, validated topology file.

    :ivar source: file name the topology was read from (for messages).
    :ivar trait_prefix: group trait prefix (default ``CUSTOM_PCI_GROUP``).
    :ivar hosts: dict host name -> :class:`Host`, in file order.
    """
    source: str
    trait_prefix: str
    hosts: dict

    def select(self, names):
        """Return the hosts named in ``names`` (all when empty).

        :raises KeyError: naming the first unknown host.
        """
        if not names:
            return list(self.hosts.values())
        missing = [n for n in names if n not in self.hosts]
        if missing:
            raise KeyError(missing[0])
        return [self.hosts[n] for n in dict.fromkeys(names)]


def letters(index):
    """Bijective base-26 label: 0 -> ``a``, 25 -> ``z``, 26 -> ``aa``."""
    label = ''
    index += 1
    while index:
        index, rem = divmod(index - 1, 26)
        label = chr(ord('a') + rem) + label
    return label


def group_name(host, size, index):
    """RP name of the ``index``-th (0-based) group of ``size`` on ``host``."""
    return '%s_nvlink-group-of-%d-%s' % (host, size, letters(index))


def is_group_name(host, name):
    """True when ``name`` is a name :func:`group_name` gives on ``host``."""
    prefix = host + '_nvlink-group-of-'
    if not name.startswith(prefix):
        return False
    size, _, label = name[len(prefix):].partition('-')
    return (size.isdigit() and not size.startswith('0') and
            label.isalpha() and label.islower() and label.isascii())


def build_groups(host, domains, gpus, trait_prefix):
    """Name and nest a host's NVLink domains.

    :param host: host name.
    :param domains: list of ``(members, nominal_size, source, order)``;
        members are canonical addresses of the GPUs present and usable,
        ``order`` is the sort key the letter comes from: ``(0, lowest
        module id)`` of the full domain, or ``(1, lowest address key)`` where
        module ids are unknown, so names stay stable when a GPU is missing or
        excluded. The family must already be laminar.
        Domains with fewer than two members or holding every GPU are
        skipped (they create no resource provider) but keep their letter.
    :param gpus: dict address -> :class:`Gpu` (for module ids).
    :returns: list of :class:`Group`, largest nominal size first (so
        parents come before their children).
    """
    names = {}
    per_size = {}
    for members, size, source, order in sorted(
            domains, key=lambda d: (d[1], d[3])):
        index = per_size.get(size, 0)
        per_size[size] = index + 1
        names.setdefault(frozenset(members), group_name(host, size, index))

    total = len(gpus)
    kept = {}
    for members, size, source, order in domains:
        members = frozenset(members)
        if 2 <= len(members) < total and members not in kept:
            kept[members] = (size, source)
    groups = []
    for members, (size, source) in kept.items():
        parents = [m for m in kept if members < m]
        parent = min(parents, key=len) if parents else None
        ordered = tuple(sorted(members, key=pci.address_sort_key))
        groups.append(Group(
            name=names[members], size=size,
            trait='%s%d' % (trait_prefix, size), members=ordered,
            modules=tuple(gpus[a].module_id for a in ordered),
            parent=names[parent] if parent else None, source=source))
    # A parent's nominal domain strictly contains its child's.
    groups.sort(key=lambda g: (-g.size, g.name))
    return groups
