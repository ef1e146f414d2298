"""Which ``[pci] alias`` names which GPU model of a topology.

Pure. A fleet of several GPU models needs one Nova alias per model: an
alias names one resource class (``nova/pci/request.py``: every spec of
an alias with PCI in Placement must share it), and a GPU's resource
class is ``CUSTOM_PCI_<VENDOR>_<PRODUCT>`` unless its device_spec entry
tags another (``nova/compute/pci_placement_translator.py``). The GPU
classes of a topology (:class:`GpuClass`) come from host inspection
(``vendor_id`` / ``device_id`` or ``resource_class`` per GPU,
:func:`gpu_class`), in *topology order*: the order in which the hosts,
in file order, and their GPUs, in PCI address order, first show each
class. A topology of one class names it for every alias
(:func:`topology_resource_class`, :func:`aliases_for`); an
``--alias-config`` file (:mod:`.inputs`) names the classes itself.

``--alias`` (repeatable) takes ``NAME`` or ``NAME=VENDOR:PRODUCT``:

- ``NAME=VENDOR:PRODUCT`` names the class of those PCI ids;
- each bare ``NAME`` names the next class no ``NAME=...`` names, in
  topology order;
- a class left unnamed gets :func:`derived_name` (``pci-10de-2901`` for
  ``CUSTOM_PCI_10DE_2901``).

A topology without ids (written by hand) is one class: one ``--alias``,
whose ``=VENDOR:PRODUCT`` (or ``--vendor-id`` / ``--product-id``) gives
the ids, as with a single model.
"""

import dataclasses
import re

from nvlink_placement import errors
from nvlink_placement.flavors import generate
from nvlink_placement.flavors import inputs
from nvlink_placement.flavors import request
from nvlink_placement.topology import pci

SYNTAX = 'NAME or NAME=VENDOR:PRODUCT, e.g. h100=10de:2330'
_ID = re.compile(r'^[0-9a-fA-F]{4}$')


@dataclasses.dataclass(frozen=True)
class GpuClass:
    """GPUs of one resource class in a topology.

    :ivar vendor_id: / :ivar product_id: lower-case hex from host
        inspection, or None.
    :ivar hosts: sorted tuple of host names.
    """
    resource_class: str
    vendor_id: str
    product_id: str
    hosts: tuple


def gpu_class(gpu):
    """Resource class of a :class:`Gpu` from its inspection details.

    Its ``resource_class``, else ``CUSTOM_PCI_<VENDOR>_<PRODUCT>`` from
    ``vendor_id`` / ``device_id``, else None.
    """
    details = gpu.details
    vendor, product = details.get('vendor_id'), details.get('device_id')
    if details.get('resource_class') or (vendor and product):
        return request.resource_class_name(details.get('resource_class'),
                                           vendor, product)
    return None


def gpu_classes(hosts):
    """Resource classes of the usable GPUs of ``hosts``.

    A GPU's class is its ``resource_class`` from host inspection, else
    ``CUSTOM_PCI_<VENDOR>_<PRODUCT>`` from its ids, else unknown.

    :returns: dict resource class -> :class:`GpuClass`; GPUs of no known
        class are left out.
    """
    found = {}
    for host in hosts:
        for address in generate.usable_gpus(host):
            gpu = host.gpus[address]
            rc = gpu_class(gpu)
            if rc is None:
                continue
            found.setdefault(rc, (gpu.details.get('vendor_id'),
                                  gpu.details.get('device_id'), set()))[
                2].add(host.name)
    classes = {rc: GpuClass(rc, v and v.lower(), p and p.lower(),
                            tuple(sorted(h)))
               for rc, (v, p, h) in sorted(found.items())}
    return classes


def topology_resource_class(hosts, resource_class=None):
    """The one resource class of the GPUs of ``hosts``.

    :param resource_class: an explicit class (normalized and returned).
    :raises NvlinkError: when the topology has none or several.
    """
    if resource_class:
        return request.resource_class_name(resource_class)
    classes = gpu_classes(hosts)
    if not classes:
        raise errors.NvlinkError(
            'the topology holds no GPU resource class (no vendor/device '
            'ids from host inspection): give --resource-class, e.g. '
            'CUSTOM_PCI_10DE_2330, or --alias-config')
    if len(classes) > 1:
        raise errors.NvlinkError(
            'the GPUs are of several resource classes (%s): pick the hosts '
            'of one class with --host, or give --resource-class or '
            '--alias-config' % '; '.join(
                '%s on %s' % (c.resource_class, ', '.join(c.hosts))
                for c in classes.values()))
    return next(iter(classes))


def aliases_for(flavors, hosts, alias_config=None, resource_class=None):
    """The ``[pci] alias`` values the flavors are judged with.

    :param alias_config: a file of Nova's alias values
        (:func:`read_alias_config`); without it each alias the flavors
        name gets the one resource class of ``hosts``
        (:func:`topology_resource_class`, ``resource_class`` first).
    :returns: dict alias name -> :class:`Alias`.
    :raises NvlinkError: naming the file, or the classes found.
    """
    if alias_config:
        return inputs.read_alias_config(alias_config)
    rc = topology_resource_class(hosts, resource_class)
    return {name: request.Alias(name, rc)
            for name in inputs.alias_names(flavors)}


@dataclasses.dataclass(frozen=True)
class AliasClass:
    """One alias and the GPUs it names.

    :ivar name: the alias name.
    :ivar resource_class: Placement resource class of its GPUs, or None
        when the topology holds no ids and none were given.
    :ivar vendor_id: / :ivar product_id: lower-case hex PCI ids, or None.
    :ivar hosts: names of the hosts with usable GPUs of the class, in
        topology order (every host for a topology without ids).
    :ivar derived: True when no ``--alias`` named it (:func:`derived_name`).
    :ivar sole: True for the one alias of a topology of one model (or
        without ids): its hosts keep every GPU (:func:`hosts_of`).
    :ivar by_order: True when a bare ``--alias NAME`` was given this model
        by topology order, among several models no ids named: the name
        moves to another model if the topology's host order changes.
    """
    name: str
    resource_class: str
    vendor_id: str
    product_id: str
    hosts: tuple
    derived: bool = False
    sole: bool = False
    by_order: bool = False


def parse(text):
    """One ``--alias`` value: ``(name, (vendor, product) or None)``.

    :raises NvlinkError: for a malformed value (see :data:`SYNTAX`).
    """
    name, sep, ids = (text or '').partition('=')
    if not sep:
        return name, None
    vendor, colon, product = ids.partition(':')
    if not (colon and _ID.match(vendor) and _ID.match(product)):
        raise errors.NvlinkError(
            '--alias %r: expected %s (4 hex digits each)' % (text, SYNTAX))
    return name, (vendor.lower(), product.lower())


def derived_name(resource_class):
    """The alias name of a class no ``--alias`` names.

    ``CUSTOM_PCI_10DE_2901`` -> ``pci-10de-2901``: the resource class
    without ``CUSTOM_``, lower case, ``_`` as ``-``.
    """
    name = resource_class
    if name.startswith('CUSTOM_'):
        name = name[len('CUSTOM_'):]
    return name.lower().replace('_', '-')


def classes(hosts):
    """The GPU classes of ``hosts`` in topology order.

    :returns: ``(found, unknown)``: a list of
        :class:`GpuClass` (hosts in
        topology order) and the names of the hosts with a usable GPU of
        no known class.
    """
    order, where, ids, unknown = [], {}, {}, []
    for host in hosts:
        for address in sorted(host.usable(), key=pci.address_sort_key):
            gpu = host.gpus[address]
            rc = gpu_class(gpu)
            if rc is None:
                if host.name not in unknown:
                    unknown.append(host.name)
                continue
            if rc not in where:
                order.append(rc)
                where[rc] = []
                vendor = gpu.details.get('vendor_id')
                product = gpu.details.get('device_id')
                ids[rc] = (vendor and vendor.lower(),
                           product and product.lower())
            if host.name not in where[rc]:
                where[rc].append(host.name)
    return ([GpuClass(rc, ids[rc][0], ids[rc][1], tuple(where[rc]))
             for rc in order], unknown)


def assign(hosts, specs, vendor_id=None, product_id=None,
           resource_class=None, scope=None):
    """The aliases of ``hosts``, one per GPU class, in topology order.

    :param specs: the ``--alias`` values (:func:`parse`), at least one.
    :param scope: every host of the topology when ``hosts`` are some of
        them (``--host``): bare names are then given in the topology's
        order, so that ``--host`` does not change which model a name
        names, and the aliases of models ``hosts`` lack are left out. One
        ``--alias`` for hosts of one model names that model, as for a
        topology of one model.
    :param vendor_id: / :param product_id: explicit PCI ids
        (``--vendor-id`` / ``--product-id``): only for one class.
    :param resource_class: an explicit resource class tag: only for one
        class.
    :returns: list of :class:`AliasClass`.
    :raises NvlinkError: naming the alias or class: no alias, a name
        given twice, ids no GPU of the topology has, more bare names than
        classes, ids or a resource class for several classes, GPUs of
        unknown class beside known ones.
    """
    parsed = [parse(s) for s in specs]
    if not parsed:
        raise errors.NvlinkError('give at least one --alias (%s)' % SYNTAX)
    if scope is not None and (len(parsed) > 1 or len(classes(hosts)[0]) > 1):
        selected = {h.name for h in hosts}
        return [dataclasses.replace(one, hosts=tuple(
            n for n in one.hosts if n in selected))
            for one in assign(scope, specs, vendor_id, product_id,
                              resource_class)
            if selected & set(one.hosts)]
    names = [n for n, _ in parsed]
    for name in names:
        if names.count(name) > 1:
            raise errors.NvlinkError('--alias %s is given twice' % name)
    found, unknown = classes(hosts)
    with_ids = [c for c in found if c.vendor_id and c.product_id]
    if len(with_ids) <= 1:
        return [_single(hosts, parsed, found, with_ids, vendor_id,
                        product_id, resource_class)]
    unknown += [n for c in found if c not in with_ids for n in c.hosts
                if n not in unknown]
    if unknown:
        raise errors.NvlinkError(
            'host(s) %s have GPUs without vendor/device ids beside GPUs of '
            'several models (%s): no alias can be told which are theirs; '
            'take their topology from host inspection' % (
                ', '.join(unknown), _listed(with_ids)))
    if len(found) > 1 and (vendor_id or product_id or resource_class):
        raise errors.NvlinkError(
            'the topology has %d GPU models (%s): --vendor-id, '
            '--product-id and --resource-class are for one; name each '
            'model with --alias NAME=VENDOR:PRODUCT' % (
                len(found), _listed(found)))
    chosen = {}
    for name, ids in parsed:
        if ids is None:
            continue
        match = [c for c in found if (c.vendor_id, c.product_id) == ids]
        if not match:
            raise errors.NvlinkError(
                '--alias %s=%s:%s: no GPU of the topology has these ids '
                '(it has %s)' % ((name,) + ids + (_listed(found),)))
        if match[0].resource_class in chosen:
            raise errors.NvlinkError(
                '--alias %s and --alias %s name the same GPU model %s:%s' % (
                    (chosen[match[0].resource_class], name) + ids))
        chosen[match[0].resource_class] = name
    bare = [name for name, ids in parsed if ids is None]
    rest = [c for c in found if c.resource_class not in chosen]
    if len(bare) > len(rest):
        raise errors.NvlinkError(
            '%d --alias NAME given for %d GPU model(s) no NAME=VENDOR:'
            'PRODUCT names (%s): drop %s' % (
                len(bare), len(rest), _listed(rest) or 'none',
                ', '.join(bare[len(rest):])))
    for name, gpu_class in zip(bare, rest):
        chosen[gpu_class.resource_class] = name
    by_order = {c.resource_class for c in rest[:len(bare)]} if len(
        rest) > 1 else set()
    out = []
    taken = set(chosen.values())
    for gpu_class in found:
        name = chosen.get(gpu_class.resource_class)
        derived = name is None
        if derived:
            name = derived_name(gpu_class.resource_class)
            if name in taken:
                raise errors.NvlinkError(
                    'alias %s is given to another model than %s: name '
                    'that one with --alias NAME=%s:%s' % (
                        name, gpu_class.resource_class, gpu_class.vendor_id,
                        gpu_class.product_id))
        out.append(AliasClass(name, gpu_class.resource_class,
                              gpu_class.vendor_id, gpu_class.product_id,
                              gpu_class.hosts, derived,
                              by_order=gpu_class.resource_class in by_order))
    return out


def _single(hosts, parsed, found, with_ids, vendor_id, product_id,
            resource_class):
    """The one alias of a topology of one model (or of no ids).

    :param found: every class of :func:`classes`; :param with_ids: those
        with PCI ids (at most one). Its ids are the alias' unless given;
        the resource class is the topology's one class, else the one
        Nova derives from the ids (as ``nova-config`` did for one model).
    """
    if len(parsed) > 1:
        raise errors.NvlinkError(
            '%d aliases given, but the topology has one GPU model%s: give '
            'one --alias' % (len(parsed), ' (%s)' % _listed(found)
                             if found else ' (no vendor/device ids)'))
    name, ids = parsed[0]
    if ids and (vendor_id or product_id) and ids != (vendor_id, product_id):
        raise errors.NvlinkError(
            '--alias %s=%s:%s and --vendor-id/--product-id disagree'
            % ((name,) + ids))
    if (vendor_id or product_id) and not (vendor_id and product_id):
        raise errors.NvlinkError('give both --vendor-id and --product-id')
    vendor_id, product_id = (vendor_id and vendor_id.lower(),
                             product_id and product_id.lower())
    vendor, product = ids or (vendor_id, product_id)
    if not vendor and with_ids:
        vendor, product = with_ids[0].vendor_id, with_ids[0].product_id
    if ids and with_ids and not vendor_id and ids != (
            with_ids[0].vendor_id, with_ids[0].product_id):
        raise errors.NvlinkError(
            '--alias %s=%s:%s: no GPU of the topology has these ids (it has '
            '%s)' % ((name,) + ids + (_listed(with_ids),)))
    rc = resource_class or (found[0].resource_class if len(found) == 1
                            else None)
    if rc is None and vendor:
        rc = request.resource_class_name(None, vendor, product)
    return AliasClass(name, rc and request.resource_class_name(rc),
                      vendor, product,
                      tuple(h.name for h in hosts if h.usable()), sole=True)


def _listed(found):
    return ', '.join('%s:%s' % (c.vendor_id, c.product_id)
                     if c.vendor_id else c.resource_class for c in found)


def restrict(host, resource_class):
    """``host`` with only its GPUs of ``resource_class`` and their groups.

    A GPU of unknown class is kept (a topology without ids is one
    class); a group keeps only if all its members are kept. With
    ``resource_class`` None, only the GPUs of unknown class are kept.
    """
    gpus = {a: g for a, g in host.gpus.items()
            if gpu_class(g) in (None, resource_class)}
    if len(gpus) == len(host.gpus):
        return host
    groups = [g for g in host.groups if set(g.members) <= set(gpus)]
    kept = {g.name for g in groups}
    groups = [g if g.parent is None or g.parent in kept else
              dataclasses.replace(g, parent=None) for g in groups]
    return dataclasses.replace(host, gpus=gpus, groups=groups)


def hosts_of(hosts, alias):
    """The hosts of ``alias`` among ``hosts``, restricted to its GPUs.

    The hosts of a :attr:`AliasClass.sole` alias are returned whole.
    """
    return [h if alias.sole else restrict(h, alias.resource_class)
            for h in hosts if h.name in alias.hosts]


def for_flavors(flavors, hosts, specs=(), alias_config=None,
                resource_class=None):
    """The ``[pci] alias`` values flavors are judged with, by alias name.

    :param flavors: flavor dicts (:func:`inputs.read_flavors`).
    :param hosts: every host of the topology.
    :param specs: ``--alias`` values, as given to ``flavor generate``.
    :returns: dict alias name -> :class:`request.Alias`: from
        ``alias_config`` or ``resource_class`` when given
        (:func:`aliases_for`); for a topology of one model, its
        class for every alias; else each alias of :func:`assign` (a model
        no ``--alias`` names under its :func:`derived_name`).
    :raises NvlinkError: for a flavor's alias that names no model of a
        topology of several, naming the flavor and the aliases known.
    """
    found = classes(hosts)[0]
    if alias_config or resource_class or (len(found) <= 1 and not specs):
        return aliases_for(flavors, hosts, alias_config, resource_class)
    if specs:
        assigned = assign(hosts, specs)
        known = {one.name: one.resource_class for one in assigned}
        # The example names a model no --alias names, never a named one.
        unnamed = [one for one in assigned if one.derived]
    else:
        known = {derived_name(c.resource_class): c.resource_class
                 for c in found}
        unnamed = found
    ids = next(('%s:%s' % (c.vendor_id, c.product_id) for c in unnamed
                if c.vendor_id and c.product_id), 'VENDOR:PRODUCT')
    out = {}
    for flavor in flavors:
        for name in inputs.alias_names([flavor]):
            if name not in known:
                raise errors.NvlinkError(
                    'flavor %s names alias %s, which no GPU model of the '
                    'topology has (aliases: %s): give the --alias options '
                    'given to flavor generate (e.g. --alias %s=%s), '
                    'or --alias-config' % (flavor['name'], name,
                                           ', '.join(known), name, ids))
            out[name] = request.Alias(name, known[name])
    return out


def reach_of(hosts, alias):
    """Every host of ``hosts`` with GPUs of ``alias``, restricted to them.

    Unlike :func:`hosts_of`, not limited to :attr:`AliasClass.hosts`
    (the hosts picked with ``--host``): where the alias' query can land.
    """
    if alias.sole:
        return list(hosts)
    kept = [restrict(h, alias.resource_class) for h in hosts]
    return [h for h in kept if any(
        gpu_class(h.gpus[a]) == alias.resource_class
        for a in h.usable())]
