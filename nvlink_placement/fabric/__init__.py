"""Fabric Manager access, for the hook and the host commands alike.

Below both :mod:`nvlink_placement.hook` and
:mod:`nvlink_placement.discovery`, which import it; it imports neither.
One module per concept:

- :mod:`.client`: the client, libnvfm through ctypes (connect, supported
  partitions, activate, deactivate), and the partitions it answers with;
- :mod:`.access`: a checked client, and the partitions read within a
  deadline (what the host commands use);
- :mod:`.deadline`: work that may hang run in a child process, killed at
  a deadline;
- :mod:`.library`: is a file libnvfm? (from the ELF file, not loading it);
- :mod:`.trust`: which files a process running as root may trust (owner
  and mode checks) before it reads or loads them.

Standard library only (and the standard-library-only
:mod:`nvlink_placement.errors` and :mod:`nvlink_placement.topology.pci`):
it runs on a bare compute node.
"""
