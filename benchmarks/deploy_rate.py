"""How often the toolkit recommends deploying a reranker that is no better than the first
stage: ``python -m benchmarks.deploy_rate [REPS] [ALGO ...]`` (default 200 repetitions,
linear).

Each repetition generates a data set shaped like Cranfield's logged candidates (225
queries x the first stage's top 100, rows in first-stage order, grades 0-4 with a few
relevant documents per query, more of them near the top) whose features carry nothing
beyond the first stage: column 0 is the first stage's score, the others are noisy
transforms of it, with noise independent of the grades. It then runs the toolkit's own
path offline: 5 outer folds, in each the settings chosen by ``selection.select`` on the
training folds (the inner gate) and the model (or the first stage) scoring the held-out
fold as the plugin would serve it (``plugin_scores``, blends included), then
``evaluation.report.compare`` + ``recommend`` over all queries: a recommendation to
deploy is a false positive. Run twice on the same data: with the inner gate as it is
(the best of all candidates tested by a max-statistic test) and as it was (the best
tested as if it were the only candidate). Table + PNG in benchmarks/results/deploy_rate.*.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager

import numpy as np

from ltr_toolkit.data.dataset import RankingDataset
from ltr_toolkit.evaluation import report as R
from ltr_toolkit.models.export import plugin_scores
from ltr_toolkit.pipeline import selection
from ltr_toolkit.pipeline.crossval import fit_chosen
from ltr_toolkit.pipeline.train import model_from_artifact
from ltr_toolkit.rank.metrics import ndcg
from ltr_toolkit.stores.contract import of_artifact

from ._report import finish, pyplot, write_table

QUERIES, CANDIDATES, FEATURES, FOLDS, K = 225, 100, 5, 5, 10


def null_dataset(seed: int) -> RankingDataset:
    """Cranfield-shaped candidates whose features add nothing to the first stage."""
    rng = np.random.default_rng(seed)
    n = QUERIES * CANDIDATES
    rank = np.tile(np.arange(CANDIDATES), QUERIES)
    first = np.sort(rng.gamma(4.0, 2.0, size=(QUERIES, CANDIDATES)), axis=1)[:, ::-1].ravel()
    relevant = rng.random(n) < 0.25 / (1.0 + rank / 8.0)      # ~6 per query, more at the top
    y = np.where(relevant, rng.integers(1, 5, size=n), 0).astype(np.float32)
    X = np.empty((n, FEATURES), dtype=np.float32)
    X[:, 0] = first
    for j in range(1, FEATURES):            # transforms of the first stage + label-free noise
        X[:, j] = first ** (0.5 + 0.3 * j) + rng.normal(scale=first.std() * 0.3 * j, size=n)
    offsets = np.arange(0, n + 1, CANDIDATES)
    return RankingDataset(X, y, offsets, np.array([str(q) for q in range(QUERIES)]))


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


def _plain_best(base, candidates, n=10000, seed=0):
    """The gate as it was: the best candidate tested as if it were the only one."""
    row = int(np.argmax(np.asarray(candidates).mean(axis=1)))
    return row, R.randomisation_test(base, candidates[row], n=n, seed=seed)


@contextmanager
def gate(kind: str):
    saved = selection.best_of_test
    selection.best_of_test = R.best_of_test if kind == "corrected (max-statistic)" else _plain_best
    try:
        yield
    finally:
        selection.best_of_test = saved


GATES = ("corrected (max-statistic)", "as before (best tested alone)")


def main(reps: int = 200, algos=("linear",)):
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
    write_table("deploy_rate", ["algorithm", "inner gate", "repetitions", "deployed", "rate",
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
    finish(fig, "deploy_rate")


def _wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200, tuple(sys.argv[2:]) or ("linear",))
