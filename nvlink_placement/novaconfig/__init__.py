"""Nova's configuration for the reshaped tree (design.rst s6).

What it reads: the topology (and, for the as-configured model, a
snapshot). What it writes: settings and the files deployment tools read.
What it models: how Nova matches ``[pci] device_spec`` entries and what
its nova-compute then reports to Placement. Pure logic, no I/O but
:func:`.rollout.unreported` (one Placement read; the command reads the
operator's files for :mod:`.keep`):

- :mod:`.settings`: the Nova and Placement settings to pair with the
  reshaped tree and the flavors of :mod:`nvlink_placement.flavors`.
- :mod:`.devicespec`: which ``device_spec`` entry a GPU matches, and the
  traits Nova gives its provider.
- :mod:`.layouts`: those settings as the files kolla-ansible,
  OpenStack-Ansible or oslo.config drop-in folders read.
- :mod:`.keep`: what the operator already has in a deployment tool's
  tree (their entries, aliases and filters, and which files this tool
  wrote), from the texts of those files, for :mod:`.layouts`.
- :mod:`.as_configured`: a snapshot as Nova reports it once it runs the
  printed entries.
- :mod:`.rollout`: the rollout order, checked before flavors are
  created.
"""
