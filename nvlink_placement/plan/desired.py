"""The tree each host should have (design.rst s4), as plain data."""

import dataclasses
import typing

from nvlink_placement.topology import members
from nvlink_placement.topology import model


@dataclasses.dataclass(frozen=True)
class DesiredGroup:
    """A group RP: ``parent`` is a group name or None (compute node).

    :ivar traits: its size traits (one for a domain; every size it serves
        for a mesh, e.g. ``CUSTOM_PCI_GROUP2``, ``CUSTOM_PCI_GROUP4``).
    :ivar sizes: the instance sizes one NVLink domain of this group holds
        (``(size,)`` for a domain, every size it serves for a mesh).
    """
    name: str
    parent: typing.Optional[str]
    traits: tuple
    detail: str
    sizes: tuple = ()


@dataclasses.dataclass(frozen=True)
class DesiredGpu:
    """A Nova PCI RP: its parent group (None = compute node) and health.

    :ivar address: canonical PCI address.
    :ivar reserve: True when the GPU is unhealthy and should be reserved.
    :ivar member_traits: the member traits Nova's ``[pci] device_spec``
        must give it (:mod:`nvlink_placement.topology.members`); the tool
        never writes them, ``check`` reports a difference.
    """
    address: str
    parent: typing.Optional[str]
    detail: str
    reserve: bool = False
    member_traits: tuple = ()


@dataclasses.dataclass
class DesiredHost:
    """What one compute node tree should look like.

    :ivar name: compute node RP name (hypervisor_hostname).
    :ivar groups: list of :class:`DesiredGroup`, parents first.
    :ivar gpus: dict Nova PCI RP name -> :class:`DesiredGpu`; every one of
        them must exist in Placement.
    :ivar known: False for a host the topology does not describe (``check
        --all`` on a tree holding groups of the tool). Its PCI RPs are not
        reported as unknown GPUs: that is only done for hosts whose GPUs
        the topology lists (a flatten target lists none either).
    :ivar ignored: Nova PCI RP names the topology knows but keeps out of
        groups (excluded GPUs): never reported as unknown.
    :ivar health: False (``--no-health``): GPU reservations are left as
        they are, neither made nor released.
    """
    name: str
    groups: list
    gpus: dict
    known: bool = True
    ignored: frozenset = frozenset()
    health: bool = True

    @property
    def traits(self):
        """The group traits this host's tree uses."""
        return {t for g in self.groups for t in g.traits}

    @property
    def member_traits(self):
        """The member traits its GPU providers should carry."""
        return {t for g in self.gpus.values() for t in g.member_traits}

    def domains(self):
        """``[(group, frozenset of Nova PCI RP names)]``: each group's GPUs.

        A GPU belongs to its parent group and to every group above it.
        """
        parent_of = {g.name: g.parent for g in self.groups}
        members = {g.name: set() for g in self.groups}
        for name, gpu in self.gpus.items():
            group = gpu.parent
            while group:
                members[group].add(name)
                group = parent_of[group]
        return [(g, frozenset(members[g.name])) for g in self.groups]


def from_topology(host, health=True,
                  trait_prefix=model.DEFAULT_TRAIT_PREFIX):
    """Desired tree for a :class:`nvlink_placement.topology.model.Host`.

    GPUs excluded from groups (vGPU, MIG) are left out: they are not
    passthrough devices and the tool does not touch them.

    :param health: reserve unhealthy GPUs (``reshape --no-health`` passes
        False).
    :param trait_prefix: the topology's group trait prefix (member traits
        are named after it).
    """
    member_traits = members.traits(host, trait_prefix)
    groups = [DesiredGroup(g.name, g.parent, g.traits, _group_detail(g),
                           sizes=g.sizes)
              for g in host.groups]
    gpus = {}
    ignored = set()
    for address, gpu in sorted(host.gpus.items()):
        if gpu.excluded:
            ignored.add(host.gpu_provider_name(address))
            continue
        detail = address if gpu.module_id is None else (
            '%s module %d' % (address, gpu.module_id))
        gpus[host.gpu_provider_name(address)] = DesiredGpu(
            address, host.parent_of_gpu(address), detail,
            reserve=health and gpu.health == 'unhealthy',
            member_traits=member_traits.get(address, ()))
    return DesiredHost(host.name, groups, gpus, ignored=frozenset(ignored),
                       health=health)


def flat(host_name, known=True):
    """Desired tree for ``flatten`` (or an unknown host): no groups."""
    return DesiredHost(host_name, [], {}, known=known)


def _group_detail(group):
    traits = ','.join(group.traits)
    if all(m is not None for m in group.modules):
        return '%s modules %s' % (traits, ','.join(
            str(m) for m in sorted(group.modules)))
    return '%s %s' % (traits, ','.join(group.members))
