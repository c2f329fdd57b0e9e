"""Offline work spread over the machine's cores: independent fits (one per outer fold
and algorithm of a cross-validation) run in worker processes, each with its share of
the cores, while the parent keeps the cluster work (uploads, live reranking).

Processes, not threads: the lambda objective and the networks are NumPy code whose
Python part holds the GIL. Workers are spawned (never forked: the parent may hold a
connection pool and the encoder's thread pool) with their threads capped through the
environment, so two workers on two cores do not each start two xgboost and two BLAS
threads. ``jobs`` 1 runs everything in the calling process, in order.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager

from ..errors import UserError

#: environment variables that cap a worker's threads (xgboost reads LTR_THREADS through
#: ``models.trees.default_threads``; the others bound BLAS and OpenMP pools)
THREAD_VARS = ("LTR_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
#: share of the available memory the copies of a data set in workers may take
MEMORY_SHARE = 0.5


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def available_memory() -> int | None:
    """Bytes of memory available now (Linux ``MemAvailable``), None when unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:  # pragma: no cover - not Linux
        return None
    return None


def default_jobs(tasks: int, data_bytes: int, per_copy: float = 12.0) -> int:
    """Workers for ``tasks`` fits of a data set of ``data_bytes``: the machine's cores,
    fewer when the copies (about ``per_copy`` x the data each: the training matrix, its
    padded pair blocks, the booster's own copy) would take more than
    :data:`MEMORY_SHARE` of the available memory. ``LTR_JOBS`` overrides it."""
    env = os.environ.get("LTR_JOBS")
    if env:
        return max(1, int(env))
    jobs = min(cores(), max(1, tasks))
    free = available_memory()
    if free and data_bytes > 0:
        jobs = min(jobs, max(1, int(free * MEMORY_SHARE // (per_copy * data_bytes))))
    return jobs


@contextmanager
def _capped_threads(threads: int):
    """The environment spawned workers inherit: ``threads`` per worker."""
    old = {v: os.environ.get(v) for v in THREAD_VARS}
    os.environ.update({v: str(threads) for v in THREAD_VARS})
    try:
        yield
    finally:
        for v, value in old.items():
            if value is None:
                os.environ.pop(v, None)
            else:
                os.environ[v] = value


_SHARED = None
#: per task, the share of its work done (workers write their own slot: :func:`report`)
_SLOTS = None
_SLOT = 0
#: seconds without a finished task after which the parent logs where the work stands
HEARTBEAT = 15.0


def _receive(shared, slots=None) -> None:
    global _SHARED, _SLOTS
    _SHARED, _SLOTS = shared, slots


def _call(fn, i, task):
    global _SLOT
    _SLOT = i
    return fn(_SHARED, *task)


def report(done: float, total: float) -> None:
    """Called from inside a task (in a worker, or here with ``jobs`` 1): ``done`` of its
    ``total`` units of work are done. The parent reads every running task's share for its
    progress lines (:func:`run_all`'s ``on_tick``); outside :func:`run_all`, nothing."""
    if _SLOTS is not None and total > 0:
        _SLOTS[_SLOT] = min(1.0, float(done) / float(total))
        if _ON_REPORT is not None:
            _ON_REPORT()


_ON_REPORT = None


def _standing(slots, finished: int, total: int, elapsed: float) -> dict:
    """Where the work stands: ``share`` of it done (finished tasks, and the running
    ones' reported shares), and the ETA at the pace so far (None before any share)."""
    share = sum(slots) / max(1, total)
    eta = elapsed * (1 - share) / share if share > 0.01 else None
    return {"done": finished, "total": total, "elapsed": elapsed, "share": share, "eta": eta}


def run_all(fn, tasks: list, jobs: int, shared=None,
            on_done=lambda i, result, progress: None, log=None,
            ready=lambda i: None, on_tick=None) -> list:
    """``[fn(shared, *task) for task in tasks]`` in ``jobs`` worker processes (in order,
    here, when ``jobs`` is 1). ``shared`` (e.g. the logged data set) is sent to each
    worker once; tasks stay small. ``on_done(i, result, progress)`` runs in this process
    as task ``i`` finishes; ``progress`` has ``done``, ``total``, ``elapsed`` and ``eta``
    seconds (the mean time per finished task times the tasks left). ``ready(i)`` runs in
    this process before task ``i`` starts (in order: tasks are handed out as workers free
    up) and may block until what the task needs is there. ``fn`` must be a module-level
    function of an importable module (not the main script); tasks are best given longest
    first. An error (in a fit or in ``on_done``) or Ctrl-C stops the fits at once: those
    not started are dropped, the running ones' workers terminated, and one line to
    ``log`` (default: standard error) says so before the error goes on. ``on_tick``: see
    :func:`_ticker` (tasks that call :func:`report` count their part of the work)."""
    start = time.monotonic()
    results: list = [None] * len(tasks)
    done = [0]
    ctx = multiprocessing.get_context("spawn")
    spread = jobs > 1 and len(tasks) > 1
    slots = ctx.Array("d", len(tasks), lock=False) if spread else [0.0] * len(tasks)

    def finished(i, result):
        results[i] = result
        done[0] += 1
        slots[i] = 1.0
        elapsed = time.monotonic() - start
        on_done(i, result, {"done": done[0], "total": len(tasks), "elapsed": elapsed,
                            "eta": elapsed / done[0] * (len(tasks) - done[0])})
    tick = _ticker(on_tick, slots, done, len(tasks), start)
    if not spread:
        return _in_order(fn, tasks, shared, slots, ready, finished, tick, results)
    jobs = min(jobs, len(tasks))
    with _capped_threads(max(1, cores() // jobs)), _main_left_alone():
        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx,
                                   initializer=_receive, initargs=(shared, slots))
        pending: dict = {}
        try:
            _hand_out(pool, [(i, fn, task) for i, task in enumerate(tasks)], jobs, ready,
                      pending, finished, tick)
        except BrokenProcessPool:
            raise UserError("a worker process of the parallel fits died (out of memory?)",
                            "run with LTR_JOBS=1, or fewer, to fit one fold at a time") from None
        except BaseException as exc:
            _stop(pool, pending, len(tasks) - done[0], len(tasks), exc, log)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    return results


def _ticker(on_tick, slots, done: list, total: int, start: float):
    """A function that calls ``on_tick(progress)`` when no task has finished for
    :data:`HEARTBEAT` seconds, and again every as long: ``progress`` (:func:`_standing`)
    has the ``share`` of all the work done and its ``eta`` at that pace (None before any
    share is known). ``on_tick`` None: nothing to do."""
    if on_tick is None:
        return lambda: None
    last = [start, done[0]]

    def tick():
        now = time.monotonic()
        if done[0] != last[1]:
            last[:] = [now, done[0]]
        elif now - last[0] >= HEARTBEAT:
            last[0] = now
            on_tick(_standing(slots, done[0], total, now - start))
    return tick


def _in_order(fn, tasks, shared, slots, ready, finished, tick, results) -> list:
    """:func:`run_all` in this process: each task in order, its reports ticking here."""
    global _SLOTS, _SLOT, _ON_REPORT
    saved = (_SLOTS, _SLOT, _ON_REPORT)
    _SLOTS, _ON_REPORT = slots, tick
    try:
        for i, task in enumerate(tasks):
            ready(i)
            _SLOT = i
            finished(i, fn(shared, *task))
    finally:
        _SLOTS, _SLOT, _ON_REPORT = saved
    return results


def _hand_out(pool: ProcessPoolExecutor, calls: list, jobs: int, ready, pending: dict,
              finished, tick=lambda: None) -> None:
    """``calls`` (i, fn, task) to the pool in order, ``jobs`` at a time, each after
    ``ready(i)``; ``finished(i, result)`` as each ends, once the next is handed out (a
    worker does not wait for this process's work on the last result). ``pending``: the
    running ones."""
    left = iter(calls)

    def hand_next() -> None:
        call = next(left, None)
        if call is not None:
            ready(call[0])
            pending[pool.submit(_call, call[1], call[0], call[2])] = call[0]

    for _ in range(jobs):
        hand_next()
    while pending:
        ended, _ = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
        tick()
        for fut in ended:
            i = pending.pop(fut)
            result = fut.result()
            hand_next()
            finished(i, result)


def _stop(pool: ProcessPoolExecutor, pending: dict, undone: int, total: int, exc: BaseException,
          log) -> None:
    """Terminate the workers of the running fits (the pool would wait for each), and say
    so in one line (``undone``: the fits of ``total`` not finished, started or not)."""
    if not pending:
        return
    for fut in pending:
        fut.cancel()
    workers = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in workers:
        p.terminate()
    for p in workers:
        p.join(5)
    why = "on Ctrl-C" if isinstance(exc, KeyboardInterrupt) else "after an error"
    line = (f"parallel fits stopped {why}: {len(workers)} worker processes terminated, "
            f"{undone} of {total} fits left undone")
    if log is None:
        print(line, file=sys.stderr, flush=True)
    else:
        log(line)


@contextmanager
def _main_left_alone():
    """Spawned workers import the parent's main script again (to find what a pickle
    names there), running its top-level code: a user's script without an ``if __name__
    == "__main__":`` guard would start the fits again in every worker, which dies. The
    fits need nothing from it (``fn`` is a module-level function of an importable
    module), so while the workers start, the main module names no file to import."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)
