"""Built-in board catalog: NVLink domains of HGX baseboards by module id.

Source: NVIDIA Fabric Manager User Guide, "Default GPU partitions" tables
(see ``shared/reference/fabric-manager.md``). Module id = FM physical id.
Each board lists every default partition; the NVLink domains are the
partitions with more than one GPU, reduced to the largest laminar family
(:func:`nvlink_placement.topology.laminar.largest_laminar_family`) where
the table overlaps. Which partitions are left out is kept in
:attr:`Board.dropped` and shown in the docs.
"""

import collections

from nvlink_placement.topology import laminar

Board = collections.namedtuple('Board', 'name gpus groups dropped aliases')
Board.__doc__ = """A baseboard's GPUs and NVLink domains.

:ivar name: catalog name, e.g. ``hgx-h100-8gpu``.
:ivar gpus: tuple of module ids (ints).
:ivar groups: tuple of tuples of module ids; laminar, each with more than
    one GPU and fewer than all (those create no resource provider).
:ivar dropped: tuple of ``(partition_id, members)`` left out because they
    cross other partitions.
:ivar aliases: other board names served by the same table.
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


BUILTIN = {b.name: b
           for b in (_h100(), _b200(), _a100_8(), _a100_16(), _hgx2())}
_ALIASES = {alias: b.name for b in BUILTIN.values() for alias in b.aliases}


def names():
    """All board names the catalog answers to, sorted."""
    return sorted(set(BUILTIN) | set(_ALIASES))


def get(name):
    """Return the built-in :class:`Board` for ``name`` (or an alias).

    :raises KeyError: for an unknown name.
    """
    return BUILTIN[_ALIASES.get(name, name)]
