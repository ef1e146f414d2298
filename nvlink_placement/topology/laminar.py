"""Laminar (nested) families of GPU sets.

A family is laminar when any two sets in it are disjoint or one contains the
other. Only laminar families map onto a resource provider tree. Fabric
Manager tables of some boards overlap (HGX A100 cross-tray 8-GPU partitions,
HGX-2 interleaved 8s), so we keep the largest laminar sub-family. Direct
NVLink wirings give meshes: the maximal cliques of the link graph, of which
:func:`mesh_family` keeps a laminar family, larger meshes first.
"""

import itertools

# Above this many conflicting sets the exact search is replaced by a greedy
# pass (largest sets first); real FM tables have at most 6 conflicting sets.
_EXACT_LIMIT = 16


def compatible(a, b):
    """True when sets ``a`` and ``b`` are disjoint or nested."""
    a, b = frozenset(a), frozenset(b)
    return not (a & b) or a <= b or b <= a


def conflicts(sets):
    """Return the index pairs ``(i, j)``, ``i < j``, of crossing sets."""
    sets = [frozenset(s) for s in sets]
    return [(i, j) for i, j in itertools.combinations(range(len(sets)), 2)
            if not compatible(sets[i], sets[j])]


def largest_laminar_family(sets):
    """Split ``sets`` into a largest laminar sub-family and the rest.

    Deterministic: among families of the same size, the one keeping the
    earliest sets (in input order) wins, so pass sets in a meaningful order
    (FM partition id order keeps whole baseboards before cross-tray sets).

    :param sets: sequence of iterables (GPU ids or addresses).
    :returns: ``(kept_indexes, dropped_indexes)``, both sorted lists.
    """
    pairs = conflicts(sets)
    if not pairs:
        return list(range(len(sets))), []
    involved = sorted({i for pair in pairs for i in pair})
    bad = set(pairs)

    def independent(chosen):
        return not any((a, b) in bad
                       for a, b in itertools.combinations(chosen, 2))

    keep_involved = None
    if len(involved) <= _EXACT_LIMIT:
        for size in range(len(involved), 0, -1):
            for chosen in itertools.combinations(involved, size):
                if independent(chosen):
                    keep_involved = chosen
                    break
            if keep_involved is not None:
                break
    else:
        order = sorted(involved, key=lambda i: (-len(set(sets[i])), i))
        chosen = []
        for i in order:
            if independent(sorted(chosen + [i])):
                chosen.append(i)
        keep_involved = chosen
    dropped = sorted(set(involved) - set(keep_involved))
    kept = [i for i in range(len(sets)) if i not in dropped]
    return kept, dropped


def cliques(nodes, edges):
    """Maximal cliques of the graph ``(nodes, edges)``, at least 2 nodes.

    Bron-Kerbosch with pivoting; graphs here have at most a few dozen
    GPUs.

    :param nodes: sequence of hashable nodes, in a meaningful order.
    :param edges: iterable of node pairs.
    :returns: list of tuples, members in ``nodes`` order, sorted by that
        order.
    """
    position = {n: i for i, n in enumerate(nodes)}
    near = {n: set() for n in nodes}
    for a, b in edges:
        if a != b:
            near[a].add(b)
            near[b].add(a)
    found = []

    def expand(clique, candidates, excluded):
        if not candidates and not excluded:
            if len(clique) > 1:
                found.append(tuple(sorted(clique, key=position.get)))
            return
        pivot = max(candidates | excluded, key=lambda n: len(near[n]))
        for node in sorted(candidates - near[pivot], key=position.get):
            expand(clique | {node}, candidates & near[node],
                   excluded & near[node])
            candidates = candidates - {node}
            excluded = excluded | {node}

    expand(frozenset(), set(nodes), set())
    return sorted(found, key=lambda c: [position[n] for n in c])


def mesh_family(nodes, edges):
    """Split the maximal cliques into a laminar family and the rest.

    Larger cliques first (ties: the one with the earliest nodes), each kept
    when it crosses none kept before. On a DGX-1 hybrid cube-mesh the two
    all-to-all quads are kept and the four cross-quad pairs dropped.

    :returns: ``(kept, dropped)``, lists of tuples as :func:`cliques` gives.
    """
    position = {n: i for i, n in enumerate(nodes)}

    def key(clique):
        return [position[n] for n in clique]

    kept, dropped = [], []
    for clique in sorted(cliques(nodes, edges),
                         key=lambda c: (-len(c), key(c))):
        if all(compatible(clique, other) for other in kept):
            kept.append(clique)
        else:
            dropped.append(clique)
    return sorted(kept, key=key), sorted(dropped, key=key)
