"""Feature-logging throughput, live: ``python -m benchmarks.logging``.

The same judgments and candidates (the first stage's top 100 for every Cranfield query),
logged (a) by the toolkit's batched path (``_msearch``, 25 queries per round trip), (b)
the same with 2 round trips in flight (``parallel=2``), and (c) with one ``_search`` per
query, the naive loop. Rows/s, best of 3 runs each.
"""

from __future__ import annotations

import time

import numpy as np

from ltr_toolkit.features.candidates import candidate_judgments
from ltr_toolkit.features.featurelog import LOG_NAME, log_body, log_features
from ltr_toolkit.stores.params import derived_depth, featureset_params, with_first_stage_ids
from ltr_toolkit.query.requests import msearch_ids
from ltr_toolkit.stores.store import get_featureset
from ltr_toolkit.datasets import cranfield

from ._live import INDEX, STAGE, connect, prepare, workdir
from ._report import finish, pyplot, write_table

RUNS = 3


def one_search_per_query(conn, jl, fs_name) -> int:
    """The naive loop: per query, the first stage (for the feedback ids), then one search."""
    c = conn.client()
    depth = derived_depth(featureset_params(get_featureset(conn, fs_name)))
    rows = 0
    for q, docs in jl.by_query().items():
        if not docs:
            continue
        params = jl.query_params(q)
        if depth:
            ids = msearch_ids(conn, INDEX, [params], STAGE, size=depth)[0]
            params = with_first_stage_ids(params, ids, depth)
        resp = c.search(index=INDEX, body=log_body(params, [d for d, _ in docs], fs_name, None))
        for h in resp["hits"]["hits"]:
            assert h["fields"]["_ltrlog"][0][LOG_NAME]
            rows += 1
    return rows


def main():
    conn = connect()
    fs = prepare(conn)
    cands, info = candidate_judgments(conn, INDEX, cranfield.judgments(), 100, STAGE)
    d = workdir()
    paths = {"toolkit batched _msearch (25/trip)": 1,
             "toolkit batched, 2 trips in flight": 2}
    timings = {name: [] for name in [*paths, "one _search per query"]}
    rows = {}
    for run in range(RUNS):
        for name, parallel in paths.items():
            out = d / f"log-{run}-{parallel}.txt"
            for p in (out, out.with_suffix(".txt.json")):
                p.unlink(missing_ok=True)
            t0 = time.perf_counter()
            side = log_features(conn, cands, fs, INDEX, out, batch=25, first_stage=STAGE,
                                candidates=info, parallel=parallel)
            timings[name].append(time.perf_counter() - t0)
            rows[name] = side["rows"]
        t0 = time.perf_counter()
        rows["one _search per query"] = one_search_per_query(conn, cands, fs)
        timings["one _search per query"].append(time.perf_counter() - t0)
    table = []
    for name, ts in timings.items():
        best = min(ts)
        table.append([name, rows[name], round(best, 2), round(float(np.median(ts)), 2),
                      round(rows[name] / best, 0)])
    ratio = table[0][4] / table[-1][4]
    notes = [f"{info['queries']} queries x top 100 candidates ({rows['one _search per query']} rows), "
             f"{len(get_featureset(conn, fs)['featureset']['features'])} features, best of {RUNS} runs",
             f"batched / one-per-query rows/s: {ratio:.2f}x; with 2 in flight: "
             f"{table[1][4] / table[-1][4]:.2f}x",
             "both paths run the first stage for the feedback features' ids (batched: one _msearch per 25 queries)",
             "node: single local OpenSearch, 512 MiB heap, 2 cores shared with the client"]
    write_table("logging", ["path", "rows", "best s", "median s", "rows/s"], table, notes)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar([r[0] for r in table], [r[4] for r in table], color=["tab:blue", "tab:cyan", "tab:grey"])
    ax.tick_params(axis="x", labelrotation=12)
    ax.set_ylabel("rows / s (best run)")
    ax.set_title(f"feature logging throughput ({ratio:.2f}x)")
    finish(fig, "logging")


if __name__ == "__main__":
    main()
