"""The tree each host should have (DESIGN.md section 4), as plain data."""

import dataclasses
import typing

from nvlink_placement.topology import model


@dataclasses.dataclass(frozen=True)
class DesiredGroup:
    """A group RP: ``parent`` is a group name or None (compute node)."""
    name: str
    parent: typing.Optional[str]
    trait: str
    detail: str


@dataclasses.dataclass
class DesiredHost:
    """What one compute node tree should look like.

    :ivar name: compute node RP name (hypervisor_hostname).
    :ivar groups: list of :class:`DesiredGroup`, parents first.
    :ivar gpus: dict Nova PCI RP name -> ``(parent group name or None,
        detail)``; every one of them must exist in Placement.
    """
    name: str
    groups: list
    gpus: dict

    @property
    def traits(self):
        """The group traits this host's tree uses."""
        return {g.trait for g in self.groups}


def from_topology(host):
    """Desired tree for a :class:`nvlink_placement.topology.model.Host`.

    GPUs excluded from groups (vGPU, MIG) are left out: they are not
    passthrough devices and the tool does not touch them.
    """
    groups = [DesiredGroup(g.name, g.parent, g.trait, _group_detail(g))
              for g in host.groups]
    gpus = {}
    for address, gpu in sorted(host.gpus.items()):
        if gpu.excluded:
            continue
        detail = address if gpu.module_id is None else (
            '%s module %d' % (address, gpu.module_id))
        gpus[host.gpu_provider_name(address)] = (
            host.parent_of_gpu(address), detail)
    return DesiredHost(host.name, groups, gpus)


def flat(host_name):
    """Desired tree for ``flatten``: no groups, PCI RPs under the node."""
    return DesiredHost(host_name, [], {})


def _group_detail(group):
    if all(m is not None for m in group.modules):
        return '%s modules %s' % (group.trait, ','.join(
            str(m) for m in sorted(group.modules)))
    return '%s %s' % (group.trait, ','.join(group.members))


OWNER_TRAIT = model.OWNER_TRAIT
