"""Shapes the other test topologies lack, and what must come of them.

``tests/fixtures/misc/edges.yaml``: two HGX H100 hosts wired identically
(``nova-config`` merges hosts with the same entries into one row, so a
bug that serves only the first of them passes on topologies without such
a pair). The expected entries are written out by hand here from the
board's NVLink domains (:data:`tests.novalike.BOARD_MEMBERS`), not
computed by the code under test. ``mixed-01`` holds two GPU classes
(PCIe H100 and A100 cards, bridge pairs of each): what is counted for
one class must not count the other. New features' tests should meet
these hosts too.
"""

import json
import os

from tests import novalike

TOPOLOGY = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        'fixtures', 'misc', 'edges.yaml')
VENDOR_ID, PRODUCT_ID = '10de', '2330'
TWINS = ('twin-01', 'twin-02')
#: The twins' board map: address -> module id (the same on both).
TWIN_BOARD = dict(novalike.BOARD1)


def twin_device_spec():
    """Each twin's whole ``[pci] device_spec``, in Nova's order.

    One entry per GPU, by PCI address, with its member traits; then the
    generic entry: 9 entries, as dicts.
    """
    entries = [{'vendor_id': VENDOR_ID, 'product_id': PRODUCT_ID,
                'address': address,
                'traits': ','.join(novalike.BOARD_MEMBERS[novalike.H100][
                    TWIN_BOARD[address]])}
               for address in sorted(TWIN_BOARD)]
    return entries + [{'vendor_id': VENDOR_ID, 'product_id': PRODUCT_ID}]


def ini_entries(text):
    """``device_spec`` entries (dicts) of an INI file, in order."""
    return [json.loads(line.split(' = ', 1)[1])
            for line in text.splitlines()
            if line.startswith('device_spec = ')]


MIXED = 'mixed-01'
H100_PCIE_RC, A100_RC = 'CUSTOM_PCI_10DE_2331', 'CUSTOM_PCI_10DE_20B5'
#: mixed-01's GPUs by class, and its bridge pairs.
MIXED_GPUS = {
    H100_PCIE_RC: ('0000:17:00.0', '0000:31:00.0', '0000:4b:00.0',
                   '0000:65:00.0'),
    A100_RC: ('0000:98:00.0', '0000:b1:00.0', '0000:ca:00.0',
              '0000:e3:00.0'),
}
MIXED_PAIRS = (('0000:17:00.0', '0000:31:00.0'),
               ('0000:4b:00.0', '0000:65:00.0'),
               ('0000:98:00.0', '0000:b1:00.0'),
               ('0000:ca:00.0', '0000:e3:00.0'))
