"""What Nova's NUMATopologyFilter leaves of a GPU boot's candidates.

Pure. The ``flat-numa`` layout of ``simulate`` is the best an unmodified
cloud can do: upstream flavors (``pci_passthrough:alias=A:N``) with the
NUMA extra specs ``openstack nvlink nova-config`` advises
(:func:`nvlink_placement.novaconfig.settings.numa_advice`): a size whose
NVLink domains each sit on one NUMA node gets ``hw:numa_nodes=1`` and
``hw:pci_numa_affinity_policy=required``; a size whose domains span nodes
gets ``hw:numa_nodes=k`` and ``preferred``.

The NUMA node of each GPU is the topology's ``numa_node`` (what host
inspection records from sysfs, and what ``nova-config`` reads).

Nova 34.0.0: ``NUMATopologyFilter.host_passes`` keeps the allocation
candidates for which ``hardware.numa_fit_instance_to_host`` fits the
guest's NUMA cells onto the host's with the candidate's
``provider_mapping`` (``BaseHostFilter.filter_candidates``), and fails the
host when none is left. With one guest cell and the ``required`` policy
the PCI devices of the request must all come from pools of the host cell
the guest cell lands on (``nova/pci/stats.py``
``_filter_pools_for_numa_cells``: pools on other cells, and pools whose
NUMA node is unknown, are dropped). Modelled (:func:`accepts`): a
candidate passes when all its GPUs are on one known NUMA node. The
``preferred`` policy never refuses a device: not filtered. Not modelled:
whether the flavor's vCPUs and memory fit the free part of that one host
cell (the GPU flavors of ``flavor generate`` take a fraction of a socket).
"""

from nvlink_placement import errors
from nvlink_placement.novaconfig import settings as novaconfig

NUMA_NODES = 'hw:numa_nodes'
POLICY = 'hw:pci_numa_affinity_policy'
REQUIRED = 'required'


def extra_specs(hosts, sizes):
    """``nova-config``'s NUMA extra specs for each size.

    :returns: dict size -> dict of extra specs (empty for a size
        ``nova-config`` gives no NUMA advice, e.g. one GPU on a host
        without NVLink domains of that size).
    :raises NvlinkError: no GPU of the hosts has a known NUMA node.
    """
    specs = {size: {row.option: row.value for row in
                    novaconfig.numa_advice(hosts, [size])}
             for size in sizes}
    if not any(specs.values()):
        raise errors.NvlinkError(
            'the flat-numa layout needs the GPUs\' NUMA nodes: the topology '
            'has no numa_node for the GPUs of %s (host inspection records '
            'it: openstack nvlink host inspect)'
            % ', '.join(h.name for h in hosts))
    return specs


def required(specs):
    """Whether NUMATopologyFilter keeps the GPUs on one node for ``specs``."""
    return specs.get(NUMA_NODES) == '1' and specs.get(POLICY) == REQUIRED


def node_of(host, address):
    """The NUMA node of a GPU: an int, or None when unknown."""
    node = host.gpus[address].details.get('numa_node')
    if isinstance(node, int) and not isinstance(node, bool):
        return node
    return None


def accepts(host, addresses):
    """Whether a candidate with these GPUs of ``host`` passes (module doc).

    :param addresses: the GPUs' PCI addresses on ``host``.
    """
    nodes = {node_of(host, a) for a in addresses}
    return len(nodes) == 1 and None not in nodes
