"""Power at the sizes users have (#52): how often offline cross-validation recommends a
reranker, with no real gain and with a real gain of +0.02 / +0.05 NDCG@10, for 100, 150
and 225 judged queries, under the recommendation's old design and the new one, side by
side on the same data and the same fold fits.

``python -m benchmarks.power [REPS NULL_REPS [WORKER WORKERS [START]]]``: repetitions
``START + WORKER``, ``START + WORKER + WORKERS``, ... < NULL_REPS (default 0..199; with
a gain only those < REPS, default 100) are run and each one's outcome appended to
``benchmarks/results/power_runs.csv`` (several niced processes share the work; a run cut
short keeps what it did); ``python -m benchmarks.power table`` writes
benchmarks/results/power.md + .csv + .png from those rows.

Data: ``deploy_rate.null_dataset`` (Cranfield-shaped logged candidates: the first
stage's top 100 per query in its order, grades 0-4, column 0 the first stage's score,
four features that are noisy transforms of it) plus one feature ``lam x grade +
N(0, 1)``: lam 0 is no gain (the feature is noise); lam is calibrated so that the best
blend ``first-stage score + b x feature`` (b over a grid) is +0.02 / +0.05 NDCG@10 above
the first stage, on average over queries (``TRUE_GAIN``: the gain a reranker could have;
what a model learns from 80-180 queries is less, measured in the table). The same base
data (seeded by the repetition) serves the three truths.

Per repetition and outer fold (5 folds), linear and lambdamart each run
``tuning.select`` on the training folds (small grids, ``GRIDS``: the benchmark's
time), then:

* old design: each algorithm's fold serves its gated choice (the first stage unless its
  best candidate passed the inner max-statistic gate); pooled, ``evaluation.report.
  compare`` (two-sided, max-T over the two algorithms) + ``recommend`` as before;
* new design: the fold serves the pipeline's choice (``tuning.pipeline_choice``: the
  best mean inner NDCG@10 of all candidates of both algorithms and the first stage, no
  inner gate); pooled, one one-sided test vs the first stage (``report.pipeline_test``);
* also shown: the pipeline with the inner gate kept (the best gated choice per fold),
  one one-sided test: what removing the gate adds on its own.
"""

from __future__ import annotations

import csv
import sys
import time

import numpy as np

from ltr_toolkit.data.dataset import RankingDataset
from ltr_toolkit.evaluation import report as R
from ltr_toolkit.pipeline import tuning
from ltr_toolkit.pipeline.crossval import fit_choice
from ltr_toolkit.rank.metrics import ndcg

from ._report import RESULTS, finish, pyplot, write_table
from .deploy_rate import CANDIDATES, FOLDS, K, _served, _wilson, null_dataset

SIZES = (100, 150, 225)
GAINS = (0.0, 0.02, 0.05)
ALGOS = ("linear", "lambdamart")
#: small grids (the benchmark's time: one setting each, every blend step with the first
#: stage; xgboost's cost per tree dominates on such small data)
GRIDS = {"linear": [{"l2": 0.0, "lr": 1e-2, "epochs": 20}],
         "lambdamart": [{"depth": 2, "lr": 0.3, "trees": 10, "min_child_weight": 10.0}]}
TREE_COUNTS = (10,)
#: sign flips of every test here (the inner gate's too): a randomisation p-value
#: (k + 1) / (B + 1) is valid for any B, so the false-deploy rate holds; B only blurs p
DRAWS = 2000
DESIGNS = ("old", "new", "gated pipeline")
RUNS = RESULTS / "power_runs.csv"
#: blend weights b of the true-gain calibration
B_GRID = np.geomspace(0.05, 50, 25)


def dataset(seed: int, queries: int, lam: float) -> RankingDataset:
    """``null_dataset`` plus the feature ``lam x grade + N(0, 1)`` (column 5)."""
    ds = null_dataset(seed, queries)
    noise = np.random.default_rng(10**6 + seed).normal(size=ds.n_docs)
    X = np.column_stack([ds.X, (lam * ds.y + noise).astype(np.float32)])
    return RankingDataset(X, ds.y, ds.offsets, ds.qids)


def true_gain(lam: float, data: list) -> float:
    """The best blend's mean NDCG@10 over the first stage's, on ``data``."""
    got = []
    for ds in data:
        first = ndcg(ds.X[:, 0].astype(np.float64), ds.y, ds.offsets, K).mean()
        sig = lam * ds.y + ds.X[:, 5]          # ds has lam 0: column 5 is the noise alone
        got.append(max(ndcg(ds.X[:, 0] + b * sig, ds.y, ds.offsets, K).mean() for b in B_GRID)
                   - first)
    return float(np.mean(got))


def calibrate() -> dict:
    """{gain: lam} by bisection on 2 x 500 queries (not the repetitions' seeds)."""
    data = [dataset(10**5 + i, 500, 0.0) for i in range(2)]
    out = {0.0: 0.0}
    for g in GAINS[1:]:
        lo, hi = 0.0, 1.0
        for _ in range(12):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if true_gain(mid, data) < g else (lo, mid)
        out[g] = (lo + hi) / 2
    return out


def _fold(train, test, seed) -> dict:
    """Per algorithm: (select result, the test fold's NDCG of its gated choice, of its
    ungated choice)."""
    out = {}
    for algo in ALGOS:
        sel = tuning.select(train, algo, K, seed, first_col=0)
        gated = ndcg(_served(fit_choice(train, algo, K, seed, sel, "sim", 0), test), test.y,
                     test.offsets, K)
        free = tuning.ungated(sel)
        same = free["first_stage"] == sel["first_stage"]
        ungated = gated if same else ndcg(_served(fit_choice(train, algo, K, seed, free, "sim", 0),
                                                  test), test.y, test.offsets, K)
        out[algo] = (sel, gated, ungated)
    return out


def repetition(seed: int, queries: int, lam: float) -> dict:
    """The three designs' verdicts (deploy or not) and the measured gains of one
    repetition."""
    ds = dataset(seed, queries, lam)
    where = np.random.default_rng(seed).permutation(queries) % FOLDS
    first = ndcg(-np.arange(ds.n_docs, dtype=np.float64), ds.y, ds.offsets, K)
    rows = {a: np.zeros(queries) for a in ALGOS}
    pipe, gated_pipe, served = first.copy(), first.copy(), 0
    for f in range(FOLDS):
        test_q = np.flatnonzero(where == f).tolist()
        got = _fold(ds.subset(np.flatnonzero(where != f).tolist()), ds.subset(test_q), seed + f)
        for a in ALGOS:
            rows[a][test_q] = got[a][1]
        pick = tuning.pipeline_choice({a: got[a][0] for a in ALGOS})
        if pick is not None:
            pipe[test_q], served = got[pick][2], served + 1
        passed = {a: got[a][0]["inner_ndcg"] for a in ALGOS if not got[a][0]["first_stage"]}
        if passed:
            gated_pipe[test_q] = got[max(sorted(passed), key=passed.get)][1]
    per_query = {"first stage": {f"ndcg@{K}": first}, **{a: {f"ndcg@{K}": v} for a, v in rows.items()}}
    old = R.recommend(R.compare(per_query, "first stage", K, n_resamples=DRAWS,
                                confidence_level=None))["deploy"]
    tests = [R.pipeline_test(first, p, n_resamples=DRAWS, seed=seed) for p in (pipe, gated_pipe)]
    return {"old": old is not None,
            **{d: t["p_value"] < R.ALPHA and t["mean_delta"] > 0 for d, t in zip(DESIGNS[1:], tests)},
            "pipeline gain": float((pipe - first).mean()), "folds served": served}


def small() -> None:
    """The benchmark's grids and draws, in place of the toolkit's."""
    gate = tuning.gate
    tuning.grid, tuning.TREE_COUNTS = (lambda algo, n: GRIDS[algo]), TREE_COUNTS
    tuning.gate = lambda per, seed, halving: gate(per, seed, halving, n_resamples=DRAWS)


def run(reps: int, null_reps: int, worker: int = 0, workers: int = 1, start: int = 0) -> None:
    """Repetitions ``start + worker``, ``start + worker + workers``, ... < ``null_reps``:
    every truth below ``reps``, no gain alone from there."""
    lams = calibrate()
    print("lam", lams, flush=True)
    small()
    new = not RUNS.exists()
    with open(RUNS, "a", newline="") as fh:
        w = csv.writer(fh)
        if new:
            w.writerow(["rep", "queries", "gain", "lam", *DESIGNS, "pipeline gain",
                        "folds served", "seconds"])
        for rep in range(start + worker, null_reps, workers):
            for n in SIZES:
                for g in GAINS if rep < reps else GAINS[:1]:
                    t0 = time.monotonic()
                    got = repetition(rep, n, lams[g])
                    w.writerow([rep, n, g, round(lams[g], 5), *(int(got[d]) for d in DESIGNS),
                                round(got["pipeline gain"], 5), got["folds served"],
                                round(time.monotonic() - t0, 2)])
                    fh.flush()
            print("rep", rep, "done", flush=True)


def table() -> None:
    with open(RUNS) as fh:
        runs = {(r["rep"], r["queries"], r["gain"]): r for r in csv.DictReader(fh)
                if r["rep"] != "rep"}               # the workers' headers; a redone run once
    runs = list(runs.values())
    rows = []
    for n in SIZES:
        for g in GAINS:
            mine = [r for r in runs if int(r["queries"]) == n and float(r["gain"]) == g]
            if not mine:
                continue
            reps = len(mine)
            row = [n, "no gain" if g == 0 else f"+{g:.2f}", reps]
            for d in DESIGNS:
                k = sum(int(r[d]) for r in mine)
                lo, hi = _wilson(k, reps)
                row += [round(k / reps, 3), f"{lo:.3f}-{hi:.3f}"]
            row += [f'{sum(int(r["new"]) > int(r["old"]) for r in mine)} / '
                    f'{sum(int(r["new"]) < int(r["old"]) for r in mine)}',
                    round(float(np.mean([float(r["pipeline gain"]) for r in mine])), 4),
                    round(float(np.mean([int(r["folds served"]) for r in mine])) / FOLDS, 3),
                    round(float(np.mean([float(r["seconds"]) for r in mine])), 2)]
            rows.append(row)
    _write(rows, runs)


def _write(rows: list, runs: list) -> None:
    header = ["queries", "true gain", "repetitions"]
    for d in DESIGNS:
        header += [f"deploys ({d})", f"95% CI ({d})"]
    header += ["new only / old only", "pipeline gain (measured)",
               "share of folds serving a model (new)", "s per repetition"]
    lam = {float(r["gain"]): float(r["lam"]) for r in runs}
    write_table("power", header, rows, [
        f"data: benchmarks.deploy_rate.null_dataset ({CANDIDATES} candidates per query, the "
        "first stage's order) plus one feature lam x grade + N(0, 1); lam "
        + ", ".join(f"{lam[g]:.4f}" for g in sorted(lam)) + " for a true gain of "
        + ", ".join(f"{g:+.2f}" for g in sorted(lam)) + f" NDCG@{K} (the best blend of the first "
        "stage and that feature, calibrated on 2 x 500 other queries)",
        f"{FOLDS} outer folds; in each, linear and lambdamart chosen by tuning.select on the "
        f"training folds, small grids ({GRIDS}, tree counts {TREE_COUNTS}), each blended with "
        f"the first stage ({tuning.BLEND_STEPS}) or alone",
        "old: each algorithm's fold serves its gated choice; recommend = two-sided "
        "randomisation test, max-T over the 2 algorithms, alpha 0.05",
        "new: each fold serves the pipeline's choice (best mean inner NDCG@10 of both "
        "algorithms' candidates and the first stage, no inner gate); one one-sided "
        "randomisation test of the pooled outer NDCG@10 vs the first stage, alpha 0.05",
        "gated pipeline: as new, but each fold serves the best of the choices that passed "
        "their inner gate (for comparison: the gain of dropping the gate)",
        "deploys: share of repetitions recommending a reranker (no gain: false deploys, "
        "must be <= 5%); Wilson 95% intervals; the same data and fold fits for the 3 designs",
        "no gain: the models learnt from features carrying nothing are a little worse than the "
        "first stage (pipeline gain < 0), so false deploys stay under the one-sided test's level; "
        "at the boundary (every system exchangeable with the first stage) it is at its level, "
        "tests/test_pipeline_choice.py",
        "new only / old only: repetitions deployed by the new design and not the old, and the "
        "reverse (paired: the same data and fits)",
        f"every test with {DRAWS} sign flips (the inner gate's too); threads: 1 per process "
        f"(OMP_NUM_THREADS=1, LTR_THREADS=1), 2 niced processes sharing 2 busy cores; "
        f"{len(runs)} runs, {sum(float(r['seconds']) for r in runs) / 3600:.2f} process-hours"])
    plt = pyplot()
    fig, axes = plt.subplots(1, len(GAINS), figsize=(12, 3.8))
    for ax, g in zip(axes, ["no gain", "+0.02", "+0.05"]):
        mine = [r for r in rows if r[1] == g]
        x = np.arange(len(mine))
        for i, d in enumerate(DESIGNS):
            at = 3 + 2 * i          # the rate of design i in a row of table()
            ax.bar(x + (i - 1) * 0.27, [r[at] for r in mine], 0.27, label=d)
        if g == "no gain":
            ax.axhline(0.05, color="k", ls="--", lw=1, label="5%")
        ax.set_xticks(x, [str(r[0]) for r in mine])
        ax.set_xlabel("judged queries")
        ax.set_title(f"{g}: share deploying", fontsize=9)
        ax.legend(fontsize=7)
    finish(fig, "power")


if __name__ == "__main__":
    if sys.argv[1:2] == ["table"]:
        table()
    else:
        args = [int(a) for a in sys.argv[1:]]
        run(*(args or [100, 200]))
