"""A newcomer's first ``ltr demo`` against the next one (issue 53, item 8):
``python -m benchmarks.first_run [REPEATS] [--before REV]``.

The node runs and the demo's index is there (as after ``ltr cluster start`` and a first
demo), so what differs between the two runs is numba's cache: each pair of runs gets an
empty ``NUMBA_CACHE_DIR`` of its own (a fresh install: nothing compiled yet; numba keeps
everything there when the variable is set), the first run fills it, the second reads
it. Each run is ``python -m ltr_toolkit.cli demo --workdir NEW`` in a fresh process
with a fresh work directory. ``REPEATS`` pairs (default 2), and with ``--before REV``
the same pairs with the toolkit as of REV (exported by ``git archive``, run through
``PYTHONPATH``), the variants interleaved.

Per run: wall seconds; the demo's own phases read from its log (setup: plugin, index,
feature set; the candidates logged; the wait for the compiled kernels; the fits: from
the candidates to the last fold fitted; the rest: reports); the first two LambdaMART
fits (one per worker) against the same in the second run. Target: the first run at
most 1.3x the second. Table + PNG in benchmarks/results/first_run.*.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ._report import finish, pyplot, write_table

ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.3
STEP = re.compile(r"^\[\s*([\d.]+)s\] (.*)$")
FIT = re.compile(r"^(\S+) fold (\d+)/\d+ fitted in ([\d.]+)s")
WAITED = re.compile(r"^compiled kernels ready for (\S+): waited ([\d.]+)s")
PHASES = ("setup", "candidates", "fits", "rest")
HEADER = ["code", "pair", "run", "wall s", "CPU s", *[f"{p} s" for p in PHASES],
          "of which waiting for kernels s", "first 2 lambdamart fits s", "load before/after",
          "first / second"]


def phases(log: str) -> dict:
    """The demo's log lines ``[  12.3s] message`` (seconds since the line before)
    summed by phase; ``kernels``: the seconds the fits waited for the compiled kernels
    (this code's lines saying so); ``lambdamart``: its folds' fit seconds, in finishing
    order."""
    out = {p: 0.0 for p in PHASES}
    out.update(kernels=0.0, lambdamart=[])
    after = "setup"
    for line in log.splitlines():
        m = STEP.match(line.strip())
        if not m:
            continue
        seconds, msg = float(m.group(1)), m.group(2)
        fit, waited = FIT.match(msg), WAITED.match(msg)
        if fit and fit.group(1) == "lambdamart":
            out["lambdamart"].append(float(fit.group(3)))
        if waited:
            out["kernels"] += float(waited.group(2))
        if msg.startswith("logged ") and "candidate rows" in msg:
            phase, after = "candidates", "fits"
        elif fit or waited:
            phase, after = "fits", "rest"
        else:
            phase = after
        out[phase] += seconds
    return out


def demo(code: Path, cache: Path, work: Path) -> dict:
    """One ``ltr demo`` in a fresh process: its wall seconds, phases and load."""
    env = dict(os.environ, PYTHONPATH=str(code), NUMBA_CACHE_DIR=str(cache))
    load = open("/proc/loadavg").read().split()[0]
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ltr_toolkit.cli", "demo", "--workdir",
                                 str(work)], cwd=code, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)     # CPU: the demo and the processes it waited for
        wall = time.perf_counter() - t0
        out.seek(0)
        log = out.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"ltr demo failed ({code}):\n{log[-3000:]}")
    load += "/" + open("/proc/loadavg").read().split()[0]
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "load": load, **phases(log)}


def pair(code: Path, tmp: Path, name: str) -> tuple[dict, dict]:
    """The first run after an install (an empty numba cache), then the next."""
    cache = tmp / f"numba-{name}"
    first = demo(code, cache, tmp / f"work-{name}-1")
    print(f"{name} first: {first['wall']:.1f}s", flush=True)
    second = demo(code, cache, tmp / f"work-{name}-2")
    print(f"{name} second: {second['wall']:.1f}s (x{first['wall'] / second['wall']:.2f})", flush=True)
    return first, second


def export(rev: str, tmp: Path) -> Path:
    """The toolkit's package as of ``rev``, in a directory of its own."""
    out = tmp / f"code-{rev}"
    out.mkdir()
    archive = subprocess.run(["git", "archive", rev, "ltr_toolkit"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


def _row(code: str, rep: int, which: str, run: dict, ratio: float | None) -> list:
    fits = run["lambdamart"][:2]
    return [code, rep, which, round(run["wall"], 1), round(run["cpu"], 1),
            *[round(run[p], 1) for p in PHASES], round(run["kernels"], 1),
            round(statistics.mean(fits), 1) if fits else "", run["load"],
            "" if ratio is None else round(ratio, 2)]


def main(argv: list[str]) -> None:
    before = argv[argv.index("--before") + 1] if "--before" in argv else None
    rest = [a for a in argv if a != "--before" and a != before]
    repeats = int(rest[0]) if rest else 2
    rows, ratios = [], {}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        codes = {"this": ROOT}
        if before:
            codes = {f"before ({before})": export(before, tmp), **codes}
        for rep in range(1, repeats + 1):
            order = list(codes) if rep % 2 else list(codes)[::-1]
            for label in order:
                first, second = pair(codes[label], tmp, f"{rep}-{len(rows)}")
                ratio = first["wall"] / second["wall"]
                ratios.setdefault(label, []).append(ratio)
                rows += [_row(label, rep, "first (empty cache)", first, ratio),
                         _row(label, rep, "second", second, None)]
            _write(rows, ratios, rep)       # after each round: what is done so far
            _plot(rows)


def _write(rows: list[list], ratios: dict, repeats: int) -> None:
    notes = [f"{label}: first / second run, median of {len(r)} pairs: {statistics.median(r):.2f} "
             f"(each: {', '.join(f'{x:.2f}' for x in r)}); target <= {TARGET}: "
             + ("met" if statistics.median(r) <= TARGET else "NOT met") for label, r in ratios.items()]
    notes += ["each run: `python -m ltr_toolkit.cli demo --workdir NEW` in a fresh process, the node "
              "running and the index there; the first run of a pair with an empty NUMBA_CACHE_DIR "
              "(a fresh install), the second with the cache the first filled",
              "phases from the demo's log: setup (plugin, index, feature set), candidates (logged "
              "from the first stage), fits (from there to the last fold fitted, the first stage's "
              "rankings, uploads and any wait for the compiled kernels included: this code says "
              "how long it waited), rest (the report); CPU: user + system seconds of the demo and "
              "the processes it waited for (workers, the warm-up); load: 1-minute load average "
              "before/after the run",
              f"pairs: {repeats}, the variants interleaved, machine shared with other work"]
    write_table("first_run", HEADER, rows, notes)


def _plot(rows: list[list]) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(6, len(rows) * 0.9), 4.5))
    bottom = [0.0] * len(rows)
    for j, phase in enumerate(PHASES):
        values = [r[5 + j] for r in rows]
        ax.bar(range(len(rows)), values, bottom=bottom, label=phase)
        bottom = [b + v for b, v in zip(bottom, values)]
    for i, r in enumerate(rows):
        ax.text(i, bottom[i], f"{r[3]:.0f}s" + (f"\nx{r[-1]}" if r[-1] != "" else ""),
                ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(rows)), [f"{r[0]}\n#{r[1]} {r[2].split()[0]}" for r in rows],
                  fontsize=7)
    ax.set_ylabel("seconds")
    ax.set_title("ltr demo: first run after install (empty numba cache) vs the next")
    ax.legend(fontsize=8)
    finish(fig, "first_run")


if __name__ == "__main__":
    main(sys.argv[1:])
