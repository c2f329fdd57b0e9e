"""How the LambdaMART defaults were chosen: ``python -m benchmarks.defaults``.

Cross-validation on the *training* file of the MSLR 5k extract only (the test file is
never read): 3 repeats x 5 folds over its 43 queries; each configuration trains 300 trees,
depth 6, learning rate 0.1, no early stopping (what ``ltr train`` does without
``--valid``), and is scored by NDCG@10 on the held-out fold. The grid crosses the
objective's choices that xgboost's native ``rank:ndcg`` makes differently or that the
issue named (hessian factor, score normalisation, truncation), then the truncation, the
discounts and the LambdaLoss weighting around the best of them; native runs on the same
folds. Two worker processes, one thread per model. Table + PNG in benchmarks/results/.
"""

from __future__ import annotations

import itertools
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from ._report import SHARED, finish, pyplot, write_table

TREES, DEPTH, ETA, K = 300, 6, 0.1, 10
REPEATS, FOLDS, WORKERS = 3, 5, 2
NATIVE = "xgboost rank:ndcg (native)"

GRID = {f"hessian x{h:g}, {'top-32 pairs' if t else 'all pairs'}, "
        f"score normalisation {'on' if sn else 'off'}": dict(hessian_scale=h, truncation=t,
                                                             score_normalization=sn)
        for h, t, sn in itertools.product((2.0, 1.0), (32, None), (True, False))}
# around the best of those: the truncation and the LambdaLoss weighting
GRID.update({
    "hessian x2, top-16 pairs, score normalisation on": dict(hessian_scale=2.0, truncation=16),
    "hessian x2, top-64 pairs, score normalisation on": dict(hessian_scale=2.0, truncation=64),
    "hessian x2, top-32, NDCG-Loss2++ (mu 1)": dict(hessian_scale=2.0, weighting="ndcg-loss2++", mu=1.0),
    "hessian x2, top-32, NDCG-Loss2++ (mu 10)": dict(hessian_scale=2.0, weighting="ndcg-loss2++", mu=10.0),
    "hessian x2, top-32 pairs, score normalisation on, NDCG@32's truncated discounts":
        dict(hessian_scale=2.0, truncation=32, truncate_discounts=True),
})


def _data():
    from ltr_toolkit.data.svmlight import load_svmlight
    return load_svmlight(SHARED / "data" / "mslr-5k" / "msn1.fold1.train.5k.txt")


def _splits(n_queries):
    out = []
    for r in range(REPEATS):
        perm = np.random.default_rng(1000 + r).permutation(n_queries)
        for f, held in enumerate(np.array_split(perm, FOLDS)):
            out.append((r, f, np.sort(np.setdiff1d(perm, held)), np.sort(held)))
    return out


def run_config(name):
    """Every fold of one configuration: (name, [fold NDCG@10], [fit seconds])."""
    from threadpoolctl import threadpool_limits
    import xgboost as xgb
    from ltr_toolkit.models.trees import LambdaMART, fill_missing
    from ltr_toolkit.rank.metrics import ndcg
    full = _data()
    scores, times = [], []
    with threadpool_limits(1):
        for r, _, tr, te in _splits(full.n_queries):
            train, held = full.subset(tr), full.subset(te)
            t0 = time.perf_counter()
            if name == NATIVE:
                d = xgb.DMatrix(fill_missing(train.X), label=train.y, nthread=1)
                d.set_group(train.group_sizes)
                bst = xgb.train({"objective": "rank:ndcg", "eta": ETA, "max_depth": DEPTH,
                                 "nthread": 1, "seed": r, "disable_default_eval_metric": 1}, d, TREES)
                pred = bst.predict(xgb.DMatrix(fill_missing(held.X), nthread=1), output_margin=True)
            else:
                m = LambdaMART(nthread=1, seed=r, n_estimators=TREES, max_depth=DEPTH,
                               learning_rate=ETA, early_stopping_rounds=None, **GRID[name])
                pred = m.fit(train).predict(held.X)
            times.append(time.perf_counter() - t0)
            scores.append(float(ndcg(np.asarray(pred, dtype=np.float64), held.y, held.offsets, K).mean()))
    print(f"{name}: {np.mean(scores):.4f}", flush=True)
    return name, scores, times


def main():
    from ltr_toolkit.models.trees import LambdaMART
    t_start = time.perf_counter()
    names = [NATIVE, *GRID]
    with ProcessPoolExecutor(WORKERS) as pool:
        results = {name: (s, t) for name, s, t in pool.map(run_config, names)}
    native = np.asarray(results[NATIVE][0])
    d = LambdaMART()
    default = next(n for n, cfg in GRID.items()
                   if all(getattr(d, k) == v for k, v in cfg.items()))
    rows = []
    for name in sorted(names, key=lambda n: -np.mean(results[n][0])):
        s = np.asarray(results[name][0])
        diff = s - native
        rows.append([name + (" = LambdaMART() defaults" if name == default else ""), float(s.mean()),
                     float(s.std()), float(diff.mean()), float(diff.std() / np.sqrt(len(diff))),
                     statistics.median(results[name][1])])
    total = time.perf_counter() - t_start
    notes = [
        f"msn1.fold1.train.5k only (43 queries), {REPEATS} repeats x {FOLDS} folds; {TREES} trees, "
        f"depth {DEPTH}, learning rate {ETA}, no early stopping; other parameters: LambdaMART() "
        "defaults (LambdaRank weights, pairs normalisation, min_child_weight 1, sigma 1, "
        "untruncated discounts over the IDCG@truncation), native: "
        "xgboost's defaults; fold NDCG@10 of the held-out queries",
        "'minus native' is paired by fold; 'se' its standard error over the "
        f"{REPEATS * FOLDS} folds (folds share training queries: an optimistic error)",
        "hessian x2 = xgboost's rank:ndcg factor: the same trees as the exact hessian with half "
        "the learning rate, reg_lambda and min_child_weight",
        f"whole run {total / 60:.1f} min, {WORKERS} worker processes",
    ]
    write_table("defaults", ["configuration", "CV NDCG@10", "std over folds", "minus native",
                             "se", "fit s (median)"], rows, notes)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.8))
    labels = [r[0] for r in rows][::-1]
    y = np.arange(len(labels))
    ax.errorbar([r[3] for r in rows][::-1], y, xerr=[r[4] for r in rows][::-1], fmt="o", capsize=3)
    ax.axvline(0, color="grey", ls="--", lw=1)
    ax.set_yticks(y, labels, fontsize=7)
    ax.set_xlabel("CV NDCG@10 minus native rank:ndcg (paired by fold, +- se)")
    ax.set_title("LambdaMART objective choices, CV on the MSLR 5k training queries")
    finish(fig, "defaults")


if __name__ == "__main__":
    main()
