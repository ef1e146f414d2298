"""Read-only work in forked processes: ``[function(item) for item in items]``.

For work that only reads what this process holds in memory, such as the
allocation-candidate queries ``flavor verify`` sends to an embedded
Placement loaded from a snapshot (SQLite in memory: each forked process
reads its own copy, nothing is written back). The items are spread over
up to ``workers`` processes forked from this one, so nothing is pickled
on the way in; each result is pickled back.

An item whose process fails (the function raises, or its result does not
pickle) is run again here, in order, so that its exception is raised
exactly as it is without this module. Where ``fork`` is not available, or
one worker is asked for, everything runs here.

Why not a library: this is ``multiprocessing``'s ``Pool`` with the fork
context; the code around it is what no executor does. ``Pool.map``,
``concurrent.futures.ProcessPoolExecutor`` (``mp_context`` fork) and
OpenStack's ``futurist`` pickle every item to the workers (here they
inherit them), give up the whole map at the first failure (here only the
failing item runs again, in this process, to raise its own exception),
and neither empties the inherited stdio buffers nor freezes the heap
(:mod:`.heap`) before the fork.
"""

import multiprocessing
import os
import sys

from nvlink_placement import heap

# What the forked processes run: (function, items), set before they fork.
_WORK = None


def _call(index):
    function, items = _WORK
    try:
        return True, function(items[index])
    except Exception:   # run again in the parent, which raises it
        return False, None


def forkmap(function, items, workers):
    """The list ``[function(item) for item in items]``.

    :param workers: most processes at once (``os.cpu_count()`` for as
        many as there are cores); fewer when there are fewer items.
    :raises: whatever ``function`` raises for the first failing item, as
        a plain loop would.
    """
    global _WORK
    items = list(items)
    workers = min(workers or 1, len(items))
    if workers < 2 or 'fork' not in multiprocessing.get_all_start_methods():
        return [function(item) for item in items]
    # A forked process flushes the buffers it inherited when it ends:
    # empty them first, or their text would be written twice.
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    _WORK = (function, items)
    try:
        with heap.frozen(), \
                multiprocessing.get_context('fork').Pool(workers) as pool:
            pending = [pool.apply_async(_call, (i,))
                       for i in range(len(items))]
            answers = []
            for one in pending:
                try:
                    answers.append(one.get())
                except Exception:   # a result that does not pickle
                    answers.append((False, None))
    finally:
        _WORK = None
    return [result if done else function(item)
            for (done, result), item in zip(answers, items)]


def workers():
    """The processes worth forking here: the cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
