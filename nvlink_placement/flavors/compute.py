"""Flavors in Nova's compute API, through an openstacksdk connection.

:func:`plan` (pure) compares a generated flavor with the one Nova has;
:func:`apply` reads every flavor first, plans all changes (any conflict
stops it before a write), then creates flavors and sets or unsets extra
specs. Only differing extra specs are written, and only the keys this
tool manages (:data:`MANAGED`) are ever removed, so an operator's own
keys (``hw:*``, ``quota:*`` ...) stay. Nova flavors cannot change vCPUs,
RAM or disk; a flavor that differs there is a conflict.
"""

import dataclasses
import re

from nvlink_placement import errors

COLUMNS = ('flavor', 'action', 'key', 'value')
CREATE = 'create-flavor'
SET = 'set-property'
UNSET = 'unset-property'
# Extra spec keys written by flavor generate (DESIGN.md section 5).
MANAGED = re.compile(r'^(pci_passthrough:alias|placement:same_subtree|'
                     r'placement:group_policy|trait_nvl[0-9]+:.+)$')


@dataclasses.dataclass(frozen=True)
class Change:
    """One write to the compute API.

    :ivar action: :data:`CREATE`, :data:`SET` or :data:`UNSET`.
    :ivar key: the extra spec; empty for :data:`CREATE`.
    """
    flavor: str
    action: str
    key: str
    value: str

    def row(self):
        return (self.flavor, self.action, self.key, self.value)


def plan(spec, current):
    """Changes that turn ``current`` into ``spec``.

    :param spec: :class:`nvlink_placement.flavors.generate.FlavorSpec`.
    :param current: None (no such flavor) or a dict with ``vcpus, ram,
        disk, extra_specs``.
    :returns: list of :class:`Change`.
    :raises NvlinkError: when vCPUs, RAM or disk differ.
    """
    changes = []
    if current is None:
        changes.append(Change(spec.name, CREATE, '', 'vcpus=%d ram=%d disk=%d'
                              % (spec.vcpus, spec.ram, spec.disk)))
        existing = {}
    else:
        differ = ['%s %s, not %s' % (f, current[f], getattr(spec, f))
                  for f in ('vcpus', 'ram', 'disk')
                  if current[f] != getattr(spec, f)]
        if differ:
            raise errors.NvlinkError(
                'flavor %s exists with %s; Nova flavors cannot be changed: '
                'delete it (running servers keep their copy) or choose '
                'another --name-template' % (spec.name, ', '.join(differ)))
        existing = current['extra_specs']
    for key, value in spec.extra_specs.items():
        if existing.get(key) != value:
            changes.append(Change(spec.name, SET, key, value))
    for key in sorted(existing):
        if MANAGED.match(key) and key not in spec.extra_specs:
            changes.append(Change(spec.name, UNSET, key, existing[key]))
    return changes


def _as_dict(flavor):
    return {'name': flavor.name, 'vcpus': flavor.vcpus, 'ram': flavor.ram,
            'disk': flavor.disk, 'ephemeral': flavor.ephemeral or 0,
            'swap': flavor.swap or 0,
            'extra_specs': dict(flavor.extra_specs or {})}


def read(connection, name):
    """The flavor ``name`` as a dict (see :func:`request.flavor_from_dict`).

    :raises NvlinkError: when there is no such flavor.
    """
    flavor = connection.compute.find_flavor(name, ignore_missing=True,
                                            get_extra_specs=True)
    if flavor is None:
        raise errors.NvlinkError('no flavor named %r in the compute API'
                                 % name)
    return _as_dict(flavor)


def apply(connection, specs, dry_run=False):
    """Create or update ``specs`` (list of ``FlavorSpec``).

    :returns: list of :class:`Change` (applied, or planned on a dry run).
    """
    found, changes = {}, []
    for spec in specs:
        flavor = connection.compute.find_flavor(
            spec.name, ignore_missing=True, get_extra_specs=True)
        found[spec.name] = flavor
        changes += plan(spec, None if flavor is None else _as_dict(flavor))
    if dry_run:
        return changes
    for spec in specs:
        mine = [c for c in changes if c.flavor == spec.name]
        flavor = found[spec.name]
        if any(c.action == CREATE for c in mine):
            flavor = connection.compute.create_flavor(
                name=spec.name, vcpus=spec.vcpus, ram=spec.ram,
                disk=spec.disk)
        values = {c.key: c.value for c in mine if c.action == SET}
        if values:
            connection.compute.create_flavor_extra_specs(flavor, values)
        for change in mine:
            if change.action == UNSET:
                connection.compute.delete_flavor_extra_specs_property(
                    flavor, change.key)
    return changes
