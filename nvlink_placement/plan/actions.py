"""Plan actions: what one write to Placement will do.

Order of application per host (DESIGN.md section 2): ``create-trait``,
``create-provider``, ``set-traits``, ``move-provider``, ``set-reserved``,
``delete-provider``. Creation goes top-down, moves go top-down by the
target depth (so no move can form a loop), deletions bottom-up.
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

COLUMNS = ('host', 'action', 'provider', 'parent', 'detail')


@dataclasses.dataclass
class Action:
    """One planned write.

    :ivar host: compute host the action belongs to ('' for a trait).
    :ivar action: one of :data:`ORDER`.
    :ivar provider: RP name (trait name for ``create-trait``).
    :ivar parent: target parent RP name ('' when not applicable).
    :ivar detail: human-readable detail.
    :ivar uuid: RP uuid when the RP exists already.
    :ivar add_traits: traits to add (``set-traits``).
    :ivar remove_traits: traits to remove (``set-traits``).
    :ivar reserved: new reserved value per resource class
        (``set-reserved``).
    """
    host: str
    action: str
    provider: str
    parent: str = ''
    detail: str = ''
    uuid: typing.Optional[str] = None
    add_traits: tuple = ()
    remove_traits: tuple = ()
    reserved: dict = dataclasses.field(default_factory=dict)

    def row(self):
        """The output row: ``(host, action, provider, parent, detail)``."""
        return (self.host, self.action, self.provider, self.parent,
                self.detail)
