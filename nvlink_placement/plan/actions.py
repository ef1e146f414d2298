"""Plan actions: what one write (or pair of writes) to Placement will do.

Order of application per host (design.rst s2): ``create-trait``,
``create-provider``, ``set-traits``, ``move-provider``, ``set-reserved``,
``delete-provider``. Creation goes top-down, moves go top-down by the
target depth (so no move can form a loop), deletions bottom-up.

Each action also names the drift it repairs, for ``check``:
``missing-group``, ``missing-trait``, ``wrong-parent``,
``unexpected-group``, ``missing-reservation``, ``stale-reservation``;
findings that no action repairs use ``unknown-gpu``, ``excluded-gpu``
(a Nova PCI provider of a GPU the topology excludes: nova-compute's
``[pci] device_spec`` matches a GPU serving vGPU or MIG),
``member-traits`` (a GPU provider's member traits differ from those the
topology gives it: Nova writes them from ``[pci] device_spec``, the tool
never does) and ``split-allocation`` (and ``missing-reservation`` for an
unhealthy GPU in no group) (a consumer holds GPUs of more than one NVLink
domain of its size: it has no NVLink between them).
"""

import dataclasses
import typing

CREATE_TRAIT = 'create-trait'
CREATE_PROVIDER = 'create-provider'
SET_TRAITS = 'set-traits'
MOVE_PROVIDER = 'move-provider'
SET_RESERVED = 'set-reserved'
DELETE_PROVIDER = 'delete-provider'

ORDER = (CREATE_TRAIT, CREATE_PROVIDER, SET_TRAITS, MOVE_PROVIDER,
         SET_RESERVED, DELETE_PROVIDER)

MISSING_GROUP = 'missing-group'
MISSING_TRAIT = 'missing-trait'
WRONG_PARENT = 'wrong-parent'
UNEXPECTED_GROUP = 'unexpected-group'
MISSING_RESERVATION = 'missing-reservation'
STALE_RESERVATION = 'stale-reservation'
UNKNOWN_GPU = 'unknown-gpu'
MEMBER_TRAITS = 'member-traits'
EXCLUDED_GPU = 'excluded-gpu'
SPLIT_ALLOCATION = 'split-allocation'

COLUMNS = ('host', 'action', 'provider', 'parent', 'detail')
CHECK_COLUMNS = COLUMNS + ('drift', 'repair')


@dataclasses.dataclass
class Action:
    """One planned write.

    :ivar host: compute host the action belongs to ('' for a trait).
    :ivar action: one of :data:`ORDER`, or '' for a finding (no write).
    :ivar provider: RP name (trait name for ``create-trait``).
    :ivar parent: target parent RP name ('' when not applicable).
    :ivar detail: human-readable detail.
    :ivar drift: the drift kind this action repairs (see module doc).
    :ivar uuid: RP uuid when the RP exists already.
    :ivar add_traits: traits to add (``set-traits``).
    :ivar remove_traits: traits to remove (``set-traits``).
    :ivar reserve: ``set-reserved``: True to reserve all, False to release.
    :ivar marker: ``set-reserved``: the marker trait recording it.
    :ivar marker_provider: name of the group RP that carries the marker.
    :ivar consumer: ``split-allocation``: the consumer (instance) uuid.
    """
    host: str
    action: str
    provider: str
    parent: str = ''
    detail: str = ''
    drift: str = ''
    uuid: typing.Optional[str] = None
    add_traits: tuple = ()
    remove_traits: tuple = ()
    reserve: typing.Optional[bool] = None
    marker: str = ''
    marker_provider: str = ''
    consumer: str = ''

    def row(self):
        """The output row: ``(host, action, provider, parent, detail)``."""
        return (self.host, self.action, self.provider, self.parent,
                self.detail)

    def check_row(self, repair):
        """The ``check`` row: :meth:`row`, the drift kind and ``repair``.

        ``repair``: the command that repairs it, or what to do by hand
        (:mod:`nvlink_placement.plan.repair`).
        """
        return self.row() + (self.drift, repair)
