"""Live rerank latency: ``python -m benchmarks.latency``.

On the Cranfield index (``bench-cranfield``) with the demo's feature set: trains a tree
(lambdamart), a network (lambdarank-nn) and a linear model on the train split's logged
candidates, uploads them, and times the 225 Cranfield queries (one warm-up pass, then 3
passes, one client thread, client-side wall time) as

* the first stage alone (BM25 best_fields over title and abstract),
* the first stage's top-ids request alone (what the feedback features add as a round trip),
* each model reranking the top 10 / 100 / 1000: the ids request + the rescore request,
  as ``rerank.search`` serves it.

Reports p50/p95/p99 in ms and the p99 overhead over the first stage alone.
"""

from __future__ import annotations

import time

import numpy as np

from ltr_toolkit.cluster.candidates import candidate_judgments
from ltr_toolkit.cluster.featurelog import log_features
from ltr_toolkit.cluster.model_store import upload
from ltr_toolkit.cluster.params import derived_depth, model_params, with_first_stage_ids
from ltr_toolkit.cluster.rerank import search_body
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.pipeline.train import load_model, train_from_files

from ._live import INDEX, STAGE, connect, prepare, workdir
from ._report import finish, pyplot, write_table

WINDOWS = (10, 100, 1000)
PASSES = 3
MODELS = {"lambdamart": dict(trees=200, depth=3, lr=0.05), "lambdarank-nn": dict(epochs=40, hidden=(16, 4)),
          "linear": dict(epochs=40)}


def _timed(fn, params):
    for p in params:   # warm-up
        fn(p)
    lat = []
    for _ in range(PASSES):
        for p in params:
            t0 = time.perf_counter()
            fn(p)
            lat.append((time.perf_counter() - t0) * 1e3)
    return np.percentile(lat, [50, 95, 99])


def main():
    conn = connect()
    c = conn.client()
    fs = prepare(conn)
    d = workdir()
    cands, info = candidate_judgments(conn, INDEX, cranfield.split_judgments("train"), 100, STAGE)
    data = d / "latency-train.txt"
    if not data.exists():
        log_features(conn, cands, fs, INDEX, data, first_stage=STAGE, candidates=info)
    names = {}
    for algo, kw in MODELS.items():
        path = d / f"latency-{algo}.json"
        train_from_files(data, algo=algo, output=path, **kw)
        art, model = load_model(path)
        names[algo] = upload(conn, art, model, f"bench-{algo}", fs)["name"]
    params = [{"keywords": t} for t in cranfield.queries().values()]

    def first_stage(p):
        c.search(index=INDEX, body=search_body(STAGE, p, size=10, source=None))
    base = _timed(first_stage, params)
    rows = [["first stage (bm25)", "-", *np.round(base, 2), 0.0, 0.0]]
    depth = max(derived_depth(model_params(conn, m)) for m in names.values())

    def ids_only(p):
        c.search(index=INDEX, body=search_body(STAGE, p, size=depth, source=None))
    if depth:
        p = _timed(ids_only, params)
        rows.append([f"first-stage ids (top {depth})", "-", *np.round(p, 2),
                     round(p[2] - base[2], 2), round(100 * (p[2] - base[2]) / base[2], 1)])
    for algo, m in names.items():
        mdepth = derived_depth(model_params(conn, m))
        for w in WINDOWS:
            def rerank(p, m=m, w=w, mdepth=mdepth):
                mp = p
                if mdepth:
                    hits = c.search(index=INDEX, body=search_body(STAGE, p, size=mdepth, source=None))
                    mp = with_first_stage_ids(p, [h["_id"] for h in hits["hits"]["hits"]], mdepth)
                c.search(index=INDEX, body=search_body(STAGE, p, m, 10, w, None, mp, source=None))
            p = _timed(rerank, params)
            rows.append([algo, w, *np.round(p, 2), round(p[2] - base[2], 2),
                         round(100 * (p[2] - base[2]) / base[2], 1)])
            print(f"{algo} window {w}: p50 {p[0]:.2f} p95 {p[1]:.2f} p99 {p[2]:.2f} ms", flush=True)
    notes = [f"{len(params)} queries x {PASSES} passes after a warm-up pass, size 10, one client thread",
             f"models: {', '.join(names.values())}; feature set {fs} "
             f"(feedback features need the first stage's top {depth} ids: 2 requests per reranked query)",
             "node: single local OpenSearch, 512 MiB heap, 2 cores shared with the client"]
    write_table("latency", ["system", "window", "p50 ms", "p95 ms", "p99 ms", "p99 overhead ms",
                            "p99 overhead %"], rows, notes)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4))
    labels = [f"{r[0]}" + (f" w{r[1]}" if r[1] != "-" else "") for r in rows]
    for i, q in enumerate(("p50", "p95", "p99")):
        ax.bar(np.arange(len(rows)) + (i - 1) * 0.27, [r[2 + i] for r in rows], width=0.27, label=q)
    ax.set_xticks(np.arange(len(rows)), labels, rotation=30, ha="right")
    ax.set_ylabel("ms")
    ax.set_title("rerank latency, Cranfield queries")
    ax.legend()
    finish(fig, "latency")


if __name__ == "__main__":
    main()
