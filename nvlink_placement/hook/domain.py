"""The PCI devices a libvirt domain passes through, from its XML.

libvirt gives the qemu hook the full domain XML on standard input
(libvirt ``docs/hooks.rst``, "Script arguments"). A PCI passthrough device
is a ``<devices><hostdev mode='subsystem' type='pci'>`` whose host address
is its ``<source><address domain= bus= slot= function=/>`` (libvirt
``docs/formatdomain.rst``, "Host device assignment"); an ``<address>``
directly under ``<hostdev>`` is where the guest sees the device, not the
host device. libvirt reads the four numbers as C ``strtoul`` with base 0
(``virPCIDeviceAddressParseXML``: ``0x`` hexadecimal, a leading ``0``
octal, else decimal; a missing one is 0), checks bus <= 0xff, slot <=
0x1f, function <= 7, and writes them back in hexadecimal
(``domain='0x0000' bus='0x19' slot='0x00' function='0x0'``).

Mediated devices (``type='mdev'``, vGPUs), USB and SCSI host devices and
``<interface type='hostdev'>`` (SR-IOV NICs) are not whole GPUs passed
through and are not returned.

The XML is read as bytes: the parser (expat) honours its encoding
declaration and byte-order mark, and text that is not in its encoding is
an XML error like any other. What the XML says goes into log lines, so
the guest name is escaped (:func:`printable`): a name with a newline
cannot forge a line of the hook's log.
"""

import collections
import re
import xml.etree.ElementTree as ElementTree

from nvlink_placement import documents
from nvlink_placement import errors
from nvlink_placement.topology import pci

Domain = collections.namedtuple('Domain', 'name pci_addresses')
Domain.__doc__ = """A guest as its XML describes it.

:ivar name: ``<name>``, escaped by :func:`printable`.
:ivar pci_addresses: host addresses (sysfs form) of the PCI devices passed
    through, in address order, each once.
"""

# Limits of virPCIDeviceAddressIsValid (the domain is an unsigned int).
_LIMITS = (('domain', 0xffffffff), ('bus', 0xff), ('slot', 0x1f),
           ('function', 7))
_C_NUMBER = re.compile(r'^(?:0[xX](?P<hex>[0-9a-fA-F]+)|(?P<oct>0[0-7]*)|'
                       r'(?P<dec>[1-9][0-9]*))$')


# libvirt's longest guest names are far shorter.
MAX_NAME = 200


def printable(text):
    """``text`` safe for one log line: control characters escaped.

    Each character Python does not print (newlines, tabs, escape
    sequences, line separators) becomes ``\\xNN`` / ``\\uNNNN``; more
    than :data:`MAX_NAME` characters are cut (``...``).
    """
    escaped = ''.join(c if c.isprintable() else
                      ascii(c)[1:-1] if ord(c) > 0xff else '\\x%02x' % ord(c)
                      for c in text[:MAX_NAME + 1])
    return documents.clip(escaped, MAX_NAME)


def c_number(text):
    """Read ``text`` as C ``strtoul(text, NULL, 0)`` over the whole string.

    :returns: int, or None when ``text`` is not such a number.
    """
    match = _C_NUMBER.match(text.strip())
    if match is None:
        return None
    if match.group('hex'):
        return int(match.group('hex'), 16)
    if match.group('oct'):
        return int(match.group('oct'), 8)
    return int(match.group('dec'))


def _host_address(address, where):
    values = []
    for attribute, limit in _LIMITS:
        text = address.get(attribute, '0')
        value = c_number(text)
        if value is None or value > limit:
            raise errors.NvlinkError(
                '%s: %s=%s: expected a number up to %#x' % (
                    where, attribute, documents.short(text), limit))
        values.append(value)
    return '%04x:%02x:%02x.%d' % tuple(values)


def parse(text, source='domain XML'):
    """Read a libvirt domain XML document.

    :param text: the XML (bytes as libvirt writes them, or str).
    :param source: what the text is, for messages.
    :returns: :class:`Domain`.
    :raises NvlinkError: for text that is not XML (in its declared
        encoding, one Python does not know included), a root other than
        ``<domain>``, or a PCI host device without a valid
        ``<source><address>``; the message names the ``<hostdev>``.
    """
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        raise errors.NvlinkError('%s: invalid XML: %s' % (source, exc))
    except ValueError as exc:  # str with an encoding declaration
        raise errors.NvlinkError('%s: invalid XML: %s' % (source, exc))
    except LookupError as exc:  # a declared encoding Python does not know
        raise errors.NvlinkError('%s: invalid XML: %s' % (source, exc))
    if root.tag != 'domain':
        raise errors.NvlinkError('%s: expected a <domain> document, got <%s>'
                                 % (source, printable(root.tag)))
    name = printable((root.findtext('name') or '').strip())
    addresses = set()
    hostdevs = root.findall('devices/hostdev')
    for index, hostdev in enumerate(hostdevs, 1):
        if (hostdev.get('mode', 'subsystem') != 'subsystem' or
                hostdev.get('type') != 'pci'):
            continue
        where = "%s: <hostdev type='pci'> #%d of %d" % (
            source, index, len(hostdevs))
        address = hostdev.find('source/address')
        if address is None:
            raise errors.NvlinkError('%s: no <source><address>' % where)
        addresses.add(_host_address(address, where))
    return Domain(name, tuple(sorted(addresses, key=pci.address_sort_key)))
