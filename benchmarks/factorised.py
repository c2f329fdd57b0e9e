"""Time per epoch, factorised vs naive per-pair RankNet, for n documents per query.

One command: ``python -m benchmarks.factorised``. Network 136-64-16-1 (sigmoid), float64
for both trainers (same arithmetic); one query of n documents with labels 0..4; an epoch
is one pass over the query (one update). Medians of repeated runs, side by side in one
run; log-log plot with fitted slopes. Also: microseconds per document of a full training
epoch over the MSLR 5k extract (float32, the trainer's default).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from ltr_toolkit.models.mlp import MLP, SGD
from benchmarks._naive import naive_query_gradient
from ltr_toolkit.models.neural import NeuralRanker
from ltr_toolkit.rank.pairs import QueryPairs

from ._report import SHARED, finish, pyplot, write_table

SIZES = [10, 50, 100, 200, 500, 1000]
HIDDEN = (64, 16)
N_FEATURES = 136


def _median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_sizes():
    rows = []
    for n in SIZES:
        rng = np.random.default_rng(n)
        X = rng.normal(size=(n, N_FEATURES))
        y = rng.integers(0, 5, size=n).astype(float)
        n_pairs = int((y[:, None] > y[None, :]).sum())
        net_f = MLP(N_FEATURES, HIDDEN, seed=0, dtype=np.float64)
        net_n = MLP(N_FEATURES, HIDDEN, seed=0, dtype=np.float64)
        opt_f, opt_n = SGD([net_f.flat], 1e-4), SGD(net_n.params, 1e-4)
        pairs = QueryPairs(y)  # label-only part, built once per training run

        def factorised():
            s, acts = net_f.forward(X, keep=True)
            opt_f.step([net_f.flat], [net_f.backward_flat(acts, pairs.ranknet(s))])

        def naive():
            opt_n.step(net_n.params, naive_query_gradient(net_n, X, y))

        t_f = _median_time(factorised, 31)
        t_n = _median_time(naive, 5 if n <= 100 else (3 if n <= 200 else 1))
        rows.append([n, n_pairs, t_f * 1e3, t_n * 1e3, t_n / t_f, n / 4])
        print(f"n={n:5d} pairs={n_pairs:7d} factorised={t_f * 1e3:9.3f} ms "
              f"naive={t_n * 1e3:10.1f} ms speed-up={t_n / t_f:8.1f}x (n/4={n / 4:.0f})", flush=True)
    return rows


def bench_mslr_epoch():
    from ltr_toolkit.data.svmlight import load_svmlight
    ds = load_svmlight(SHARED / "data" / "mslr-5k" / "msn1.fold1.train.5k.txt")
    m = NeuralRanker(algo="lambdarank-nn", hidden=HIDDEN, seed=0).init(ds.n_features, ds.X)
    Xt = m._transform(ds.X)
    queries = [ds.query(q) for q in range(ds.n_queries)]
    pairs = [m.pairs_for(ds.y[sl]) for sl in queries]

    def epoch():
        for sl, qp in zip(queries, pairs):
            m.step_query(Xt[sl], qp)
    out = {}
    for objective in ("ranknet", "lambdarank"):
        m.objective = objective
        epoch()  # warm-up
        t = _median_time(epoch, 7)
        out[objective] = (t, t / ds.n_docs * 1e6)
        print(f"MSLR epoch ({objective}, float32, 136-64-16-1): {t * 1e3:.1f} ms, "
              f"{t / ds.n_docs * 1e6:.2f} us/doc over {ds.n_docs} docs", flush=True)
    return out, ds.n_docs


def main():
    rows = bench_sizes()
    ns = np.array([r[0] for r in rows], dtype=float)
    tf = np.array([r[2] for r in rows])
    tn = np.array([r[3] for r in rows])
    big = ns >= 100
    slope_f = np.polyfit(np.log(ns[big]), np.log(tf[big]), 1)[0]
    slope_n = np.polyfit(np.log(ns[big]), np.log(tn[big]), 1)[0]
    epoch, n_docs = bench_mslr_epoch()
    notes = [
        f"fitted log-log slope for n >= 100: factorised {slope_f:.2f}, naive {slope_n:.2f}",
        "acceptance: speed-up >= n/4 at every n >= 100: "
        + ", ".join(f"n={int(r[0])}: {'yes' if r[4] >= r[5] else 'NO'}" for r in rows if r[0] >= 100),
    ]
    for obj, (t, us) in epoch.items():
        notes.append(f"MSLR 5k epoch, {obj}-nn 136-64-16-1 float32: {t * 1e3:.1f} ms = {us:.2f} us/doc ({n_docs} docs)")
    write_table("factorised", ["n docs", "pairs", "factorised ms/epoch", "naive ms/epoch",
                               "speed-up", "n/4"], rows, notes)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    ax.loglog(ns, tn, "o-", label=f"naive per-pair (slope {slope_n:.2f})")
    ax.loglog(ns, tf, "s-", label=f"factorised (slope {slope_f:.2f})")
    ax.set_xlabel("documents per query (n)")
    ax.set_ylabel("time per epoch (ms)")
    ax.set_title("RankNet epoch time, 136-64-16-1 MLP")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    finish(fig, "factorised")


if __name__ == "__main__":
    main()
