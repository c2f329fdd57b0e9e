"""Reading the cluster's UBI indices (issue 32, item 4): ``python -m benchmarks.ubi_reading [EVENTS]``.

EVENTS (default 1,000,000) simulated UBI events and their query records (the
``benchmarks.clicks`` generator: 5,000 queries, 10 results each) are written to the node
twice: records in one shard, events in one shard and in two. Each is
read into an :class:`EventReader` side by side in one run, best of 3 (a fresh reader
each time):

* scroll, one document at a time (``helpers.scan`` and the reader's per-document path:
  what the toolkit did before, and still does on a cluster without a PIT API);
* point in time + search_after, each page parsed by ``json`` and added per document
  (what the toolkit does with a page pyarrow cannot read);
* point in time + search_after, each page parsed by pyarrow into columns (the default);
* the same over the two-shard index: one stream, and one slice per shard side by side.

Events/s counts the events index alone (the records, a tenth as many documents, are
read apart); peak RSS is the process's. Table + PNG in benchmarks/results/ubi_reading.*.
Needs a node (``LTR_URL``, else the local node).
"""

from __future__ import annotations

import resource
import sys
import time

from ltr_toolkit.clicks import simulate as S
from ltr_toolkit.clicks.events import ubi
from ltr_toolkit.clicks.events.eventlog import EventReader
from ltr_toolkit.transport.client import request

from ._live import connect
from ._report import finish, pyplot, write_table
from .clicks import synthetic

QI, EV1, EV2 = "bench_ubi_queries", "bench_ubi_events_1", "bench_ubi_events_2"


def fill(conn, n_events: int) -> None:
    rankings, texts, truth = synthetic(5_000, 100_000)
    sim = S.simulate(rankings, texts, truth, int(n_events / 11.3), seed=2)
    ubi.create_indices(conn, QI, EV1, recreate=True)
    ubi.write_documents(conn, S.ubi_documents(sim), QI, EV1, chunk=5000)
    conn.client().indices.delete(index=EV2, ignore_unavailable=True)
    request(conn, "PUT", f"/{EV2}", body={"settings": {"number_of_shards": 2, "number_of_replicas": 0},
                                           "mappings": ubi.EVENTS_MAPPING})
    ubi.write_documents(conn, S.ubi_documents(sim), QI + "_copy", EV2, chunk=5000)
    conn.client().indices.delete(index=QI + "_copy")


def _scroll(conn, index):
    reader = EventReader()
    return ubi._scan(conn.client(), index, {"match_all": {}}, ubi.PAGE, ubi._doc_adder(reader, ubi.EVENT_KIND))


def _pit(conn, index, arrow=True, slices=True):
    saved = ubi.parse_page, ubi.MAX_SLICES
    ubi.parse_page = ubi.parse_page if arrow else (lambda *a: None)     # json per page
    ubi.MAX_SLICES = ubi.MAX_SLICES if slices else 1
    try:
        return ubi.read_index(conn, EventReader(), index, ubi.EVENT_KIND, {"match_all": {}})
    finally:
        ubi.parse_page, ubi.MAX_SLICES = saved


WAYS = [("scroll, per document (before)", EV1, _scroll),
        ("PIT + search_after, json per page", EV1, lambda c, i: _pit(c, i, arrow=False)),
        ("PIT + search_after, pyarrow per page", EV1, _pit),
        ("PIT, pyarrow, 2 shards, one stream", EV2, lambda c, i: _pit(c, i, slices=False)),
        ("PIT, pyarrow, 2 shards, a slice per shard", EV2, _pit)]


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    conn = connect()
    fill(conn, n)
    rows = []
    for name, index, read in WAYS:
        best = None
        for _ in range(3):
            t0 = time.perf_counter()
            got = read(conn, index)
            secs = time.perf_counter() - t0
            best = secs if best is None else min(best, secs)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        rows.append([name, index, got, round(best, 2), round(got / best), round(rss)])
        print(rows[-1], flush=True)
    t0 = time.perf_counter()
    records = ubi.read_index(conn, EventReader(), QI, ubi.QUERY_KIND, {"match_all": {}})
    rows.append(["PIT, pyarrow, query records in order of time", QI, records,
                 round(time.perf_counter() - t0, 2), round(records / (time.perf_counter() - t0)), ""])
    write_table("ubi_reading", ["way", "index", "documents", "seconds (best of 3)", "documents/s",
                                "peak RSS MiB (process, so far)"], rows,
                [f"{n:,} simulated events requested; the node on this machine (2 cores shared by "
                 "the node and the reader), page size 5,000; events/s of the events index alone",
                 "the same events in every row (the test suite checks the PIT read equals the "
                 "file reader's); the records index is read in one stream, in order of time"])
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.barh([r[0] for r in rows[:-1]][::-1], [r[4] for r in rows[:-1]][::-1], color="tab:blue")
    ax.set_xlabel("UBI events read per second")
    ax.set_title(f"Reading {rows[0][2]:,} UBI events from the node")
    fig.tight_layout()
    finish(fig, "ubi_reading")


if __name__ == "__main__":
    main()
