"""The fits' compiled kernels compiled once, ahead of the fits (``models.warmup``): after
the warm-up, the workers of the parallel fits load every kernel they call from numba's
cache and compile none, where without it each compiles them."""

from __future__ import annotations

import sys

import numpy as np

from ltr_toolkit.data.dataset import RankingDataset
from ltr_toolkit.models import warmup
from ltr_toolkit.pipeline import parallel
from ltr_toolkit.pipeline.crossval import _fit_fold

KERNEL_MODULES = ("ltr_toolkit.rank.kernel", "ltr_toolkit.models.netkernel")
#: short fits of each family with the settings' types of the real ones
SETTINGS = {"lambdamart": {"trees": 3, "depth": 2}, "lambdarank-nn": {"epochs": 2, "hidden": (4,)},
            "linear": {"epochs": 2}}


def _kernel_stats() -> dict[str, tuple[int, int]]:
    """(signatures loaded from the cache, signatures compiled) of each compiled kernel
    this process called itself (those only called from other kernels have none)."""
    from numba.core.registry import CPUDispatcher
    stats = {}
    for name in KERNEL_MODULES:
        for fn_name, fn in vars(sys.modules.get(name, sys)).items():
            if isinstance(fn, CPUDispatcher) and fn.signatures:
                s = fn.stats
                stats[f"{name}.{fn_name}"] = (sum(s.cache_hits.values()), sum(s.cache_misses.values()))
    return stats


def _fit_then_stats(ds, algo, keep):
    """A fold fit as the cross-validation's workers run it, then :func:`_kernel_stats`."""
    _fit_fold(ds, algo, 0, keep, 10, 7, SETTINGS[algo], "synthetic", 0)
    return _kernel_stats()


def _data() -> RankingDataset:
    """12 queries of 30 documents, 8 features, grades 0-4 (seeded)."""
    rng = np.random.default_rng(3)
    n = 12 * 30
    return RankingDataset(rng.random((n, 8)), rng.integers(0, 5, n), np.arange(0, n + 1, 30),
                          [f"q{i}" for i in range(12)])


def _worker_stats(algos) -> dict[str, tuple[int, int]]:
    """Each family of ``algos`` fitted twice in two worker processes started for it (as
    the cross-validation's), their kernels' statistics summed."""
    ds = _data()
    keep = frozenset(ds.qids[:9])
    merged: dict[str, tuple[int, int]] = {}
    for algo in algos:
        got = parallel.run_all(_fit_then_stats, [(algo, keep), (algo, keep)], jobs=2, shared=ds)
        for stats in got:
            for name, (hits, misses) in stats.items():
                old = merged.get(name, (0, 0))
                merged[name] = (old[0] + hits, old[1] + misses)
    return merged


def test_after_the_warm_up_the_workers_compile_no_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba-cache"))   # empty: an install
    warm = warmup.start(list(SETTINGS))
    assert warm.wait() and set(warm.seconds) == set(SETTINGS)
    stats = _worker_stats(SETTINGS)
    called = {"rank.kernel.tree_grad_hess_serial", "rank.kernel.query_lambdas",
              "models.netkernel.linear_epoch"}
    assert {n.removeprefix("ltr_toolkit.") for n in stats} == called
    assert {n: misses for n, (_, misses) in stats.items() if misses} == {}
    assert all(hits >= 1 for hits, _ in stats.values())


def test_without_the_warm_up_each_worker_compiles_the_kernels(tmp_path, monkeypatch):
    """The case the warm-up removes (and the statistics the test above reads can tell
    it): an empty cache, the workers compiling what they call (one family: the
    cheapest to compile)."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba-cache"))
    stats = _worker_stats(["lambdarank-nn"])
    assert stats and all(misses >= 1 for _, misses in stats.values())


def test_the_warm_up_of_nothing_compiled_starts_nothing():
    warm = warmup.start(["no-such-algorithm"])
    assert warm.proc is None and warm.wait() and warm.seconds == {}
