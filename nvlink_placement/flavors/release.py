"""What each Nova release puts into its allocation candidates query.

Pure. Facts read in the ``nova`` wheels on PyPI (20.0.0, 21.2.4, 22.0.0
... 33.0.0, 34.0.0; 21.0.0 ships no wheel):

- PCI devices become Placement request groups only with
  ``[filter_scheduler] pci_in_placement`` (``nova/conf/scheduler.py``),
  new in Nova 27.0.0 (2023.1); 26.0.0 reports PCI providers but does not
  schedule with them. Older releases are refused here.
- The disabled-host pre-filter (``compute_status_filter`` in
  ``nova/scheduler/request_filter.py``): Nova 20 wrote
  ``trait:COMPUTE_STATUS_DISABLED=forbidden`` into the flavor, so it went
  into the unsuffixed group (``required=!COMPUTE_STATUS_DISABLED``); from
  Nova 21 it is ``request_spec.root_forbidden``, sent as
  ``root_required=!COMPUTE_STATUS_DISABLED`` (Placement microversion 1.35,
  ``ResourceRequest.to_querystring`` in ``nova/scheduler/utils.py``). Every
  release that schedules PCI devices uses the root form.
- ``owner_nova_filter``, new in Nova 34.0.0 (absent in 33.0.0): when
  ``objects.service.get_minimum_version_all_cells(['nova-compute'])`` is
  at least 73 (``MIN_COMPUTE_VERSION_OWNER_TRAIT``; service version 73 is
  "Report OWNER_NOVA trait on resource providers" in
  ``nova/objects/service.py``), it adds ``OWNER_NOVA`` to
  ``root_required`` and to the required traits of every PCI request group
  (a group whose ``requester_id`` is ``<pci request id>-<i>``). A Nova 34
  nova-compute puts ``OWNER_NOVA`` on its compute node provider
  (``resource_tracker._get_traits``) and on every PCI provider
  (``pci_placement_translator``).
- The query goes out at Placement microversion 1.36
  (``SAME_SUBTREE_VERSION`` in ``nova/scheduler/client/report.py``) since
  Nova 24, so in every release modelled here.
- The compute API's maximum microversion (``_MAX_API_VERSION`` in
  ``nova/api/openstack/api_version_request.py``) per release is
  :data:`MAX_MICROVERSIONS`; a live cloud's value names the release, up
  to releases that share it (which build the same query).

Nova's API does not expose service versions. A compute node provider
without ``OWNER_NOVA`` belongs to a nova-compute older than service
version 73 (or one that has not reported since its upgrade), so a live
check reads that instead.
"""

import dataclasses
import re

from nvlink_placement import errors

OLDEST = 27
DEFAULT = 34
OWNER_FILTER_SINCE = 34
OWNER_SERVICE_VERSION = 73
OWNER_TRAIT = 'OWNER_NOVA'
DISABLED_TRAIT = 'COMPUTE_STATUS_DISABLED'
# Compute API maximum microversion of each release (x.0.0 wheels).
MAX_MICROVERSIONS = {27: (2, 95), 28: (2, 95), 29: (2, 96), 30: (2, 96),
                     31: (2, 100), 32: (2, 100), 33: (2, 103), 34: (2, 104)}
AUTO, ON, OFF = 'auto', 'on', 'off'
OWNER_CHOICES = (AUTO, ON, OFF)

HELP = (
    'Every release since 27 (the first to schedule PCI devices through '
    'Placement) sends root_required=!COMPUTE_STATUS_DISABLED. Nova 34 also '
    'requires OWNER_NOVA on the compute node (root_required) and on every '
    'GPU request group, once every nova-compute runs service version %d '
    'or later (its owner_nova_filter).' % OWNER_SERVICE_VERSION)

_RELEASE = re.compile(r'^(\d+)(\.\d+){0,2}$')


@dataclasses.dataclass(frozen=True)
class NovaQuery:
    """The shape of the query a nova-scheduler of ``release`` sends.

    :ivar release: Nova major version (27 ... 34).
    :ivar owner_filter: whether ``owner_nova_filter`` applies.
    :ivar source: how both were chosen, for messages.
    :ivar pci_traits_in_flavor: ``[filter_scheduler]
        allow_pci_traits_in_flavor`` (MOSK): a flavor's ``trait<S>:``
        keys whose suffix names a PCI request group join that group.
    """
    release: int = DEFAULT
    owner_filter: bool = True
    source: str = 'default Nova %d' % DEFAULT
    pci_traits_in_flavor: bool = True

    @property
    def root_required(self):
        """Required traits of the root provider (sorted)."""
        return (OWNER_TRAIT,) if self.owner_filter else ()

    @property
    def root_forbidden(self):
        return (DISABLED_TRAIT,)

    @property
    def gpu_required(self):
        """Traits every PCI request group requires besides the alias'."""
        return (OWNER_TRAIT,) if self.owner_filter else ()

    def describe(self):
        """One line: release, owner filter, and why."""
        return 'Nova %d query, owner filter %s (%s)' % (
            self.release, 'on' if self.owner_filter else 'off', self.source)


def parse_release(text):
    """``'34'`` or ``'34.0.0'`` -> 34.

    :raises NvlinkError: for anything else or a release older than
        :data:`OLDEST`.
    """
    match = _RELEASE.match(str(text).strip())
    if not match:
        raise errors.NvlinkError(
            '--nova-release %r: expected a Nova version such as 34 or '
            '33.0.2' % (text,))
    release = int(match.group(1))
    if release < OLDEST:
        raise errors.NvlinkError(
            'Nova %d does not schedule PCI devices through Placement '
            '([filter_scheduler] pci_in_placement is new in Nova %d), so no '
            'flavor can ask for an NVLink domain there' % (release, OLDEST))
    return release


def parse_microversion(text):
    """``'2.104'`` -> ``(2, 104)``; None for anything else."""
    match = re.match(r'^(\d+)\.(\d+)$', str(text or '').strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def release_for_microversion(version):
    """Nova releases whose compute API stops at ``version``.

    :param version: ``(2, minor)``.
    :returns: ``(release, label)``: the newest release whose maximum
        microversion is at most ``version`` (newer releases than those
        known count as the newest known), and a label such as ``'Nova 31
        or 32'``; ``(None, label)`` below :data:`OLDEST`.
    """
    known = sorted(r for r, v in MAX_MICROVERSIONS.items() if v <= version)
    if not known:
        return None, 'older than Nova %d' % OLDEST
    newest = known[-1]
    same = [r for r in known if MAX_MICROVERSIONS[r] == MAX_MICROVERSIONS[
        newest]]
    if version > MAX_MICROVERSIONS[max(MAX_MICROVERSIONS)]:
        return newest, 'Nova %d or newer' % newest
    return newest, 'Nova %s' % ' or '.join(map(str, same))


def choose(release=None, owner=AUTO, microversion=None,
           nodes_without_owner=None):
    """The query shape to model, from options and what a live cloud shows.

    :param release: ``--nova-release`` (int) or None.
    :param owner: :data:`AUTO`, :data:`ON` or :data:`OFF`.
    :param microversion: the live compute API's maximum microversion
        (``(2, minor)``) or None (offline, or not found).
    :param nodes_without_owner: names of compute node providers without
        ``OWNER_NOVA`` in the live Placement, or None (offline).
    :returns: :class:`NovaQuery`.
    :raises NvlinkError: when the live compute API is older than
        :data:`OLDEST` and no release was given.
    """
    if release is not None:
        source = '--nova-release %d' % release
    elif microversion is not None:
        release, label = release_for_microversion(microversion)
        if release is None:
            raise errors.NvlinkError(
                'the compute API stops at microversion %d.%d (%s): that Nova '
                'does not schedule PCI devices through Placement; give '
                '--nova-release if nova-scheduler runs a newer release'
                % (microversion + (label,)))
        source = 'compute API maximum microversion %d.%d: %s' % (
            microversion + (label,))
    else:
        release, source = DEFAULT, 'default Nova %d' % DEFAULT
    if owner != AUTO:
        return NovaQuery(release, owner == ON,
                         '%s; --owner-filter %s' % (source, owner))
    if release < OWNER_FILTER_SINCE:
        return NovaQuery(release, False, source)
    if nodes_without_owner:
        shown = ', '.join(sorted(nodes_without_owner)[:5])
        more = len(nodes_without_owner) - 5
        return NovaQuery(release, False, '%s; compute node provider(s) %s%s '
                         'lack %s: some nova-compute is older than service '
                         'version %d' % (source, shown, ' and %d more' % more
                                         if more > 0 else '', OWNER_TRAIT,
                                         OWNER_SERVICE_VERSION))
    if nodes_without_owner is not None:
        source += '; every compute node provider carries %s' % OWNER_TRAIT
    return NovaQuery(release, True, source)
