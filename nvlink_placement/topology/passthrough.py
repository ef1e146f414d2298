"""GPUs of a topology that Nova cannot pass through.

Pure. A GPU whose PCI address is past the limits Nova 34 parses
(:func:`nvlink_placement.topology.pci.nova_refusal`: a PCI domain above
0xffff, as behind Intel VMD) can get no ``[pci] device_spec`` entry: Nova
refuses the entry and nova-compute does not start, and without an entry
Nova skips the device. ``topology validate`` and ``nova-config`` refuse
such a topology, naming each GPU; a GPU marked ``excluded`` is left out of
``[pci] device_spec`` anyway and passes.
"""

from nvlink_placement import documents
from nvlink_placement import errors
from nvlink_placement.topology import pci

REMEDY = ('; move it out of the VMD domain (turn VMD off for its root '
          'port), or mark it "excluded: <reason>" to keep it out of Nova '
          'and of the NVLink groups')


def problems(hosts, source):
    """``(location, message)`` for each GPU Nova cannot pass through.

    :param hosts: :class:`nvlink_placement.topology.model.Host` list.
    :param source: the topology file, named in each location.
    :returns: list in host order, then PCI order; empty when all pass.
    """
    found = []
    for host in hosts:
        for address in sorted(host.gpus, key=pci.address_sort_key):
            if host.gpus[address].excluded:
                continue
            reason = pci.nova_refusal(address)
            if reason:
                found.append(('%s: %s' % (source, documents.keypath(
                    ['hosts', host.name, 'gpus', address])), reason + REMEDY))
    return found


def check(hosts, source):
    """Raise :class:`errors.TopologyError` listing :func:`problems`."""
    found = problems(hosts, source)
    if found:
        raise errors.TopologyError(found)
