"""The fits' compiled kernels compiled once, ahead of the fits, into numba's cache.

numba compiles a kernel at its first call in a process unless its cache holds it
(``cache=True``: ``__pycache__`` beside the module, numba's user cache directory where
that is not writable, or ``NUMBA_CACHE_DIR``). Right after an install the cache is empty,
and the parallel fits' worker processes, started together, each compiled every kernel at
their first fit of each family (measured, one process on 2 busy cores: about 10 s for
the trees' kernels, 10 s for the networks', 16 s for the linear model's; the issue's
first LambdaMART fits of ``ltr demo`` took 29 s against 6 s warm). :func:`start`
compiles them once, family by family in the fits' order, in a background process, while
the caller does other work (logging the candidates); each family's first fit waits for
its kernels (:meth:`Warmup.wait`), and the workers load them from the cache (a few
tenths of a second a process) while the later families' compile. With the cache warm
the background process only loads them, about a second of one core.

The kernels are compiled by the estimators' own code on a tiny data set, so their
argument types, hence the signatures cached, are those of the real fits. Not covered:
the tree objective's multi-threaded kernel (data sets of at least
``rank.pairs.PARALLEL_PAIRS`` pairs, whose fits are long next to its compile) and
the scoring kernels of ``ltr predict`` and the reader (``io.compiled``'s policy).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

#: the order the kernels are compiled in: that of the cross-validation's fits
#: (trees first, linear last)
ORDER = ("lambdamart", "ranknet-tree", "lambdarank-nn", "ranknet-nn", "linear")
#: seconds from the start :meth:`Warmup.wait` waits until at most (then the fits compile
#: what is left)
WAIT_SECONDS = 600.0


def _tiny():
    """Two queries of three documents, two features, every grade different."""
    from ..data.dataset import RankingDataset
    X = np.array([[0.1, 1.0], [0.5, 0.0], [0.9, 0.5]] * 2, dtype=np.float32)
    y = np.array([0.0, 1.0, 2.0, 2.0, 0.0, 1.0])
    return RankingDataset(X, y, np.array([0, 3, 6]), ["1", "2"])


def compile_kernels(algos, k: int = 10, report=lambda algo, seconds: None) -> dict[str, float]:
    """Call the kernels the fits of ``algos`` call, through the estimators' own code on
    :func:`_tiny` data (compiled, or loaded from the cache), in :data:`ORDER`; seconds per
    algorithm, each also given to ``report`` as soon as its kernels are in the cache."""
    from .neural import ALGOS as NEURAL_ALGOS, NeuralRanker
    from .trees import LambdaMART
    ds, seconds = _tiny(), {}
    for algo in sorted(set(algos), key=lambda a: ORDER.index(a) if a in ORDER else len(ORDER)):
        t = time.perf_counter()
        if algo in NEURAL_ALGOS:
            NeuralRanker(algo=algo, k=k, epochs=1, hidden=(2,)).fit(ds)
        else:
            LambdaMART(algo=algo, k=k).rank_pairs(ds.y, ds.offsets).grad_hess(np.zeros(ds.n_docs))
        seconds[algo] = round(time.perf_counter() - t, 3)
        report(algo, seconds[algo])
    return seconds


class Warmup:
    """:func:`compile_kernels` running in a background process (None: nothing to
    compile): ``seconds`` fills in, algorithm by algorithm, as their kernels are cached."""

    def __init__(self, proc: subprocess.Popen | None, algos=()):
        self.proc, self.algos = proc, list(algos)
        self.seconds: dict[str, float] = {}
        self.deadline = time.monotonic() + WAIT_SECONDS
        self._changed = threading.Condition()
        self._ended = proc is None
        if proc is not None:
            threading.Thread(target=self._read, name="ltr-warmup", daemon=True).start()

    def _read(self) -> None:
        """The process's lines ``algorithm seconds`` (numba's debugging output, if on,
        among them) as they come, then its end."""
        for line in self.proc.stdout:
            words = line.decode(errors="replace").split()
            if len(words) == 2 and words[0] in self.algos:
                with self._changed:
                    self.seconds[words[0]] = float(words[1])
                    self._changed.notify_all()
        self.proc.wait()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def wait(self, algos=None) -> bool:
        """Until the kernels of ``algos`` (None: all it compiles) are in the cache, the
        process ended (failed: the fits compile what they miss, as before) or
        :data:`WAIT_SECONDS` from the start passed; whether they are."""
        want = [a for a in (self.algos if algos is None else algos) if a in self.algos]
        with self._changed:
            self._changed.wait_for(lambda: self._ended or all(a in self.seconds for a in want),
                                   timeout=max(0.0, self.deadline - time.monotonic()))
            return all(a in self.seconds for a in want)

    def stop(self) -> None:
        """End the background process if it still runs (the caller is done with it)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> "Warmup":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start(algos, k: int = 10) -> Warmup:
    """:func:`compile_kernels` for ``algos`` in a background process, one thread, with
    this process's environment (the same numba cache) and this copy of the toolkit
    (the same source files, which key the cache); nothing to start when no
    algorithm has compiled kernels."""
    algos = [a for a in ORDER if a in set(algos)]
    if not algos:
        return Warmup(None)
    root = str(Path(__file__).resolve().parents[2])
    code = (f"import sys\nif {root!r} not in sys.path: sys.path.insert(0, {root!r})\n"
            f"from {__name__} import main\nmain(sys.argv[1:])")
    proc = subprocess.Popen([sys.executable, "-c", code, str(int(k)), *algos],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=dict(os.environ, LTR_THREADS="1"))
    return Warmup(proc, algos)


def main(argv: list[str]) -> None:
    compile_kernels(argv[1:], int(argv[0]), lambda algo, s: print(algo, s, flush=True))
