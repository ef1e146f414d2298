"""Warnings for a host that is valid but covers less than its board.

A topology can be valid and still leave GPUs out of the NVLink domains
they have: a host of a board lists only some of the board's GPUs, a host
of a board with NVLink domains ends up with none, or a host shows
NVSwitches (so its GPUs share a fabric split into domains) and names no
groups and no board, which is what host inspection gives without Fabric
Manager or ``--board``. Reshaping such a host works and changes little or
nothing; the operator is told instead of finding out from the flavors.

Pure: :func:`host_warnings` gets what the loader built.
"""


def _modules(ids):
    return ', '.join(map(str, sorted(ids)))


def host_warnings(board, gpus, groups, nvswitches):
    """What a host leaves out, as messages (empty when nothing).

    :param board: the host's :class:`nvlink_placement.topology.boards.Board`
        (built-in or from the file), or None.
    :param gpus: dict address -> :class:`nvlink_placement.topology.model.Gpu`
        (excluded GPUs count: they are on the board).
    :param groups: the host's :class:`nvlink_placement.topology.model.Group`
        list.
    :param nvswitches: the NVSwitch addresses the host lists.
    """
    found = []
    if board is not None:
        listed = {g.module_id for g in gpus.values()} & set(board.gpus)
        if len(gpus) < len(board.gpus):
            found.append(
                'lists %d of the %d GPUs of board %s (modules %s missing)%s: '
                'the missing ones stay out of its NVLink groups; list every '
                'GPU (host inspection does)' % (
                    len(gpus), len(board.gpus), board.name,
                    _modules(set(board.gpus) - listed),
                    ' and gets no NVLink group' if board.groups and not groups
                    else ''))
        elif board.groups and not groups:
            excluded = sum(1 for g in gpus.values() if g.excluded)
            found.append('board %s has NVLink domains, but this host gets '
                         'none%s' % (board.name, ' (%d of its GPUs are '
                                     'excluded)' % excluded if excluded
                                     else ''))
    elif nvswitches and not groups and len(gpus) > 1:
        found.append(
            'NVSwitches but no NVLink groups and no board: the domains of an '
            'NVSwitch board come from Fabric Manager or the board; inspect '
            'the host again with Fabric Manager (--fm-*) or --board, or set '
            'its board')
    return found
