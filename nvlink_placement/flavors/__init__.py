"""Flavors for NVLink-domain subtrees (design.rst s6).

Pure logic, no I/O except in :mod:`.inputs` (the operator's files),
:mod:`.verify` (Placement reads) and :mod:`.compute` (compute API):

- :mod:`.generate`: flavor specs (size, extra specs) from a topology, in
  the ``mosk`` or ``upstream`` dialect.
- :mod:`.inputs`: the files the operator hands us, the ``[pci] alias``
  configuration and the flavors file, read and validated.
- :mod:`.aliases`: the GPU classes (resource classes) of a topology and
  which ``[pci] alias`` names each.
- :mod:`.request`: the ``GET /allocation_candidates`` query Nova builds
  from a flavor and its ``[pci] alias`` values.
- :mod:`.release`: what differs in that query between Nova releases
  (``root_required``, Nova 34's owner filter), and how a live cloud
  tells its release.
- :mod:`.judge`: check every allocation request of that query's answer
  against the topology's NVLink domains (pure).
- :mod:`.verify`: run that query and read from Placement what
  :mod:`.judge` needs.
- :mod:`.compute`: create or update flavors through the compute API
  (extra specs at microversion 2.86, validated by Nova).

Nova's configuration (the settings, ``[pci] device_spec`` matching, the
deployment tools' files, the as-configured model, the rollout order) is
:mod:`nvlink_placement.novaconfig`, one layer above.
"""
