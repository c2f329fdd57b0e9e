"""Ranking quality of the toolkit's trainers against xgboost's native ``rank:ndcg`` and
LightGBM's ``lambdarank`` on the MSLR 5k extract: test NDCG@10, mean and spread over
seeds and bootstrap resamples of the test queries, and training time.

One command: ``python -m benchmarks.quality`` (``pip install -e ".[bench]"`` for LightGBM
and matplotlib). For each seed, the 43 queries of the train file are split at random
into 34 training and 9 validation queries; every system trains on the same 34, stops
early on the validation NDCG@10 (the toolkit's metric, by name, for every system), and is
scored on the 43 test queries. The test NDCG@10 of each seed's model is then also taken
on bootstrap resamples of the test queries (the same resamples for every system).

Tree systems share the trees, depth and learning rate (300, 6, 0.1: the ``LambdaMART()``
and ``ltr train --algo lambdamart`` defaults) and otherwise keep their library's
defaults; each of the toolkit's other rows changes one setting of its defaults (the
"first defaults" row: the objective as first written). Native and the toolkit's
defaults are also trained for all 300 trees without early stopping. Every model runs on
one thread (xgboost ``nthread=1``, LightGBM ``num_threads=1``, BLAS limited to one
thread for the networks). Table (Markdown + CSV) and PNG in benchmarks/results/.
"""

from __future__ import annotations

import contextlib
import importlib.util
import statistics
import time

import numpy as np

from ltr_toolkit.data.svmlight import load_svmlight
from ltr_toolkit.models.neural import NeuralRanker
from ltr_toolkit.models.trees import LambdaMART, fill_missing
from ltr_toolkit.rank.metrics import ndcg

from ._report import SHARED, finish, pyplot, write_table

SEEDS = [0, 1, 2, 3, 4]
BOOTSTRAPS = 5
VALID_QUERIES = 9
TREES, DEPTH, ETA, PATIENCE = 300, 6, 0.1, 30
K = 10
NATIVE = "xgboost rank:ndcg (native defaults)"
DEFAULTS = "toolkit lambdamart (defaults: LambdaRank weights)"


def _one_thread():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:        # numpy then uses whatever OPENBLAS/OMP_NUM_THREADS say
        return contextlib.nullcontext()
    return threadpool_limits(1)


def _metric(valid):
    return lambda preds: float(np.mean(ndcg(preds, valid.y, valid.offsets, K)))


# --------------------------------------------------------------------------- systems
# each: (train, valid, seed, early) -> fitted predict(X) function

def native(train, valid, seed, early):
    import xgboost as xgb

    def dm(ds):
        d = xgb.DMatrix(fill_missing(ds.X), label=ds.y, nthread=1)
        d.set_group(ds.group_sizes)
        return d
    score = _metric(valid)
    params = {"objective": "rank:ndcg", "eta": ETA, "max_depth": DEPTH, "nthread": 1,
              "seed": seed, "disable_default_eval_metric": 1}
    cbs = [xgb.callback.EarlyStopping(rounds=PATIENCE, metric_name=f"ndcg@{K}", data_name="valid",
                                      maximize=True, save_best=False)] if early else []
    bst = xgb.train(params, dm(train), TREES, evals=[(dm(valid), "valid")], verbose_eval=False,
                    custom_metric=lambda p, d: (f"ndcg@{K}", score(p)), callbacks=cbs)
    last = bst.best_iteration + 1 if early else TREES
    return (lambda X: bst.predict(xgb.DMatrix(fill_missing(X), nthread=1), output_margin=True,
                                  iteration_range=(0, last))), bst.num_boosted_rounds()


def lightgbm(train, valid, seed, early):
    import lightgbm as lgb
    score = _metric(valid)
    params = {"objective": "lambdarank", "learning_rate": ETA, "max_depth": DEPTH,
              "num_leaves": 2 ** DEPTH, "num_threads": 1, "seed": seed, "deterministic": True,
              "force_row_wise": True, "verbose": -1, "metric": "None"}
    dtrain = lgb.Dataset(train.X, label=train.y, group=train.group_sizes)
    dvalid = lgb.Dataset(valid.X, label=valid.y, group=valid.group_sizes, reference=dtrain)
    cbs = [lgb.early_stopping(PATIENCE, verbose=False)] if early else []
    bst = lgb.train(params, dtrain, TREES, valid_sets=[dvalid], valid_names=["valid"],
                    feval=lambda p, d: (f"ndcg@{K}", score(p), True), callbacks=cbs)
    best = bst.best_iteration if early and bst.best_iteration > 0 else TREES
    return (lambda X: bst.predict(X, num_iteration=best)), bst.current_iteration()


def toolkit(**kw):
    def run(train, valid, seed, early):
        m = LambdaMART(nthread=1, seed=seed, n_estimators=TREES, max_depth=DEPTH,
                       learning_rate=ETA, early_stopping_rounds=PATIENCE if early else None, **kw)
        m.fit(train, valid)
        return m.predict, m.booster_.num_boosted_rounds()
    return run


def network(algo):
    def run(train, valid, seed, early):
        m = NeuralRanker(algo=algo, seed=seed).fit(train, valid)
        return m.predict, len(m.history)          # epochs
    return run


def systems():
    out = {NATIVE: native}
    if importlib.util.find_spec("lightgbm") is not None:
        out["lightgbm lambdarank (defaults)"] = lightgbm
    else:
        print("lightgbm not installed: skipped (pip install lightgbm)")
    out[DEFAULTS] = toolkit()
    out["toolkit lambdamart, RankNet weights"] = toolkit(weighting="ranknet")
    out["toolkit lambdamart, NDCG-Loss2"] = toolkit(weighting="ndcg-loss2")
    out["toolkit lambdamart, NDCG-Loss2++ (mu 1)"] = toolkit(weighting="ndcg-loss2++", mu=1.0)
    out["toolkit lambdamart, exact hessian (hessian_scale 1)"] = toolkit(hessian_scale=1.0)
    out["toolkit lambdamart, NDCG@32's truncated discounts"] = toolkit(truncate_discounts=True)
    out["toolkit lambdamart, first defaults"] = toolkit(truncation="k", min_child_weight=0.0,
                                                        query_normalization="documents",
                                                        score_normalization=False, hessian_scale=1.0,
                                                        truncate_discounts=True)
    out["lambdarank-nn (defaults)"] = network("lambdarank-nn")
    out["ranknet-nn (defaults)"] = network("ranknet-nn")
    return out


NETWORKS = ("lambdarank-nn (defaults)", "ranknet-nn (defaults)")   # early stopping only


def _label(name, early):
    if name in NETWORKS:
        return name
    return f"{name} [{'early stopping' if early else f'{TREES} trees'}]"


def main():
    d = SHARED / "data" / "mslr-5k"
    full = load_svmlight(d / "msn1.fold1.train.5k.txt")
    test = load_svmlight(d / "msn1.fold1.test.5k.txt", n_features=full.n_features)
    boot = np.random.default_rng(12345).integers(0, test.n_queries, size=(BOOTSTRAPS, test.n_queries))
    runs = {name: fn for name, fn in systems().items()}
    keys = [(name, early) for early in (True, False) for name in runs
            if early or name not in NETWORKS]
    per_query = {key: [] for key in keys}       # key -> [seed] -> test NDCG@10 per query
    scores = {key: [] for key in keys}          # key -> [seed] -> test scores
    times = {key: [] for key in keys}
    rounds = {key: [] for key in keys}
    t_start = time.perf_counter()
    with _one_thread():
        # warm-up (library loading, first-call set-up), untimed
        small, tiny = full.subset(np.arange(6)), full.subset(np.arange(6, 8))
        for name, fn in runs.items():
            if name not in NETWORKS:
                fn(small, tiny, 0, True)
        for seed in SEEDS:
            q = np.random.default_rng(seed).permutation(full.n_queries)
            train, valid = full.subset(np.sort(q[VALID_QUERIES:])), full.subset(np.sort(q[:VALID_QUERIES]))
            for name, early in keys:
                t0 = time.perf_counter()
                predict, n_rounds = runs[name](train, valid, seed, early)
                times[(name, early)].append(time.perf_counter() - t0)
                rounds[(name, early)].append(n_rounds)
                p = np.asarray(predict(test.X), dtype=np.float64)
                scores[(name, early)].append(p)
                v = ndcg(p, test.y, test.offsets, K)
                per_query[(name, early)].append(v)
                print(f"seed {seed} {_label(name, early)}: NDCG@10 {v.mean():.4f} "
                      f"({times[(name, early)][-1]:.2f}s)", flush=True)
    total = time.perf_counter() - t_start
    rng = np.random.default_rng(0)
    random_ndcg = float(np.mean([ndcg(rng.normal(size=test.n_docs), test.y, test.offsets, K).mean()
                                 for _ in range(50)]))

    def stats(key):
        v = np.asarray(per_query[key])                     # [seeds, queries]
        seed_means = v.mean(axis=1)
        boot_means = v[:, boot].mean(axis=2)               # [seeds, bootstraps]
        return seed_means, boot_means

    rows, summary, diffs = [], {}, {}
    for key in keys:
        name, early = key
        seed_means, boot_means = stats(key)
        ref = (NATIVE, early)                              # native trained the same way
        ref_seed, ref_boot = stats(ref)
        t = statistics.median(times[key])
        t_ref = statistics.median(times[ref])
        label = _label(name, early)
        diff = boot_means - ref_boot
        # seconds per round (tree) against native's, each over its own fits
        per_round = (float("nan") if name in NETWORKS else
                     statistics.median(np.divide(times[key], rounds[key]))
                     / statistics.median(np.divide(times[ref], rounds[ref])))
        # seeds whose model scores the test set as native's does (the same trees)
        same = sum(np.allclose(a, b, rtol=0, atol=1e-5) for a, b in zip(scores[key], scores[ref]))
        rows.append([label, float(seed_means.mean()), float(seed_means.std()),
                     float(boot_means.std()), float((seed_means - ref_seed).mean()),
                     float(diff.std()), t, t / t_ref, statistics.median(rounds[key]), per_round,
                     f"{same}/{len(SEEDS)}"])
        summary[label] = (float(seed_means.mean()), float(boot_means.std()), t)
        diffs[label] = rows[-1][4]
    rows.append(["random ranker", random_ndcg, 0.0, 0.0, float("nan"), 0.0, 0.0, 0.0, 0, float("nan"), ""])

    def mean(name, early):
        return summary[_label(name, early)][0]

    def tmed(name, early):
        return statistics.median(times[(name, early)])
    best_ll = max((r for r in rows if "Loss2" in r[0]), key=lambda r: r[1])
    notes = [
        f"train: {full.n_queries - VALID_QUERIES} of the {full.n_queries} queries of "
        f"msn1.fold1.train.5k, drawn per seed; valid: the other {VALID_QUERIES}; test: "
        f"msn1.fold1.test.5k ({test.n_queries} queries, {test.n_docs} docs). [early stopping]: "
        f"stop when the validation NDCG@{K} has not improved for {PATIENCE} rounds, keep the best "
        f"round (early_stopping_rounds=30 for LambdaMART); [{TREES} trees]: no early stopping "
        "(xgboost's, LightGBM's and LambdaMART()'s default, and `ltr train`'s for trees); networks: "
        "NeuralRanker defaults (early stopping on "
        "the validation NDCG@10, patience 10 epochs)",
        f"seeds {SEEDS} (query split and model seed); {BOOTSTRAPS} bootstrap resamples of the test "
        "queries, the same for every system; 'std seeds' is over the per-seed test means, "
        "'std seeds x bootstrap' over the seed x resample means; 'minus native' is paired (same "
        "seed, same resample) against native trained the same way (networks: against native "
        "with early stopping)",
        f"trees: {TREES} trees, depth {DEPTH}, learning rate {ETA}, everything else each library's "
        "default (LightGBM: num_leaves 2^depth); networks: 64-16, Adam 1e-3, <= 50 epochs; one "
        "thread per model; time = median fit time over the seeds (including per-round validation "
        "and, with early stopping, the rounds after the best one)",
        f"toolkit defaults vs native: {mean(DEFAULTS, True) - mean(NATIVE, True):+.4f} with early "
        f"stopping (time ratio {tmed(DEFAULTS, True) / tmed(NATIVE, True):.2f}), "
        f"{mean(DEFAULTS, False) - mean(NATIVE, False):+.4f} with {TREES} trees (time ratio "
        f"{tmed(DEFAULTS, False) / tmed(NATIVE, False):.2f}); toolkit defaults with early stopping vs "
        f"native with its defaults ({TREES} trees): {mean(DEFAULTS, True) - mean(NATIVE, False):+.4f} "
        f"(time ratio {tmed(DEFAULTS, True) / tmed(NATIVE, False):.2f})",
        "time per round / native's: median seconds per boosting round over the seeds, "
        "against native's (early stopping trains different numbers of rounds: with it, the "
        f"toolkit's defaults trained {statistics.median(rounds[(DEFAULTS, True)]):.0f} rounds "
        f"(median), native {statistics.median(rounds[(NATIVE, True)]):.0f})",
        "native's scores: seeds whose model gives every test document native's score (to "
        "1e-5): the same trees, so the same NDCG; float32 rounding in the objective can flip a "
        "near-tied split after many rounds, after which the models drift apart",
        f"best LambdaLoss variant: {best_ll[0]} ({best_ll[1]:.4f}, {best_ll[4]:+.4f} vs native)",
        f"whole run {total / 60:.1f} min",
    ]
    write_table("quality", ["system", f"test NDCG@{K} mean", "std seeds", "std seeds x bootstrap",
                            "minus native (paired)", "std of difference", "train time s (median)",
                            "time / native", "rounds or epochs trained (median)",
                            "time per round / native's", "native's scores"], rows, notes)
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 6.5), gridspec_kw={"width_ratios": [3, 2]})
    labels = list(summary)[::-1]
    ypos = np.arange(len(labels))
    colors = ["tab:orange" if "toolkit" in n else ("tab:green" if "-nn" in n else "tab:blue") for n in labels]
    for y_, n, c in zip(ypos, labels, colors):
        a1.errorbar([summary[n][0]], [y_], xerr=[summary[n][1]], fmt="o", capsize=3, color=c)
    a1.axvline(mean(NATIVE, False), ls="--", color="grey", lw=1, label=f"native rank:ndcg, {TREES} trees")
    a1.axvline(random_ndcg, ls=":", color="grey", lw=1, label="random ranker")
    a1.set_yticks(ypos, labels, fontsize=7)
    a1.set_xlabel(f"test NDCG@{K}: mean over seeds, bars: std over seeds x bootstrap")
    a1.legend(fontsize=7, loc="lower left")
    a2.barh(ypos, [summary[n][2] for n in labels], color=colors)
    a2.set_yticks(ypos, [""] * len(labels))
    a2.set_xlabel("training time, s (median over seeds, 1 thread)")
    fig.suptitle(f"MSLR 5k extract: {len(SEEDS)} seeds x {BOOTSTRAPS} bootstrap resamples of the test queries")
    finish(fig, "quality")


if __name__ == "__main__":
    main()
