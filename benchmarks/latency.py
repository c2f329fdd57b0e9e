"""Live rerank latency through the helper users call: ``python -m benchmarks.latency``.

Two set-ups on the Cranfield collection, measured in the same run, each with 1 and 4
concurrent clients (threads of one process), one node, window 100, size 10:

* **before**: the index mapping, feature set and serving path as they were when issue 22
  was filed (``benchmarks/data/cranfield-before.json``): 18 features, two of them
  ``more_like_this`` feedback features (top 3 and top 10 documents) re-analysing the
  liked documents' text (no term vectors), served the way the helper served them (the
  model's definition read from the store for every query, then the first stage's top
  ``window`` ids, then the rescore restricted to them: three requests);
* **after**: the shipped mapping and feature set (5 features; the feedback comes from
  each document's neighbours, found at index time: one request), through
  ``ltr_toolkit.serving.rerank.search`` as users call it;
* **after + query-time feedback**: ``feature_sets/cranfield-feedback.json``, the shipped
  set plus a ``more_like_this`` feedback feature over the first stage's top 3 (term
  vectors): what query-time feedback costs on top (two requests), for users who want it.

The first stage alone is the same helper without a model, in the same interleaved loop:
for every query, every system runs back to back in a random order, so that a slow moment
of the machine falls on all of them alike. Reports p50/p95/p99 in ms and the ratio to the
first stage's. Models are trained on the train split's logged candidates with one fixed
setting per family (the same before and after).
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import numpy as np

from ltr_toolkit.stores import store as st
from ltr_toolkit.indexing.documents import CORPUS_VERSION, corpus_version, index_documents
from ltr_toolkit.stores.model_store import upload
from ltr_toolkit.stores.params import derived_depth, featureset_params, with_first_stage_ids
from ltr_toolkit.query.requests import Rescore, search_body
from ltr_toolkit.serving.rerank import search
from ltr_toolkit.serving.serving import Serving
from ltr_toolkit.stores.store import get_document, store_path
from ltr_toolkit.data.featuresets import load_featureset
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.pipeline.train import load_model, train_from_files

from ._live import INDEX, STAGE, connect, prepare, workdir
from ._report import finish, pyplot, write_table

OLD_INDEX = "bench-cranfield-before"
WINDOW, SIZE, PASSES = 100, 10, 3
MODELS = {"lambdamart": dict(trees=200, depth=4, lr=0.1), "linear": dict(epochs=40),
          "lambdarank-nn": dict(epochs=40, hidden=(16,))}
BEFORE_SET = Path(__file__).parent / "data" / "cranfield-before.json"
FEEDBACK_SET = Path(__file__).parent.parent / "feature_sets" / "cranfield-feedback.json"
FEEDBACK = "after + query-time feedback"


def _old_index(conn) -> None:
    """Cranfield with the mapping as it was: no term vectors, no neighbours, the segments
    of the bulk load."""
    if corpus_version(conn, OLD_INDEX) != CORPUS_VERSION:
        index_documents(conn, OLD_INDEX, cranfield.documents(), recreate=True, term_vectors=False,
                        merge=False, expansion=None)


def _feature_sets(conn) -> dict[str, str]:
    sets = {"after": load_featureset(cranfield.FEATURE_SET),
            "before": load_featureset(BEFORE_SET), FEEDBACK: load_featureset(FEEDBACK_SET)}
    return {k: st.upload_featureset_versioned(conn, v)[0] for k, v in sets.items()}


def _models(conn, fsets: dict[str, str]) -> dict[str, dict[str, str]]:
    """{set-up: {algo: stored model}} trained on the train split's candidates."""
    d = workdir()
    train = cranfield.split_judgments("train")
    out = {}
    for setup, fs in fsets.items():
        index = OLD_INDEX if setup == "before" else INDEX
        data = d / f"latency-{fs}.txt"
        if not data.exists():
            Serving(index, STAGE, WINDOW).log_candidates(conn, train, fs, data)
        algos = MODELS if setup != FEEDBACK else {"lambdamart": MODELS["lambdamart"]}
        out[setup] = {}
        for algo, kw in algos.items():
            path = d / f"latency-{fs}-{algo}.json"
            train_from_files(data, algo=algo, output=path, **kw)
            art, model = load_model(path)
            out[setup][algo] = upload(conn, art, model, f"bench-{fs}-{algo}", fs)["name"]
    return out


def _before(conn, index, params, model):
    """The helper as it served before: the model read from the store, the top ``window``
    ids, then the rescore restricted to them."""
    doc = get_document(conn, f"{store_path(None)}/_model/{model}", None)
    depth = max(WINDOW, SIZE, derived_depth(featureset_params(doc["model"]["feature_set"])))
    c = conn.client()
    hits = c.search(index=index, body=search_body(STAGE, params, depth))["hits"]["hits"]
    ids = [h["_id"] for h in hits]
    mp = with_first_stage_ids(params, ids, derived_depth(featureset_params(doc["model"]["feature_set"])))
    c.search(index=index, body=search_body(STAGE, params, SIZE, Rescore(model, WINDOW), model_params=mp,
                                           top_ids=ids[:WINDOW]))


def _systems(conn, models) -> dict[str, object]:
    sys = {"before: first stage": lambda p: search(conn, OLD_INDEX, p, STAGE, None, SIZE, max_terms=1000),
           "after: first stage": lambda p: search(conn, INDEX, p, STAGE, None, SIZE, max_terms=1000)}
    for algo, m in models["before"].items():
        sys[f"before: {algo}"] = lambda p, m=m: _before(conn, OLD_INDEX, p, m)
    for setup in ("after", FEEDBACK):
        for algo, m in models[setup].items():
            sys[f"{setup}: {algo}"] = lambda p, m=m: search(conn, INDEX, p, STAGE, Rescore(m, WINDOW), SIZE,
                                                             max_terms=1000)
    return sys


def _run(systems, queries, clients: int, seed: int) -> dict[str, list[float]]:
    """Every thread takes its share of the queries; per query, every system in a random order."""
    times = {s: [] for s in systems}
    lock = threading.Lock()

    def work(share, rng):
        for p in share:
            order = list(systems)
            rng.shuffle(order)
            for s in order:
                t0 = time.perf_counter()
                systems[s](p)
                ms = (time.perf_counter() - t0) * 1e3
                with lock:
                    times[s].append(ms)
    threads = [threading.Thread(target=work, args=(queries[i::clients], random.Random(seed + i)))
               for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return times


def main():
    conn = connect()
    prepare(conn)
    _old_index(conn)
    models = _models(conn, _feature_sets(conn))
    systems = _systems(conn, models)
    queries = [{"keywords": t} for t in cranfield.queries().values()]
    _run(systems, queries, 1, 0)                       # warm-up pass
    rows = []
    for clients in (1, 4):
        times = {s: [] for s in systems}
        for rep in range(PASSES):
            for s, t in _run(systems, queries, clients, 100 * rep + clients).items():
                times[s] += t
        base = {setup: np.percentile(times[f"{setup}: first stage"], [50, 95, 99])
                for setup in ("before", "after")}
        for s, t in times.items():
            setup = s.split(": ")[0].split(" + ")[0]
            p = np.percentile(t, [50, 95, 99])
            rows.append([s, clients, *np.round(p, 2), round(p[0] / base[setup][0], 2),
                         round(p[2] / base[setup][2], 2)])
            print(rows[-1], flush=True)
    _write(rows, models)


def _write(rows, models):
    notes = [f"Cranfield, {len(cranfield.queries())} queries x {PASSES} passes per client count "
             f"(after a warm-up pass), window {WINDOW}, size {SIZE}; 4 clients: 4 threads of one "
             "process (a RankLib network is queried one at a time per process: not thread-safe "
             "in the plugin)",
             "ratios: to the first stage of the same set-up, same clients, same run",
             "the semantic feature's query vectors: computed in the warm-up pass, then kept by "
             "the process, as for any repeated query (the encoder's own cost per new query: "
             "latency_breakdown.md)",
             f"models: {models}",
             "node: one local OpenSearch, 512 MiB heap, 2 cores shared with the client"]
    write_table("latency", ["system", "clients", "p50 ms", "p95 ms", "p99 ms", "p50 ratio",
                            "p99 ratio"], rows, notes)
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for ax, clients in zip(axes, (1, 4)):
        sel = [r for r in rows if r[1] == clients]
        x = np.arange(len(sel))
        for i, q in enumerate(("p50", "p95", "p99")):
            ax.bar(x + (i - 1) * 0.27, [r[2 + i] for r in sel], width=0.27, label=q)
        ax.set_xticks(x, [r[0] for r in sel], rotation=35, ha="right", fontsize=8)
        ax.set_title(f"{clients} client(s)")
        ax.set_ylabel("ms")
        ax.legend()
    fig.suptitle("rerank latency through rerank.search, Cranfield, window 100")
    finish(fig, "latency")


if __name__ == "__main__":
    main()
