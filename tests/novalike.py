"""Seed Placement the way Nova does.

Two ways to the same state. :func:`seed_host` sends the HTTP requests
nova-compute's report client sends for a compute node with ``[pci]
report_in_placement = True`` (nova/compute/pci_placement_translator.py,
nova/scheduler/client/report.py); the end-to-end and round-trip tests use
it against a real HTTP Placement. :func:`document` gives the same trees as
a snapshot (:mod:`nvlink_placement.placement.nova_tree`), which the
functional tests bulk-load in milliseconds. The tree: the compute node RP
named after the hypervisor hostname with VCPU, MEMORY_MB and DISK_GB and
the traits of a Nova 34 node (OWNER_NOVA included); one child RP per PCI
device named ``<hypervisor_hostname>_<ADDRESS upper>`` with ``{RC: total
1, max_unit 1}`` and traits COMPUTE_MANAGED_PCI_DEVICE and OWNER_NOVA, plus
the member traits Nova gives each GPU once its ``[pci] device_spec`` is
set as ``nova-config`` prints it (:func:`member_traits`): written out by
hand per board and module id in :data:`BOARD_MEMBERS`, not computed by the
code under test, so a test on these trees fails when ``nova-config``
assigns other traits (``tests/functional/test_fixture_traits.py`` checks
the printed config against the same table).
"""

from nvlink_placement.placement import embedded
from nvlink_placement.placement import nova_tree
from nvlink_placement.placement import snapshot
from nvlink_placement.topology import pci

GPU_RC = 'CUSTOM_PCI_10DE_2330'
NODE_TRAITS = sorted(nova_tree.NODE_TRAITS)
PCI_TRAITS = sorted(nova_tree.PCI_TRAITS)

# Real BDF -> module id maps of two HGX H100 boards (shared/reference/
# host-formats.md).
BOARD1 = {'0000:19:00.0': 2, '0000:3b:00.0': 4, '0000:4c:00.0': 1,
          '0000:5d:00.0': 3, '0000:9b:00.0': 7, '0000:bb:00.0': 5,
          '0000:cb:00.0': 6, '0000:db:00.0': 8}
BOARD2 = {'0000:18:00.0': 2, '0000:2a:00.0': 4, '0000:3a:00.0': 1,
          '0000:5d:00.0': 3, '0000:9a:00.0': 6, '0000:ab:00.0': 8,
          '0000:ba:00.0': 5, '0000:db:00.0': 7}

node_uuid = nova_tree.node_uuid
pci_uuid = nova_tree.pci_uuid
H100 = 'hgx-h100-8gpu'


def _members(*pairs):
    return tuple(sorted('CUSTOM_PCI_GROUP%d_MEMBER%d' % p for p in pairs))


#: board -> module id -> the member traits of that GPU on a whole board,
#: written out by hand. Member ``i`` of a domain is its ``i``-th GPU by
#: module id; the whole board is one more size. NVSwitch boards take their
#: domains from Fabric Manager's partitions (shared/reference/): HGX H100
#: pairs (1,3) (2,4) (5,7) (6,8), B200 pairs (1,2) (3,4) (5,6) (7,8), quads
#: 1-4 and 5-8. Direct-NVLink meshes (HGX H100 4-GPU, DGX-1 V100 quads
#: 1-4 and 5-8): a pair takes one GPU of each member class, and a quad
#: mesh's classes for size 2 are modules {1, 3} (member 0) and {2, 4}
#: (member 1), as in the direct-nvlink example's reshaped tree.
BOARD_MEMBERS = {
    H100: {1: _members((2, 0), (4, 0), (8, 0)),
           2: _members((2, 0), (4, 1), (8, 1)),
           3: _members((2, 1), (4, 2), (8, 2)),
           4: _members((2, 1), (4, 3), (8, 3)),
           5: _members((2, 0), (4, 0), (8, 4)),
           6: _members((2, 0), (4, 1), (8, 5)),
           7: _members((2, 1), (4, 2), (8, 6)),
           8: _members((2, 1), (4, 3), (8, 7))},
    'hgx-b200-8gpu': {1: _members((2, 0), (4, 0), (8, 0)),
                      2: _members((2, 1), (4, 1), (8, 1)),
                      3: _members((2, 0), (4, 2), (8, 2)),
                      4: _members((2, 1), (4, 3), (8, 3)),
                      5: _members((2, 0), (4, 0), (8, 4)),
                      6: _members((2, 1), (4, 1), (8, 5)),
                      7: _members((2, 0), (4, 2), (8, 6)),
                      8: _members((2, 1), (4, 3), (8, 7))},
    'hgx-h100-4gpu': {1: _members((2, 0), (4, 0)),
                      2: _members((2, 1), (4, 1)),
                      3: _members((2, 0), (4, 2)),
                      4: _members((2, 1), (4, 3))},
    # HGX A100 16-GPU: pairs (1,2) (3,4) ..., quads 1-4 ... 13-16,
    # eights 1-8 and 9-16, and the whole board.
    'hgx-a100-16gpu': {
        1: _members((2, 0), (4, 0), (8, 0), (16, 0)),
        2: _members((2, 1), (4, 1), (8, 1), (16, 1)),
        3: _members((2, 0), (4, 2), (8, 2), (16, 2)),
        4: _members((2, 1), (4, 3), (8, 3), (16, 3)),
        5: _members((2, 0), (4, 0), (8, 4), (16, 4)),
        6: _members((2, 1), (4, 1), (8, 5), (16, 5)),
        7: _members((2, 0), (4, 2), (8, 6), (16, 6)),
        8: _members((2, 1), (4, 3), (8, 7), (16, 7)),
        9: _members((2, 0), (4, 0), (8, 0), (16, 8)),
        10: _members((2, 1), (4, 1), (8, 1), (16, 9)),
        11: _members((2, 0), (4, 2), (8, 2), (16, 10)),
        12: _members((2, 1), (4, 3), (8, 3), (16, 11)),
        13: _members((2, 0), (4, 0), (8, 4), (16, 12)),
        14: _members((2, 1), (4, 1), (8, 5), (16, 13)),
        15: _members((2, 0), (4, 2), (8, 6), (16, 14)),
        16: _members((2, 1), (4, 3), (8, 7), (16, 15))},
    'dgx-1-v100': {1: _members((2, 0), (4, 0), (8, 0)),
                   2: _members((2, 1), (4, 1), (8, 1)),
                   3: _members((2, 0), (4, 2), (8, 2)),
                   4: _members((2, 1), (4, 3), (8, 3)),
                   5: _members((2, 0), (4, 0), (8, 4)),
                   6: _members((2, 1), (4, 1), (8, 5)),
                   7: _members((2, 0), (4, 2), (8, 6)),
                   8: _members((2, 1), (4, 3), (8, 7))},
}


def member_traits(addresses, board=H100):
    """The member traits Nova gives each GPU of a whole board.

    From :data:`BOARD_MEMBERS` (hand-written), not from the code under
    test.

    :param addresses: a board map (PCI address -> module id) of ``board``
        holding every module of the board, in any order; a list (no
        module ids) or ``board`` None gives none.
    :returns: dict address -> tuple of traits.
    :raises AssertionError: for a board without a table or a map that is
        not the whole board (write its traits out first).
    """
    if board is None or not isinstance(addresses, dict) or not addresses:
        return {}
    table = BOARD_MEMBERS[board]
    assert sorted(addresses.values()) == sorted(table), (board, addresses)
    return {address: table[module] for address, module in addresses.items()}


def _put_inventory(client, rp_uuid, generation, inventories):
    body = client.request(
        'PUT', '/resource_providers/%s/inventories' % rp_uuid,
        body={'resource_provider_generation': generation,
              'inventories': inventories}, version='1.20')
    return body['resource_provider_generation']


def _put_traits(client, rp_uuid, generation, traits):
    body = client.request(
        'PUT', '/resource_providers/%s/traits' % rp_uuid,
        body={'resource_provider_generation': generation,
              'traits': sorted(traits)}, version='1.6')
    return body['resource_provider_generation']


def seed_host(client, host, addresses, rc=GPU_RC, vcpus=224,
              memory_mb=2063784, disk_gb=3500, board=H100):
    """Create one compute node tree as Nova would, request by request.

    On an embedded Placement the same tree is bulk-loaded instead (the
    same state: tests/functional/test_snapshot_load.py).

    :returns: dict RP name -> uuid.
    """
    if isinstance(client, embedded.EmbeddedClient):
        tree = document({host: addresses}, rc=rc, vcpus=vcpus,
                        memory_mb=memory_mb, disk_gb=disk_gb, board=board)
        client.placement.load(tree)
        return names_in(tree)
    client.request('PUT', '/resource_classes/%s' % rc, version='1.7',
                   expect=(201, 204))
    cn = node_uuid(host)
    rp = client.request('POST', '/resource_providers', version='1.20',
                        body={'uuid': cn, 'name': host})
    gen = _put_inventory(client, cn, rp['generation'], {
        'VCPU': {'total': vcpus, 'allocation_ratio': 4.0,
                 'max_unit': vcpus},
        'MEMORY_MB': {'total': memory_mb, 'reserved': 512,
                      'max_unit': memory_mb, 'allocation_ratio': 1.0},
        'DISK_GB': {'total': disk_gb, 'max_unit': disk_gb}})
    _put_traits(client, cn, gen, NODE_TRAITS)
    names = {host: cn}
    extra = member_traits(addresses, board)
    # Nova's report client creates the custom traits of device_spec first.
    for trait in sorted({t for ts in extra.values() for t in ts}):
        client.request('PUT', '/traits/%s' % trait, version='1.6',
                       expect=(201, 204))
    for address in sorted(addresses):
        name = pci.nova_provider_name(host, address)
        child = pci_uuid(cn, address)
        rp = client.request('POST', '/resource_providers', version='1.20',
                            body={'uuid': child, 'name': name,
                                  'parent_provider_uuid': cn})
        gen = _put_inventory(client, child, rp['generation'],
                             {rc: {'total': 1, 'max_unit': 1}})
        _put_traits(client, child, gen,
                    set(PCI_TRAITS) | set(extra.get(address, ())))
        names[name] = child
    return names


def document(hosts, rc=GPU_RC, board=H100, **sizes):
    """The trees :func:`seed_host` creates, as a snapshot.

    :param hosts: dict host name -> PCI addresses (a board map or list).
    :param board: the board of the maps, for their member traits
        (:func:`member_traits`); None: Nova not configured for them.
    :param sizes: ``vcpus``, ``memory_mb``, ``disk_gb``.
    """
    providers = []
    for host, addresses in hosts.items():
        providers.extend(nova_tree.host_providers(
            host, {a: rc for a in addresses},
            traits=member_traits(addresses, board), **sizes))
    return snapshot.document(providers, {})


def names_in(document):
    """dict RP name -> uuid of a snapshot."""
    return {rp['name']: rp['uuid'] for rp in document['resource_providers']}


def allocate(client, consumer, allocations, project='p1', user='u1'):
    """Claim resources for an instance: ``{rp_uuid: {rc: amount}}``."""
    client.request('PUT', '/allocations/%s' % consumer, version='1.38',
                   expect=(204,),
                   body={'allocations': {u: {'resources': r}
                                         for u, r in allocations.items()},
                         'project_id': project, 'user_id': user,
                         'consumer_generation': None,
                         'consumer_type': 'INSTANCE'})
