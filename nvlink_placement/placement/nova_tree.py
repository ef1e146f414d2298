"""The flat tree Nova would report for a topology's hosts, as a snapshot.

So operators and CI can reshape, verify flavors and size capacity before a
host is racked. What Nova 34.0.0 reports with ``[pci] report_in_placement
= True`` (``nova/virt/libvirt/driver.py`` ``update_provider_tree``,
``nova/compute/resource_tracker.py``, ``nova/compute/
pci_placement_translator.py``; reference/openstack.md):

* the compute node RP, named after the hypervisor hostname, with VCPU
  (``allocation_ratio`` 4.0, ``initial_cpu_allocation_ratio``), MEMORY_MB
  (``reserved`` 512, ``reserved_host_memory_mb``) and DISK_GB, each with
  ``max_unit = total``, and the traits ``COMPUTE_NODE`` and
  ``OWNER_NOVA`` plus the driver's capability traits;
* one child RP per GPU named ``<host>_<PCI ADDRESS upper case>``, with
  ``{RC: {total: 1, max_unit: 1}}`` and the traits
  ``COMPUTE_MANAGED_PCI_DEVICE`` and ``OWNER_NOVA``. The resource class
  is the ``[pci] device_spec`` ``resource_class`` (recorded by host
  inspection as the GPU's ``resource_class``), else
  ``CUSTOM_PCI_<VENDOR>_<PRODUCT>``.

Every inventory field is written out (the form an export has). UUIDs are
derived with uuid5 from the host name and the PCI address, so the output
is reproducible; Nova's own are random.
"""

import uuid

from nvlink_placement import errors
from nvlink_placement import hostnames
from nvlink_placement.placement import naming
from nvlink_placement.placement import snapshot
from nvlink_placement.topology import pci

#: Traits of a Nova 34 compute node RP: COMPUTE_NODE and OWNER_NOVA from
#: the resource tracker, and a few of the libvirt driver's capabilities.
NODE_TRAITS = ('COMPUTE_IMAGE_TYPE_QCOW2', 'COMPUTE_IMAGE_TYPE_RAW',
               'COMPUTE_NODE', 'HW_CPU_X86_AVX2', 'OWNER_NOVA')
#: Traits Nova puts on each PCI RP.
PCI_TRAITS = (naming.PCI_TRAIT, 'OWNER_NOVA')
#: Compute node size of an HGX H100 host (2 x 56-core CPUs with SMT, 2 TiB,
#: 3.5 TB of local disk).
VCPUS = 224
MEMORY_MB = 2063784
DISK_GB = 3500
CPU_ALLOCATION_RATIO = 4.0
RESERVED_HOST_MEMORY_MB = 512


def node_uuid(host):
    """The compute node RP uuid given to ``host`` (uuid5, reproducible)."""
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, host))


def pci_uuid(cn_uuid, address):
    """The PCI RP uuid of ``address`` under compute node ``cn_uuid``."""
    return str(uuid.uuid5(uuid.UUID(cn_uuid), pci.normalize_address(address)))


def _inventory(total, max_unit=None, reserved=0, allocation_ratio=1.0):
    return {'total': total, 'reserved': reserved, 'min_unit': 1,
            'max_unit': total if max_unit is None else max_unit,
            'step_size': 1, 'allocation_ratio': allocation_ratio}


def gpu_resource_class(gpu, default=None):
    """Nova's resource class for ``gpu`` (:class:`model.Gpu`), or default.

    The ``resource_class`` detail, else ``CUSTOM_PCI_<VENDOR>_<PRODUCT>``
    from ``vendor_id`` and ``device_id``, else ``default``.
    """
    details = gpu.details
    if details.get('resource_class'):
        return details['resource_class']
    if details.get('vendor_id') and details.get('device_id'):
        return 'CUSTOM_PCI_%s_%s' % (details['vendor_id'].upper(),
                                     details['device_id'].upper())
    return default


def host_providers(name, addresses, vcpus=VCPUS, memory_mb=MEMORY_MB,
                   disk_gb=DISK_GB, traits=None):
    """The providers Nova reports for one host, as snapshot entries.

    :param addresses: dict PCI address -> resource class.
    :param traits: dict PCI address -> the ``traits`` tag of its
        ``[pci] device_spec`` entry (member traits), added to
        :data:`PCI_TRAITS`.
    :returns: list of :func:`snapshot.provider_entry` dicts, node first.
    """
    traits = traits or {}
    cn = node_uuid(name)
    providers = [snapshot.provider_entry(cn, name, None, {
        'VCPU': _inventory(vcpus, allocation_ratio=CPU_ALLOCATION_RATIO),
        'MEMORY_MB': _inventory(memory_mb, reserved=RESERVED_HOST_MEMORY_MB),
        'DISK_GB': _inventory(disk_gb)}, NODE_TRAITS)]
    for address, rc in sorted(addresses.items(),
                              key=lambda a: pci.address_sort_key(
                                  pci.normalize_address(a[0]))):
        providers.append(snapshot.provider_entry(
            pci_uuid(cn, address), pci.nova_provider_name(name, address),
            cn, {rc: _inventory(1)},
            tuple(sorted(set(PCI_TRAITS) | set(traits.get(address, ()))))))
    return providers


def from_topology(topology, hosts=(), resource_class=None, **sizes):
    """Snapshot of the flat trees Nova reports for ``hosts`` of ``topology``.

    :param hosts: host names (all when empty).
    :param resource_class: class of GPUs whose topology entry names none.
    :param sizes: ``vcpus``, ``memory_mb``, ``disk_gb`` of each node.
    GPUs the topology excludes (vGPU or MIG in use) get no provider:
    they are not passthrough devices, so they are left out of ``[pci]
    device_spec`` (``nova-config``) and Nova reports none for them. Each
    GPU provider has Nova's own traits only, as before any member-trait
    entry: :func:`nvlink_placement.novaconfig.as_configured.from_topology`
    adds those of the entries ``nova-config`` prints.

    :returns: a validated snapshot dict with no allocations.
    :raises NvlinkError: a GPU with no resource class, an unknown host.
    """
    try:
        selected = topology.select(hosts)
    except KeyError as exc:
        name = exc.args[0]
        raise errors.NvlinkError('%s: no host %r in the topology%s' % (
            topology.source, name,
            hostnames.known_hint(name, topology.hosts)))
    providers = []
    missing = []
    for host in selected:
        classes = {}
        for address, gpu in host.gpus.items():
            if gpu.excluded:
                continue
            classes[address] = gpu_resource_class(gpu, resource_class)
            if classes[address] is None:
                missing.append('%s %s' % (host.name, address))
        providers.extend(host_providers(host.name, classes, **sizes))
    if missing:
        raise errors.NvlinkError(
            '%s: no resource class for %s; give --resource-class (Nova '
            'names it CUSTOM_PCI_<VENDOR>_<PRODUCT>, e.g. '
            'CUSTOM_PCI_10DE_2330 for an H100 SXM5)' % (
                topology.source, ', '.join(missing[:5]) + (
                    ' and %d more' % (len(missing) - 5)
                    if len(missing) > 5 else '')))
    document = snapshot.document(providers, {})
    snapshot.validate(document, topology.source)
    return document
