"""Live search latency with and without the sltr rescore: ``python -m benchmarks.latency``.

Uses ``LTR_URL`` or starts the local node; loads Cranfield when the index is missing; runs
the 225 Cranfield queries (3 passes, after a warm-up pass) as plain BM25 and, for each
stored model named in ``LTR_BENCH_MODELS`` (comma-separated, e.g. a tree and a network
uploaded by ``ltr demo``), with the rescore at window 10, 100 and 1000. Reports client
p50/p95/p99 in ms and the p99 overhead over the baseline. Rescore rows need the LTR
plugin; without it they are reported as not run, with the reason.
"""

from __future__ import annotations

import os
import time

import numpy as np

from ltr_toolkit.cluster import client as cl
from ltr_toolkit.cluster.indexing import index_documents
from ltr_toolkit.cluster.rerank import search_body
from ltr_toolkit.datasets import cranfield

from ._report import finish, pyplot, write_table

WINDOWS = (10, 100, 1000)
PASSES = 3


def _connect():
    url = os.environ.get("LTR_URL")
    if not url:
        from ltr_toolkit.cluster import localnode
        info, _ = localnode.start(require_plugin=False)
        url = info.url
    return cl.Connection(url=url)


def _timed(c, index, bodies):
    lat = []
    for _ in range(PASSES):
        for body in bodies:
            t0 = time.perf_counter()
            c.search(index=index, body=body)
            lat.append((time.perf_counter() - t0) * 1e3)
    return np.percentile(lat, [50, 95, 99])


def main():
    conn = _connect()
    c = conn.client()
    index = "cranfield"
    if not c.indices.exists(index=index) or c.count(index=index)["count"] != 1400:
        index_documents(conn, index, cranfield.documents())
    texts = list(cranfield.queries().values())
    base_bodies = [search_body(t, size=10, source=None) for t in texts]
    for body in base_bodies:   # warm-up
        c.search(index=index, body=body)
    base = _timed(c, index, base_bodies)
    rows = [["bm25", "-", *np.round(base, 2), 0.0, 0.0]]
    print(f"bm25: p50 {base[0]:.2f} p95 {base[1]:.2f} p99 {base[2]:.2f} ms", flush=True)
    models = [m for m in os.environ.get("LTR_BENCH_MODELS", "").split(",") if m]
    plugin = cl.ltr_plugin_version(conn)
    notes = [f"{len(texts)} queries x {PASSES} passes, size 10, client-side wall time, one client thread",
             f"node: {conn.display_url}"]
    if plugin is None:
        notes.append("rescore rows NOT RUN: the node has no LTR plugin")
    elif not models:
        notes.append("rescore rows not run: set LTR_BENCH_MODELS to stored model names")
    else:
        for m in models:
            for w in WINDOWS:
                bodies = [search_body(t, model=m, size=10, window=w, source=None) for t in texts]
                for body in bodies[:20]:
                    c.search(index=index, body=body)
                p = _timed(c, index, bodies)
                rows.append([m, w, *np.round(p, 2), round(p[2] - base[2], 2),
                             round(100 * (p[2] - base[2]) / base[2], 1)])
                print(f"{m} window {w}: p50 {p[0]:.2f} p95 {p[1]:.2f} p99 {p[2]:.2f} ms", flush=True)
    write_table("latency", ["system", "window", "p50 ms", "p95 ms", "p99 ms", "p99 overhead ms",
                            "p99 overhead %"], rows, notes)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    labels = [f"{r[0]}" + (f" w{r[1]}" if r[1] != "-" else "") for r in rows]
    for i, q in enumerate(("p50", "p95", "p99")):
        ax.bar(np.arange(len(rows)) + (i - 1) * 0.27, [r[2 + i] for r in rows], width=0.27, label=q)
    ax.set_xticks(np.arange(len(rows)), labels, rotation=20, ha="right")
    ax.set_ylabel("ms")
    ax.set_title("search latency, Cranfield queries")
    ax.legend()
    finish(fig, "latency")


if __name__ == "__main__":
    main()
