"""Built-in board catalog: NVLink domains of GPU baseboards by module id.

Two kinds of board:

- NVSwitch boards (HGX H100/B200/A100, HGX-2). Source: NVIDIA Fabric
  Manager User Guide, "Default GPU partitions" tables (see
  ``shared/reference/fabric-manager.md``). Module id = FM physical id.
  Each board lists every default partition; the NVLink domains are the
  partitions with more than one GPU, reduced to the largest laminar family
  (:func:`nvlink_placement.topology.laminar.largest_laminar_family`) where
  the table overlaps.
- Direct NVLink boards (no NVSwitch: 4-GPU HGX boards, GB200 trays, the
  DGX-1 hybrid cube-mesh): the board is its wiring, ``{(a, b): n}`` NVLinks
  per module pair, and its groups are meshes, the all-to-all linked sets
  (:func:`nvlink_placement.topology.laminar.mesh_family`). Each board's
  docstring names the source of its wiring.

What is left out (crossing partitions, cross-quad pairs) is kept in
:attr:`Board.dropped` and shown in the docs.
"""

import collections

from nvlink_placement.topology import laminar

Board = collections.namedtuple(
    'Board', 'name gpus groups dropped aliases meshes links',
    defaults=((), None))
Board.__doc__ = """A baseboard's GPUs and NVLink domains.

:ivar name: catalog name, e.g. ``hgx-h100-8gpu``.
:ivar gpus: tuple of module ids (ints).
:ivar groups: tuple of tuples of module ids; laminar, each with more than
    one GPU and, unless it is a mesh, fewer than all (a domain of every GPU
    creates no resource provider).
:ivar dropped: tuple of ``(partition id or None, members)`` left out
    because they cross other groups (None: a clique of a direct wiring).
:ivar aliases: other board names served by the same table.
:ivar meshes: the groups (in ``groups``) that are meshes: any N of their
    GPUs are linked.
:ivar links: None for NVSwitch boards; for direct NVLink boards a dict
    ``{(a, b): n}``, ``a < b`` module ids, ``n`` bonded NVLinks (the
    ``NV<n>`` of ``nvidia-smi topo -m``): the designed wiring, which link
    health is judged against.
"""


def _span(first, last):
    return tuple(range(first, last + 1))


def _singles(first_id, gpus):
    return [(first_id + i, (g,)) for i, g in enumerate(gpus)]


def board_from_partitions(name, gpus, partitions, aliases=()):
    """Build a :class:`Board` from an FM partition table.

    :param partitions: list of ``(partition_id, members)`` in id order.
    """
    gpus = tuple(gpus)
    multi = [(pid, tuple(sorted(m))) for pid, m in partitions
             if 1 < len(m) < len(gpus)]
    kept, dropped = laminar.largest_laminar_family([m for _, m in multi])
    groups = tuple(multi[i][1] for i in kept)
    return Board(name, gpus, groups, tuple(multi[i] for i in dropped),
                 tuple(aliases))


def board_from_links(name, gpus, links, aliases=()):
    """Build a direct NVLink :class:`Board` from its wiring.

    :param links: dict ``{(a, b): n}`` by module id.
    """
    gpus = tuple(gpus)
    links = {tuple(sorted(pair)): n for pair, n in links.items()}
    kept, dropped = laminar.mesh_family(gpus, list(links))
    return Board(name, gpus, tuple(kept), tuple((None, c) for c in dropped),
                 tuple(aliases), tuple(kept), links)


def _all_pairs(gpus, n):
    return {(a, b): n for i, a in enumerate(gpus) for b in gpus[i + 1:]}


def _h100():
    g = _span(1, 8)
    table = [(0, g), (1, _span(1, 4)), (2, _span(5, 8)),
             (3, (1, 3)), (4, (2, 4)), (5, (5, 7)), (6, (6, 8))]
    table += _singles(7, g)
    return board_from_partitions(
        'hgx-h100-8gpu', g, table,
        aliases=('hgx-h200-8gpu', 'hgx-h800-8gpu', 'hgx-h20-8gpu'))


def _b200():
    g = _span(1, 8)
    table = [(1, g), (2, _span(1, 4)), (3, _span(5, 8)),
             (4, (1, 2)), (5, (3, 4)), (6, (5, 6)), (7, (7, 8))]
    table += _singles(8, g)
    return board_from_partitions(
        'hgx-b200-8gpu', g, table,
        aliases=('hgx-b100-8gpu', 'hgx-b300-8gpu'))


def _a100_table():
    table = [(0, _span(1, 16)), (1, _span(1, 8)), (2, _span(9, 16)),
             (3, _span(1, 4) + _span(9, 12)), (4, _span(5, 8) + _span(13, 16)),
             (5, _span(1, 4) + _span(13, 16)), (6, _span(5, 8) + _span(9, 12)),
             (7, _span(1, 4)), (8, _span(5, 8)), (9, _span(9, 12)),
             (10, _span(13, 16))]
    table += [(11 + i, (2 * i + 1, 2 * i + 2)) for i in range(8)]
    table += _singles(19, _span(1, 16))
    return table


def _a100_8():
    # One baseboard: FM drops partitions with missing GPUs, ids unchanged.
    g = _span(1, 8)
    table = [(pid, m) for pid, m in _a100_table() if set(m) <= set(g)]
    return board_from_partitions('hgx-a100-8gpu', g, table)


def _a100_16():
    return board_from_partitions('hgx-a100-16gpu', _span(1, 16),
                                 _a100_table())


def _hgx2():
    g = _span(1, 16)
    table = [(0, g), (1, _span(1, 8)), (2, _span(9, 16)),
             (3, (1, 4, 6, 7, 9, 12, 14, 15)),
             (4, (2, 3, 5, 8, 10, 11, 13, 16)),
             (5, (1, 4, 6, 7)), (6, (2, 3, 5, 8)), (7, (9, 12, 14, 15)),
             (8, (10, 11, 13, 16)),
             (9, (1, 4)), (10, (2, 3)), (11, (5, 8)), (12, (6, 7)),
             (13, (9, 12)), (14, (10, 11)), (15, (13, 16)), (16, (14, 15))]
    table += _singles(17, g)
    return board_from_partitions('hgx-2-16gpu', g, table,
                                 aliases=('dgx-2-16gpu',))


def _hgx_h100_4():
    """HGX H100 4-GPU: four H100 SXM5, each pair linked directly by NV6.

    An H100 has 18 NVLink4 links; with no NVSwitch each GPU gives 6 to
    each of the other three. Public ``nvidia-smi topo -m`` captures of
    4-GPU Hopper nodes show ``NV6`` between every pair. Module ids 1-4.
    """
    return board_from_links('hgx-h100-4gpu', _span(1, 4),
                            _all_pairs(_span(1, 4), 6),
                            aliases=('hgx-h200-4gpu',))


def _hgx_a100_4():
    """HGX A100 4-GPU: four A100 SXM4, each pair linked directly by NV4.

    An A100 has 12 NVLink3 links (``nvidia-smi nvlink -s`` lists links
    0-11); with no NVSwitch each GPU gives 4 to each of the other three.
    Public captures of 4x A100-SXM4 nodes show ``NV4`` between every pair
    (``NV12`` is what the 8-GPU NVSwitch board shows). Module ids 1-4.
    """
    return board_from_links('hgx-a100-4gpu', _span(1, 4),
                            _all_pairs(_span(1, 4), 4))


def _gb200_tray():
    """GB200 NVL compute tray: four B200 GPUs, NV18 between every pair.

    Each B200 has 18 NVLink5 links, all going to the rack's NVLink Switch
    trays, which are outside the compute tray (its sysfs shows no
    NVSwitch). ``nvidia-smi topo -m`` on a tray shows ``NV18`` between
    every pair (public captures of GB200 trays: 4 GPUs, 2 Grace CPUs).
    For the tray, any N of its GPUs are linked. Module ids 1-4.
    """
    return board_from_links('gb200-tray-4gpu', _span(1, 4),
                            _all_pairs(_span(1, 4), 18))


# DGX-1 V100 wiring by module id (module i = GPU i-1): quads {1-4} {5-8}
# all-to-all inside, twins 1-5, 2-6, 3-7, 4-8 across; 6 NVLinks per GPU.
_DGX1_V100 = {(1, 2): 1, (1, 3): 1, (1, 4): 2, (2, 3): 2, (2, 4): 1,
              (3, 4): 2, (5, 6): 1, (5, 7): 1, (5, 8): 2, (6, 7): 2,
              (6, 8): 1, (7, 8): 2, (1, 5): 2, (2, 6): 2, (3, 7): 1,
              (4, 8): 1}


def _dgx1(name, v100):
    """DGX-1 (8 GPUs, no NVSwitch): the hybrid cube-mesh.

    Two quads {1-4} {5-8}, all-to-all inside, and one link from each GPU
    to its twin in the other quad (1-5, 2-6, 3-7, 4-8). P100 (4 NVLinks
    per GPU): every link ``NV1``. V100 (6 per GPU): ``NV1`` and ``NV2``
    mixed (:data:`_DGX1_V100`), 6 links on every GPU.

    Wiring sources: the ``nvidia-smi topo -m`` matrix of DGX-1 class
    V100 servers in many public reports (e.g. OneFlow benchmark reports,
    the pytorch/benchmarks distributed README: GPU0 NV1 to GPU1 and GPU2,
    NV2 to GPU3 and GPU4 ...), the NCCL topology dump of a DGX-1 V100 in
    NVIDIA/nccl issue 671 (per-pair NVLink counts, PCI addresses 06, 07,
    0a, 0b, 85, 86, 89, 8a), and for P100 the DGX-1 matrix of the
    University of Sheffield DGX-1 course notes (all ``NV1``).

    Module ids: DGX-1 drivers print none; module i here is ``GPU<i-1>`` of
    ``nvidia-smi topo -m`` (NVML index order, PCI order on a DGX-1), so
    give a mapping in that order.

    The tree keeps the two quads as meshes (any 2 or 4 GPUs of a quad).
    The cross-quad pairs (1-5, 2-6, 3-7, 4-8) cross both quads and cannot
    be in a laminar tree: a 2-GPU instance is never placed on such a pair
    although it is NVLinked, and 8-GPU instances are whole-host flavors.
    """
    links = dict(_DGX1_V100)
    if not v100:
        links = {pair: 1 for pair in links}
    return board_from_links(name, _span(1, 8), links)


BUILTIN = {b.name: b
           for b in (_h100(), _b200(), _a100_8(), _a100_16(), _hgx2(),
                     _hgx_h100_4(), _hgx_a100_4(), _gb200_tray(),
                     _dgx1('dgx-1-v100', True), _dgx1('dgx-1-p100', False))}
_ALIASES = {alias: b.name for b in BUILTIN.values() for alias in b.aliases}


def names():
    """All board names the catalog answers to, sorted."""
    return sorted(set(BUILTIN) | set(_ALIASES))


def get(name):
    """Return the built-in :class:`Board` for ``name`` (or an alias).

    :raises KeyError: for an unknown name.
    """
    return BUILTIN[_ALIASES.get(name, name)]
