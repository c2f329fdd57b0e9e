"""Reading SVMlight at MSLR scale, side by side: ``python -m benchmarks.svmlight``.

Generates an MSLR-shaped file in a temporary directory: ``ROWS`` rows x 136 dense
features (``grade qid:N 1:v ... 136:v``), rows resampled from the MSLR 5k extract, query
sizes drawn from the extract's, every other row ending in a ``# docid`` comment. Then
reads it with each parser in a fresh subprocess, in interleaved rounds (so that load from
other processes on this shared machine falls on all of them alike):

* the toolkit's ``load_svmlight`` (dense float32 matrix, labels, qids grouped, doc ids),
* ``sklearn.datasets.load_svmlight_file(dtype=float32, query_id=True)`` (a CSR matrix),
* xgboost's libsvm text parser, ``xgboost.DMatrix("file?format=libsvm")`` (the reference),
* and the toolkit again on the same rows with every query's rows spread through the file
  (``qid = row % queries``, as ``ltr log --incremental`` appends them): it regroups them
  by query into a second matrix, its worst case for memory.

Each child imports its library first, then times the parse alone (wall and CPU seconds)
and reports its own RSS before parsing (interpreter + libraries: the constant) and its
peak RSS (VmHWM). Seconds and RSS are medians over the runs. sklearn's parser takes many
minutes at this size (it converts every token through Python objects): it runs once and
is stopped after ``SKLEARN_LIMIT_S``, its peak RSS read from /proc just before, so the
whole benchmark stays near five minutes; the table says so.
Results: table (Markdown + CSV) and PNG in benchmarks/results/.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ._report import SHARED, finish, pyplot, write_table

ROWS = 500_000
FEATURES = 136
ROUNDS = 3
SKLEARN_LIMIT_S = 180.0
PARSERS = ("toolkit", "sklearn", "xgboost", "toolkit-interleaved")
LABELS = {"toolkit": "ltr_toolkit load_svmlight",
          "sklearn": "sklearn load_svmlight_file",
          "xgboost": "xgboost DMatrix libsvm",
          "toolkit-interleaved": "ltr_toolkit, qids interleaved"}
ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20


def generate(path: Path, rows: int, seed: int = 0, interleaved: bool = False,
             draw_size=None) -> None:
    """Write ``rows`` MSLR rows resampled from the 5k extract; each query's size from
    ``draw_size(rng)`` (default: a size of one of the extract's queries)."""
    src = (SHARED / "data" / "mslr-5k" / "msn1.fold1.train.5k.txt").read_text().splitlines()
    sizes, bodies = {}, []
    for line in src:
        grade, qid, body = line.split(" ", 2)
        sizes[qid] = sizes.get(qid, 0) + 1
        bodies.append((grade, body.rstrip()))
    assert all(len(b.split()) == FEATURES for _, b in bodies[:50])
    rng = random.Random(seed)
    sizes = list(sizes.values())
    draw_size = draw_size or (lambda r: r.choice(sizes))
    with open(path, "w") as fh:
        qid, left = 0, 0
        for i in range(rows):
            if left == 0:
                qid, left = qid + 1, draw_size(rng)
            left -= 1
            grade, body = bodies[rng.randrange(len(bodies))]
            if interleaved:
                qid = i % (rows // 120) + 1
            fh.write(f"{grade} qid:{qid} {body} # doc-{i}\n" if i % 2 == 0
                     else f"{grade} qid:{qid} {body}\n")


def _status_kib(field: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def child(name: str, path: str) -> None:
    """Runs in the subprocess: parse once, print one JSON line."""
    import warnings
    if name.startswith("toolkit"):
        from ltr_toolkit.data.svmlight import load_svmlight

        def parse():
            ds = load_svmlight(path)
            return ds.n_docs
    elif name == "sklearn":
        import numpy as np
        from sklearn.datasets import load_svmlight_file

        def parse():
            X, y, qid = load_svmlight_file(path, dtype=np.float32, query_id=True)
            return X.shape[0]
    else:
        import xgboost

        def parse():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")     # "text input is deprecated" (3.1)
                return xgboost.DMatrix(f"{path}?format=libsvm").num_row()
    before = _status_kib("VmRSS")
    print(json.dumps({"before_mib": before / 1024}), flush=True)
    t0, c0 = time.perf_counter(), time.process_time()
    rows = parse()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"rows": rows, "seconds": seconds, "cpu": cpu,
                      "before_mib": before / 1024, "peak_mib": _status_kib("VmHWM") / 1024}))


def _peak_of(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def run(name: str, path: Path, limit: float | None = None) -> dict:
    """One parse in a fresh interpreter; stopped (and marked so) after ``limit`` seconds."""
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.svmlight", "--child", name,
                             str(path)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    first = json.loads(proc.stdout.readline() or "{}")    # printed just before parsing
    t0 = time.perf_counter()
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        peak = _peak_of(proc.pid)
        proc.kill()
        proc.communicate()
        return {"rows": None, "seconds": time.perf_counter() - t0, "cpu": float("nan"),
                "before_mib": first.get("before_mib", float("nan")), "peak_mib": peak,
                "stopped": True}
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed:\n{err}")
    return json.loads(out.strip().splitlines()[-1])


def main():
    runs: dict[str, list[dict]] = {p: [] for p in PARSERS}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mslr_shaped.txt"
        spread = Path(tmp) / "mslr_shaped_interleaved.txt"
        t0 = time.perf_counter()
        generate(path, ROWS)
        generate(spread, ROWS, interleaved=True)
        size_mb = path.stat().st_size / 1e6
        print(f"generated {ROWS:,} rows x {FEATURES} ({size_mb:.0f} MB) in "
              f"{time.perf_counter() - t0:.0f}s", flush=True)
        load_before = os.getloadavg()[0]
        for rnd in range(ROUNDS):
            for name in PARSERS:
                if name == "sklearn" and runs[name]:
                    continue                          # minutes per run: once is enough
                res = run(name, spread if name == "toolkit-interleaved" else path,
                          SKLEARN_LIMIT_S if name == "sklearn" else None)
                assert res.get("stopped") or res["rows"] == ROWS, (name, res)
                runs[name].append(res)
                print(f"round {rnd + 1} {name:19s} {res['seconds']:7.2f}s"
                      f"{' (stopped)' if res.get('stopped') else ''} (cpu {res['cpu']:.2f}s) "
                      f"peak {res['peak_mib']:.0f} MiB (before {res['before_mib']:.0f})", flush=True)
        load_after = os.getloadavg()[0]

    matrix_mib = ROWS * FEATURES * 4 / MiB
    med = {p: {k: statistics.median(r[k] for r in runs[p])
               for k in ("seconds", "cpu", "before_mib", "peak_mib")} for p in PARSERS}
    ref = med["xgboost"]["seconds"]
    header = ["parser", "runs", "seconds (median)", "CPU seconds", "x xgboost time",
              "peak RSS MiB", "RSS before parse MiB", "peak - before MiB",
              "(peak - before) / float32 matrix"]
    rows = []
    for p in PARSERS:
        m = med[p]
        stopped = any(r.get("stopped") for r in runs[p])
        mark = ">" if stopped else ""             # a lower bound: stopped before the end
        rows.append([LABELS[p], len(runs[p]), f"{mark}{m['seconds']:.2f}",
                     "" if stopped else round(m["cpu"], 2), f"{mark}{m['seconds'] / ref:.2f}",
                     f"{mark}{m['peak_mib']:.0f}", round(m["before_mib"]),
                     f"{mark}{m['peak_mib'] - m['before_mib']:.0f}",
                     f"{mark}{(m['peak_mib'] - m['before_mib']) / matrix_mib:.2f}"])
    tk, tki = med["toolkit"], med["toolkit-interleaved"]
    time_ratio = tk["seconds"] / ref
    mem_ratio = (tk["peak_mib"] - tk["before_mib"]) / matrix_mib
    mem_ratio_i = (tki["peak_mib"] - tki["before_mib"]) / matrix_mib
    notes = [
        f"file: {ROWS:,} rows x {FEATURES} dense features, {size_mb:.0f} MB, every other row "
        "with a `# docid` comment; float32 feature matrix (rows x 136 x 4 bytes) = "
        f"{matrix_mib:.0f} MiB",
        f"target 1, time within 1.5x xgboost's parser: toolkit / xgboost = {time_ratio:.2f} "
        f"({'met' if time_ratio <= 1.5 else 'NOT met'})",
        f"target 2, peak <= 2x the float32 matrix + a constant (the RSS before parsing: "
        f"interpreter, NumPy, {tk['before_mib']:.0f} MiB): (peak - before) / matrix = "
        f"{mem_ratio:.2f} ({'met' if mem_ratio <= 2 else 'NOT met'}); with the queries "
        f"interleaved (regrouped into a second matrix): {mem_ratio_i:.2f}, i.e. the two "
        f"matrices + {tki['peak_mib'] - tki['before_mib'] - 2 * matrix_mib:.0f} MiB "
        "(doc ids, labels, parse buffers)",
        "each parser in a fresh subprocess per run, rounds interleaved; peak RSS = the child's "
        "VmHWM; seconds = the parse alone (imports excluded), medians over the runs",
        "outputs differ: the toolkit returns the dense float32 matrix, labels, qids grouped "
        "(stable, with the input order kept) and doc ids, every bad row an error with "
        "file:line; sklearn a float32 CSR matrix, labels and qids; xgboost its own DMatrix",
        (f"sklearn: one run, stopped after {SKLEARN_LIMIT_S:.0f} s without finishing ('>': "
         "lower bounds; its peak RSS is the one it had reached)"
         if any(r.get("stopped") for r in runs["sklearn"]) else
         "sklearn: one run (minutes per run at this size)"),
        f"load average (1 min) {load_before:.1f} at the start, {load_after:.1f} at the end "
        "(other developers' jobs share the 2 cores)",
    ]
    write_table("svmlight", header, rows, notes)

    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.6))
    names = [LABELS[p].replace(" ", "\n", 1) for p in PARSERS]
    for ax in (ax1, ax2):
        ax.tick_params(axis="x", labelsize=8)
    colors = ["tab:blue", "tab:gray", "tab:orange", "tab:cyan"]
    bars = ax1.bar(names, [med[p]["seconds"] for p in PARSERS], color=colors)
    for bar, p in zip(bars, PARSERS):
        stopped = any(r.get("stopped") for r in runs[p])
        ax1.annotate(f"{'>' if stopped else ''}{med[p]['seconds']:.3g} s",
                     (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                     ha="center", va="bottom", fontsize=8)
    ax1.axhline(1.5 * ref, color="tab:red", ls="--", lw=1, label="1.5x xgboost")
    ax1.set_ylabel("seconds (median)")
    ax1.set_yscale("log")
    ax1.set_title(f"parse {ROWS:,} x {FEATURES} ({size_mb:.0f} MB)")
    ax1.legend()
    before = [med[p]["before_mib"] for p in PARSERS]
    parse = [med[p]["peak_mib"] - med[p]["before_mib"] for p in PARSERS]
    ax2.bar(names, before, color="lightgray", label="RSS before parsing")
    ax2.bar(names, parse, bottom=before, color=colors, label="added by the parse")
    ax2.axhline(tk["before_mib"] + matrix_mib, color="k", ls=":", lw=1,
                label="toolkit constant + float32 matrix")
    ax2.axhline(tk["before_mib"] + 2 * matrix_mib, color="tab:red", ls="--", lw=1,
                label="toolkit constant + 2x matrix")
    ax2.set_ylabel("peak RSS (MiB)")
    ax2.set_title("peak memory")
    ax2.legend(fontsize=8)
    finish(fig, "svmlight")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        main()
