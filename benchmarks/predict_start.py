"""``ltr predict`` against xgboost reading the same file, and the CLI's start-up, side by
side in one run: ``python -m benchmarks.predict_start``.

Generates 200,000 MSLR-shaped rows (136 features, as benchmarks/scale.py does), trains a
LambdaMART model (100 trees, depth 6) on the MSLR 5k extract, then runs, each in a fresh
process, interleaved, ``REPEATS`` rounds (medians):

* ``ltr predict MODEL DATA -o SCORES`` (``python -m ltr_toolkit.cli``): read the file,
  score every row as the plugin would, write one score per row;
* xgboost's own parse of the file (``import xgboost; xgboost.DMatrix("DATA?format=libsvm")``),
  the reference the issue names;
* ``ltr --help`` (the CLI's start-up before any work), and the modules it imports
  (``python -X importtime``: the toolkit's CLI package, cumulative, and whether NumPy,
  the cluster client, xgboost, numba, scikit-learn or SciPy are among them); and which of
  those ``ltr predict`` imported.

Wall seconds, CPU seconds (user + system) and peak RSS (the child's own VmHWM) of each
whole process. Targets (issue 44): predict within 1.2x xgboost's parse; its peak RSS
within 2x the float32 matrix + 300 MB. Table (Markdown + CSV) in benchmarks/results/.
"""

from __future__ import annotations

import os
from importlib.util import find_spec
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ._report import SHARED, write_table

ROWS, FEATURES, REPEATS = 200_000, 136, 5
ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20
HEAVY = ("numpy", "opensearchpy", "xgboost", "numba", "sklearn", "scipy")


#: run in the child before its work: its own peak RSS (VmHWM, which exec resets; the
#: rusage of a child started from this large process would count this process's pages)
#: and the heavy modules it imported, printed on stderr at exit
PEAK = ("import atexit, sys\n"
        "def _peak():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmHWM:'):\n"
        "            sys.stderr.write('PEAK_KIB ' + line.split()[1] + '\\n')\n"
        f"    sys.stderr.write('HEAVY ' + ','.join(m for m in {HEAVY!r} if m in sys.modules) + '\\n')\n"
        "atexit.register(_peak)\n")


def _child(args: list[str]) -> dict:
    """Wall, CPU seconds and peak RSS (MiB) of a fresh Python process; its stderr.
    ``args``: ["-m", module, ...] or ["-c", code]."""
    if args[0] == "-m":
        code = PEAK + f"import runpy; sys.argv = {[args[1], *args[2:]]!r}; runpy.run_module({args[1]!r}, run_name='__main__')"
    else:
        code = PEAK + args[1]
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{err[-3000:]}")
    peak = [int(line.split()[1]) for line in err.splitlines() if line.startswith("PEAK_KIB ")]
    heavy = [line[6:].strip() for line in err.splitlines() if line.startswith("HEAVY ")]
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "peak": peak[-1] / 1024,
            "heavy": [m for m in heavy[-1].split(",") if m], "stderr": err}


def _imports() -> tuple[float, list[str]]:
    """(seconds importing ltr_toolkit.cli, the heavy modules among the imports)."""
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", "import ltr_toolkit.cli"],
                         cwd=ROOT, capture_output=True, text=True).stderr
    cli_us, heavy = 0, []
    for line in err.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[2] == "ltr_toolkit.cli":
            cli_us = int(parts[1])
        if len(parts) == 3 and parts[2] in HEAVY:
            heavy.append(parts[2])
    return cli_us / 1e6, heavy


def _cold(args: list[str], tmp: Path) -> dict:
    """``ltr predict`` as the first run after an install: numba's cache empty (an empty
    NUMBA_CACHE_DIR of its own), so its compiled code is compiled, then cached."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp / "numba-cache"))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return {"wall": time.perf_counter() - t0}


def _prepare(tmp: Path) -> tuple[Path, Path]:
    from ltr_toolkit.data.svmlight import load_svmlight
    from ltr_toolkit.pipeline.train import train_from_files
    from .scale import draw_size
    from .svmlight import generate
    data, model = tmp / "rows.txt", tmp / "model.json"
    generate(data, ROWS, seed=1, draw_size=draw_size)
    train = SHARED / "data" / "mslr-5k" / "msn1.fold1.train.5k.txt"
    assert load_svmlight(train).n_features == FEATURES
    train_from_files(train, "lambdamart", output=model, trees=100)
    return data, model


def main():
    load = [open("/proc/loadavg").read().split()[0]]
    runs = {"predict": [], "xgboost": [], "help": [], "numba": [], "import": []}
    with tempfile.TemporaryDirectory() as tmp:
        data, model = _prepare(Path(tmp))
        commands = {
            "predict": ["-m", "ltr_toolkit.cli", "predict", str(model), str(data), "-o", f"{tmp}/scores.txt"],
            "xgboost": ["-c", "import warnings, xgboost; warnings.simplefilter('ignore'); "
                              f"xgboost.DMatrix('{data}?format=libsvm')"],
            "help": ["-m", "ltr_toolkit.cli", "--help"],
            "numba": ["-c", "from ltr_toolkit.data.svmlight_jit import jit_chunk; "
                            "jit_chunk(b'0 qid:1 1:0\\n', None, 0.0)"]}
        for rep in range(REPEATS):
            for name, args in commands.items():
                runs[name].append(_child(args))
                print(f"repeat {rep + 1} {name}: {runs[name][-1]['wall']:.2f}s wall "
                      f"{runs[name][-1]['peak']:.0f} MiB", flush=True)
            runs["import"].append(_imports())
        runs["cold"] = _cold(commands["predict"], Path(tmp))
    load.append(open("/proc/loadavg").read().split()[0])
    _write(runs, load)


def _write(runs: dict, load: list[str]) -> None:
    med = {n: {k: statistics.median(r[k] for r in runs[n]) for k in ("wall", "cpu", "peak")}
           for n in ("predict", "xgboost", "help", "numba")}
    matrix = ROWS * FEATURES * 4 / MiB
    bound = 2 * matrix + 300 * 1e6 / MiB
    wall_ratio = med["predict"]["wall"] / med["xgboost"]["wall"]
    import_s = statistics.median(s for s, _ in runs["import"])
    heavy = sorted({h for _, hs in runs["import"] for h in hs})
    predict_heavy = sorted({h for r in runs["predict"] for h in r["heavy"]})
    rows = [
        ["ltr predict, wall s", med["predict"]["wall"], f"x xgboost's parse ({med['xgboost']['wall']:.2f} s) "
         f"= {wall_ratio:.2f}", "<= 1.2", "met" if wall_ratio <= 1.2 else "NOT met"],
        ["ltr predict, CPU s", med["predict"]["cpu"], f"x xgboost's ({med['xgboost']['cpu']:.2f} s) = "
         f"{med['predict']['cpu'] / med['xgboost']['cpu']:.2f}", "", ""],
        ["ltr predict, peak RSS MiB", med["predict"]["peak"], f"matrix {matrix:.0f} MiB; xgboost's parse "
         f"peaks at {med['xgboost']['peak']:.0f}", f"<= 2 x matrix + 300 MB = {bound:.0f}",
         "met" if med["predict"]["peak"] <= bound else "NOT met"],
        ["ltr predict, heavy modules imported", ", ".join(predict_heavy) or "none", f"of {', '.join(HEAVY)}",
         "", ""],
        ["of which numba's start-up, wall s", med["numba"]["wall"], "a process that imports the "
         "compiled parser and calls it once (cache loaded): Python, NumPy, numba", "", ""],
        ["ltr predict, first run after install, wall s", runs["cold"]["wall"], "numba's cache empty: "
         "the parser and the forest's walk compiled, then cached", "", ""],
        ["ltr --help, wall s", med["help"]["wall"], f"CPU {med['help']['cpu']:.2f} s, peak "
         f"{med['help']['peak']:.0f} MiB", "", ""],
        ["import ltr_toolkit.cli, s (-X importtime)", import_s,
         "heavy modules imported: " + (", ".join(heavy) or f"none of {', '.join(HEAVY)}"), "", ""]]
    notes = [f"{ROWS:,} generated MSLR-shaped rows x {FEATURES} features; model: LambdaMART, 100 trees, "
             "depth 6, trained on the MSLR 5k extract; each command a fresh process, interleaved, "
             f"median of {REPEATS}; whole processes (interpreter start, imports, work)",
             "machine load (uptime, 1 min) " + " / ".join(load),
             "environment: scikit-learn " + ("installed: xgboost's import (in its parse) imports it, "
                                             "about 1 s" if find_spec("sklearn") else
                                             "not installed (the README's base install): xgboost's "
                                             "import is at its fastest")]
    write_table("predict_start", ["measure", "value", "ratio", "target", "status"], rows, notes)
    print((Path(__file__).resolve().parent / "results" / "predict_start.md").read_text())


if __name__ == "__main__":
    main()
