"""Does early stopping on a held-out fifth of the training queries help LambdaMART (and
the networks)? ``python -m benchmarks.early_stopping``.

Cross-validation on the *training* file of the MSLR 5k extract only (the folds of
benchmarks/defaults.py: 3 repeats x 5 folds over its 43 queries). In each fold a fifth of
the training queries is drawn as validation set (what ``ltr evaluate --cv`` and the demo
hold out); LambdaMART() with its defaults (300 trees, depth 6, learning rate 0.1) then
trains with early stopping at several patiences, or keeps the best of all 300 rounds, or
trains without validation (on the other four fifths, or on all the training queries:
``ltr train`` without ``--valid``). The networks (lambdarank-nn, ranknet-nn with
NeuralRanker's defaults) the same way, in epochs. Scored by NDCG@10 on the held-out fold,
paired by fold against the same algorithm trained on all the training queries. Table +
PNG in benchmarks/results/.
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from ._report import finish, pyplot, write_table
from .defaults import FOLDS, REPEATS, WORKERS, _data, _splits

K = 10
ALL = "no validation, all training queries"
INNER = "no validation, four fifths of the training queries"
#: name -> (algorithm, patience | "inner" | "all"); networks keep their best epoch
TREES = {
    "patience 10": 10,
    "patience 30": 30,
    "patience 100": 100,
    "best of 300 rounds (validation picks the round)": 300,
    INNER: "inner",
    ALL: "all",
}
NETS = {"patience 10 (NeuralRanker's default)": 10,
        "best of 50 epochs (validation picks the epoch)": 50, INNER: "inner", ALL: "all"}
CONFIGS = {**{f"lambdamart: {n}": ("lambdamart", c) for n, c in TREES.items()},
           **{f"{a}: {n}": (a, c) for a in ("lambdarank-nn", "ranknet-nn") for n, c in NETS.items()}}


def _model(algo, seed, patience):
    from ltr_toolkit.models.neural import NeuralRanker
    from ltr_toolkit.models.trees import LambdaMART
    if algo == "lambdamart":
        return LambdaMART(nthread=1, seed=seed, early_stopping_rounds=patience)
    return NeuralRanker(algo=algo, seed=seed, **({} if patience is None else {"patience": patience}))


def run_config(name):
    """(name, [fold NDCG@10], [trees or epochs kept], [fit seconds]) over every fold."""
    from threadpoolctl import threadpool_limits
    from ltr_toolkit.rank.metrics import ndcg
    full = _data()
    algo, cfg = CONFIGS[name]
    scores, kept, times = [], [], []
    with threadpool_limits(1):
        for r, f, tr, te in _splits(full.n_queries):
            perm = np.random.default_rng(100 * r + f).permutation(tr)
            n_valid = max(1, len(tr) // 5)
            valid, inner = np.sort(perm[:n_valid]), np.sort(perm[n_valid:])
            t0 = time.perf_counter()
            if cfg == "all":
                m = _model(algo, r, None).fit(full.subset(tr))
            elif cfg == "inner":
                m = _model(algo, r, None).fit(full.subset(inner))
            else:
                m = _model(algo, r, cfg).fit(full.subset(inner), full.subset(valid))
            times.append(time.perf_counter() - t0)
            kept.append(m.best_iteration_ + 1 if algo == "lambdamart" else len(m.history))
            held = full.subset(te)
            scores.append(float(ndcg(m.predict(held.X), held.y, held.offsets, K).mean()))
    print(f"{name}: {np.mean(scores):.4f}", flush=True)
    return name, scores, kept, times


def main():
    t_start = time.perf_counter()
    with ProcessPoolExecutor(WORKERS) as pool:
        results = {n: (s, k, t) for n, s, k, t in pool.map(run_config, CONFIGS)}
    rows = []
    for name in CONFIGS:
        algo = CONFIGS[name][0]
        base = np.asarray(results[f"{algo}: {ALL}"][0])
        s, kept, times = results[name]
        s = np.asarray(s)
        diff = s - base
        rows.append([name, float(s.mean()), float(s.std()), float(diff.mean()),
                     float(diff.std() / np.sqrt(len(diff))), int(sum(diff > 0)), int(sum(diff < 0)),
                     statistics.median(kept), statistics.median(times)])
    notes = [
        f"msn1.fold1.train.5k only (43 queries), {REPEATS} repeats x {FOLDS} folds; validation: "
        "a fifth of each fold's training queries (7); LambdaMART() defaults otherwise (300 trees, "
        "depth 6, learning rate 0.1: xgboost rank:ndcg's gradient), NeuralRanker defaults for the "
        "networks (64-16, Adam 1e-3, 50 epochs, the best epoch on the monitored NDCG kept: the "
        "validation's, or the training data's without validation); NDCG@10 of the held-out fold",
        f"'minus all' is paired by fold against the same algorithm's '{ALL}'; 'se' its standard error over the "
        f"{REPEATS * FOLDS} folds (folds share training queries: an optimistic error); "
        "better/worse: folds above/below it",
        f"whole run {(time.perf_counter() - t_start) / 60:.1f} min, {WORKERS} worker processes",
    ]
    write_table("early_stopping", ["training", "CV NDCG@10", "std over folds", "minus all", "se",
                                   "folds better", "folds worse", "trees or epochs kept (median)",
                                   "fit s (median)"], rows, notes)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 6))
    y = np.arange(len(rows))[::-1]
    ax.errorbar([r[3] for r in rows], y, xerr=[r[4] for r in rows], fmt="o", capsize=3)
    ax.axvline(0, color="grey", ls="--", lw=1)
    ax.set_yticks(y, [f"{r[0]} ({r[7]:.0f})" for r in rows], fontsize=7)
    ax.set_xlabel(f"CV NDCG@10 minus '{ALL}' (paired by fold, +- se)")
    ax.set_title("Early stopping on 7 validation queries, MSLR 5k training queries\n"
                 "(trees or epochs kept in brackets)")
    finish(fig, "early_stopping")


if __name__ == "__main__":
    main()
