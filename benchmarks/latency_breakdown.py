"""Where a reranked query's time goes: ``python -m benchmarks.latency_breakdown``.

Cranfield, the shipped feature set, lambdamart (the set-up of ``benchmarks.latency``'s
"after: lambdamart"), window 100, size 10, one client. In one interleaved loop (every
query, every row back to back in a random order, so a slow moment of the machine falls on
all alike):

* the first stage and the reranked query through ``serving.rerank.search``, as users
  call it;
* the same two requests sent as bodies prepared before the loop, through the same client
  call (``transport.client.call``): what is left of ``search`` without the toolkit's own
  work per query (the model's plan, the query's parameters and vector, the tie check);
* that reranked body with a rescore window of 1 (the rescore's fixed cost in the node);
* a rescore by the first stage's own query (OpenSearch's rescore, no plugin);
* each feature of the set alone, as a one-feature linear model, and the six as a linear
  model (the plugin's cost per feature; lambdamart minus linear: its trees);
* the query's vector computed by the index's encoder, not memoised (``search`` keeps the
  vectors of the queries it has seen in memory, so after the warm-up pass the rows above
  do not include it: a new query's first search pays it once);
* the toolkit's own work for a reranked query without the request: the model's kept
  plan, the query's parameters and the body (its JSON is the client's, in every row).

Reports p50/p99 wall time, the node's mean ``took`` and each request's p50 added to the
first stage's prepared body (the last two rows are timed alone: no request).
"""

from __future__ import annotations

import copy

import numpy as np

from ltr_toolkit.data.featuresets import load_featureset
from ltr_toolkit.data.querytext import fit_params
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.indexing.vectors import vector_source
from ltr_toolkit.query.requests import Rescore, search_body
from ltr_toolkit.serving.rerank import search, serving_params
from ltr_toolkit.stores import store as st
from ltr_toolkit.transport.client import call, request

from . import latency
from ._live import INDEX, STAGE, connect, prepare
from ._report import finish, pyplot, write_table

WINDOW, SIZE, PASSES, TERMS = 100, 10, 2, 1000
FIRST, RERANKED = "first stage, search()", "lambdamart, search()"
FIRST_BODY, RERANKED_BODY = "first stage, body", "lambdamart, body"
ENCODER = "the query's vector alone (the index's encoder, not memoised)"
CLIENT = "the toolkit's own work for a reranked query alone (no request)"
ALONE = (ENCODER, CLIENT)


def _linear(conn, name: str, features: list[dict]) -> str:
    """A feature set of ``features`` and a linear model weighing each 1 (replaced)."""
    path = st.store_path(None)
    for kind in ("_model", "_featureset"):
        try:
            request(conn, "DELETE", f"{path}/{kind}/{name}")
        except Exception:          # noqa: BLE001 -- absent on a first run
            pass
    st.upload_featureset(conn, {"name": name, "features": features})
    request(conn, "POST", f"{path}/_featureset/{name}/_createmodel",
            body={"model": {"name": name, "model": {"type": "model/linear",
                                                    "definition": {f["name"]: 1.0 for f in features}}}})
    return name


def _models(conn) -> dict[str, str]:
    """{row: stored model}: the benchmark's lambdamart, the six features as a linear model,
    each feature alone."""
    features = load_featureset(cranfield.FEATURE_SET)["features"]
    latency.MODELS = {"lambdamart": latency.MODELS["lambdamart"]}
    fs, _ = st.upload_featureset_versioned(conn, load_featureset(cranfield.FEATURE_SET))
    out = {"lambdamart": latency._models(conn, {"after": fs})["after"]["lambdamart"],
           "linear, six features": _linear(conn, "breakdown-all", features)}
    for f in features:
        out[f"one feature: {f['name']}"] = _linear(conn, f"breakdown-{f['name']}", [f])
    return out


def _bodies(conn, models: dict[str, str], raw: dict) -> dict[str, dict]:
    """One query's prepared bodies, by row (the model's parameters as serving makes them)."""
    lm = Rescore(models["lambdamart"], WINDOW)
    mp = serving_params(conn, INDEX, [raw], STAGE, lm, max_terms=TERMS)[0]
    params = fit_params(raw, TERMS)
    out = {FIRST_BODY: search_body(STAGE, params, SIZE)}
    for row, model in models.items():
        name = RERANKED_BODY if row == "lambdamart" else row
        out[name] = search_body(STAGE, params, SIZE + 1, Rescore(model, WINDOW), model_params=mp)
    one = copy.deepcopy(out[RERANKED_BODY])
    one["rescore"]["window_size"] = 1
    out["lambdamart, window 1"] = one
    plain = copy.deepcopy(out[FIRST_BODY])
    plain["size"] = SIZE + 1
    plain["rescore"] = {"window_size": WINDOW, "query": {"rescore_query": plain["query"]}}
    out["rescore by the first stage's query"] = plain
    return out


def _systems(conn, models, queries) -> tuple[dict, dict]:
    """{row: callable(query number)}, and the node's took per row (filled as they run)."""
    bodies = [_bodies(conn, models, q) for q in queries]
    took: dict[str, list[float]] = {}

    def raw(row):
        def send(i):
            resp = call(conn, conn.client().search, index=INDEX, body=bodies[i][row],
                        search_type=STAGE.search_type)
            took.setdefault(row, []).append(resp["took"])
        return send
    lm = Rescore(models["lambdamart"], WINDOW)
    sys = {FIRST: lambda i: search(conn, INDEX, queries[i], STAGE, None, SIZE, max_terms=TERMS),
           RERANKED: lambda i: search(conn, INDEX, queries[i], STAGE, lm, SIZE, max_terms=TERMS)}
    sys.update({row: raw(row) for row in bodies[0]})
    encoder = vector_source(conn, INDEX)[1].encoder
    sys[ENCODER] = lambda i: encoder.encode([queries[i]["keywords"]], kind="query")
    sys[CLIENT] = lambda i: search_body(
        STAGE, fit_params(queries[i], TERMS), SIZE + 1, lm,
        model_params=serving_params(conn, INDEX, [queries[i]], STAGE, lm, max_terms=TERMS)[0])
    return sys, took


def main():
    conn = connect()
    prepare(conn)
    models = _models(conn)
    queries = [{"keywords": t} for t in cranfield.queries().values()]
    systems, took = _systems(conn, models, queries)
    numbers = list(range(len(queries)))
    latency._run(systems, numbers, 1, 0)                  # warm-up pass
    took.clear()
    times = {s: [] for s in systems}
    for rep in range(PASSES):
        for s, t in latency._run(systems, numbers, 1, 100 * rep + 1).items():
            times[s] += t
    base = float(np.percentile(times[FIRST_BODY], 50))
    rows = []
    for s, t in times.items():
        p50, p99 = np.percentile(t, [50, 99])
        node = round(float(np.mean(took[s])), 2) if s in took else ""
        added = "" if s in ALONE else round(p50 - base, 2)
        rows.append([s, round(p50, 2), round(p99, 2), node, added])
        print(rows[-1], flush=True)
    _write(rows, models)


def _write(rows, models):
    notes = [f"Cranfield, {len(cranfield.queries())} queries x {PASSES} passes (after a warm-up "
             f"pass), one client, window {WINDOW}, size {SIZE} (11 with a rescore: the tie check)",
             "search(): serving.rerank.search as users call it; body: the same request prepared "
             "before the loop, sent through the same client call",
             "node took: the mean of the node's own `took` (whole ms) for the rows sent as bodies",
             f"models: {models}",
             "node: one local OpenSearch, 512 MiB heap, 2 cores shared with the client"]
    write_table("latency_breakdown", ["row", "p50 ms", "p99 ms", "node took ms",
                                      "p50 added to the first stage's body (ms)"], rows, notes)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 5))
    y = np.arange(len(rows))
    ax.barh(y, [r[1] if r[0] in ALONE else r[4] for r in rows],
            color=["tab:orange" if r[0] in ALONE else "tab:blue" for r in rows])
    ax.set_yticks(y, [r[0] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("p50 ms added to the first stage's prepared body (orange: p50 alone)")
    ax.set_title("where a reranked query's time goes (Cranfield, window 100, one client)")
    finish(fig, "latency_breakdown")


if __name__ == "__main__":
    main()
