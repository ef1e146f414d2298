"""Read printed ``nova-config`` output as a nova-compute would, for tests.

Written apart from the code under test (it imports nothing of
``nvlink_placement``): a test that needs the traits Nova gives a GPU takes
the ``[pci] device_spec`` values ``nova-config`` printed (``--ini`` text
or ``-f json`` rows) and asks :func:`traits_for` which entry the GPU
matches first and what traits that gives. Only the entry forms
``nova-config`` prints are understood (a full address or none, vendor and
product ids, a ``traits`` tag of ``CUSTOM_`` names); anything else fails
the test instead of being guessed.
"""

import json


def ini_values(text):
    """``device_spec`` values of every nova-compute block, in order.

    :param text: ``nova-config --ini`` output.
    """
    values, compute, section = [], False, None
    for line in text.splitlines():
        if line.startswith('# nova.conf on '):
            compute = line[len('# nova.conf on '):].startswith(
                'nova-compute')
        elif line.startswith('# placement.conf on'):
            compute = False
        elif line.startswith('['):
            section = line.strip('[]')
        elif compute and section == 'pci' and line.startswith(
                'device_spec = '):
            values.append(line[len('device_spec = '):])
    return values


def json_values(rows):
    """``device_spec`` values of ``nova-config -f json`` rows, in order."""
    return [row['value'] for row in rows
            if row['option'] == 'device_spec' and
            row['service'].startswith('nova-compute')]


def _bdf(text):
    domain, bus, rest = text.lower().split(':')
    slot, function = rest.split('.')
    return (int(domain, 16), int(bus, 16), int(slot, 16), int(function))


def traits_for(values, address, vendor_id='10de', product_id='2330'):
    """The traits Nova gives the GPU at ``address``, or None (no entry).

    :returns: set of trait names (COMPUTE_MANAGED_PCI_DEVICE and the
        first matching entry's ``traits``).
    """
    for value in values:
        entry = json.loads(value)
        assert isinstance(entry, dict), value
        assert set(entry) <= {'vendor_id', 'product_id', 'address',
                              'traits', 'resource_class'}, value
        if entry.get('vendor_id', vendor_id) != vendor_id:
            continue
        if entry.get('product_id', product_id) != product_id:
            continue
        if 'address' in entry and _bdf(entry['address']) != _bdf(address):
            continue
        names = [t for t in entry.get('traits', '').split(',') if t]
        assert all(t.startswith('CUSTOM_') for t in names), value
        return {'COMPUTE_MANAGED_PCI_DEVICE'} | set(names)
    return None


def member_traits(values, addresses, **ids):
    """dict address -> sorted tuple of the ``_MEMBER`` traits Nova gives.

    An address no entry matches is left out.
    """
    out = {}
    for address in addresses:
        found = traits_for(values, address, **ids)
        if found is not None:
            out[address] = tuple(sorted(t for t in found
                                        if '_MEMBER' in t))
    return out
