"""Flavors in Nova's compute API, through an openstacksdk connection.

:func:`plan` (pure) compares a generated flavor with the one Nova has;
:func:`apply` reads every flavor first, plans all changes (any conflict
stops it before a write), then creates flavors and sets or unsets extra
specs. Only differing extra specs are written, and only the keys this
tool manages (:data:`MANAGED`) are ever removed, so an operator's own
keys (``hw:*``, ``quota:*`` ...) stay. Nova flavors cannot change vCPUs,
RAM or disk; a flavor that differs there is a conflict.

Extra specs are written at compute API microversion
:data:`EXTRA_SPECS_MICROVERSION` (2.86), where Nova validates known keys
(``nova/api/openstack/compute/flavors_extraspecs.py``; 2.86 is new in
Nova 21). openstacksdk would send 2.61 (its ``Flavor`` resource's
maximum), where Nova stores anything: upstream Nova would then keep a
named-alias value ``A:N:P`` and fail every boot of that flavor with HTTP
500 (``get_pci_requests_from_flavor``: too many values to unpack).
At 2.86 upstream Nova refuses it with HTTP 400 (its
``pci_passthrough:alias`` pattern is ``[^:]+:\\d+(,...)``), which
:func:`apply` reports, deleting a flavor it created in the same run.
``placement:*`` keys are in no namespace Nova validates and are stored
as they are.
"""

import dataclasses
import re

from keystoneauth1 import exceptions as ks_exc
from openstack import exceptions as sdk_exc

from nvlink_placement import errors
from nvlink_placement.flavors import generate

COLUMNS = ('flavor', 'action', 'key', 'value')
CREATE = 'create-flavor'
SET = 'set-property'
UNSET = 'unset-property'
EXTRA_SPECS_MICROVERSION = '2.86'
# Extra spec keys written by flavor generate (design.rst s6).
MANAGED = re.compile(r'^(pci_passthrough:alias|placement:same_subtree|'
                     r'placement:group_policy|trait_nvl[0-9]+:.+|'
                     r'trait_[^:]+-[0-9]+:.+_MEMBER[0-9]+)$')


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
    """The flavor ``name`` as a dict (see :func:`inputs.flavor_from_dict`).

    :raises NvlinkError: when there is no such flavor.
    """
    flavor = connection.compute.find_flavor(name, ignore_missing=True,
                                            get_extra_specs=True)
    if flavor is None:
        raise errors.NvlinkError('no flavor named %r in the compute API'
                                 % name)
    return _as_dict(flavor)


def max_microversion(connection):
    """The compute API's maximum microversion, ``(2, minor)``, or None.

    From the endpoint's version document (keystoneauth discovery); None
    when the endpoint is not a compute API v2.1.

    :raises keystoneauth1.exceptions.ClientException,
        openstack.exceptions.SDKException: when it cannot be read.
    """
    data = connection.compute.get_endpoint_data()
    if data is None or not data.max_microversion or tuple(
            data.api_version or (0,))[:1] != (2,):
        return None
    return tuple(data.max_microversion[:2])


def _validating(connection):
    """Refuse a compute API that cannot validate extra specs."""
    try:
        version = max_microversion(connection)
    except (ks_exc.ClientException, sdk_exc.SDKException) as exc:
        raise errors.NvlinkError('cannot read the compute API version: %s'
                                 % exc)
    wanted = tuple(int(p) for p in EXTRA_SPECS_MICROVERSION.split('.'))
    if version is not None and version < wanted:
        raise errors.NvlinkError(
            'the compute API stops at microversion %d.%d: flavor extra '
            'specs are validated from %s on (Nova 21), and this tool does '
            'not write specs Nova would not check. Nothing was written.'
            % (version + (EXTRA_SPECS_MICROVERSION,)))


def _set_extra_specs(connection, flavor, values):
    """POST extra specs at 2.86; returns None or Nova's refusal."""
    response = connection.compute.post(
        '/flavors/%s/os-extra_specs' % flavor.id,
        json={'extra_specs': values},
        microversion=EXTRA_SPECS_MICROVERSION, raise_exc=False)
    if response.status_code < 400:
        return None
    try:
        body = response.json()
        detail = next(iter(body.values()))['message']
    except (ValueError, TypeError, KeyError, StopIteration, AttributeError):
        detail = response.text
    return 'HTTP %d: %s' % (response.status_code, detail)


def _refusal(spec, detail, created, written):
    message = ('Nova refused the extra specs of flavor %s at compute API '
               'microversion %s (%s).' % (spec.name, EXTRA_SPECS_MICROVERSION,
                                          detail))
    if generate.ALIAS_KEY in spec.extra_specs and len(
            spec.extra_specs[generate.ALIAS_KEY].split(':')) > 2:
        message += (
            ' Upstream Nova accepts only alias:count in %s; the named-alias '
            '(alias:count:prefix) NVLink-domain flavors need a Nova with '
            'the MOSK extension, or upstream Nova 29.4.0, 31.3.1, 33.0.2 '
            'or 34.0.0 with the nova-patches/ series of nvlink-placement. '
            'On upstream Nova '
            'generate with --dialect upstream (1-GPU and whole-host flavors '
            'only).'
            % generate.ALIAS_KEY)
    if created:
        message += ' Flavor %s, created by this run, was deleted again.' % (
            spec.name)
    message += (' Already written: %s.' % ', '.join(written) if written
                else ' Nothing else was written.')
    return message


@dataclasses.dataclass
class Progress:
    """How far :func:`apply` got; read after it was interrupted.

    :ivar planned: names of the flavors to write, in write order.
    :ivar made: the :class:`Change` list of the flavors written in full.
    """
    planned: list = dataclasses.field(default_factory=list)
    made: list = dataclasses.field(default_factory=list)


def apply(connection, specs, dry_run=False, stop=None, progress=None):
    """Create or update ``specs`` (list of ``FlavorSpec``).

    Named-alias flavors are written first, so a Nova that refuses them
    (upstream) stops the run before any other flavor is written; a flavor
    this run created is deleted again when Nova refuses its extra specs.

    :param stop: a ``threading.Event`` (SIGINT, SIGTERM, see
        :mod:`nvlink_placement.interrupt`) checked before each flavor: a
        flavor begun is written in full (created with all its extra
        specs), the next one is not begun.
    :param progress: a :class:`Progress` to fill, or None.
    :returns: list of :class:`Change` (applied, or planned on a dry run).
    :raises NvlinkError: when the compute API cannot validate extra specs
        (older than 2.86) or refuses them, saying what was written.
    :raises Interrupted: ``stop`` was set; ``progress`` says what was
        written.
    """
    found, changes = {}, []
    for spec in specs:
        flavor = connection.compute.find_flavor(
            spec.name, ignore_missing=True, get_extra_specs=True)
        found[spec.name] = flavor
        changes += plan(spec, None if flavor is None else _as_dict(flavor))
    if dry_run or not changes:
        return changes
    _validating(connection)
    progress = progress or Progress()
    ordered = sorted(specs, key=lambda s: s.kind != generate.DOMAIN)
    progress.planned[:] = [s.name for s in ordered
                           if any(c.flavor == s.name for c in changes)]
    written = []
    for spec in ordered:
        mine = [c for c in changes if c.flavor == spec.name]
        if not mine:
            continue
        if stop is not None and stop.is_set():
            raise errors.Interrupted()
        flavor = found[spec.name]
        created = any(c.action == CREATE for c in mine)
        if created:
            flavor = connection.compute.create_flavor(
                name=spec.name, vcpus=spec.vcpus, ram=spec.ram,
                disk=spec.disk)
        values = {c.key: c.value for c in mine if c.action == SET}
        refused = values and _set_extra_specs(connection, flavor, values)
        if refused:
            if created:
                connection.compute.delete_flavor(flavor)
            raise errors.NvlinkError(_refusal(spec, refused, created,
                                              written))
        for change in mine:
            if change.action == UNSET:
                connection.compute.delete_flavor_extra_specs_property(
                    flavor, change.key)
        written.append(spec.name)
        progress.made.extend(mine)
    return changes
