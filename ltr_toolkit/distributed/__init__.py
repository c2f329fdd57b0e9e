"""Training beyond one machine on Dask (``ltr train --dask ADDRESS`` / ``--dask local:N``).

``ranges``: the training files planned into partitions of whole queries (byte ranges of
the files, cut only where the query id changes) that the workers read in parallel;
``dask_trees``: LambdaMART / RankNet-trees on ``xgboost.dask`` with the toolkit's own
objective, computed on every worker for the queries it holds (a query is never split, so
its lambdas are those of one process), the validation NDCG summed over all workers.
``encoding``: document vectors encoded on the workers (``ltr index jsonl --dask``), the
encoder loaded once per worker process.
Dask is an optional dependency (``pip install "ltr-toolkit[dask]"``): nothing here imports
it before it is asked for.
"""

from __future__ import annotations

import contextlib
import logging
import os

from ..errors import UserError

INSTALL = 'pip install "ltr-toolkit[dask]"  (or: pip install "dask[distributed]")'


def require():
    """``(dask, distributed)``, or a one-line error saying how to install them."""
    try:
        import dask
        import distributed
    except ImportError:
        raise UserError("--dask needs Dask (dask.distributed), which is not installed",
                        INSTALL) from None
    return dask, distributed


def local_workers(address: str) -> int | None:
    """N for ``local:N``; None for a scheduler address."""
    if not address.startswith("local"):
        return None
    _, _, n = address.partition(":")
    try:
        workers = int(n) if n else 2
    except ValueError:
        workers = 0
    if workers < 1:
        raise UserError(f"--dask {address!r}: expected local:N with N >= 1 workers, "
                        "or a scheduler address such as tcp://host:8786")
    return workers


@contextlib.contextmanager
def connect(address: str, threads_per_worker: int | None = None):
    """A ``distributed.Client`` for ``address``: ``local:N`` starts a LocalCluster of N
    worker processes (one thread each unless the machine has cores to spare) and stops
    it at the end; anything else is a running scheduler's address. A worker that dies
    on a task as often as the scheduler allows (out of memory, killed) ends the work in
    one line (:func:`_worker_died`), not a traceback."""
    _, distributed = require()
    try:
        with _client(distributed, address, threads_per_worker) as client:
            yield client
    except distributed.KilledWorker as exc:
        raise _worker_died(exc) from None


def _worker_died(exc) -> UserError:
    task = exc.args[0] if exc.args else "a task"
    return UserError(f"a Dask worker died running {task} as often as the scheduler allows "
                     "(out of memory, or killed)",
                     "give the workers more memory (dask worker --memory-limit) or fewer threads, "
                     "and run the command again: ltr index resumes at the batches not kept, "
                     "ltr train starts over")


@contextlib.contextmanager
def _client(distributed, address: str, threads_per_worker: int | None):
    n = local_workers(address)
    if n is None:
        try:
            client = distributed.Client(address, timeout="20s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise UserError(f"no Dask scheduler answers at {address}: {exc}",
                            "start one (dask scheduler) or use --dask local:N") from None
        with client:
            yield client
        return
    threads = threads_per_worker or max(1, (os.cpu_count() or 1) // n)
    with distributed.LocalCluster(n_workers=n, threads_per_worker=threads, processes=True,
                                  dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            distributed.Client(cluster) as client:
        yield client
