"""Run the layouts and seeds of one simulation, each in its own process.

A run (one layout, one seed) is one sequence of requests to its own
embedded Placement, and an embedded Placement is one per process
(wsgi-intercept and the database facade are process-wide). Each run gets
a fresh Python process (``spawn``) whose string hash seed
(``PYTHONHASHSEED``) comes from the run's seed (:func:`hash_seed`): the
order in which Placement lists allocation candidates and Nova's host
manager yields hosts of equal weight comes from sets, so from that hash
seed (:mod:`.choice`). Every layout of a seed runs with the same hash
seed, as one cloud would; another seed is another Placement and scheduler
process. The runs go at once, up to one per CPU.
"""

import concurrent.futures
import dataclasses
import multiprocessing
import os
import threading
import traceback

from nvlink_placement import errors
from nvlink_placement.simulate import engine

#: Guards ``os.environ`` while a process starts with its hash seed.
_ENV_LOCK = threading.Lock()
HASH_SEED = 'PYTHONHASHSEED'


def hash_seed(seed):
    """The ``PYTHONHASHSEED`` of the runs of workload seed ``seed``."""
    return seed % 4294967296


def _child(conn, done, job):
    """A run's process: sends ``('ok', (Result, state))`` or an error."""
    document, hosts, layout, workload, flavors, rc, options = job
    from nvlink_placement.placement import embedded

    def tick():
        with done.get_lock():
            done.value += 1
    try:
        with embedded.EmbeddedPlacement(document) as client:
            result = engine.simulate(
                client, hosts, layout, workload, flavors, rc, progress=tick,
                shuffle=options['shuffle'],
                numa_sizes=options['numa_sizes'].get(layout, ()))
            state = client.placement.export() if options['save'] else None
        conn.send(('ok', (result, state)))
    except errors.NvlinkError as exc:
        conn.send(('error', str(exc)))
    except Exception:
        conn.send(('crash', traceback.format_exc()))
    finally:
        conn.close()


class _Started(object):
    """The runs' processes, and whether to start no more."""

    def __init__(self):
        self.processes = []
        self.stopped = False

    def stop(self):
        with _ENV_LOCK:
            self.stopped = True
            for process in self.processes:
                process.terminate()


def _start(context, done, job, seed, started):
    """Start one run's process with the seed's hash seed; its pipe end.

    :param started: :class:`_Started`, which the process is added to.
    """
    with _ENV_LOCK:
        if started.stopped:
            raise errors.NvlinkError('stopped')
        receive, send = context.Pipe(duplex=False)
        before = os.environ.get(HASH_SEED)
        os.environ[HASH_SEED] = str(hash_seed(seed))
        try:
            process = context.Process(target=_child, args=(send, done, job),
                                      daemon=True)
            process.start()
            started.processes.append(process)
        finally:
            if before is None:
                del os.environ[HASH_SEED]
            else:
                os.environ[HASH_SEED] = before
    send.close()
    return process, receive


def _one(context, done, job, seed, started):
    process, receive = _start(context, done, job, seed, started)
    try:
        status, value = receive.recv()
    except EOFError:
        process.join()
        raise errors.NvlinkError(
            'the simulation of seed %d, layout %s, stopped (exit code %s)'
            % (seed, job[2], process.exitcode))
    finally:
        receive.close()
    process.join()
    if status == 'error':
        raise errors.NvlinkError(value)
    if status == 'crash':
        raise RuntimeError('the simulation of seed %d, layout %s failed:\n%s'
                           % (seed, job[2], value))
    return value


def run(document, hosts, layouts, runs, workload, rc, seeds=1, save=False,
        progress=None, processes=None, shuffle=False, numa_sizes=None):
    """Simulate ``workload`` on each layout, for ``seeds`` seeds.

    :param document: the starting snapshot (validated), loaded into each
        run's embedded Placement.
    :param runs: dict layout -> its flavors (:func:`engine.flavors_by_size`).
    :param seeds: how many seeds: the workload's seed, then the next ones
        (seed + 1, ...), each with its own events and hash seed.
    :param save: also export each layout's final state (first seed only).
    :param progress: optional callable(events done since the last call).
    :param processes: at most this many at once (default: the CPUs).
    :param shuffle: see :func:`engine.simulate`.
    :param numa_sizes: dict layout -> sizes NUMATopologyFilter keeps on
        one node (:func:`engine.simulate`).
    :returns: list (one per seed, in seed order) of lists of ``(Result,
        final snapshot or None)`` in ``layouts`` order.
    :raises NvlinkError: a run failed (the first one, in order).
    """
    jobs = []
    for number in range(seeds):
        seeded = dataclasses.replace(workload, seed=workload.seed + number)
        options = {'save': save and number == 0, 'shuffle': shuffle,
                   'numa_sizes': numa_sizes or {}}
        for layout in layouts:
            jobs.append(((document, hosts, layout, seeded, runs[layout], rc,
                          options), seeded.seed))
    context = multiprocessing.get_context('spawn')
    done = context.Value('q', 0)
    seen, started = 0, _Started()
    workers = max(1, min(len(jobs), processes or os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = [pool.submit(_one, context, done, job, seed, started)
                   for job, seed in jobs]
        pending = set(futures)
        while pending:
            _, pending = concurrent.futures.wait(pending, timeout=0.5)
            if progress is not None and done.value > seen:
                progress(done.value - seen)
                seen = done.value
            failed = next((f for f in futures if f.done() and
                           not f.cancelled() and f.exception()), None)
            if failed is not None:
                # Stop the rest: nothing more is needed from them.
                for future in pending:
                    future.cancel()
                started.stop()
                raise failed.exception()
        values = [f.result() for f in futures]
    per_seed = len(layouts)
    return [values[i:i + per_seed] for i in range(0, len(values), per_seed)]
