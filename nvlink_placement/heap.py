"""Keep Python's cyclic garbage collector off long-lived data.

A ``--snapshot`` command holds the parsed snapshot, the topology and the
embedded Placement's database for its whole run: at 1000 hosts millions of
objects, none of them garbage. The collector's full passes walk all of
them again and again while Placement answers queries (about a quarter of
``flavor verify``'s CPU at 1000 hosts), and in a forked process each pass
writes to every object's header, so the pages shared with the parent are
copied. :func:`frozen` moves everything alive into the collector's
permanent generation (``gc.freeze``, which the Python documentation
advises before ``fork``) for the duration of a block; objects made inside
the block are collected as usual.

Why not a library: ``gc.freeze`` and ``gc.unfreeze`` are the standard
library's; what this module adds is the nesting (an inner block must not
unfreeze what the outer one froze), which neither ``gc`` nor any package
we know offers as a context manager.
"""

import contextlib
import gc


@contextlib.contextmanager
def frozen():
    """Within the block, the objects alive at its start are not scanned.

    Blocks nest: an inner one (``flavor verify`` forking inside an offline
    command's block) freezes what was made since, and the outermost block
    hands everything back to the collector when it ends (``gc.unfreeze``).
    """
    outermost = gc.get_freeze_count() == 0
    gc.freeze()
    try:
        yield
    finally:
        if outermost:
            gc.unfreeze()
