"""The SVMlight reader's three parse paths on logged files of the sizes users have:
``python -m benchmarks.svmlight_paths``.

``data.svmlight`` parses a chunk by the first path that takes it: the compiled one-pass
scan (``svmlight_jit``, numba), the vectorised NumPy one (``svmlight_fast``), the
line-by-line reference (``_slow_chunk``). The compiled path is taken only where numba's
start-up pays (``io.compiled``). This measures whether each path earns its place: the
same file read with the reference alone, with NumPy (and the reference behind it), and
with the compiled path (numba's start-up included: a fresh process imports it when it
parses), as the shipped policy does for each size too.

Files: what ``ltr log`` writes, ``grade qid:N 1:v ... # docid`` with ``FEATURES`` features
as ``%.9g``, about one value in ten absent (a feature that did not match), a doc id on
every row, 60 rows a query, generated to about 1, 10, 100 and 300 MB (the compiled path
is taken from about 160 MB; the reference is timed up to 100 MB). Each read runs in a fresh
interpreter (so numba's start-up is paid where it is used), its wall seconds from before
``load_logged`` to its return (the imports of NumPy and the toolkit excluded: every path
pays them), rounds interleaved; medians. numba's on-disk cache is warmed first (a first
run after install also compiles: ``predict_start.md``).
Results: table (Markdown + CSV) in benchmarks/results/svmlight_paths.md.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ._report import write_table

FEATURES = 40
SIZES_MB = (1, 10, 100, 300)
#: the line-by-line reference is timed up to this size (about 45 s a read at 100 MB)
REFERENCE_UP_TO_MB = 100
ROUNDS = 3
PATHS = ("reference", "numpy", "numba", "shipped")
LABELS = {"reference": "reference (line by line)", "numpy": "NumPy (svmlight_fast)",
          "numba": "compiled (svmlight_jit, start-up included)",
          "shipped": "as shipped (io.compiled policy)"}
ROOT = Path(__file__).resolve().parent.parent


def generate(path: Path, megabytes: float, seed: int = 0) -> int:
    """A logged file of about ``megabytes`` MB with its sidecar; returns its rows."""
    rng = random.Random(seed)
    target, size, rows = megabytes * 1e6, 0, 0
    with open(path, "w") as fh:
        while size < target:
            vals = "".join(f" {j}:{rng.random() * 30:.9g}" for j in range(1, FEATURES + 1)
                           if rng.random() > 0.1)
            line = f"{rng.randrange(5)} qid:{rows // 60 + 1}{vals} # doc-{rows}\n"
            fh.write(line)
            size += len(line)
            rows += 1
    names = [f"f{j}" for j in range(1, FEATURES + 1)]
    Path(f"{path}.json").write_text(json.dumps({"missing_features": "absent",
                                                "feature_names": names}))
    return rows


def child(name: str, path: str) -> None:
    """Runs in the subprocess: read the file once by the path ``name``, print one JSON line."""
    from ltr_toolkit.data import svmlight as S
    if name == "reference":
        S.fast_chunk = lambda *a, **k: None
        S._compiled_parser = lambda size: None
    elif name == "numpy":
        S._compiled_parser = lambda size: None
    elif name == "numba":
        def compiled(size):
            from ltr_toolkit.data.svmlight_jit import jit_chunk
            return jit_chunk
        S._compiled_parser = compiled
    t0, c0 = time.perf_counter(), time.process_time()
    ds = S.load_logged(path)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"rows": ds.n_docs, "seconds": seconds, "cpu": cpu,
                      "numba": "numba" in sys.modules}))


def _paths(mb: float) -> tuple:
    return PATHS if mb <= REFERENCE_UP_TO_MB else tuple(p for p in PATHS if p != "reference")


def run(name: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "benchmarks.svmlight_paths", "--child", name,
                          str(path)], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for mb in SIZES_MB:
            path = Path(tmp) / f"logged-{mb}mb.txt"
            files[mb] = (path, generate(path, mb))
        run("numba", files[SIZES_MB[0]][0])             # numba's cache warmed
        got = {(mb, p): [] for mb in SIZES_MB for p in _paths(mb)}
        for r in range(ROUNDS):
            for mb in SIZES_MB:
                order = _paths(mb) if r % 2 == 0 else tuple(reversed(_paths(mb)))
                for p in order:
                    got[(mb, p)].append(run(p, files[mb][0]))
                    print(mb, p, got[(mb, p)][-1], flush=True)
    rows = []
    for mb in SIZES_MB:
        numpy_s = statistics.median(x["seconds"] for x in got[(mb, "numpy")])
        for p in _paths(mb):
            runs = got[(mb, p)]
            s = statistics.median(x["seconds"] for x in runs)
            rows.append([f"{mb} MB", files[mb][1], LABELS[p], len(runs), round(s, 3),
                         round(statistics.median(x["cpu"] for x in runs), 3),
                         round(s / numpy_s, 2), runs[0]["numba"]])
    load = open("/proc/loadavg").read().split()[0]
    write_table("svmlight_paths", ["file", "rows", "path", "runs", "seconds (median)",
                                   "CPU seconds", "x NumPy", "numba loaded"], rows, notes=[
        f"logged files as `ltr log` writes them: {FEATURES} features as %.9g, ~10% absent, "
        "a `# docid` on every row, 60 rows a query, with a sidecar (missing = NaN)",
        "each read a fresh interpreter; seconds: `load_logged` alone, from its call to its "
        "return (numba's import and cache load included where the path uses it; NumPy's and "
        f"the toolkit's imports excluded); medians of {ROUNDS} interleaved rounds",
        "numba's on-disk cache warmed before the runs (a first run after install also "
        "compiles, several seconds: predict_start.md)",
        f"load average (1 min) {load} at the end (the 2 cores are shared with other jobs)"])
    print((Path(__file__).parent / "results" / "svmlight_paths.md").read_text())


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        main()
