"""Member traits: each GPU's place in the NVLink domains of each size.

Pure. Why they exist: an N-GPU flavor asks for N separate request groups,
one per GPU. When each group may be any GPU of the host, Placement builds
the product of the groups' providers per host and checks ``same_subtree``
on each full product afterwards (openstack-placement 16.0.0,
``placement/objects/allocation_candidate.py`` ``_merge_candidates``,
``_satisfies_same_subtree``): a free quad comes back 4! = 24 times, an
8-GPU host 8! = 40320 times, and ``max_allocation_candidates`` fills with
permutations of the same GPUs.

With member traits, group ``i`` of an N-GPU flavor may only be a GPU
that is member ``i`` of an N-GPU domain (trait ``<prefix>N_MEMBER<i>``,
e.g. ``CUSTOM_PCI_GROUP4_MEMBER2``). Placement's product per host falls
from ``G^N`` (G GPUs) to ``D^N`` (D domains of size N) and each free
domain is exactly one candidate.

Who writes them: Nova owns the traits of its PCI providers and rewrites
them from the ``traits`` tag of the matching ``[pci] device_spec`` entry
on every provider refresh and restart (``nova/compute/
pci_placement_translator.py`` ``_get_traits_for_dev``), so member traits
come from ``device_spec`` entries per PCI address (``openstack nvlink
nova-config`` prints them); this tool never writes them.

Assignment, per host and size N:

- a domain group of nominal size N holding all N GPUs: member ``i`` is
  the ``i``-th GPU in order of module id (PCI address where module ids are
  unknown). A domain with a GPU missing serves no N-GPU flavor and gives
  none.
- a mesh serving N (any N of its GPUs are linked): the ``k``-th GPU is
  member ``k mod N``. Each candidate is then one GPU of each class: no GPU
  set twice, at the price of the sets holding two GPUs of the same class
  (on a 4-GPU mesh, 4 of the 6 pairs are offered: {0,1} {0,3} {2,1}
  {2,3}). :func:`reachable` and ``capacity`` count by the same rule.
- the whole host (N = its usable GPUs, the whole-host flavor): the
  ``i``-th usable GPU, unless a group already gave size N.

GPUs excluded from NVLink groups get none; size 1 needs none.
"""

import re

from nvlink_placement.topology import pci

SEPARATOR = '_MEMBER'


def member_trait(prefix, size, index):
    """``<prefix><size>_MEMBER<index>``, e.g. ``CUSTOM_PCI_GROUP4_MEMBER2``."""
    return '%s%d%s%d' % (prefix, size, SEPARATOR, index)


def parser(prefix):
    """A function ``trait -> (size, index)`` or None for other traits."""
    pattern = re.compile('^%s([1-9][0-9]*)%s(0|[1-9][0-9]*)$' % (
        re.escape(prefix), SEPARATOR))

    def parse(trait):
        match = pattern.match(trait)
        return (int(match.group(1)), int(match.group(2))) if match else None
    return parse


_ANY = re.compile('^(CUSTOM_[A-Z0-9_]*?)([1-9][0-9]*)%s(0|[1-9][0-9]*)$'
                  % SEPARATOR)


def parse_any(trait):
    """``(prefix, size, index)`` of a member trait of any prefix, or None."""
    match = _ANY.match(trait or '')
    if not match:
        return None
    return match.group(1), int(match.group(2)), int(match.group(3))


def _ordered(host, addresses):
    """``addresses`` by module id (unknown last), then PCI address."""
    def key(address):
        module = host.gpus[address].module_id
        return (module is None, module or 0, pci.address_sort_key(address))
    return sorted(addresses, key=key)


def indexes(host):
    """Each usable GPU's member index per size.

    Per NVLink group, and for the whole host: every usable GPU of the
    host, or, on a host with GPUs of several models, every usable GPU of
    one model (:attr:`~nvlink_placement.topology.model.Gpu.model`).

    :param host: :class:`nvlink_placement.topology.model.Host`.
    :returns: dict address -> dict size -> index (sizes of 2 or more).
    """
    found = {a: {} for a in host.usable()}

    def give(address, size, index):
        found[address].setdefault(size, index)

    for group in host.groups:
        members = _ordered(host, [a for a in group.members if a in found])
        for size in group.sizes:
            if group.mesh:
                for k, address in enumerate(members):
                    give(address, size, k % size)
            elif len(members) == size:
                for i, address in enumerate(members):
                    give(address, size, i)
    # The whole host: its usable GPUs of one model (a host with GPUs of
    # two models has a whole-host set of each; Gpu.model).
    by_model = {}
    for address in found:
        by_model.setdefault(host.gpus[address].model or '', []).append(
            address)
    for addresses in by_model.values():
        usable = _ordered(host, addresses)
        if len(usable) >= 2:
            for i, address in enumerate(usable):
                give(address, len(usable), i)
    return found


def traits(host, prefix):
    """dict usable address -> sorted tuple of its member traits."""
    return {address: tuple(sorted(member_trait(prefix, n, i)
                                  for n, i in sizes.items()))
            for address, sizes in indexes(host).items()}


def reachable(classes, size):
    """How many disjoint ``size``-GPU sets one class each can form.

    :param classes: iterable of the member index (for ``size``) of each
        free GPU of one domain or mesh; None for a GPU without one.
    :returns: ``min`` over the indexes ``0 .. size-1`` of the free GPUs of
        that index: an N-GPU flavor takes one GPU of each.
    """
    counts = [0] * size
    for index in classes:
        if index is not None and 0 <= index < size:
            counts[index] += 1
    return min(counts) if size else 0


def one_of_each(classes, size):
    """True when ``classes`` (indexes of a GPU set) are ``0 .. size-1``."""
    return sorted(classes) == list(range(size))
