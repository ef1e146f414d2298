"""Names this tool writes into Placement, and Nova's that it recognises.

A naming contract (design.rst s4): other tools, monitoring and
earlier releases of this one find the tool's providers and reservations by
these names, so they only ever grow.

- :data:`OWNER_TRAIT` marks every group resource provider this tool
  creates; only providers carrying it are ever deleted.
- :data:`PCI_TRAIT` is the trait Nova puts on its PCI resource providers
  (``nova/compute/pci_placement_translator.py``).
- Reservation markers. ``reshape`` sets ``reserved = total`` on the Nova
  PCI RP of an unhealthy GPU so Placement stops handing it out, and
  releases it when the GPU is healthy again. It must never release a
  reservation it did not make (Nova's one-time-use devices, an operator's
  own). Nova rewrites the traits of its PCI RPs on every refresh, so the
  record cannot live there: it is a marker trait
  ``CUSTOM_NVLINK_RESERVED_<ADDRESS>`` on the GPU's NVLink group RP, which
  only this tool writes. Nova keeps an operator-set ``reserved`` while the
  inventory ``total`` is unchanged (reference/openstack.md).
"""

import re

from nvlink_placement.topology import pci

OWNER_TRAIT = 'CUSTOM_OWNER_NVLINK_PLACEMENT'
PCI_TRAIT = 'COMPUTE_MANAGED_PCI_DEVICE'
MARKER_PREFIX = 'CUSTOM_NVLINK_RESERVED_'
_MARKER = re.compile(r'^CUSTOM_NVLINK_RESERVED_([0-9A-F]+)_([0-9A-F]{2})_'
                     r'([0-9A-F]{2})_([0-7])$')


def marker(address):
    """Reservation marker trait of a PCI address.

    ``0000:4c:00.0`` -> ``CUSTOM_NVLINK_RESERVED_0000_4C_00_0``.
    """
    address = pci.normalize_address(address).upper()
    return MARKER_PREFIX + re.sub('[:.]', '_', address)


def address_of(trait):
    """Canonical PCI address a marker trait stands for, or None."""
    match = _MARKER.match(trait)
    if not match:
        return None
    return pci.normalize_address('%s:%s:%s.%s' % match.groups())
