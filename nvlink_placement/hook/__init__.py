"""The libvirt qemu hook that activates Fabric Manager partitions.

In the Shared NVSwitch model a VM's GPUs talk over NVLink only once Fabric
Manager has activated the partition made of exactly those GPUs. The hook
``nvlink-partition-hook`` (:mod:`nvlink_placement.cmd.partition_hook`)
does that when libvirt prepares a guest and undoes it when libvirt has
released it. One module per concept:

- :mod:`.domain`: the PCI devices of a libvirt domain XML;
- :mod:`.partitions`: matching a VM's GPUs to a partition, the nearest
  partitions, overlapping active partitions, the partition listing (pure);
- :mod:`.lock`: the host-local lock that serializes hooks;
- :mod:`.config`: the configuration file and environment overrides;
- :mod:`.listing`: this host's partitions for ``host partitions``;
- :mod:`.activation`: activation, deactivation and the failure policy.

Fabric Manager itself (its client, the child process with its deadline,
the library and trust checks) is :mod:`nvlink_placement.fabric`. Like
host discovery, everything here imports only the standard library
and the standard-library-only parts of nvlink_placement: it runs on a
bare compute node.
"""
