"""OpenSearch and Elasticsearch side by side, live, in one run: ``python -m benchmarks.engines``.

Both local nodes (``ltr cluster start --engine opensearch|elasticsearch``; a running node
is used as it is, never restarted; ``LTR_OPENSEARCH_URL`` / ``LTR_ELASTICSEARCH_URL``
name others), each with the Cranfield index ``bench-cranfield`` and the shipped feature
set with its semantic feature (``query_doc_cosine``) in a store of its own
(``bench-engines``: a test run on the same shared nodes may drop the default store):

* **logging**: rows/s of the toolkit's ``log_features`` (its defaults: ``_msearch``, 25
  queries per round trip, one in flight) over the first stage's top 100 candidates of all
  225 judged queries; 3 runs per engine, the engines alternating (OS, ES, ES, OS, OS,
  ES), median reported; the query vectors are computed once before (the encoder is the
  same for both and not what is compared);
* **latency**: p50/p99 ms through ``ltr_toolkit.serving.rerank.search`` (what users
  call), 1 client, window 100, size 10: the first stage alone, a LambdaMART and a linear
  model (fixed settings, those of ``benchmarks.latency``), and a linear model of the
  lexical set (``cranfield-lexical``: the same without the semantic feature), each
  trained per engine on the train split's candidates logged on that engine. Per test
  query, the eight systems (two engines x four) run back to back in a random order, so a
  slow moment of the machine falls on all alike; a warm-up pass, then 3 passes over the
  test queries. The query's vector is passed in (computed once per query before; the
  encoder's cost per query is in ``semantic_latency.md``, the same on either engine).

HTTP requests (and each one's time) are counted on each connection's transport during
the timed calls: Elasticsearch's ``knn`` feature needs the window's ids before the
rescore (the feature is restricted to them), OpenSearch's ``knn_score`` does not, so a
reranked query with the semantic feature is expected to take two requests on one and one
on the other; the table says what it took. Served-vs-local score parity on both engines
is covered by the test suite (``tests/test_parity.py``), not here.
"""

from __future__ import annotations

import os
import random
import statistics
import time

import numpy as np

from ltr_toolkit.data.featuresets import load_featureset
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.encoders import default_encoder
from ltr_toolkit.features.candidates import candidate_judgments
from ltr_toolkit.features.featurelog import log_features
from ltr_toolkit.indexing.vectors import with_query_vectors
from ltr_toolkit.pipeline.train import load_model, train_from_files
from ltr_toolkit.serving.rerank import Rescore, search
from ltr_toolkit.serving.serving import Serving
from ltr_toolkit.stores import store as st
from ltr_toolkit.stores.model_store import upload
from ltr_toolkit.stores.store import get_featureset
from ltr_toolkit.transport.engine import detect

from ._live import INDEX, STAGE, connect, prepare, workdir
from ._report import finish, pyplot, write_table

ENGINES = ("opensearch", "elasticsearch")
SHORT = {"opensearch": "OS", "elasticsearch": "ES"}
RUNS, WINDOW, SIZE, PASSES, K = 3, 100, 10, 3, 100
#: a store of its own: the shared nodes' default store may be dropped by a test run meanwhile
STORE = "bench-engines"
MODELS = {"lambdamart": dict(trees=200, depth=4, lr=0.1), "linear": dict(epochs=40)}
#: a linear model of the lexical set too: what the semantic feature costs on each engine
LEXICAL = "linear, lexical set"
SYSTEMS = ("first stage", *MODELS, LEXICAL)


class Counter:
    """Counts the HTTP requests a connection's client sends (its transport's
    ``perform_request``), with their method and path."""

    def __init__(self, conn):
        transport = conn.client().transport
        inner = transport.perform_request
        self.n, self.paths, self.ms = 0, {}, []

        def counted(method, url, *args, **kwargs):
            self.n += 1
            key = f"{method} {url}"
            self.paths[key] = self.paths.get(key, 0) + 1
            t0 = time.perf_counter()
            try:
                return inner(method, url, *args, **kwargs)
            finally:
                self.ms.append((time.perf_counter() - t0) * 1e3)
        transport.perform_request = counted


def _nodes() -> dict[str, dict]:
    out = {}
    for engine in ENGINES:
        conn = connect(engine)
        out[engine] = {"conn": conn, "label": detect(conn).label, "fs": prepare(conn, STORE),
                       "lexical": st.upload_featureset_versioned(
                           conn, load_featureset(cranfield.LEXICAL_FEATURE_SET), STORE)[0],
                       "count": Counter(conn)}
        print(f"{out[engine]['label']} at {conn.display_url}: index {INDEX}, feature set "
              f"{out[engine]['fs']}", flush=True)
    return out


# --------------------------------------------------------------------------- logging

def logging(nodes) -> dict[str, dict]:
    d = workdir()
    jobs = {}
    for engine, n in nodes.items():
        conn, fs = n["conn"], n["fs"]
        cands, info = candidate_judgments(conn, INDEX, cranfield.judgments(), K, STAGE)
        # the query vectors once, untimed: the same encoder for both engines
        with_query_vectors(conn, INDEX, [{"keywords": t} for t in cranfield.queries().values()],
                           ["query_vector"])
        jobs[engine] = (cands, info)
    secs = {e: [] for e in nodes}
    reqs = {e: [] for e in nodes}
    rows = {}
    for run in range(RUNS):
        order = list(ENGINES) if run % 2 == 0 else list(reversed(ENGINES))
        for engine in order:
            n = nodes[engine]
            cands, info = jobs[engine]
            out = d / f"engines-log-{engine}-{run}.txt"
            for p in (out, out.with_suffix(".txt.json")):
                p.unlink(missing_ok=True)
            before = n["count"].n
            t0 = time.perf_counter()
            side = log_features(n["conn"], cands, n["fs"], INDEX, out, STORE, first_stage=STAGE,
                                candidates=info)
            secs[engine].append(time.perf_counter() - t0)
            reqs[engine].append(n["count"].n - before)
            rows[engine] = side["rows"]
            print(f"logging {engine} run {run}: {side['rows']} rows in {secs[engine][-1]:.2f} s, "
                  f"{reqs[engine][-1]} requests", flush=True)
    out = {}
    for engine in ENGINES:
        conn, fs = nodes[engine]["conn"], nodes[engine]["fs"]
        med = statistics.median(secs[engine])
        out[engine] = {"rows": rows[engine], "seconds": secs[engine], "median s": med,
                       "rows/s": rows[engine] / med, "requests": statistics.median(reqs[engine]),
                       "features": len(get_featureset(conn, fs, STORE)["featureset"]["features"])}
    return out


# --------------------------------------------------------------------------- latency

def _models(n, engine) -> dict[str, str]:
    """{system: stored model} trained on the train split's candidates logged on this engine."""
    d = workdir()
    conn = n["conn"]
    out = {}
    for fs, models in ((n["fs"], MODELS), (n["lexical"], {LEXICAL: MODELS["linear"]})):
        data = d / f"engines-train-{engine}-{fs}.txt"
        for p in (data, data.with_suffix(".txt.json")):
            p.unlink(missing_ok=True)
        Serving(INDEX, STAGE, WINDOW, STORE).log_candidates(conn, cranfield.split_judgments("train"),
                                                            fs, data)
        for system, kw in models.items():
            algo = system.split(",")[0]
            path = d / f"engines-train-{engine}-{fs}-{algo}.json"
            train_from_files(data, algo=algo, output=path, **kw)
            art, model = load_model(path)
            out[system] = upload(conn, art, model, f"bench-engines-{fs}-{algo}", fs, STORE)["name"]
    return out


def latency(nodes) -> tuple[dict, dict]:
    texts = [cranfield.queries()[q] for q in cranfield.split_qids()["test"]]
    systems, models = {}, {}
    for engine, n in nodes.items():
        conn = n["conn"]
        models[engine] = _models(n, engine)
        queries = with_query_vectors(conn, INDEX, [{"keywords": t} for t in texts], ["query_vector"])
        systems[(engine, "first stage")] = (
            n, queries, lambda p, conn=conn: search(conn, INDEX, p, STAGE, None, SIZE, max_terms=1000))
        for system, m in models[engine].items():
            systems[(engine, system)] = (
                n, queries, lambda p, conn=conn, m=m: search(conn, INDEX, p, STAGE, Rescore(m, WINDOW, STORE),
                                                             SIZE, max_terms=1000))
    times = {s: [] for s in systems}
    reqs = {s: 0 for s in systems}
    paths = {s: {} for s in systems}
    req_ms = {s: [] for s in systems}        # per timed query: each request's ms, in order
    rng = random.Random(0)
    for rep in range(PASSES + 1):                  # the first pass warms caches up, untimed
        for i in range(len(texts)):
            order = list(systems)
            rng.shuffle(order)
            for s in order:
                n, queries, fn = systems[s]
                count = n["count"]
                before, seen, first = count.n, dict(count.paths), len(count.ms)
                t0 = time.perf_counter()
                hits = fn(queries[i])
                ms = (time.perf_counter() - t0) * 1e3
                assert hits, (s, texts[i])
                if rep:
                    times[s].append(ms)
                    reqs[s] += count.n - before
                    req_ms[s].append(count.ms[first:])
                    for k, v in count.paths.items():
                        if v != seen.get(k, 0):
                            paths[s][k] = paths[s].get(k, 0) + v - seen.get(k, 0)
        print(f"latency pass {rep} done", flush=True)
    out = {}
    for s, t in times.items():
        p50, p99 = np.percentile(t, [50, 99])
        two = [r for r in req_ms[s] if len(r) == 2]
        out[s] = {"n": len(t), "p50": float(p50), "p99": float(p99), "requests": reqs[s] / len(t),
                  "last request p50": float(np.median([r[-1] for r in req_ms[s]])),
                  "first of two p50": float(np.median([r[0] for r in two])) if two else None}
        print(s, out[s], paths[s], flush=True)
    return out, {"models": models, "paths": {f"{e}: {s}": v for (e, s), v in paths.items()},
                 "queries": len(texts)}


# --------------------------------------------------------------------------- report

def main():
    load0 = os.getloadavg()
    t_start = time.monotonic()
    nodes = _nodes()
    log = logging(nodes)
    lat, extra = latency(nodes)
    load1 = os.getloadavg()
    _write(nodes, log, lat, extra, load0, load1, time.monotonic() - t_start)


def _table(log, lat) -> list[list]:
    """One row per measure, the two engines side by side, and ES / OS."""
    rows = []

    def row(measure, a, b, digits=2):
        rows.append([measure, round(a, digits), round(b, digits), round(b / a, 2) if a else ""])
    os_, es = ENGINES
    row("logging rows/s (median of 3 runs)", log[os_]["rows/s"], log[es]["rows/s"], 0)
    row("logging seconds, median", log[os_]["median s"], log[es]["median s"])
    row("logging seconds, best", min(log[os_]["seconds"]), min(log[es]["seconds"]))
    row("logging HTTP requests per run", log[os_]["requests"], log[es]["requests"], 0)
    for system in SYSTEMS:
        a, b = lat[(os_, system)], lat[(es, system)]
        row(f"{system}: p50 ms", a["p50"], b["p50"])
        row(f"{system}: p99 ms", a["p99"], b["p99"])
        row(f"{system}: HTTP requests per query", a["requests"], b["requests"])
        row(f"{system}: p50 ms of its last (rescore) request", a["last request p50"],
            b["last request p50"])
    return rows


def _write(nodes, log, lat, extra, load0, load1, secs):
    os_, es = ENGINES
    rows = _table(log, lat)
    req = {e: {s: round(lat[(e, s)]["requests"], 2) for s in SYSTEMS} for e in ENGINES}
    # systems where most queries took two requests: the first fetched the window's ids
    ids_ms = {f"{SHORT[e]} {s}": round(lat[(e, s)]["first of two p50"], 2) for e in ENGINES
              for s in SYSTEMS if lat[(e, s)]["requests"] >= 1.5}
    notes = [
        f"logging: all 225 judged queries x the first stage's top {K} candidates "
        f"({log[os_]['rows']} rows on {nodes[os_]['label']}, {log[es]['rows']} on "
        f"{nodes[es]['label']}), the shipped Cranfield feature set ({log[os_]['features']} "
        "features, query_doc_cosine among them), log_features' defaults (_msearch, 25 queries "
        f"a trip, one in flight); feature set and models in the store {STORE!r}; {RUNS} runs "
        "per engine, the engines alternating; the query vectors computed once before the "
        "runs; seconds per run: "
        + "; ".join(f"{SHORT[e]} " + ", ".join(f"{x:.2f}" for x in log[e]["seconds"]) for e in ENGINES),
        f"latency: ltr_toolkit.serving.rerank.search, 1 client, window {WINDOW}, size {SIZE}, "
        f"{extra['queries']} test-split queries x {PASSES} passes ({lat[(os_, 'first stage')]['n']} "
        "timed queries per system) after a warm-up pass, the eight systems (2 engines x 4) per "
        "query back to back in a random order; the query vector passed in (the encoder's "
        "cost per query, the same on either engine, is in semantic_latency.md)",
        f"HTTP requests per reranked query, counted on each client's transport: OpenSearch {req[os_]}; "
        f"Elasticsearch {req[es]}. On Elasticsearch the semantic feature is a knn query "
        "restricted to the window's ids, so serving asks the first stage for them first (two "
        "requests); OpenSearch's knn_score script scores any document with a vector, in the "
        "rescore's one request. Where most queries took two, the first (the window's ids, "
        f"the first stage's top {WINDOW}) took p50 {ids_ms} ms, measured on the client's "
        "transport as the table's last-request p50; the rest of a query's time is the "
        "client's. A few queries take one more request anywhere: model scores tied at the "
        "cut are fetched again with the first stage's scores (the toolkit's tie order). "
        f"{LEXICAL!r}: the same linear model without the semantic feature",
        f"requests seen per system in the timed passes (method path: count): {extra['paths']}",
        f"models (fixed settings {MODELS}), each trained on the train split's candidates "
        f"logged on its own engine: {extra['models']}",
        "served-vs-local score parity on both engines is covered by the test suite "
        "(tests/test_parity.py), not measured here",
        f"nodes: {nodes[os_]['label']} and {nodes[es]['label']} (the community LTR plugin), "
        "one local node each, 512 MiB heap, sharing 2 cores with the client and other work; "
        f"load average (1/5/15 min) {load0[0]:.1f}/{load0[1]:.1f}/{load0[2]:.1f} at the start, "
        f"{load1[0]:.1f}/{load1[1]:.1f}/{load1[2]:.1f} at the end; whole run {secs:.0f} s; "
        f"encoder {default_encoder().name}",
    ]
    write_table("engines", ["measure", nodes[os_]["label"], nodes[es]["label"], "ES / OS"], rows, notes)
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1, 2]})
    colors = {os_: "tab:blue", es: "tab:orange"}
    ax = axes[0]
    vals = [log[e]["rows/s"] for e in ENGINES]
    ax.bar([nodes[e]["label"] for e in ENGINES], vals, color=[colors[e] for e in ENGINES])
    for x, v in enumerate(vals):
        ax.text(x, v, f"{v:.0f}", ha="center", va="bottom")
    ax.set_ylabel("rows / s (median of 3 runs)")
    ax.set_title(f"feature logging, {log[os_]['rows']} rows")
    ax.tick_params(axis="x", labelsize=8)
    ax = axes[1]
    systems = list(SYSTEMS)
    x = np.arange(len(systems))
    for i, e in enumerate(ENGINES):
        xs = x + (i - 0.5) * 0.4
        ax.bar(xs, [lat[(e, s)]["p50"] for s in systems], width=0.4, color=colors[e],
               label=f"{nodes[e]['label']} p50")
        ax.scatter(xs, [lat[(e, s)]["p99"] for s in systems], marker="_", s=500, color="k",
                   zorder=3, label="p99" if i else None)
    ax.set_xticks(x, systems, fontsize=8)
    ax.set_ylabel("ms")
    ax.legend(fontsize=8)
    ax.set_title(f"rerank.search, window {WINDOW}, size {SIZE}, 1 client")
    finish(fig, "engines")


if __name__ == "__main__":
    main()
