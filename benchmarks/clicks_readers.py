"""One UBI file reader, which (issue 53): ``python -m benchmarks.clicks_readers [EVENTS]``.

EVENTS (default 1,000,000) simulated UBI events and their query records (the
``benchmarks.clicks`` generator), written as NDJSON and in the bulk format, each read in
a fresh process, best of 3 (the runs interleaved, so that the machine's load falls on
every way alike):

* the block reader: ``files.read_file`` (pyarrow's JSON reader on 16 MB blocks, the
  columns by NumPy, a second thread parsing the next block);
* the line reader: ``json.loads`` per line and the reader's per-document path
  (``files.read_lines``: what ``read_file`` did without pyarrow, now the path of a block
  pyarrow cannot read);
* ``json.loads`` of every line and nothing else: the floor of any line-by-line reader on
  the standard library's parser (no event added, no string interned).

Wall and CPU seconds (the block reader's second thread counts in CPU); peak RSS is the
process's. Table in benchmarks/results/clicks_readers.md. No node needed.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from ._report import write_table
from .clicks import _write_events

_READ = """import json, resource, sys, time
from ltr_toolkit.clicks.events import files
from ltr_toolkit.clicks.events.eventlog import EventReader
path, how = sys.argv[1], sys.argv[2]
t0, c0 = time.perf_counter(), time.process_time()
if how == "blocks":
    log = files.read_file(path)
elif how == "lines":
    reader = EventReader()
    with open(path, encoding="utf-8") as fh:
        files.read_lines(reader, fh, path)
    log = reader.finish()
else:
    with open(path, "rb") as fh:
        n = sum(1 for line in fh if json.loads(line) is not None)
print(len(log) if how != "json" else 0, time.perf_counter() - t0, time.process_time() - c0,
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""

WAYS = (("blocks", "block reader (pyarrow)"), ("lines", "line reader (json.loads + per document)"),
        ("json", "json.loads per line only (floor)"))


def run(path: Path, how: str) -> tuple[int, float, float, int]:
    out = subprocess.run([sys.executable, "-c", _READ, str(path), how], capture_output=True,
                         text=True, check=True).stdout.split()
    return int(out[0]), float(out[1]), float(out[2]), int(out[3])


def main(n_events: int = 1_000_000, repeats: int = 3) -> list[list]:
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name, bulk in (("NDJSON", False), ("bulk", True)):
            path = Path(d) / f"{name}.ndjson"
            _write_events(path, n_events, bulk)
            best: dict[str, tuple] = {}
            for _ in range(repeats):
                for how, _label in WAYS:
                    got = run(path, how)
                    if how not in best or got[1] < best[how][1]:
                        best[how] = got
            events = best["blocks"][0]
            assert best["lines"][0] == events
            wall = best["blocks"][1]
            for how, label in WAYS:
                _, secs, cpu, rss = best[how]
                rows.append([name, label, events, round(secs, 2), round(cpu, 2), round(events / secs),
                             round(secs / wall, 1), round(rss / 1024)])
                print(rows[-1], flush=True)
            path.unlink()
    return rows


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    import os
    write_table("clicks_readers", ["file", "way", "events", "wall s (best of 3)", "CPU s", "events/s",
                                   "x block reader", "peak RSS MiB"], main(n),
                [f"{n:,} simulated events requested (query records and impressions/clicks mixed, "
                 "the benchmarks.clicks generator); each way in a fresh process, best of 3, runs interleaved",
                 f"load average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores shared "
                 "with other jobs: wall times are noisy (the block reader's second thread gains least on a "
                 "loaded machine): compare the CPU seconds too",
                 "the floor row adds nothing to a reader: any line-by-line reader on the standard "
                 "library's json is at least this slow"])
