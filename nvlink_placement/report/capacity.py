"""How many more instances of each size fit, per host and in total.

An N-GPU instance fits in an N-GPU NVLink domain whose GPUs are all free
(design.rst s6: a flavor of N GPUs asks for one N-domain), or in any
N free GPUs of a mesh that serves N (a free 4-GPU mesh holds two 2-GPU
instances). With member traits (:mod:`nvlink_placement.topology.members`)
an N-GPU instance takes one GPU of each member class of a mesh, so a mesh
holds as many as its scarcest free class: the count the member-trait
flavors get from Placement. Size 1 fits on any free GPU; the whole-host
size needs every GPU free. A domain is *broken* when some but not all of
its GPUs are taken (used or reserved): smaller instances fragment it; a
mesh is broken for size N when some of its GPUs are taken and some of its
free GPUs cannot serve size N.
"""

import dataclasses
import re

from nvlink_placement.placement import naming
from nvlink_placement.placement import usage
from nvlink_placement.plan import actions as act
from nvlink_placement.topology import members
from nvlink_placement.topology import model
from nvlink_placement.topology import pci

COLUMNS = ('host', 'size', 'fits', 'free_gpus', 'used_gpus',
           'reserved_gpus', 'broken_domains', 'stranded_gpus',
           'resource_class')


@dataclasses.dataclass
class HostGpus:
    """One host for the capacity report.

    :ivar name: host name.
    :ivar status: dict GPU key -> ``free``/``used``/``reserved``.
    :ivar domains: list of ``(size, frozenset of GPU keys)``: the NVLink
        domains with their nominal size.
    :ivar meshes: list of ``(sizes, frozenset of GPU keys)``: the meshes
        with the sizes they serve.
    :ivar members: dict GPU key -> dict size -> member index, where known.
    :ivar classes: dict GPU key -> resource class, where known.
    """
    name: str
    status: dict
    domains: list
    meshes: list = dataclasses.field(default_factory=list)
    members: dict = dataclasses.field(default_factory=dict)
    classes: dict = dataclasses.field(default_factory=dict)


def _of_class(host, rc):
    """``host`` with only its GPUs of class ``rc`` (and their domains)."""
    keys = {g for g in host.status if host.classes.get(g, '') == rc}
    if len(keys) == len(host.status):
        return host
    return dataclasses.replace(
        host, status={g: s for g, s in host.status.items() if g in keys},
        domains=[(n, m) for n, m in host.domains if m <= keys],
        meshes=[(n, m) for n, m in host.meshes if m <= keys],
        members={g: m for g, m in host.members.items() if g in keys},
        classes={g: c for g, c in host.classes.items() if g in keys})


def _count(host, size):
    """``(fits, broken)`` of ``size`` on ``host``."""
    fits = broken = 0
    whole = frozenset(host.status)
    units = [(1, frozenset([g])) for g in host.status] if size == 1 else []
    units += [(n, m) for n, m in host.domains if n == size]
    meshes = [m for sizes, m in host.meshes if size in sizes]
    if size == len(whole) > 1 and whole not in meshes and (
            (size, whole) not in units):
        units.append((size, whole))
    for nominal, gpus in units:
        taken = sum(1 for g in gpus if host.status[g] != usage.FREE)
        if taken == 0 and len(gpus) == nominal:
            fits += 1
        elif 0 < taken < len(gpus):
            broken += 1
    for gpus in meshes:
        free = [g for g in gpus if host.status[g] == usage.FREE]
        classes = [host.members.get(g, {}).get(size) for g in free]
        if any(c is not None for c in classes):
            here = members.reachable(classes, size)
        else:
            here = len(free) // size
        fits += here
        if len(free) < len(gpus) and len(free) > here * size:
            broken += 1
    return fits, broken


def _sizes(host):
    """The sizes counted on ``host``: 1, its domains' and meshes', all."""
    sizes = {1} | {n for n, _ in host.domains} | {
        n for served, _ in host.meshes for n in served}
    if len(host.status) > 1:
        sizes.add(len(host.status))
    return sorted(sizes)


def rows(hosts):
    """Capacity rows (see :data:`COLUMNS`), per host then ``total``.

    Per GPU model (resource class): a host with GPUs of two classes gets
    rows for each, counting only that class' GPUs and domains, and the
    ``total`` rows sum every host per class and size. ``stranded_gpus``
    are the free GPUs no instance of the size can use (``free_gpus -
    size * fits``). A GPU of unknown class is of class ``''``.

    :param hosts: list of :class:`HostGpus`.
    :returns: list of tuples, hosts in the given order, each host's rows
        by class then size; then the ``total`` rows by class, then size.
    """
    out = []
    totals = {}
    for whole in hosts:
        for rc in sorted({whole.classes.get(g, '') for g in whole.status}):
            host = _of_class(whole, rc)
            states = list(host.status.values())
            counts = (states.count(usage.FREE), states.count(usage.USED),
                      states.count(usage.RESERVED))
            for size in _sizes(host):
                fits, broken = _count(host, size)
                values = (fits,) + counts + (broken,
                                             counts[0] - size * fits)
                out.append((host.name, size) + values + (rc,))
                total = totals.setdefault((rc, size), [0] * len(values))
                for i, value in enumerate(values):
                    total[i] += value
    for rc, size in sorted(totals):
        out.append(('total', size) + tuple(totals[rc, size]) + (rc,))
    return out


def hosts_from_state(state, uses, roots, topology=None,
                     prefix=model.DEFAULT_TRAIT_PREFIX):
    """Build :class:`HostGpus` for the trees ``roots`` of ``state``.

    Domains and meshes come from ``topology`` when given (by Nova RP name),
    otherwise from the tree itself: every RP carrying the owner trait is a
    group holding the PCI RPs below it, serving the sizes of its
    ``<prefix><N>`` traits (a mesh when there are several), or the size
    its name states (``..._nvlink-group-of-<N>-<letter>``) when it has
    none.

    :param uses: dict RP uuid -> :class:`nvlink_placement.placement.usage.
        GpuUse` for the PCI RPs.
    :param prefix: the group trait prefix of the tree.
    """
    size_trait = re.compile('^%s([0-9]+)$' % re.escape(prefix))
    hosts = []
    for root in roots:
        cn = state.by_uuid[root]
        gpus = {p.uuid: p for p in state.tree(root) if p.uuid in uses}
        status = {p.name: uses[u].status for u, p in gpus.items()}
        domains, meshes, classes = [], [], {}
        if topology is not None and cn.name in topology.hosts:
            host = topology.hosts[cn.name]
            classes = {host.gpu_provider_name(a): sizes for a, sizes in
                       members.indexes(host).items()}
            for group in host.groups:
                names = frozenset(host.gpu_provider_name(a)
                                  for a in group.members) & set(status)
                if group.mesh:
                    meshes.append((group.sizes, names))
                else:
                    domains.append((group.size, names))
        else:
            for group in state.tree(root):
                if naming.OWNER_TRAIT not in group.traits:
                    continue
                sizes = sorted(int(m.group(1)) for m in map(
                    size_trait.match, group.traits) if m)
                if not sizes and group_size(group.name) is not None:
                    sizes = [group_size(group.name)]
                below = frozenset(p.name for p in gpus.values()
                                  if _descends(state, p, group.uuid))
                if len(sizes) > 1:
                    meshes.append((tuple(sizes), below))
                elif sizes:
                    domains.append((sizes[0], below))
            parse = members.parser(prefix)
            for p in gpus.values():
                for size, index in filter(None, map(parse, p.traits)):
                    classes.setdefault(p.name, {})[size] = index
        kinds = {p.name: getattr(uses[u], 'resource_classes', ())
                 for u, p in gpus.items()}
        hosts.append(HostGpus(cn.name, status, domains, meshes, classes,
                              {g: k[0] for g, k in kinds.items()
                               if len(k) == 1}))
    return hosts


def not_reshaped(state, uses, roots):
    """Names of the roots with two or more GPUs and no group provider.

    No provider with the owner trait in the tree: Placement sees flat
    GPUs, and only the 1-GPU and whole-host sizes have a known domain.
    """
    names = []
    for root in roots:
        tree = state.tree(root)
        if sum(1 for p in tree if p.uuid in uses) < 2:
            continue
        if not any(naming.OWNER_TRAIT in p.traits for p in tree):
            names.append(state.by_uuid[root].name)
    return names


def group_size(name):
    """Domain size from a group RP name, or None."""
    marker = '_nvlink-group-of-'
    if marker not in name:
        return None
    size = name.rsplit(marker, 1)[1].split('-', 1)[0]
    return int(size) if size.isdigit() else None


def _descends(state, provider, ancestor_uuid):
    while provider.parent_uuid:
        if provider.parent_uuid == ancestor_uuid:
            return True
        provider = state.by_uuid[provider.parent_uuid]
    return False


#: Resource class label of GPUs whose class no read told
#: (:func:`cloud`).
UNKNOWN_CLASS = 'unknown'


@dataclasses.dataclass
class Cloud:
    """Capacity of a set of hosts per resource class (``check``'s metrics).

    Every dict is keyed by resource class, or ``(resource class, size)``;
    a size is present for a class when a host with GPUs of that class
    has it (1, its domain and mesh sizes, its whole-host size), with 0
    where nothing fits.

    :ivar gpus: GPU providers.
    :ivar free_gpus: those with a unit neither used nor reserved.
    :ivar free_domains: ``size``-GPU instances that still fit (as in
        :func:`rows`: free domains of that size, a mesh counted by the
        instances it still holds).
    :ivar stranded_gpus: free GPUs that no ``size``-GPU instance can use:
        ``free_gpus - size * free_domains``, summed over hosts.
    :ivar split_instances: instances of ``size`` GPUs split across NVLink
        domains (the ``split-allocation`` findings), sizes 2 and up.
    """
    gpus: dict
    free_gpus: dict
    free_domains: dict
    stranded_gpus: dict
    split_instances: dict


class _Status(object):
    """Usage as much as the free listing tells it (duck-types GpuUse)."""

    def __init__(self, status):
        self.status = status


def cloud(state, host_names, findings=(),
          prefix=model.DEFAULT_TRAIT_PREFIX):
    """:class:`Cloud` of the hosts ``host_names``, from reads made already.

    Needs no read per host: the domains and meshes come from the provider
    tree in ``state`` (:func:`hosts_from_state` without a topology, so
    the size traits of ``prefix`` must have been read), which GPUs are
    free from ``state.free`` (one listing per resource class). A GPU not
    listed free is taken (used and reserved are not told apart). A GPU's
    resource class is the one it was listed free for; else that of an
    allocation read for it; else the one class of its host's other GPUs;
    else the one class of all the hosts; else :data:`UNKNOWN_CLASS` (a
    cloud with no free GPU at all and no allocation read).

    :param state: :class:`nvlink_placement.placement.state.State` with
        ``free`` filled (None counts every GPU taken).
    :param host_names: the compute nodes to count (names Placement does
        not know as a root provider are left out).
    :param findings: ``check``'s drift; its ``split-allocation`` actions
        (``provider``: the consumer's GPU provider names, comma-separated)
        are counted.
    """
    roots = [state.by_name[n].uuid for n in host_names
             if n in state.by_name and state.by_name[n].parent_uuid is None]
    free = state.free or {}
    uses, classes = {}, {}
    for root in roots:
        cn = state.by_uuid[root]
        for p in state.tree(root):
            if pci.address_of_provider(cn.name, p.name) is None:
                continue
            uses[p.uuid] = _Status(usage.FREE if p.uuid in free
                                   else usage.USED)
            rc = free.get(p.uuid) or next(
                (rc for held in state.allocations.get(p.uuid, {}).values()
                 for rc in sorted(held)), None)
            if rc is not None:
                classes[p.name] = rc
    hosts = hosts_from_state(state, uses, roots, None, prefix)
    everywhere = set(classes.values())
    for host in hosts:
        known = {classes[g] for g in host.status if g in classes}
        guess = (known if len(known) == 1 else everywhere
                 if len(everywhere) == 1 else {UNKNOWN_CLASS})
        for gpu in host.status:
            classes.setdefault(gpu, next(iter(guess)))
    result = Cloud({}, {}, {}, {}, {})
    for host in hosts:
        for rc in sorted({classes[g] for g in host.status}):
            mine = dataclasses.replace(host, status={
                g: s if classes[g] == rc else usage.USED
                for g, s in host.status.items()})
            free_here = sum(1 for s in mine.status.values()
                            if s == usage.FREE)
            _add(result.gpus, rc, sum(1 for g in host.status
                                      if classes[g] == rc))
            _add(result.free_gpus, rc, free_here)
            for size in _sizes(host):
                fits, _ = _count(mine, size)
                _add(result.free_domains, (rc, size), fits)
                _add(result.stranded_gpus, (rc, size),
                     free_here - size * fits)
                if size > 1:
                    _add(result.split_instances, (rc, size), 0)
    for finding in findings:
        if finding.drift != act.SPLIT_ALLOCATION:
            continue
        gpus = finding.provider.split(', ')
        rc = classes.get(gpus[0], UNKNOWN_CLASS)
        _add(result.split_instances, (rc, len(gpus)), 1)
    return result


def _add(counts, key, value):
    counts[key] = counts.get(key, 0) + value
