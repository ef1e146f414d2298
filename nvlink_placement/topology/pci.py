"""PCI addresses (BDF) in the forms the kernel, nvidia-smi and Nova use.

The canonical form is the sysfs one, ``dddd:bb:dd.f`` in lower case: the
kernel prints the domain with ``%04x`` (``drivers/pci/probe.c``), so a domain
above 0xffff keeps all its digits and an 8-digit nvidia-smi domain such as
``00000009`` becomes ``0009``. Domains are compared as numbers, never
truncated.
"""

import re

from nvlink_placement import documents

_BDF = re.compile(
    r'^\s*(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):'
    r'(?P<slot>[0-9a-fA-F]{1,2})\.(?P<function>[0-7])\s*$')


# Nova upper-cases the sysfs form (domain %04x, so 4 or more digits).
_NOVA_ADDRESS = re.compile(
    r'^[0-9A-F]{4,8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]$')


def normalize_address(text):
    """Return the sysfs form of a PCI address.

    :param text: ``dddd:bb:dd.f``, ``dddddddd:bb:dd.f`` (nvidia-smi) or
        ``bb:dd.f`` (domain 0), any case.
    :returns: str such as ``0000:4c:00.0``.
    :raises ValueError: if ``text`` is not a PCI address.
    """
    match = _BDF.match(str(text))
    if not match:
        raise ValueError('%s is not a PCI address (expected dddd:bb:dd.f)'
                         % documents.short(text))
    domain = int(match.group('domain') or '0', 16)
    slot = int(match.group('slot'), 16)
    if slot > 0x1f:
        raise ValueError('%s is not a PCI address (device %#x > 0x1f)'
                         % (documents.short(text), slot))
    return '%04x:%02x:%02x.%s' % (domain, int(match.group('bus'), 16), slot,
                                  match.group('function'))


_PCI_ID = re.compile(r'^(?:0[xX])?([0-9a-fA-F]{4})$')


def normalize_id(text):
    """Return a PCI vendor or device id as sysfs and Nova write it.

    Four lower-case hex digits: ``0x10de``, ``10DE`` and ``10de`` all give
    ``10de`` (sysfs shows ``0x10de``; Nova reads the id without the prefix
    and builds ``CUSTOM_PCI_10DE_2330`` from it, and its ``[pci] alias``
    and ``device_spec`` compare ``vendor_id``/``product_id`` with it).

    :raises ValueError: if ``text`` is not a 16-bit hex id.
    """
    match = _PCI_ID.match(str(text).strip())
    if not match:
        raise ValueError('%s is not a PCI id (4 hex digits, e.g. 10de or '
                         '0x10de)' % documents.short(text))
    return '%04x' % int(match.group(1), 16)


#: The largest address fields Nova 34 takes in a ``[pci] device_spec``
#: address and in a device it matches (``nova/pci/devspec.py``
#: ``MAX_DOMAIN``, ``MAX_BUS``, ``MAX_SLOT``, ``MAX_FUNC``).
NOVA_MAX_FIELDS = (('domain', 0xffff), ('bus', 0xff), ('slot', 0x1f),
                   ('function', 0x7))


def nova_refusal(address):
    """Why Nova 34 cannot pass through the GPU at ``address``, or None.

    Nova parses every address of a ``[pci] device_spec`` entry with the
    limits of :data:`NOVA_MAX_FIELDS` and refuses a larger field
    (``PciConfigInvalidSpec``: nova-compute does not start); a device whose
    own address is past them (a PCI domain above 0xffff, behind Intel VMD)
    matches no entry and is skipped (``nova/pci/manager.py``
    ``PciDevTracker._set_hvdevs``), so no entry can make it assignable.

    :param address: canonical address (:func:`normalize_address`).
    :returns: str naming the field, its value and Nova's limit.
    """
    domain, bus, rest = address.split(':')
    slot, function = rest.split('.')
    values = dict(zip(('domain', 'bus', 'slot', 'function'),
                      (domain, bus, slot, function)))
    for field, limit in NOVA_MAX_FIELDS:
        value = int(values[field], 16)
        if value > limit:
            return ('PCI %s %#x is above %#x, the largest Nova accepts '
                    '(nova/pci/devspec.py): Nova cannot pass this GPU '
                    'through' % (field, value, limit))
    return None


def address_sort_key(address):
    """Sort key ordering canonical addresses numerically (domain first)."""
    domain, bus, rest = address.split(':')
    slot, function = rest.split('.')
    return (int(domain, 16), int(bus, 16), int(slot, 16), int(function))


def nova_provider_name(hypervisor_hostname, address):
    """Name Nova gives the resource provider of a PCI device.

    Nova (``nova/compute/pci_placement_translator.py``) names it
    ``<hypervisor_hostname>_<PCI address upper-cased>``.
    """
    return '%s_%s' % (hypervisor_hostname, normalize_address(address).upper())


def address_of_provider(hypervisor_hostname, provider_name):
    """The PCI address a Nova PCI RP name stands for, or None.

    The inverse of :func:`nova_provider_name`: ``compute-01_0000:4C:00.0``
    with host ``compute-01`` gives ``0000:4c:00.0``; any other name
    (group RPs, other hosts' RPs) gives None.
    """
    prefix = hypervisor_hostname + '_'
    if not provider_name.startswith(prefix):
        return None
    rest = provider_name[len(prefix):]
    return normalize_address(rest) if _NOVA_ADDRESS.match(rest) else None
