"""The force-merge that ends a load: one segment per shard (every feature of an ``sltr``
rescore builds its query once per segment), waited for as long as it takes, with a line
every :data:`HEARTBEAT` seconds while it runs (the engine reports no progress of a merge
in flight: a million products' index merges for minutes)."""

from __future__ import annotations

import threading
import time

from ..transport.client import Connection, call

#: seconds the merge request may take (the connection's timeout, 30 s by default, would
#: end it on a large index), and between two lines saying it still runs
TIMEOUT, HEARTBEAT = 6 * 3600, 15.0


def force_merge(conn: Connection, index: str, log=lambda msg: None) -> None:
    """``index`` force-merged to one segment per shard, then refreshed; ``log(message)``
    every :data:`HEARTBEAT` seconds until the merge ends."""
    c, done, t0 = conn.client(), threading.Event(), time.monotonic()

    def beat() -> None:
        while not done.wait(HEARTBEAT):
            log(f"still merging {index}: {time.monotonic() - t0:.0f} s so far (the engine "
                "reports no progress of a merge)")
    beating = threading.Thread(target=beat, name="merge", daemon=True)
    beating.start()
    try:
        call(conn, c.indices.forcemerge, index=index, max_num_segments=1, request_timeout=TIMEOUT)
    finally:
        done.set()
        beating.join()
    call(conn, c.indices.refresh, index=index)
