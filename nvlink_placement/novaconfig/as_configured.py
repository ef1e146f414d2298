"""A snapshot as Nova will report it once it runs ``nova-config``'s entries.

Pure: from a snapshot dict and a topology to a new snapshot dict and a
report. Models one thing: every nova-compute of the topology restarted
with the ``[pci] device_spec`` entries ``openstack nvlink nova-config
--topology T --host H`` prints for it. Nova then rewrites the traits of
each of its PCI providers from the first entry the device matches
(:mod:`nvlink_placement.novaconfig.devicespec`; ``nova/compute/
pci_placement_translator.py``: the entry's traits, then ``OWNER_NOVA``).
The entries are the printed ones, parsed: whatever ``nova-config``
prints is what this models.

Nothing else changes: uuids, names, parents, inventories, generations,
aggregates, allocations and every provider outside the topology's Nova
PCI providers stay as they are. A PCI provider no entry matches (a GPU
the topology excludes, or one it does not list) keeps its traits and is
reported: after the restart Nova would report no provider for it.
"""

import copy
import dataclasses
import re

from nvlink_placement import errors
from nvlink_placement.novaconfig import devicespec
from nvlink_placement.novaconfig import settings as novaconfig
from nvlink_placement.placement import naming
from nvlink_placement.placement import nova_tree
from nvlink_placement.placement import snapshot
from nvlink_placement.topology import pci

OWNER_NOVA = 'OWNER_NOVA'
#: Any alias: it names no device_spec entry.
_ALIAS = 'gpu'
_RC_IDS = re.compile(r'^CUSTOM_PCI_([0-9A-F]{4})_([0-9A-F]{4})$')


@dataclasses.dataclass
class HostReport:
    """What :func:`apply` did to one host's PCI providers.

    :ivar host: topology host name.
    :ivar providers: Nova PCI providers found in the snapshot.
    :ivar changed: providers whose traits changed.
    :ivar added: dict provider name -> sorted traits added.
    :ivar removed: dict provider name -> sorted traits removed.
    :ivar unmatched: names of providers no entry matches (unchanged).
    :ivar notes: other findings, one sentence each.
    """
    host: str
    providers: int = 0
    changed: int = 0
    added: dict = dataclasses.field(default_factory=dict)
    removed: dict = dataclasses.field(default_factory=dict)
    unmatched: list = dataclasses.field(default_factory=list)
    notes: list = dataclasses.field(default_factory=list)

    def line(self):
        """One line for standard error."""
        traits = sorted({t for ts in self.added.values() for t in ts})
        text = '%s: %d of %d GPU provider(s) given traits' % (
            self.host, len(self.added), self.providers)
        if traits:
            text += ' (%d new: %s)' % (len(traits), ', '.join(traits))
        if self.removed:
            gone = sorted({t for ts in self.removed.values() for t in ts})
            text += '; removed from %d: %s' % (len(self.removed),
                                               ', '.join(gone))
        if self.unmatched:
            text += ('; NO device_spec entry matches %s: Nova will report '
                     'no provider for %s (left as is here)' % (
                         ', '.join(self.unmatched),
                         'it' if len(self.unmatched) == 1 else 'them'))
        for note in self.notes:
            text += '; ' + note
        return text


def _ids_from_rc(resource_class):
    match = _RC_IDS.match(resource_class or '')
    return (match.group(1).lower(), match.group(2).lower()) if match \
        else (None, None)


#: Ids to print and match entries with when neither the topology nor the
#: resource class gives a GPU's (any pair works: both sides use it).
_STAND_IN_IDS = ('ffff', 'ffff')


def from_topology(topology, hosts=(), resource_class=None, **sizes):
    """The flat trees Nova reports for ``hosts``, configured.

    :func:`nova_tree.from_topology` with each GPU provider given the
    traits of the ``device_spec`` entries ``nova-config`` prints for its
    host (:func:`apply`; GPUs without vendor and device ids are matched
    by address). What ``snapshot --from-topology`` writes.

    :returns: a validated snapshot dict with no allocations.
    :raises NvlinkError: as :func:`nova_tree.from_topology`.
    """
    document = nova_tree.from_topology(topology, hosts, resource_class,
                                       **sizes)
    names = [h.name for h in topology.select(hosts)]
    document, _, _ = apply(document, topology, names,
                           assume_ids=_STAND_IN_IDS)
    snapshot.validate(document, topology.source)
    return document


def host_entries(topology, host, vendor_id=None, product_id=None):
    """The ``device_spec`` values ``nova-config --host HOST`` prints.

    :returns: list of str (JSON), in the printed order.
    :raises NvlinkError: as ``nova-config`` does (no ids, bad topology).
    """
    rows = novaconfig.settings(
        topology.select([host]), _ALIAS, vendor_id=vendor_id,
        product_id=product_id, trait_prefix=topology.trait_prefix)
    return novaconfig.host_device_specs(rows, [host])[host]


def _trees(document):
    """dict root name -> list of provider dicts of that tree."""
    by_uuid = {rp['uuid']: rp for rp in document['resource_providers']}
    roots = {}

    def root_of(rp):
        seen = 0
        while rp.get('parent_provider_uuid') and seen < 64:
            rp = by_uuid.get(rp['parent_provider_uuid'], rp)
            seen += 1
        return rp
    for rp in document['resource_providers']:
        roots.setdefault(root_of(rp)['name'], []).append(rp)
    return roots


def _device_ids(gpu, rp):
    """``(vendor_id, product_id)`` of the device behind ``rp``."""
    if gpu is not None and gpu.details.get('vendor_id') and \
            gpu.details.get('device_id'):
        return (gpu.details['vendor_id'].lower(),
                gpu.details['device_id'].lower())
    for rc in rp.get('inventories', {}):
        ids = _ids_from_rc(rc)
        if ids[0]:
            return ids
    return None, None


def _fallback_ids(trees, host):
    """Ids from the ``CUSTOM_PCI_<V>_<P>`` class of the host's GPUs.

    Of the PCI providers at the topology's GPU addresses (another device
    passed through has other ids).
    """
    names = {pci.nova_provider_name(host.name, a) for a in host.gpus}
    found = {_ids_from_rc(rc) for rp in trees.get(host.name, ())
             if rp['name'] in names
             for rc in rp.get('inventories', {})}
    found.discard((None, None))
    return sorted(found)[0] if len(found) == 1 else (None, None)


def apply(document, topology, hosts=(), assume_ids=None):
    """The snapshot with each host's PCI providers as Nova will trait them.

    :param document: a validated snapshot dict (not changed).
    :param topology: :class:`nvlink_placement.topology.model.Topology`.
    :param hosts: topology host names (all when empty).
    :param assume_ids: ``(vendor_id, product_id)`` for GPUs whose ids
        neither the topology nor a ``CUSTOM_PCI_<V>_<P>`` resource class
        gives: the entries are then printed and matched with them, which
        amounts to matching by address alone.
    :returns: ``(new document, [HostReport, ...], [message, ...])``; the
        messages name snapshot trees the topology does not have (left as
        they are).
    :raises NvlinkError: an unknown host, or entries ``nova-config``
        cannot print for a host.
    """
    selected = topology.select(hosts)
    result = copy.deepcopy(document)
    trees = _trees(result)
    reports = []
    for host in selected:
        report = HostReport(host.name)
        reports.append(report)
        if host.name not in trees:
            report.notes.append('no tree of this name in the snapshot')
            continue
        has_ids = any(g.details.get('vendor_id') and g.details.get(
            'device_id') for g in host.gpus.values())
        vendor, product = (None, None) if has_ids else _fallback_ids(
            trees, host)
        assumed = not has_ids and vendor is None and assume_ids
        if assumed:
            vendor, product = assume_ids
        try:
            entries = devicespec.parse(
                host_entries(topology, host.name, vendor, product),
                'nova-config --host %s device_spec' % host.name)
        except errors.NvlinkError as exc:
            raise errors.NvlinkError('%s: host %s: %s'
                                     % (topology.source, host.name, exc))
        for rp in trees[host.name]:
            if naming.PCI_TRAIT not in rp.get('traits', ()):
                continue
            address = pci.address_of_provider(host.name, rp['name'])
            if address is None:
                report.notes.append('%s is not named <host>_<PCI address>, '
                                    'left as is' % rp['name'])
                continue
            report.providers += 1
            gpu = host.gpus.get(address)
            ids = assume_ids if assumed else _device_ids(gpu, rp)
            entry = devicespec.first_match(entries, address, *ids)
            if entry is None:
                report.unmatched.append(rp['name'])
                continue
            if gpu is not None and gpu.excluded:
                report.notes.append(
                    '%s: the topology excludes this GPU (%s) but entry %s '
                    'matches it: Nova passes it through' % (
                        rp['name'], gpu.excluded, entry.text))
            old = set(rp.get('traits', ()))
            new = entry.traits() | (old & {OWNER_NOVA})
            if new != old:
                report.changed += 1
                if new - old:
                    report.added[rp['name']] = sorted(new - old)
                if old - new:
                    report.removed[rp['name']] = sorted(old - new)
                rp['traits'] = sorted(new)
            rc = entry.tags.get('resource_class')
            if rc and rc.upper() not in {c.upper() for c in
                                         rp.get('inventories', {})}:
                report.notes.append(
                    '%s: the entry names resource class %s, the provider '
                    'has %s (Nova would change the inventory; left as is)'
                    % (rp['name'], rc, ', '.join(rp.get('inventories', {}))))
    known = set(topology.hosts)
    others = sorted(
        name for name, rps in trees.items() if name not in known and
        any(naming.PCI_TRAIT in rp.get('traits', ()) for rp in rps))
    messages = []
    if others:
        messages.append('%d tree(s) with Nova PCI providers are not in %s, '
                        'left as they are: %s' % (
                            len(others), topology.source, ', '.join(others)))
    return result, reports, messages
