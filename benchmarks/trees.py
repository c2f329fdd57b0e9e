"""LambdaMART (custom objective over the toolkit's lambdas) vs xgboost's native rank:ndcg
vs LightGBM's lambdarank, on the MSLR 5k extract.

One command: ``python -m benchmarks.trees`` (LightGBM is a benchmark-only dependency:
``pip install lightgbm``). Same number of trees, depth, learning rate, threads, no early
stopping; trained on the whole train file (43 queries), evaluated on the test file (43
queries). Each configuration runs ``REPEATS`` times, interleaved; medians of the wall
time. Table + PNG in benchmarks/results/. (Logged Cranfield features need the LTR plugin
on a node: not part of this run, see the issue notes.)
"""

from __future__ import annotations

import statistics
import time

import xgboost as xgb

from ltr_toolkit.data.svmlight import load_svmlight

from ._reference import NativeTopKPairs
from ltr_toolkit.models.trees import LambdaMART
from ltr_toolkit.rank.metrics import evaluate

from ._report import SHARED, finish, pyplot, write_table

ROUNDS, DEPTH, ETA, THREADS, REPEATS = 200, 6, 0.05, 2, 3


def main():
    d = SHARED / "data" / "mslr-5k"
    train = load_svmlight(d / "msn1.fold1.train.5k.txt")
    test = load_svmlight(d / "msn1.fold1.test.5k.txt", n_features=train.n_features)
    dtrain = LambdaMART(nthread=THREADS)._dmatrix(train)
    dtest = xgb.DMatrix(test.X, nthread=THREADS)
    base = LambdaMART(n_estimators=ROUNDS, max_depth=DEPTH, learning_rate=ETA, nthread=THREADS,
                      early_stopping_rounds=None)

    def custom(**kw):
        def run():
            m = LambdaMART(n_estimators=ROUNDS, max_depth=DEPTH, learning_rate=ETA, nthread=THREADS,
                           early_stopping_rounds=None, **kw).fit(train)
            return m.predict(test.X)
        return run

    def native(**kw):
        def run():
            bst = xgb.train(dict(base.booster_params(), objective="rank:ndcg", **kw), dtrain, ROUNDS)
            return bst.predict(dtest, output_margin=True)
        return run

    systems = {
        "lambdamart k=10 (toolkit lambdas)": custom(k=10, query_normalization=False),
        "lambdamart k=32 (toolkit lambdas)": custom(k=32, query_normalization=False),
        "toolkit objective, native-mirroring topk=32": custom(pairs=lambda y: NativeTopKPairs(y, 32)),
        "xgboost rank:ndcg (native, topk default 32)": native(),
    }
    try:
        import lightgbm as lgb

        def lgbm():
            ds = lgb.Dataset(train.X, label=train.y, group=train.group_sizes)
            bst = lgb.train({"objective": "lambdarank", "num_leaves": 2 ** DEPTH, "max_depth": DEPTH,
                             "learning_rate": ETA, "num_threads": THREADS, "verbose": -1,
                             "min_data_in_leaf": 1, "min_sum_hessian_in_leaf": 0.0,
                             "lambdarank_truncation_level": 32, "seed": 0}, ds, ROUNDS)
            return bst.predict(test.X)
        systems["lightgbm lambdarank (truncation 32)"] = lgbm
    except ImportError:
        print("lightgbm not installed: skipped (pip install lightgbm)")

    times = {name: [] for name in systems}
    metrics = {}
    for rep in range(REPEATS):
        for name, run in systems.items():
            t0 = time.perf_counter()
            scores = run()
            times[name].append(time.perf_counter() - t0)
            metrics[name] = evaluate(scores, test.y, test.offsets, 10, max_grade=float(train.y.max()))
            print(f"rep {rep} {name}: {times[name][-1]:.2f}s NDCG@10 {metrics[name]['ndcg@10']:.4f}", flush=True)
    native_name = "xgboost rank:ndcg (native, topk default 32)"
    t_native = statistics.median(times[native_name])
    rows = []
    for name in systems:
        t = statistics.median(times[name])
        rows.append([name, metrics[name]["ndcg@10"], metrics[name]["err@10"], t, t / t_native])
    nd_native = metrics[native_name]["ndcg@10"]
    notes = [f"{ROUNDS} trees, depth {DEPTH}, eta {ETA}, {THREADS} threads, base_score 0, "
             f"no early stopping; median of {REPEATS} interleaved runs",
             "NDCG@10 difference to native: " + ", ".join(
                 f"{n.split(' (')[0]}: {metrics[n]['ndcg@10'] - nd_native:+.4f}" for n in systems if n != native_name)]
    write_table("trees", ["system", "test NDCG@10", "test ERR@10", "train time s (median)",
                          "time / native"], rows, notes)
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    names = list(systems)
    short = [n.split(" (")[0].replace("toolkit objective, ", "") for n in names]
    a1.barh(short, [metrics[n]["ndcg@10"] for n in names])
    a1.set_xlabel("test NDCG@10")
    a2.barh(short, [statistics.median(times[n]) for n in names])
    a2.set_xlabel("training time (s)")
    a2.set_yticklabels([])
    fig.suptitle("MSLR 5k extract: LambdaMART variants")
    finish(fig, "trees")


if __name__ == "__main__":
    main()
