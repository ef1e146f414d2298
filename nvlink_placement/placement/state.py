"""Read the Placement state that planning needs, in constant requests.

The whole provider listing comes from one ``GET /resource_providers``;
which providers carry the traits we care about comes from one
``GET /resource_providers?required=<trait>`` per trait (only for traits
that exist, found with one ``GET /traits?name=in:...``). So reading the
state of 1 or 1000 hosts costs the same handful of requests.
"""

import dataclasses
import typing
import urllib.parse

from nvlink_placement import errors
from nvlink_placement import hostnames
from nvlink_placement.placement import naming


READ_VERSION = '1.14'


@dataclasses.dataclass
class Provider:
    """One resource provider as listed by Placement.

    :ivar traits: the subset of the *queried* traits this RP carries (not
        necessarily all its traits).
    """
    uuid: str
    name: str
    parent_uuid: typing.Optional[str]
    root_uuid: str
    generation: int
    traits: set = dataclasses.field(default_factory=set)


class State(object):
    """An in-memory view of Placement providers.

    :param providers: iterable of :class:`Provider`.
    :param known_traits: set of queried trait names that exist in Placement.
    """

    def __init__(self, providers, known_traits):
        self.by_uuid = {p.uuid: p for p in providers}
        self.by_name = {p.name: p for p in self.by_uuid.values()}
        self.known_traits = set(known_traits)
        #: dict RP uuid -> (generation, {rc: inventory dict}), filled on
        #: demand by :func:`load_inventories`.
        self.inventories = {}
        #: dict RP uuid -> {consumer uuid: {rc: amount}}, filled on demand
        #: by :func:`load_allocations` (only for GPUs in use).
        self.allocations = {}
        #: dict GPU RP uuid -> resource class of the GPUs with a free unit
        #: (:func:`free_gpu_classes`), or None when not listed.
        self.free = None
        self.children = {}
        self._trees = {}
        for p in self.by_uuid.values():
            if p.parent_uuid:
                self.children.setdefault(p.parent_uuid, []).append(p)
            self._trees.setdefault(p.root_uuid, []).append(p)

    def tree(self, root_uuid):
        """All providers whose root is ``root_uuid``."""
        return list(self._trees.get(root_uuid, ()))

    def roots_with(self, trait):
        """UUIDs of the roots whose tree holds an RP with ``trait``.

        ``trait`` must have been read; sorted by root name.
        """
        roots = {p.root_uuid for p in self.by_uuid.values()
                 if trait in p.traits and p.root_uuid in self.by_uuid}
        return sorted(roots, key=lambda u: self.by_uuid[u].name)

    def root_names(self):
        """Names of the root providers (compute nodes, mostly)."""
        return [p.name for p in self.by_uuid.values()
                if p.parent_uuid is None]

    def select_roots(self, hosts, every_tree=False):
        """Root UUIDs of the compute nodes ``hosts``, in that order.

        When ``hosts`` is empty: every tree holding a Nova PCI RP, or every
        tree (sorted by root name) with ``every_tree``.

        :raises NvlinkError: for a name that is not a root provider.
        """
        if not hosts and every_tree:
            return sorted((p.uuid for p in self.by_uuid.values()
                           if p.parent_uuid is None),
                          key=lambda u: self.by_uuid[u].name)
        if not hosts:
            return self.roots_with(naming.PCI_TRAIT)
        roots = []
        for name in hosts:
            rp = self.by_name.get(name)
            if rp is None or rp.parent_uuid:
                raise errors.NvlinkError(
                    'no compute node resource provider named %r%s' % (
                        name, hostnames.did_you_mean(
                            name, self.root_names())))
            roots.append(rp.uuid)
        return roots

    def depth(self, provider):
        """Distance from the root (root = 0)."""
        depth = 0
        while provider.parent_uuid:
            provider = self.by_uuid[provider.parent_uuid]
            depth += 1
        return depth


def read(client, traits, trait_prefixes=(), version=None):
    """Read every provider and which of ``traits`` each carries.

    Requests: one provider listing, one ``GET /traits?name=startswith:
    CUSTOM_``, and one ``GET /resource_providers?required=<trait>`` per
    asked trait that exists.

    :param client: :class:`PlacementClient`.
    :param traits: trait names to resolve per provider.
    :param trait_prefixes: also resolve every existing custom trait
        starting with one of these.
    :param version: microversion of the listing (``1.37`` for commands that
        will re-parent, so an older server refuses before any write).
    :returns: :class:`State`; ``known_traits`` holds the existing custom
        traits and the standard traits asked for.
    """
    body = client.get('/resource_providers', version=version or READ_VERSION)
    providers = [Provider(uuid=rp['uuid'], name=rp['name'],
                          parent_uuid=rp.get('parent_provider_uuid'),
                          root_uuid=rp.get('root_provider_uuid', rp['uuid']),
                          generation=rp['generation'])
                 for rp in body['resource_providers']]
    by_uuid = {p.uuid: p for p in providers}
    custom = set(client.get('/traits?name=startswith:CUSTOM_',
                            version='1.6')['traits'])
    wanted = {t for t in traits if not t.startswith('CUSTOM_') or t in custom}
    wanted |= {t for t in custom for p in trait_prefixes if t.startswith(p)}
    for trait in sorted(wanted):
        listed = client.get('/resource_providers?' + urllib.parse.urlencode(
            {'required': trait}), version='1.18')
        for rp in listed['resource_providers']:
            if rp['uuid'] in by_uuid:
                by_uuid[rp['uuid']].traits.add(trait)
    return State(providers, custom | wanted)


def load_inventories(client, state, uuids):
    """Fetch the inventories of ``uuids`` into ``state.inventories``."""
    for uuid in sorted(set(uuids) - set(state.inventories)):
        body = client.get('/resource_providers/%s/inventories' % uuid)
        state.inventories[uuid] = (body['resource_provider_generation'],
                                   body['inventories'])


def provider_traits(client, uuid):
    """Return ``(traits set, generation)`` of one provider."""
    body = client.get('/resource_providers/%s/traits' % uuid, version='1.6')
    return set(body['traits']), body['resource_provider_generation']


def free_gpus(client):
    """UUIDs of the Nova PCI RPs with a unit neither used nor reserved.

    The set of :func:`free_gpu_classes` (the same requests).
    """
    return set(free_gpu_classes(client))


def free_gpu_classes(client):
    """The Nova PCI RPs with a unit neither used nor reserved, and class.

    One ``GET /resource_classes`` and one ``GET /resource_providers?
    resources=<RC>:1&required=COMPUTE_MANAGED_PCI_DEVICE`` per custom
    resource class (Nova names PCI classes ``CUSTOM_...``, reference/
    openstack.md). A GPU whose class is not custom is simply not listed,
    so it counts as in use: its allocations are read, nothing is missed.

    :returns: dict RP uuid -> the resource class it was listed for.
    """
    classes = client.get('/resource_classes', version='1.2')
    free = {}
    for rc in sorted(c['name'] for c in classes['resource_classes']):
        if not rc.startswith('CUSTOM_'):
            continue
        listed = client.get('/resource_providers?' + urllib.parse.urlencode(
            {'resources': '%s:1' % rc, 'required': naming.PCI_TRAIT}),
            version='1.18')
        for rp in listed['resource_providers']:
            free.setdefault(rp['uuid'], rc)
    return free


def load_allocations(client, state, uuids):
    """Fetch the allocations of ``uuids`` into ``state.allocations``.

    One ``GET /resource_providers/{uuid}/allocations`` each (Placement has
    no bulk listing of consumers by provider).
    """
    for uuid in sorted(set(uuids) - set(state.allocations)):
        body = client.get('/resource_providers/%s/allocations' % uuid)
        state.allocations[uuid] = {
            consumer: alloc['resources']
            for consumer, alloc in body['allocations'].items()}


def node_consumers(client, uuid):
    """Uuids of the consumers with allocations on provider ``uuid``."""
    body = client.get('/resource_providers/%s/allocations' % uuid)
    return set(body['allocations'])


def consumer_allocations(client, consumer):
    """``{rp uuid: {rc: amount}}`` of one consumer (empty: none)."""
    body = client.get('/allocations/%s' % urllib.parse.quote(consumer))
    return {rp: alloc['resources']
            for rp, alloc in body.get('allocations', {}).items()}
