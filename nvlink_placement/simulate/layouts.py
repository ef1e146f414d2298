"""Run the layouts of one simulation side by side, each in its process.

A layout's run is one sequence of requests to its own embedded Placement,
and an embedded Placement is one per process (wsgi-intercept and the
database facade are process-wide). So the layouts run at once, each in a
forked process (one per layout, up to the CPUs): comparing the flat and
the reshaped layout takes about the time of the slower one, not the sum.
"""

import concurrent.futures
import multiprocessing
import os

from nvlink_placement.simulate import engine

#: Events done, over every process (shared memory, made before forking).
_DONE = None


def _tick():
    with _DONE.get_lock():
        _DONE.value += 1


def _one(document, hosts, layout, workload, flavors, rc, save, progress):
    from nvlink_placement.placement import embedded
    with embedded.EmbeddedPlacement(document) as client:
        result = engine.simulate(client, hosts, layout, workload, flavors,
                                 rc, progress=progress)
        return result, client.placement.export() if save else None


def run(document, hosts, layouts, runs, workload, rc, save=False,
        progress=None, processes=None):
    """Simulate ``workload`` on each layout; see :func:`engine.simulate`.

    :param document: the starting snapshot (validated), loaded into each
        layout's embedded Placement.
    :param runs: dict layout -> its flavors (:func:`engine.flavors_by_size`).
    :param save: also export each layout's final state.
    :param progress: optional callable(events done since the last call).
    :param processes: at most this many at once (default: the CPUs); 1
        runs them one after the other in this process.
    :returns: list of ``(Result, final snapshot or None)`` in ``layouts``
        order.
    :raises NvlinkError: a layout failed (the first one, in order).
    """
    processes = min(len(layouts), processes or os.cpu_count() or 1)
    if processes <= 1:
        tick = (lambda: progress(1)) if progress else None
        return [_one(document, hosts, layout, workload, runs[layout], rc,
                     save, tick) for layout in layouts]
    global _DONE
    context = multiprocessing.get_context('fork')
    _DONE = context.Value('q', 0)
    seen = 0
    with concurrent.futures.ProcessPoolExecutor(
            processes, mp_context=context) as pool:
        futures = [pool.submit(_one, document, hosts, layout, workload,
                               runs[layout], rc, save, _tick)
                   for layout in layouts]
        pending = set(futures)
        while pending:
            _, pending = concurrent.futures.wait(pending, timeout=0.5)
            if progress is not None and _DONE.value > seen:
                progress(_DONE.value - seen)
                seen = _DONE.value
        return [f.result() for f in futures]
