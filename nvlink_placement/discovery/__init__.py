"""Host-side topology discovery: what `nvlink-host-inspect` reads.

One module per source: :mod:`.sysfs` (PCI devices), :mod:`.nvidia_smi`
(``nvidia-smi -q``), :mod:`.topo_matrix` (``nvidia-smi topo -m``),
:mod:`.fm_partitions` (``fmpm -l`` JSON, and Fabric Manager partitions as
NVLink groups; FM itself is asked through :mod:`nvlink_placement.fabric`),
:mod:`.module_ids`
(the BDF -> module id mapping file), :mod:`.health` (per-GPU health rules)
and :mod:`.inspect`, which combines them into one host fragment.

Everything here runs on a compute node where only PyYAML is installed: it
imports the standard library, PyYAML and the standard-library-only modules
``nvlink_placement.topology.pci/laminar/boards``,
``nvlink_placement.errors``, ``nvlink_placement.documents`` and
``nvlink_placement.fabric``, nothing else.
"""
