"""Semantic features, live: ``python -m benchmarks.semantic`` (``quality``, ``encoder``,
``latency``, ``seeds`` to run one part; all four by default).

* **quality**: Cranfield and CACM, live 5-fold cross-validation with the toolkit's
  defaults (settings chosen in the training folds), every algorithm, the shipped feature
  set with its semantic feature (``query_doc_cosine``) and without it (the ``-lexical``
  sets), on the same folds: NDCG@10, p vs the first stage, W/T/L, the recommendation.
* **encoder**: the packaged encoder's cost: documents per second when indexing
  (Cranfield's title + abstract, shortest first in batches of 32, as ``ltr index`` does;
  no cache) and milliseconds per query (each query alone, as at serving) p50/p99.
* **latency**: through ``rerank.search``, Cranfield, window 100, one client, in one
  interleaved run (per query every system back to back in a random order): the first
  stage; each model with the query vector computed by the toolkit (its per-process memory
  of query vectors emptied before every query: a query it never saw); and with the vector
  passed in (a hybrid first stage computed it already).
* **seeds**: CACM (where the gain is nearest the noise), the same live CV with five other
  fold seeds: the recommendation, its NDCG@10 and p, and any reranker significantly worse.

Tables + PNGs in benchmarks/results/ (semantic_quality.*, semantic_latency.*). Needs a
node with the LTR and k-NN plugins (``LTR_URL``, else the local node) and CACM in
../shared/data/cacm.
"""

from __future__ import annotations

import random
import sys
import time

import numpy as np

from ltr_toolkit.stores import store as st
from ltr_toolkit.query.firststage import FirstStage
from ltr_toolkit.stores.model_store import upload
from ltr_toolkit.serving.rerank import Rescore, search
from ltr_toolkit.serving.serving import Serving
from ltr_toolkit.indexing.vectors import vector_source, with_query_vectors
from ltr_toolkit.data.featuresets import load_featureset
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.encoders import default_encoder
from ltr_toolkit.pipeline.crossval import cross_validate
from ltr_toolkit.pipeline.train import load_model, train_from_files

from ._live import INDEX, STAGE, connect, prepare, workdir
from ._report import finish, pyplot, write_table
from .own_index import ROOT, _cacm

ALGOS = ("linear", "lambdarank-nn", "ranknet-nn", "lambdamart", "ranknet-tree")
SETS = {"cranfield": (cranfield.FEATURE_SET, cranfield.LEXICAL_FEATURE_SET),
        "cacm": (ROOT / "docs" / "cacm" / "featureset.json",
                 ROOT / "docs" / "cacm" / "featureset-lexical.json")}
WINDOW, SIZE, PASSES = 100, 10, 3
MODELS = {"lambdamart": dict(trees=200, depth=4, lr=0.1), "linear": dict(epochs=40),
          "lambdarank-nn": dict(epochs=40, hidden=(16,))}


# --------------------------------------------------------------------------- quality

def _collections(conn):
    prepare(conn)
    cacm_index, _, cacm_jl = _cacm(conn)
    return {"cranfield": (INDEX, cranfield.judgments()), "cacm": (cacm_index, cacm_jl)}


def quality(conn) -> list[list]:
    rows = []
    for name, (index, jl) in _collections(conn).items():
        for label, path in zip(("with query_doc_cosine", "lexical only"), SETS[name]):
            fs, _ = st.upload_featureset_versioned(conn, load_featureset(path))
            t0 = time.monotonic()
            rep = cross_validate(conn, index, jl, fs, {a: None for a in ALGOS},
                                 workdir() / f"semantic-{name}-{fs}", folds=5,
                                 first_stage=FirstStage.from_fields(("title", "abstract")),
                                 name_prefix=f"bench-sem-{name}", log=print)
            secs = round(time.monotonic() - t0, 1)
            base = rep["systems"][rep["baseline"]]["ndcg@10"]
            rec = rep["recommendation"]["deploy"] or "keep the first stage"
            for a in ALGOS:
                t = rep["tests"][a]
                rows.append([name, label, a, round(base, 4), round(rep["systems"][a]["ndcg@10"], 4),
                             round(t["mean_delta"], 4), round(t["p_value"], 4),
                             f"{t['wins']}/{t['ties']}/{t['losses']}", rec, secs])
                print(rows[-1], flush=True)
    _write_quality(rows)
    return rows


def _write_quality(rows):
    write_table("semantic_quality", ["collection", "feature set", "algorithm", "first stage",
                                     "ndcg@10", "delta", "p", "W/T/L", "recommendation",
                                     "cv seconds"], rows,
                [f"live 5-fold CV, seed 42, the same folds for both sets; settings chosen in the "
                 f"training folds; window {WINDOW}; encoder {default_encoder().name}"])
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, coll in zip(axes, SETS):
        x = np.arange(len(ALGOS))
        for i, label in enumerate(("lexical only", "with query_doc_cosine")):
            vals = [next(r[4] for r in rows if r[0] == coll and r[1] == label and r[2] == a)
                    for a in ALGOS]
            ax.bar(x + (i - 0.5) * 0.4, vals, width=0.4, label=label)
        base = next(r[3] for r in rows if r[0] == coll)
        ax.axhline(base, color="k", ls="--", lw=1, label="first stage")
        ax.set_xticks(x, ALGOS, rotation=20)
        ax.set_title(coll)
        ax.set_ylabel("NDCG@10 (live 5-fold CV)")
        ax.legend(fontsize=8)
    finish(fig, "semantic_quality")


# --------------------------------------------------------------------------- seeds

SEEDS = (1, 2, 3, 4, 5)


def seeds(conn) -> list[list]:
    """CACM, where the gain is nearest the noise: the same live CV with other fold seeds
    (the recommendation, its NDCG@10 and p per seed; with the semantic feature)."""
    index, _, jl = _cacm(conn)
    fs, _ = st.upload_featureset_versioned(conn, load_featureset(SETS["cacm"][0]))
    rows = []
    for seed in SEEDS:
        rep = cross_validate(conn, index, jl, fs, {a: None for a in ALGOS},
                             workdir() / f"semantic-seeds-{seed}", folds=5, seed=seed,
                             first_stage=FirstStage.from_fields(("title", "abstract")),
                             name_prefix="bench-sem-seeds")
        base = rep["systems"][rep["baseline"]]["ndcg@10"]
        rec = rep["recommendation"]["deploy"]
        t = rep["tests"].get(rec) if rec else None
        worse = [a for a in ALGOS if rep["tests"][a]["mean_delta"] < 0 and rep["tests"][a]["p_value"] < 0.05]
        rows.append([seed, round(base, 4), rec or "keep the first stage",
                     round(rep["systems"][rec]["ndcg@10"], 4) if rec else "",
                     round(t["p_value"], 4) if t else "", ", ".join(worse) or "none"])
        print(rows[-1], flush=True)
    write_table("semantic_seeds", ["seed", "first stage", "recommended", "ndcg@10", "p",
                                   "significantly worse"], rows,
                ["CACM, live 5-fold CV with the toolkit's defaults and the semantic feature, "
                 f"the folds drawn with each seed; encoder {default_encoder().name}"])
    return rows


# --------------------------------------------------------------------------- encoder cost

def encoder_cost() -> list[list]:
    enc = default_encoder()
    texts = [f"{d['title']}\n{d['abstract']}".strip() for d in cranfield.documents()]
    t0 = time.perf_counter()
    enc.encode(texts, kind="document")
    docs_s = len(texts) / (time.perf_counter() - t0)
    ms = []
    for q in cranfield.queries().values():
        t0 = time.perf_counter()
        enc.encode([q], kind="query")
        ms.append((time.perf_counter() - t0) * 1e3)
    p50, p99 = np.percentile(ms, [50, 99])
    rows = [["documents per second (indexing, batches of 32)", round(docs_s, 1)],
            ["ms per query, p50", round(float(p50), 2)], ["ms per query, p99", round(float(p99), 2)]]
    print(rows, flush=True)
    return rows


# --------------------------------------------------------------------------- latency

def _models(conn, fs) -> dict[str, str]:
    d = workdir()
    tag = f"{fs}-{default_encoder().sha256[:8]}"    # logged with this encoder's vectors
    data = d / f"semantic-latency-{tag}.txt"
    if not data.exists():
        Serving(INDEX, STAGE, WINDOW).log_candidates(conn, cranfield.split_judgments("train"), fs, data)
    out = {}
    for algo, kw in MODELS.items():
        path = d / f"semantic-latency-{tag}-{algo}.json"
        train_from_files(data, algo=algo, output=path, **kw)
        art, model = load_model(path)
        out[algo] = upload(conn, art, model, f"bench-sem-{fs}-{algo}", fs)["name"]
    return out


def _systems(conn, models):
    _, memory = vector_source(conn, INDEX)

    def computed(p, m):
        memory._memo.clear()           # a query the process never saw: the encoder runs
        return search(conn, INDEX, p, STAGE, Rescore(m, WINDOW), SIZE, max_terms=1000)
    sys_ = {"first stage": lambda p, v: search(conn, INDEX, p, STAGE, None, SIZE, max_terms=1000)}
    for algo, m in models.items():
        sys_[f"{algo}: vector computed"] = lambda p, v, m=m: computed(p, m)
        sys_[f"{algo}: vector passed in"] = lambda p, v, m=m: search(conn, INDEX, v, STAGE, Rescore(m, WINDOW),
                                                                      SIZE, max_terms=1000)
    return sys_


def latency(conn, enc_rows) -> list[list]:
    fs = prepare(conn)
    systems = _systems(conn, _models(conn, fs))
    queries = [{"keywords": t} for t in cranfield.queries().values()]
    with_vec = with_query_vectors(conn, INDEX, queries, ["query_vector"])
    times = {s: [] for s in systems}
    rng = random.Random(0)
    for rep in range(PASSES + 1):                 # the first pass warms the caches up
        for p, v in zip(queries, with_vec):
            order = list(systems)
            rng.shuffle(order)
            for s in order:
                t0 = time.perf_counter()
                systems[s](p, v)
                if rep:
                    times[s].append((time.perf_counter() - t0) * 1e3)
    base = np.percentile(times["first stage"], [50, 99])
    rows = []
    for s, t in times.items():
        p = np.percentile(t, [50, 95, 99])
        rows.append([s, *np.round(p, 2), round(p[0] / base[0], 2), round(p[2] / base[1], 2)])
        print(rows[-1], flush=True)
    _write_latency(rows, enc_rows)
    return rows


def _write_latency(rows, enc_rows):
    notes = [f"Cranfield, {len(cranfield.queries())} queries x {PASSES} passes after a warm-up "
             f"pass, one client, window {WINDOW}, size {SIZE}; one node, 512 MiB heap, 2 cores "
             "shared with the client (and its encoder)",
             "ratios: to the first stage's p50 / p99 in the same run",
             "encoder: " + "; ".join(f"{k} {v}" for k, v in enc_rows)]
    write_table("semantic_latency", ["system", "p50 ms", "p95 ms", "p99 ms", "p50 ratio",
                                     "p99 ratio"], rows, notes)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 4.5))
    x = np.arange(len(rows))
    for i, q in enumerate(("p50", "p95", "p99")):
        ax.bar(x + (i - 1) * 0.27, [r[1 + i] for r in rows], width=0.27, label=q)
    ax.set_xticks(x, [r[0] for r in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("ms")
    ax.legend()
    ax.set_title("rerank.search with a semantic feature, Cranfield, window 100, 1 client")
    finish(fig, "semantic_latency")


def main(parts=("quality", "encoder", "latency", "seeds")):
    conn = connect()
    enc_rows = encoder_cost() if "encoder" in parts or "latency" in parts else []
    if "latency" in parts:
        latency(conn, enc_rows)
    if "quality" in parts:
        quality(conn)
    if "seeds" in parts:
        seeds(conn)


if __name__ == "__main__":
    main(tuple(sys.argv[1:]) or ("quality", "encoder", "latency", "seeds"))
