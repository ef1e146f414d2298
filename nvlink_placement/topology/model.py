"""The topology model: hosts, their GPUs and their NVLink domains (groups).

Pure data, built by :mod:`nvlink_placement.topology.loader`. Group naming
and nesting follow design.rst s4.

Two kinds of group:

- a *domain*: exactly its GPUs form one NVLink domain (a Fabric Manager
  partition, a bridge pair). It serves one size, its own, and carries that
  size trait. A domain holding every GPU of the host makes no resource
  provider (the whole-host flavor needs no subtree).
- a *mesh*: every GPU is linked directly to every other (4-GPU boards
  without NVSwitch, the quads of a DGX-1), so *any* N of its GPUs are one
  NVLink domain. It serves every size of :func:`mesh_sizes` and carries all
  their traits, so the same flavors land on mesh hosts and on NVSwitch
  hosts; it is named by its own size (``..._nvlink-group-of-4-a`` for a
  4-GPU mesh carrying ``CUSTOM_PCI_GROUP2`` and ``CUSTOM_PCI_GROUP4``). A
  mesh holding every GPU of the host still makes its resource provider: a
  2-GPU flavor needs a ``GROUP2`` ancestor there. A mesh holds no other
  group (it already makes every subset a domain).
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

    @property
    def model(self):
        """The GPU's model as host inspection tells it, or None.

        Its ``resource_class`` (upper case), else its ``(vendor_id,
        device_id)`` in lower case: GPUs of one key are one Placement
        resource class. None for a hand-written GPU without them.
        """
        details = self.details
        if details.get('resource_class'):
            return str(details['resource_class']).upper()
        vendor, product = details.get('vendor_id'), details.get('device_id')
        if vendor and product:
            return (str(vendor).lower(), str(product).lower())
        return None


def mesh_sizes(size):
    """Instance sizes a mesh of ``size`` GPUs serves: ``(2, 4, ..., size)``.

    Powers of two below ``size``, then ``size`` itself: a 4-GPU mesh
    serves 2 and 4, an 8-GPU mesh 2, 4 and 8, a 3-GPU mesh 2 and 3. Flavor
    sizes on NVSwitch boards are powers of two (FM partitions of 2, 4, 8
    GPUs), so a mesh offers those, plus its whole self.
    """
    sizes = []
    power = 2
    while power < size:
        sizes.append(power)
        power *= 2
    return tuple(sizes + [size]) if size >= 2 else ()


@dataclasses.dataclass(frozen=True)
class Group:
    """An NVLink domain or mesh that becomes a group resource provider.

    :ivar name: RP name ``<host>_nvlink-group-of-<size>-<letter>``.
    :ivar size: nominal size (GPUs in the full domain or mesh).
    :ivar trait: the trait of ``size``, e.g. ``CUSTOM_PCI_GROUP4``.
    :ivar members: tuple of canonical addresses, sorted.
    :ivar modules: tuple of module ids in member order (None where unknown).
    :ivar parent: name of the smallest enclosing group, or None (the
        compute node).
    :ivar source: where the domain came from (``board``, ``file``, ``fm``,
        ``topo-matrix``).
    :ivar mesh: True when any ``n`` of the members are one domain.
    :ivar sizes: the instance sizes the group serves, ascending: ``(size,)``
        for a domain, :func:`mesh_sizes` for a mesh.
    :ivar traits: the size traits of ``sizes``: what the group RP carries
        besides the owner trait.
    """
    name: str
    size: int
    trait: str
    members: tuple
    modules: tuple
    parent: typing.Optional[str]
    source: str
    mesh: bool = False
    sizes: tuple = ()
    traits: tuple = ()

    def serves(self, size):
        """True when the group RP carries the trait of ``size``."""
        return size in self.sizes

    def holds(self, addresses, size):
        """True when ``addresses`` are one ``size``-GPU domain of the group.

        A domain holds exactly its full member set (``size`` its own); a
        mesh any ``size`` of its present members, for a size it serves.
        """
        addresses = frozenset(addresses)
        if len(addresses) != size or not self.serves(size):
            return False
        if self.mesh:
            return addresses <= set(self.members)
        return addresses == set(self.members) and len(self.members) == size


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

    def usable(self):
        """Addresses of the GPUs not excluded from NVLink groups."""
        return [a for a, gpu in self.gpus.items() if not gpu.excluded]

    def fixed_domains(self, size):
        """The NVLink domains of ``size`` GPUs that are one fixed GPU set.

        A single usable GPU for size 1, a domain group of that nominal
        size with all its GPUs, or every usable GPU of the host when that
        is the size (the whole board). Meshes are :meth:`meshes`: any
        ``size`` of their GPUs is a domain, too many sets to list.

        :returns: dict frozenset of addresses -> label (the group RP name,
            the address for size 1, ``<host> (whole host)``).
        """
        usable = self.usable()
        found = {}
        if size == 1:
            found.update({frozenset([a]): a for a in usable})
        for group in self.groups:
            if not group.mesh and group.holds(group.members, size):
                found[frozenset(group.members)] = group.name
        if len(usable) == size:
            found.setdefault(frozenset(usable),
                             '%s (whole host)' % self.name)
        return found

    def meshes(self, size):
        """Meshes that hold ``size``-GPU domains: dict members -> RP name.

        Only meshes serving ``size`` with at least ``size`` GPUs present.
        """
        return {frozenset(g.members): g.name for g in self.groups
                if g.mesh and g.serves(size) and len(g.members) >= size}

    def domain_label(self, addresses, size):
        """Label of the ``size``-GPU domain ``addresses`` is, or None."""
        key = frozenset(addresses)
        label = self.fixed_domains(size).get(key)
        if label is None and len(key) == size:
            label = next((name for members, name in
                          self.meshes(size).items() if key <= members), None)
        return label


@dataclasses.dataclass
class Topology:
    """A loaded, validated topology file.

    :ivar source: file name the topology was read from (for messages).
    :ivar trait_prefix: group trait prefix (default ``CUSTOM_PCI_GROUP``).
    :ivar hosts: dict host name -> :class:`Host`, in file order.
    :ivar warnings: ``(host name, message)`` pairs for hosts that are
        valid but cover less than their board
        (:mod:`nvlink_placement.topology.coverage`).
    """
    source: str
    trait_prefix: str
    hosts: dict
    warnings: list = dataclasses.field(default_factory=list)

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


class Domain(typing.NamedTuple):
    """A domain or mesh as the loader found it, before naming.

    :ivar members: canonical addresses of the GPUs present and usable.
    :ivar size: nominal size (GPUs of the full domain).
    :ivar source: ``board``, ``file``, ``fm`` or ``topo-matrix``.
    :ivar order: sort key the letter comes from: ``(0, lowest module id)``
        of the full domain, or ``(1, lowest address key)`` where module ids
        are unknown, so names stay stable when a GPU is missing or excluded.
    :ivar mesh: any ``n`` of the members are linked (see module doc).
    """
    members: tuple
    size: int
    source: str
    order: tuple
    mesh: bool = False


def is_group_name(host, name):
    """True when ``name`` is a name :func:`group_name` gives on ``host``."""
    prefix = host + '_nvlink-group-of-'
    if not name.startswith(prefix):
        return False
    size, _, label = name[len(prefix):].partition('-')
    return (size.isdigit() and not size.startswith('0') and
            label.isalpha() and label.islower() and label.isascii())


def build_groups(host, domains, gpus, trait_prefix):
    """Name and nest a host's NVLink domains and meshes.

    :param host: host name.
    :param domains: list of :class:`Domain`; the family must already be
        laminar. Those with fewer than two members, and domains (not
        meshes) holding every GPU, are skipped (they create no resource
        provider) but keep their letter.
    :param gpus: dict address -> :class:`Gpu` (for module ids).
    :returns: list of :class:`Group`, largest nominal size first (so
        parents come before their children).
    """
    domains = [Domain(*d) for d in domains]
    names = {}
    per_size = {}
    for domain in sorted(domains, key=lambda d: (d.size, d.order)):
        index = per_size.get(domain.size, 0)
        per_size[domain.size] = index + 1
        names.setdefault(frozenset(domain.members),
                         group_name(host, domain.size, index))

    total = len(gpus)
    kept = {}
    for domain in domains:
        members = frozenset(domain.members)
        if (2 <= len(members) and (domain.mesh or len(members) < total) and
                members not in kept):
            kept[members] = domain
    groups = []
    for members, domain in kept.items():
        parents = [m for m in kept if members < m]
        parent = min(parents, key=len) if parents else None
        ordered = tuple(sorted(members, key=pci.address_sort_key))
        sizes = mesh_sizes(domain.size) if domain.mesh else (domain.size,)
        groups.append(Group(
            name=names[members], size=domain.size,
            trait='%s%d' % (trait_prefix, domain.size), members=ordered,
            modules=tuple(gpus[a].module_id for a in ordered),
            parent=names[parent] if parent else None, source=domain.source,
            mesh=domain.mesh, sizes=sizes,
            traits=tuple('%s%d' % (trait_prefix, n) for n in sizes)))
    # A parent's nominal domain strictly contains its child's.
    groups.sort(key=lambda g: (-g.size, g.name))
    return groups
