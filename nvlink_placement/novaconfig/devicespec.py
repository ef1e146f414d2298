"""Which ``[pci] device_spec`` entry a GPU matches, and the traits it gets.

Pure. Models what Nova 34 does with the entries of one nova-compute, for
PCI devices known by address, vendor id and product id (the GPUs):

* each ``device_spec`` value is a JSON object or a JSON list of objects
  (``nova/pci/whitelist.py`` ``_parse_white_list_from_config``);
* a device uses the *first* entry it matches (``Whitelist.
  device_assignable``); no match, no PCI device and no provider;
* an entry matches when its ``vendor_id`` and ``product_id`` are absent,
  ``*`` or equal, and its ``address`` matches (``nova/pci/devspec.py``):
  absent means any; a string is a glob ``[[[domain]:]bus]:][slot][.[func]]``
  whose empty or ``*`` fields match anything and whose hex fields compare
  as numbers; an object holds one regular expression per field
  (``domain``, ``bus``, ``slot``, ``function``, matched from the start
  of the sysfs form). ``devname`` entries name a network interface and
  match no GPU here;
* the provider's traits are ``COMPUTE_MANAGED_PCI_DEVICE`` plus the
  comma-separated ``traits`` tag, each upper-cased, kept when standard
  (``os_traits``) or ``CUSTOM_``, else normalized to ``CUSTOM_<NAME>``
  (``nova/compute/pci_placement_translator.py`` ``_get_traits_for_dev``,
  ``_normalize_traits``), plus ``HW_PCI_LIVE_MIGRATABLE`` when the
  ``live_migratable`` tag is true.

Entries Nova refuses (a field above its maximum, e.g. a PCI domain above
0xffff, ``PciConfigInvalidSpec``) raise :class:`errors.NvlinkError`: Nova
would not start.
"""

import dataclasses
import functools
import json
import re

import os_traits

from nvlink_placement import errors

ANY = '*'
#: Field widths and maxima of ``nova/pci/devspec.py``.
_FIELDS = (('domain', 0xFFFF, '%04x'), ('bus', 0xFF, '%02x'),
           ('slot', 0x1F, '%02x'), ('function', 0x7, '%01x'))
_MATCH_KEYS = ('vendor_id', 'product_id', 'address', 'devname')
_TRUE = ('1', 't', 'true', 'on', 'y', 'yes')


@dataclasses.dataclass(frozen=True)
class Entry:
    """One parsed ``device_spec`` object.

    :ivar text: the JSON it came from (one object).
    :ivar tags: every other key, values as strings (Nova's tags).
    """
    text: str
    vendor_id: str
    product_id: str
    address: object      # None, a glob tuple, or a dict of regexes
    devname: str
    tags: dict

    def matches(self, address, vendor_id, product_id):
        """True when a device at ``address`` (sysfs form) matches.

        :param vendor_id: ``product_id``: 4 lower-case hex digits, or None
            when unknown (then only an entry without that key matches).
        """
        if self.devname is not None:
            return False
        for want, have in ((self.vendor_id, vendor_id),
                           (self.product_id, product_id)):
            if want != ANY and want != have:
                return False
        if self.address is None:
            return True
        fields = _split(address)
        if isinstance(self.address, dict):
            return all(regex.match(fields[name])
                       for name, regex in self.address.items())
        return all(want == ANY or want == fields[name]
                   for (name, _, _), want in zip(_FIELDS, self.address))

    def traits(self):
        """The provider traits Nova writes for a device of this entry."""
        found = {'COMPUTE_MANAGED_PCI_DEVICE'}
        found.update(_tag_traits(self.tags.get('traits', '')))
        if self.tags.get('live_migratable', 'false').lower() in _TRUE:
            found.add('HW_PCI_LIVE_MIGRATABLE')
        return found


@functools.lru_cache(maxsize=4096)
def _tag_traits(text):
    """The traits of a ``traits`` tag value: a frozenset of str.

    Cached: a fleet's entries repeat a handful of tag values, and
    ``os_traits.check_traits`` lists every standard trait at each call.
    """
    if not text:
        return frozenset()
    standard, rest = os_traits.check_traits(text.split(','))
    found = set(standard)
    for name in rest:
        name = name.upper()
        found.add(name if os_traits.is_custom(name)
                  else os_traits.normalize_name(name))
    return frozenset(found)


def _split(address):
    """``dddd:bb:ss.f`` (sysfs) -> dict field -> Nova's formatted value."""
    dbs, _, function = address.partition('.')
    domain, bus, slot = dbs.split(':')
    values = dict(zip(('domain', 'bus', 'slot', 'function'),
                      (domain, bus, slot, function)))
    return {name: form % int(values[name], 16)
            for name, _, form in _FIELDS}


def _hex_field(name, value, where):
    maximum, form = {n: (m, f) for n, m, f in _FIELDS}[name]
    value = value.strip()
    if not value or value == ANY:
        return ANY
    try:
        number = int(value, 16)
    except ValueError:
        raise errors.NvlinkError('%s: address %s %r is not a hex number'
                                 % (where, name, value))
    if number > maximum:
        raise errors.NvlinkError(
            '%s: address %s %s is above %X, Nova refuses it '
            '(PciConfigInvalidSpec) and nova-compute does not start'
            % (where, name, value, maximum))
    return form % number


def _address(value, where):
    if value is None:
        return None
    if isinstance(value, dict):
        try:
            return {name: re.compile(value[name])
                    for name in ('domain', 'bus', 'slot', 'function')
                    if name in value}
        except (re.error, TypeError) as exc:
            raise errors.NvlinkError('%s: bad address regex: %s'
                                     % (where, exc))
    if not isinstance(value, str):
        raise errors.NvlinkError('%s: address must be a string or object'
                                 % where)
    dbs, _, function = value.partition('.')
    parts = dbs.split(':') if dbs else []
    if len(parts) > 3:
        raise errors.NvlinkError('%s: address %r has more than 3 ":" '
                                 'fields' % (where, value))
    parts = [''] * (3 - len(parts)) + parts
    return tuple(_hex_field(name, text, where) for (name, _, _), text
                 in zip(_FIELDS, parts + [function]))


def _entry(obj, where):
    if not isinstance(obj, dict):
        raise errors.NvlinkError('%s: a device_spec entry is a JSON object'
                                 % where)

    def text(key):
        value = obj.get(key, ANY)
        return str(value).strip().lower() if value != ANY else ANY
    return Entry(
        text=json.dumps(obj, sort_keys=True),
        vendor_id=text('vendor_id'), product_id=text('product_id'),
        address=_address(obj.get('address'), where),
        devname=obj.get('devname'),
        tags={k: str(v) for k, v in obj.items() if k not in _MATCH_KEYS})


def parse(values, source='device_spec'):
    """Parse ``[pci] device_spec`` values, in order, into entries.

    :param values: list of str, each a JSON object or list of objects.
    :returns: list of :class:`Entry`.
    :raises NvlinkError: naming the value's position for text Nova
        refuses.
    """
    entries = []
    for i, value in enumerate(values):
        where = '%s value %d' % (source, i + 1)
        try:
            loaded = json.loads(value)
        except ValueError as exc:
            raise errors.NvlinkError('%s: not JSON: %s' % (where, exc))
        for obj in loaded if isinstance(loaded, list) else [loaded]:
            entries.append(_entry(obj, where))
    return entries


def first_match(entries, address, vendor_id, product_id):
    """The entry Nova uses for the device, or None (Nova ignores it)."""
    for entry in entries:
        if entry.matches(address, vendor_id, product_id):
            return entry
    return None
