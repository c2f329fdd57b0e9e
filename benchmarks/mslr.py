"""NDCG@10 and training time of ranknet-nn, lambdarank-nn and linear on the MSLR 5k extract.

One command: ``python -m benchmarks.mslr``. Train on the first 34 queries of the train
file, early-stop on its last 9 (validation NDCG@10), evaluate on the test file (43
queries). Several seeds; medians, side by side in one run. Results: table + PNG in
benchmarks/results/.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from ltr_toolkit.data.svmlight import load_svmlight
from ltr_toolkit.models.neural import NeuralRanker
from ltr_toolkit.rank.metrics import evaluate, ndcg

from ._report import SHARED, finish, pyplot, write_table

#: name -> NeuralRanker arguments
ALGOS = {
    "linear": dict(algo="linear"),
    "ranknet-nn": dict(algo="ranknet-nn"),
    "lambdarank-nn (dNDCG@10)": dict(algo="lambdarank-nn", truncation="k"),
    "lambdarank-nn (dNDCG whole list)": dict(algo="lambdarank-nn", truncation=None),
}
SEEDS = [0, 1, 2, 3, 4]


def main():
    d = SHARED / "data" / "mslr-5k"
    full = load_svmlight(d / "msn1.fold1.train.5k.txt")
    test = load_svmlight(d / "msn1.fold1.test.5k.txt", n_features=full.n_features)
    q = np.arange(full.n_queries)
    train, valid = full.subset(q[:34]), full.subset(q[34:])
    rng = np.random.default_rng(0)
    random_ndcg = float(np.mean([ndcg(rng.normal(size=test.n_docs), test.y, test.offsets, 10).mean()
                                 for _ in range(50)]))
    rows, per_seed = [], {}
    for algo, kw in ALGOS.items():
        nd, er, times, epochs = [], [], [], []
        for seed in SEEDS:
            m = NeuralRanker(hidden=(64, 16), epochs=60, lr=1e-3, patience=10, seed=seed, **kw)
            t0 = time.perf_counter()
            m.fit(train, valid)
            times.append(time.perf_counter() - t0)
            ev = evaluate(m.predict(test.X), test.y, test.offsets, 10, max_grade=float(full.y.max()))
            nd.append(ev["ndcg@10"])
            er.append(ev["err@10"])
            epochs.append(len(m.history))
        per_seed[algo] = nd
        rows.append([algo, statistics.median(nd), float(np.mean(nd)), float(np.std(nd)),
                     statistics.median(er), statistics.median(times), statistics.median(epochs)])
        print(f"{algo:36s} test NDCG@10 median {statistics.median(nd):.4f} "
              f"(seeds {np.round(nd, 4).tolist()}), train {statistics.median(times):.2f}s", flush=True)
    rows.append(["random", random_ndcg, random_ndcg, 0.0, float("nan"), 0.0, 0])
    rn = statistics.median(per_seed["ranknet-nn"])
    lr_vs_rn = ", ".join(f"{a}: {statistics.median(v) - rn:+.4f}" for a, v in per_seed.items()
                         if a.startswith("lambdarank"))
    notes = [
        f"train: first 34 queries of msn1.fold1.train.5k ({train.n_docs} docs); valid: last 9 "
        f"({valid.n_docs} docs); test: msn1.fold1.test.5k ({test.n_queries} queries, {test.n_docs} docs)",
        "hidden 64-16 sigmoid, Adam lr 1e-3, <= 60 epochs, patience 10 on validation NDCG@10, "
        f"seeds {SEEDS}; time includes per-epoch validation",
        f"median test NDCG@10 minus ranknet-nn's: {lr_vs_rn}",
    ]
    write_table("mslr", ["algorithm", "test NDCG@10 (median)", "mean", "std", "test ERR@10 (median)",
                         "train time s (median)", "epochs (median)"], rows, notes)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.boxplot([per_seed[a] for a in ALGOS], tick_labels=[a.replace(" (", "\n(") for a in ALGOS])
    ax.axhline(random_ndcg, ls="--", color="grey", label="random ranker")
    ax.set_ylabel("test NDCG@10")
    ax.set_title(f"MSLR 5k extract, {len(SEEDS)} seeds")
    ax.legend()
    finish(fig, "mslr")


if __name__ == "__main__":
    main()
