"""How many more instances of each size fit, per host and in total.

An N-GPU instance fits in an N-GPU NVLink domain whose GPUs are all free
(DESIGN.md section 5: a flavor of N GPUs asks for one N-domain). Size 1
fits on any free GPU; the whole-host size needs every GPU free. A domain
is *broken* when some but not all of its GPUs are taken (used or reserved):
smaller instances fragment it.
"""

import dataclasses

from nvlink_placement.placement import naming
from nvlink_placement.placement import usage

COLUMNS = ('host', 'size', 'fits', 'free_gpus', 'used_gpus',
           'reserved_gpus', 'broken_domains')


@dataclasses.dataclass
class HostGpus:
    """One host for the capacity report.

    :ivar name: host name.
    :ivar status: dict GPU key -> ``free``/``used``/``reserved``.
    :ivar domains: list of ``(size, frozenset of GPU keys)``: the NVLink
        domains with their nominal size.
    """
    name: str
    status: dict
    domains: list


def rows(hosts):
    """Capacity rows (see :data:`COLUMNS`), per host then ``total``.

    :param hosts: list of :class:`HostGpus`.
    :returns: list of tuples; the ``total`` rows sum every host per size.
    """
    out = []
    totals = {}
    for host in hosts:
        states = list(host.status.values())
        counts = (states.count(usage.FREE), states.count(usage.USED),
                  states.count(usage.RESERVED))
        sizes = {1: [(1, frozenset([g])) for g in host.status]}
        for size, members in host.domains:
            sizes.setdefault(size, []).append((size, members))
        whole = len(host.status)
        if whole > 1:
            sizes[whole] = [(whole, frozenset(host.status))]
        for size in sorted(sizes):
            fits = broken = 0
            for nominal, members in sizes[size]:
                taken = sum(1 for g in members
                            if host.status[g] != usage.FREE)
                if taken == 0 and len(members) == nominal:
                    fits += 1
                elif 0 < taken < len(members):
                    broken += 1
            row = (host.name, size, fits) + counts + (broken,)
            out.append(row)
            total = totals.setdefault(size, [0] * 5)
            for i, value in enumerate((fits,) + counts + (broken,)):
                total[i] += value
    for size in sorted(totals):
        out.append(('total', size) + tuple(totals[size]))
    return out


def hosts_from_state(state, uses, roots, topology=None):
    """Build :class:`HostGpus` for the trees ``roots`` of ``state``.

    Domains come from ``topology`` when given (by Nova RP name), otherwise
    from the tree itself: every RP carrying the owner trait is a domain of
    the size its name states (``..._nvlink-group-of-<N>-<letter>``) holding
    the PCI RPs below it.

    :param uses: dict RP uuid -> :class:`nvlink_placement.placement.usage.
        GpuUse` for the PCI RPs.
    """
    hosts = []
    for root in roots:
        cn = state.by_uuid[root]
        gpus = {p.uuid: p for p in state.tree(root) if p.uuid in uses}
        status = {p.name: uses[u].status for u, p in gpus.items()}
        domains = []
        if topology is not None and cn.name in topology.hosts:
            host = topology.hosts[cn.name]
            for group in host.groups:
                names = frozenset(host.gpu_provider_name(a)
                                  for a in group.members)
                domains.append((group.size, names & set(status)))
        else:
            for group in state.tree(root):
                size = group_size(group.name)
                if naming.OWNER_TRAIT not in group.traits or size is None:
                    continue
                below = frozenset(p.name for p in gpus.values()
                                  if _descends(state, p, group.uuid))
                domains.append((size, below))
        hosts.append(HostGpus(cn.name, status, domains))
    return hosts


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
