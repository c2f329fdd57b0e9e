"""How often the toolkit recommends deploying a reranker, when none is better than the
first stage and when one truly is.

``python -m benchmarks.deploy_rate [REPS]`` (default 200): the recommendation's own
statistics on Cranfield-shaped per-query scores, for 1, 3 and 5 rerankers. Each
repetition scores the 225 Cranfield queries (their real judged grades, the rest of each
query's 100 candidates unjudged) by a first stage and by the rerankers: a system's score
of a candidate is ``beta x gain + noise``, beta set so that the first stage's mean
NDCG@10 is Cranfield BM25's (0.3688, benchmarks/results/clicks.md); the rerankers'
noises are correlated with each other (0.5: they rerank one first stage's list with
related features). No gain: every reranker has the first stage's beta (each is
exchangeable with it on every query, the strict null). +0.02 / +0.05: the first
reranker's beta is raised until its mean NDCG@10 is that much higher (calibrated on 20 x
225 queries); the others stay at no gain. Each repetition runs
``evaluation.report.compare`` + ``recommend`` (the path of ``ltr evaluate --cv`` and the
demo) and counts a recommendation to deploy (any, with no gain; the truly better one,
with a gain), corrected (max-T over the rerankers, the toolkit's rule) and before the
correction (the best of those with a plain p < 0.05, as ``recommend`` was). Table + PNG
in benchmarks/results/deploy_rate.*.

``python -m benchmarks.deploy_rate pipeline [REPS] [ALGO ...]`` (default 200, linear):
the whole offline cross-validation instead, on null data (features carrying nothing
beyond the first stage). Each repetition generates a data set shaped like Cranfield's
logged candidates (225 queries x the first stage's top 100, rows in first-stage order,
grades 0-4 with a few relevant documents per query, more of them near the top) whose
features carry nothing beyond the first stage: column 0 is the first stage's score, the
others are noisy transforms of it, with noise independent of the grades. It then runs
the toolkit's own path offline: 5 outer folds, in each the settings chosen by
``tuning.select`` on the training folds (the inner gate) and the model (or the first
stage) scoring the held-out fold as the plugin would serve it (``plugin_scores``, blends
included), then ``evaluation.report.compare`` + ``recommend`` over all queries: a
recommendation to deploy is a false positive. Run twice on the same data: with the inner
gate as it is (the best of all candidates tested by a max-statistic test) and as it was
(the best tested as if it were the only candidate). Table + PNG in
benchmarks/results/deploy_rate_pipeline.*.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager

import numpy as np

from ltr_toolkit.data.dataset import RankingDataset
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.evaluation import report as R
from ltr_toolkit.models.export import plugin_scores
from ltr_toolkit.pipeline import tuning
from ltr_toolkit.pipeline.crossval import fit_chosen
from ltr_toolkit.pipeline.train import model_from_artifact
from ltr_toolkit.rank.metrics import ndcg
from ltr_toolkit.rank.stats import compare
from ltr_toolkit.stores.contract import of_artifact

from ._report import finish, pyplot, write_table

QUERIES, CANDIDATES, FEATURES, FOLDS, K = 225, 100, 5, 5, 10


def null_dataset(seed: int, queries: int = QUERIES) -> RankingDataset:
    """Cranfield-shaped candidates (``queries`` of them) whose features add nothing to the
    first stage."""
    rng = np.random.default_rng(seed)
    n = queries * CANDIDATES
    rank = np.tile(np.arange(CANDIDATES), queries)
    first = np.sort(rng.gamma(4.0, 2.0, size=(queries, CANDIDATES)), axis=1)[:, ::-1].ravel()
    relevant = rng.random(n) < 0.25 / (1.0 + rank / 8.0)      # ~6 per query, more at the top
    y = np.where(relevant, rng.integers(1, 5, size=n), 0).astype(np.float32)
    X = np.empty((n, FEATURES), dtype=np.float32)
    X[:, 0] = first
    for j in range(1, FEATURES):            # transforms of the first stage + label-free noise
        X[:, j] = first ** (0.5 + 0.3 * j) + rng.normal(scale=first.std() * 0.3 * j, size=n)
    offsets = np.arange(0, n + 1, CANDIDATES)
    return RankingDataset(X, y, offsets, np.array([str(q) for q in range(queries)]))


def _served(art, ds) -> np.ndarray:
    """Scores as the plugin serves them, blended with the first stage when chosen so."""
    if art["model"] is None:
        return -np.arange(ds.n_docs, dtype=np.float64)             # the first stage's order
    s = plugin_scores(art, model_from_artifact(art), ds.X).astype(np.float64)
    qw, rw = of_artifact(art).weights
    return qw * np.nan_to_num(ds.X[:, 0]) + rw * s


def recommends(ds, algo: str, seed: int) -> bool:
    """Whether the toolkit's cross-validation of ``algo`` on ``ds`` recommends deploying it."""
    where = np.random.default_rng(seed).permutation(ds.n_queries) % FOLDS
    model_ndcg = np.zeros(ds.n_queries)
    for f in range(FOLDS):
        train = ds.subset(np.flatnonzero(where != f).tolist())
        test_q = np.flatnonzero(where == f).tolist()
        test = ds.subset(test_q)
        art = fit_chosen(train, algo, K, seed + f, None, "simulated", first_col=0)
        model_ndcg[test_q] = ndcg(_served(art, test), test.y, test.offsets, K)
    first = ndcg(-np.arange(ds.n_docs, dtype=np.float64), ds.y, ds.offsets, K)
    per_query = {"first stage": {f"ndcg@{K}": first}, algo: {f"ndcg@{K}": model_ndcg}}
    return R.recommend(R.compare(per_query, "first stage", K))["deploy"] is not None


def _plain_best(per, seed, halving, n_resamples=10000):
    """The gate as it was: the best candidate tested as if it were the only one."""
    per_query = {key: np.concatenate(v) for key, v in per.items()}
    best = max((k for k in per_query if k != tuning.FIRST_STAGE), key=lambda k: per_query[k].mean())
    found = compare({0: per_query[tuning.FIRST_STAGE], 1: per_query[best]}, 0,
                    n_resamples=n_resamples, seed=seed, confidence_level=None)
    return best, found.tests[1].p_value


@contextmanager
def gate(kind: str):
    saved = tuning.gate
    tuning.gate = saved if kind == GATES[0] else _plain_best
    try:
        yield
    finally:
        tuning.gate = saved


GATES = ("corrected (max-statistic)", "as before (best tested alone)")


def main_pipeline(reps: int = 200, algos=("linear",)):
    rows = []
    for algo in algos:
        for kind in GATES:
            t0, deployed = time.monotonic(), 0
            with gate(kind):
                for rep in range(reps):
                    deployed += recommends(null_dataset(rep), algo, 42 + rep)
            secs = time.monotonic() - t0
            lo, hi = _wilson(deployed, reps)
            rows.append([algo, kind, reps, deployed, round(deployed / reps, 4), round(lo, 4),
                         round(hi, 4), round(secs / reps, 2)])
            print(rows[-1], flush=True)
    write_table("deploy_rate_pipeline", ["algorithm", "inner gate", "repetitions", "deployed", "rate",
                                         "95% CI low", "95% CI high", "s per repetition"], rows,
                [f"null data: {QUERIES} queries x {CANDIDATES} candidates, {FEATURES} features "
                 "carrying nothing beyond the first stage; offline 5-fold CV with the toolkit's "
                 "selection, serving rule and recommendation (alpha 0.05); Wilson intervals"])
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    x = np.arange(len(rows))
    ax.bar(x, [r[4] for r in rows], yerr=[[r[4] - r[5] for r in rows], [r[6] - r[4] for r in rows]])
    ax.axhline(0.05, color="k", ls="--", lw=1, label="5%")
    ax.set_xticks(x, [f"{r[0]}\n{r[1]}" for r in rows], fontsize=8)
    ax.set_ylabel("share of null repetitions deployed")
    ax.legend()
    finish(fig, "deploy_rate_pipeline")


#: Cranfield's first stage (BM25, multi_match over title and abstract): mean NDCG@10 over
#: its 225 judged queries (benchmarks/results/clicks.md)
CRANFIELD_FIRST_STAGE = 0.3688
#: correlation of the rerankers' noises (with each other; each is independent of the
#: first stage's, which makes every no-gain reranker exchangeable with it)
CORRELATION = 0.5
RERANKERS = (1, 3, 5)
GAINS = (0.0, 0.02, 0.05)
#: noise draws (x 225 queries) the betas are calibrated on
CALIBRATION_DRAWS = 20


def cranfield_gains() -> np.ndarray:
    """[225, CANDIDATES]: each Cranfield query's judged gains (1-4), largest first, the
    rest of its candidates unjudged (0)."""
    jl = cranfield.judgments()
    by_q = jl.by_query()
    y = np.zeros((QUERIES, CANDIDATES))
    for row, q in enumerate(sorted(jl.queries, key=int)):
        g = sorted((x for _, x in by_q.get(q, []) if x > 0), reverse=True)[:CANDIDATES]
        y[row, :len(g)] = g
    return y


def _ndcg(y: np.ndarray, beta: float, noise: np.ndarray) -> np.ndarray:
    """Per-query NDCG@K of the scores ``beta x gain + noise`` ([queries, candidates])."""
    offsets = np.arange(0, y.size + 1, y.shape[1])
    return ndcg((beta * y + noise).ravel(), y.ravel(), offsets, K)


def _solve(f, target: float, lo: float = 0.0, hi: float = 20.0) -> float:
    """beta with f(beta) = target, by bisection (f increasing; to 1e-6 of [0, 20])."""
    for _ in range(25):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return (lo + hi) / 2


def calibrate(y: np.ndarray) -> dict:
    """{gain: beta}: the first stage's beta (its mean NDCG@K is Cranfield's) and, per gain,
    the beta of a reranker that much better (same noise draws: common random numbers)."""
    rng = np.random.default_rng(20261126)
    noises = [rng.normal(size=y.shape) for _ in range(CALIBRATION_DRAWS)]
    mean = lambda b: float(np.mean([_ndcg(y, b, e).mean() for e in noises]))   # noqa: E731
    base = _solve(mean, CRANFIELD_FIRST_STAGE)
    at = mean(base)
    return {g: base if g == 0 else _solve(lambda b: mean(b) - at, g) for g in GAINS}


def _recommended_before(rep: dict) -> str | None:
    """``recommend`` as it was: the best of the rerankers with a plain p < ALPHA."""
    better = [n for n, t in rep["tests"].items() if t["mean_delta"] > 0 and t["p_value"] < R.ALPHA]
    return max(better, key=lambda n: rep["tests"][n]["mean_delta"]) if better else None


def _repetition(y, betas: dict, m: int, rng) -> dict:
    """{gain: (deployed before, deployed corrected, r0's gain)} on one draw of noises (the
    same draw for every gain: only reranker r0's beta changes)."""
    first = _ndcg(y, betas[0.0], rng.normal(size=y.shape))
    shared = rng.normal(size=y.shape)
    noise = [np.sqrt(CORRELATION) * shared + np.sqrt(1 - CORRELATION) * rng.normal(size=y.shape)
             for _ in range(m)]
    rest = {f"r{j}": _ndcg(y, betas[0.0], noise[j]) for j in range(1, m)}
    out = {}
    for g in GAINS:
        r0 = _ndcg(y, betas[g], noise[0])
        per_query = {"first stage": {f"ndcg@{K}": first}, "r0": {f"ndcg@{K}": r0},
                     **{n: {f"ndcg@{K}": v} for n, v in rest.items()}}
        rep = R.compare(per_query, "first stage", K, confidence_level=None)
        out[g] = (_recommended_before(rep), R.recommend(rep)["deploy"], float((r0 - first).mean()))
    return out


def _row(m: int, g: float, runs: list, seconds: float) -> list:
    before, after, gain = zip(*runs)
    n = len(runs)
    any_b, any_a = sum(x is not None for x in before), sum(x is not None for x in after)
    good_b, good_a = sum(x == "r0" for x in before), sum(x == "r0" for x in after)
    lo, hi = _wilson(good_a if g else any_a, n)
    good = (lambda k: round(k / n, 4) if g else "")       # noqa: E731
    return [m, "no gain" if g == 0 else f"r0 +{g:.2f}", n, round(any_b / n, 4), round(any_a / n, 4),
            good(good_b), good(good_a), f"{lo:.3f}-{hi:.3f}", round(float(np.mean(gain)), 4),
            round(seconds / n, 3)]


def main(reps: int = 200):
    y = cranfield_gains()
    betas = calibrate(y)
    print("betas", betas, flush=True)
    rows = []
    for m in RERANKERS:
        rng, t0, runs = np.random.default_rng(1000 + m), time.monotonic(), {g: [] for g in GAINS}
        for _ in range(reps):
            for g, got in _repetition(y, betas, m, rng).items():
                runs[g].append(got)
        rows += [_row(m, g, runs[g], time.monotonic() - t0) for g in GAINS]
        for r in rows[-len(GAINS):]:
            print(r, flush=True)
    _write_recommendation(rows, betas, reps)


def _write_recommendation(rows: list, betas: dict, reps: int) -> None:
    write_table("deploy_rate", [
        "rerankers", "truth", "repetitions", "deploys (before)", "deploys (corrected)",
        "deploys r0 (before)", "deploys r0 (corrected)", "95% CI (corrected; r0 with a gain)",
        "r0 - first stage (measured)", "s per repetition"], rows, [
        f"Cranfield-shaped per-query NDCG@{K}: the 225 judged queries' real grades, "
        f"{CANDIDATES} candidates each; score = beta x gain + N(0, 1) noise; first stage beta "
        f"{betas[0.0]:.3f} (mean NDCG@{K} {CRANFIELD_FIRST_STAGE}); the rerankers' noises "
        f"correlated {CORRELATION} with each other, independent of the first stage's",
        "no gain: every reranker exchangeable with the first stage; 'deploys' is then a false "
        "positive and must stay at or under 5%",
        "r0 +0.02 / +0.05: reranker r0 truly better by that mean NDCG@10 (beta "
        + ", ".join(f"{betas[g]:.3f}" for g in GAINS[1:]) + f", calibrated on {CALIBRATION_DRAWS} x 225 "
        "queries), the others no gain; 'deploys r0' is the power to find it",
        "corrected: `recommend` now (max-T over the rerankers vs the first stage, two-sided, "
        "10,000 sign flips, alpha 0.05); before: the best of the rerankers with a plain p < 0.05; "
        f"{reps} repetitions per number of rerankers, the same draws for the three truths; "
        "Wilson intervals"])
    plt = pyplot()
    fig, axes = plt.subplots(1, len(GAINS), figsize=(11, 3.8), sharey=False)
    for ax, g in zip(axes, GAINS):
        mine = [r for r in rows if (r[1] == "no gain") == (g == 0) and (g == 0 or f"+{g:.2f}" in r[1])]
        x = np.arange(len(mine))
        col = (3, 4) if g == 0 else (5, 6)
        ax.bar(x - 0.2, [r[col[0]] for r in mine], 0.4, label="before")
        ax.bar(x + 0.2, [r[col[1]] for r in mine], 0.4, label="corrected")
        if g == 0:
            ax.axhline(0.05, color="k", ls="--", lw=1, label="5%")
        ax.set_xticks(x, [str(r[0]) for r in mine])
        ax.set_xlabel("rerankers compared")
        ax.set_title("no gain: share deploying" if g == 0 else f"r0 +{g:.2f}: share deploying r0",
                     fontsize=9)
        ax.legend(fontsize=8)
    finish(fig, "deploy_rate")


def _wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


if __name__ == "__main__":
    if sys.argv[1:2] == ["pipeline"]:
        main_pipeline(int(sys.argv[2]) if len(sys.argv) > 2 else 200, tuple(sys.argv[3:]) or ("linear",))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
