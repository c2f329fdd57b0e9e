"""``ltr monitor``'s verdicts simulated (issue 59): how often an unchanged feature set
raises an alarm (whole-set false alarms) across feature sets of every shape, and how often
a real change is caught.

Each simulated run draws a reference and a new snapshot from the same population of
queries: ``features`` columns of mixed shapes (a BM25-like score missing where it does not
match, a heavy-tailed numeric field, a binary flag, a small count, a zero-inflated
score, a Gaussian; cycled), ``rows`` documents per query, their values correlated within
a query by ``rho`` (a query effect shared by its rows), ``queries`` queries a side. The
monitor's drift check (``evaluation.drift.feature_drift``: thresholds calibrated on the
reference, max-statistic) says ``ok`` or not; a false alarm is any feature flagged.

Power: the same runs with one change made to the new snapshot (a field dropped: its
feature all missing; a number rescaled x100; an analyzer change: a BM25-like feature's
values permuted across the documents of each query; a 10% shift of one feature's mean;
a model whose held-out gain halves, through ``evaluation.decay.decay``).

Each rate with its Wilson 95% interval; the table and a PNG into benchmarks/results/.

    python -m benchmarks.monitor_sim [--runs N]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy.special import ndtr

from benchmarks._report import finish, pyplot, write_table
from ltr_toolkit.evaluation import decay as D
from ltr_toolkit.evaluation import drift
from ltr_toolkit.pipeline.monitor import ALPHA, DECAY_ALPHA, DRIFT_ALPHA

KINDS = ("bm25", "lognormal", "binary", "count", "zero_inflated", "gaussian")
BASE = {"features": 30, "rows": 20, "rho": 0.3, "queries": 200}
#: one dimension varied at a time around BASE, and the hard corners
SHAPES = ([dict(BASE, features=f) for f in (6, 30, 120, 300)]
          + [dict(BASE, rows=r) for r in (5, 100)]
          + [dict(BASE, rho=c) for c in (0.0, 0.6)]
          + [dict(BASE, queries=q) for q in (50, 1000)]
          + [dict(features=6, rows=5, rho=0.6, queries=50),
             dict(features=120, rows=5, rho=0.6, queries=50),
             dict(features=300, rows=100, rho=0.6, queries=50)])


def simulate(rng, features: int, rows: int, rho: float, queries: int) -> tuple[np.ndarray, np.ndarray]:
    """(X [queries * rows, features], offsets): one snapshot of the population."""
    n = queries * rows
    shared = np.repeat(rng.standard_normal((queries, features)), rows, axis=0)
    z = math.sqrt(rho) * shared + math.sqrt(1 - rho) * rng.standard_normal((n, features))
    X = np.empty((n, features))
    for j in range(features):                   # a loop over features, vectorised inside
        X[:, j] = _shape(KINDS[j % len(KINDS)], z[:, j])
    return X, np.arange(0, n + 1, rows)


def _shape(kind: str, z: np.ndarray) -> np.ndarray:
    """A column of ``kind`` from standard normal scores ``z`` (monotone where it can be)."""
    u = ndtr(z)
    if kind == "bm25":
        return np.where(u < 0.3, np.nan, 2.0 * np.exp(0.5 * z))
    if kind == "lognormal":
        return np.exp(3.0 + z)
    if kind == "binary":
        return (u < 0.4).astype(float)
    if kind == "count":
        return np.floor(-np.log1p(-u) * 2.0)
    if kind == "zero_inflated":
        return np.where(u < 0.6, 0.0, np.exp(z))
    return z


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval (95% by default) of a rate of ``k`` in ``n``."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _flags(ref, new, seed: int) -> np.ndarray:
    (a, oa), (b, ob) = ref, new
    found = drift.feature_drift(a, b, [str(j) for j in range(a.shape[1])], oa, ob,
                                alpha=DRIFT_ALPHA, seed=seed)
    return np.array([f["flag"] for f in found["features"]])


def null_run(args) -> bool:
    """One unchanged run of ``shape``: any feature flagged?"""
    shape, r = args
    rng = np.random.default_rng([r, 59])
    return bool((_flags(simulate(rng, **shape), simulate(rng, **shape), r) != "ok").any())


#: the feature each change is made to (its column in BASE's cycle of KINDS)
CHANGES = {
    "dropped field (a BM25 feature all missing)": 0,
    "number rescaled x100 (a lognormal field)": 1,
    "analyzer change (a BM25 feature: matches 70% -> 60%, scores x0.85)": 6,
    "10% mean shift (a lognormal field x1.1)": 7,
}


def change(name: str, X: np.ndarray, rng) -> np.ndarray:
    """The new snapshot with ``name`` made to its column."""
    X, j = X.copy(), CHANGES[name]
    if name.startswith("dropped"):
        X[:, j] = np.nan
    elif name.startswith("number"):
        X[:, j] *= 100
    elif name.startswith("analyzer"):
        lost = rng.random(len(X)) < 1 / 7                     # 70% matched -> 60%
        X[:, j] = np.where(lost, np.nan, 0.85 * X[:, j])
    else:
        X[:, j] *= 1.1
    return X


def power_run(args) -> tuple[bool, bool]:
    """One run of BASE with the change ``name``: (any feature flagged, the changed one named)."""
    name, r = args
    rng = np.random.default_rng([r, 60])
    ref, (b, ob) = simulate(rng, **BASE), simulate(rng, **BASE)
    flags = _flags(ref, (change(name, b, rng), ob), r)
    return bool((flags != "ok").any()), bool(flags[CHANGES[name]] != "ok")


#: per-query NDCG gains over the first stage: mean and spread on held-out queries
GAIN, SPREAD = 0.10, 0.20


def decay_run(args) -> bool:
    """One decay test: held-out gains on ``queries`` queries, new gains on as many others,
    their mean ``factor`` x the held-out one; degraded?"""
    (queries, factor), r = args
    rng = np.random.default_rng([r, 61])

    def gains(prefix, mean):
        first = rng.uniform(0.2, 0.6, queries)
        return {"qids": [f"{prefix}{i}" for i in range(queries)],
                D.MODEL: first + rng.normal(mean, SPREAD, queries), D.FIRST: first}
    held = gains("h", GAIN)
    g = held[D.MODEL] - held[D.FIRST]
    held = {"source": "sim", "k": 10, "queries": queries, "gain": float(g.mean()),
            "qids": held["qids"], "gains": g.tolist(), "selected_on": False}
    return D.decay(gains("n", GAIN * factor), held, alpha=DECAY_ALPHA, seed=r)["verdict"] == "degraded"


def _pool(fn, tasks: list, jobs: int) -> list:
    if jobs <= 1:
        return [fn(t) for t in tasks]
    import multiprocessing
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        return pool.map(fn, tasks, chunksize=4)


def _row(case: str, shape: dict | None, hits: list, named: list | None = None) -> list:
    k, n = sum(hits), len(hits)
    lo, hi = wilson(k, n)
    s = shape or {}
    return [case, s.get("features", "-"), s.get("rows", "-"), s.get("rho", "-"), s.get("queries", "-"),
            n, k, k / n, lo, hi, "-" if named is None else f"{sum(named) / n:.1%}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000, help="simulated runs per shape and per change (1,000: a 2.5%% rate's Wilson upper bound stays under 5%%; about 33 min on 2 cores)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes")
    args = ap.parse_args()
    t0 = time.time()
    null = [_row("no change", sh, _pool(null_run, [(sh, r) for r in range(args.runs)], args.jobs))
            for sh in SHAPES]
    power = []
    for name in CHANGES:
        got = _pool(power_run, [(name, r) for r in range(args.runs)], args.jobs)
        power.append(_row(name, BASE, [a for a, _ in got], [b for _, b in got]))
    for label, factor in (("model unchanged (decay false alarm)", 1.0), ("held-out gain halves", 0.5)):
        got = _pool(decay_run, [((BASE["queries"], factor), r) for r in range(args.runs)], args.jobs)
        power.append(_row(label, {"queries": BASE["queries"]}, got))
    seconds = time.time() - t0
    worst = max(null, key=lambda r: r[9])
    notes = [f"{args.runs} simulated runs per shape and per change ({args.jobs} workers), {seconds:.0f} s; "
             f"seeds [run, 59] (no change), [run, 60] (changes), [run, 61] (decay)",
             f"drift: evaluation.drift.feature_drift at the monitor's drift level {DRIFT_ALPHA:g} "
             f"({drift.DRAWS} random splits of the pooled queries per run); decay: evaluation.decay.decay "
             f"at {DECAY_ALPHA:g} (held-out and new gains on {BASE['queries']} queries each, mean "
             f"{GAIN}, spread {SPREAD}); the verdict's budget: {ALPHA:g}",
             "rate: whole feature set flagged (any feature not ok), or degraded; 95% interval: Wilson",
             f"worst no-change shape: {worst[7]:.1%} [{worst[8]:.1%}, {worst[9]:.1%}] "
             f"(features {worst[1]}, rows {worst[2]}, rho {worst[3]}, queries {worst[4]}); "
             f"acceptance: every shape <= 5%, upper bound <= 7%: "
             f"{all(r[7] <= 0.05 and r[9] <= 0.07 for r in null)}",
             "power rows: BASE shape " + ", ".join(f"{k} {v}" for k, v in BASE.items())
             + "; 'named': the changed feature among those flagged"]
    header = ["case", "features", "rows/query", "rho", "queries", "runs", "alarms", "rate",
              "95% low", "95% high", "changed feature named"]
    write_table("monitor_sim", header, null + power, notes)
    _plot(null, power)


def _plot(null: list, power: list) -> None:
    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    x = np.arange(len(null))
    rate = np.array([r[7] for r in null])
    a.errorbar(x, rate, yerr=[rate - [r[8] for r in null], np.array([r[9] for r in null]) - rate],
               fmt="o", capsize=3)
    a.axhline(0.05, color="red", ls="--", label="5% (acceptance)")
    a.axhline(DRIFT_ALPHA, color="grey", ls=":", label=f"drift level {DRIFT_ALPHA:g}")
    a.set_xticks(x, [f"F{r[1]} n{r[2]} r{r[3]} Q{r[4]}" for r in null], rotation=70, fontsize=7)
    a.set_ylabel("whole-set false alarms (Wilson 95%)")
    a.legend(fontsize=8)
    y = np.arange(len(power))
    prate = np.array([r[7] for r in power])
    b.barh(y, prate, xerr=[prate - [r[8] for r in power], np.array([r[9] for r in power]) - prate],
           capsize=3, color="tab:green")
    b.set_yticks(y, [r[0] for r in power], fontsize=7)
    b.set_xlim(0, 1)
    b.set_xlabel("caught (rate, Wilson 95%)")
    finish(fig, "monitor_sim")


if __name__ == "__main__":
    main()
