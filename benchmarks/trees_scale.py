"""LambdaMART against xgboost's native rank:ndcg and LightGBM's lambdarank at three sizes,
side by side in one run: ``python -m benchmarks.trees_scale``.

Data: the MSLR 5k extract (its train and test files), and MSLR-shaped files of 200,000
and 1,000,000 rows generated as benchmarks/scale.py does (rows resampled from the
extract, query sizes log-normal, median 95, at most 1,251), each with a 50,000-row test
file generated with another seed (rows are resampled from the same pool, so test NDCG is
optimistic for all systems alike). Each is read once and kept as .npy for the runs.

Systems, each fitted in a fresh process (one at a time, interleaved, ``REPEATS`` rounds;
medians): the toolkit's ``LambdaMART`` (defaults: xgboost's rank:ndcg gradient computed by
the toolkit), the same with the NumPy block objective it had before (a frozen copy,
tests/lambdas_before.py), xgboost ``rank:ndcg`` (native, its defaults: top 32 pairs) on
the same QuantileDMatrix, and LightGBM ``lambdarank`` (truncation 32). Same trees
(``SIZES``), depth 6 (LightGBM: at most 64 leaves, depth 6, its own leaf minimums:
``min_data_in_leaf=1`` with no hessian minimum stops it on the 200k rows with a failed
check), learning rate, 256 bins, threads. Measured: the whole fit (matrix + boosting), the boosting loop per round, the
toolkit's objective alone (its share of the loop), the fit's peak RSS above the process
with the data loaded (VmHWM reset before the fit), and test NDCG@10.

Then the networks: two training epochs (lambdarank-nn and ranknet-nn, 136-64-16-1, and the
linear model) on the 200k rows with the compiled lambdas and with the NumPy blocks before
(the linear model: its compiled epoch, and NumPy's query steps before), interleaved; the
second epoch compares (the first also loads the compiled kernel, once per process).
Table (Markdown + CSV) and PNG in benchmarks/results/. Nothing here is asserted in tests.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ._report import SHARED, finish, pyplot, write_table

DEPTH, ETA, THREADS, REPEATS = 6, 0.1, 2, 3
#: rows generated (None: the extract) and trees fitted, per data set (fewer trees at the
#: larger sizes keep the whole run within this shared machine's budget; per-round times
#: are what compare)
SIZES = {"MSLR 5k": (None, 100), "200k": (200_000, 50), "1M": (1_000_000, 20)}
TEST_ROWS = 50_000
SYSTEMS = ("toolkit", "toolkit-before", "native", "lightgbm")
LABELS = {"toolkit": "toolkit LambdaMART (compiled lambdas)",
          "toolkit-before": "toolkit LambdaMART (NumPy blocks, before)",
          "native": "xgboost rank:ndcg (native)", "lightgbm": "LightGBM lambdarank"}
NETS = ("lambdarank-nn", "ranknet-nn", "linear")
ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20


def _status_mib(field: str) -> float:
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _load(folder: Path, part: str):
    from ltr_toolkit.data.dataset import RankingDataset
    off = np.load(folder / f"{part}_offsets.npy")
    return RankingDataset(X=np.load(folder / f"{part}_X.npy"), y=np.load(folder / f"{part}_y.npy"),
                          offsets=off, qids=[str(q) for q in range(len(off) - 1)])


def _use_blocks_before():
    """The toolkit's objective as it was: the frozen NumPy block implementation."""
    sys.path.insert(0, str(ROOT / "tests"))
    import lambdas_before
    from ltr_toolkit.models import neural, trees

    def old_rank_pairs(*args, threads=None, **kw):
        pairs = lambdas_before.RankPairs(*args, **kw)
        pairs.warm = lambda: None           # nothing compiled to load beforehand
        return pairs
    trees.RankPairs = old_rank_pairs
    neural.QueryPairs = lambdas_before.QueryPairs
    return lambdas_before


class _Loop:
    """An xgboost callback timing the boosting loop."""

    def __init__(self):
        import xgboost as xgb

        class Cb(xgb.callback.TrainingCallback):
            def before_training(cb, model):
                self.t0 = time.perf_counter()
                return model

            def after_training(cb, model):
                self.seconds = time.perf_counter() - self.t0
                return model
        self.callback = Cb()


def _timed_objective(pairs_class) -> dict:
    """Seconds spent in the toolkit objective's grad_hess: the first call (which loads the
    compiled kernel) and the others, accumulated."""
    spent = {"objective": 0.0, "first": None}
    inner = pairs_class.grad_hess

    def grad_hess(self, scores):
        t0 = time.perf_counter()
        try:
            return inner(self, scores)
        finally:
            if spent["first"] is None:
                spent["first"] = time.perf_counter() - t0
            else:
                spent["objective"] += time.perf_counter() - t0
    pairs_class.grad_hess = grad_hess
    return spent


def _fit_xgboost(system: str, train, trees: int):
    import xgboost as xgb
    from ltr_toolkit.models.trees import LambdaMART, fill_missing
    from ltr_toolkit.rank import pairs
    if system == "toolkit-before":
        spent = _timed_objective(_use_blocks_before().RankPairs)
    else:
        spent = _timed_objective(pairs.RankPairs)
    m = LambdaMART(n_estimators=trees, max_depth=DEPTH, learning_rate=ETA, nthread=THREADS)
    loop = _Loop()
    if system == "native":
        dtrain = m._dmatrix(train)
        params = dict(m.booster_params(), objective="rank:ndcg", disable_default_eval_metric=1)
        bst = xgb.train(params, dtrain, trees, callbacks=[loop.callback])
        return (lambda X: bst.inplace_predict(fill_missing(X), predict_type="margin")), loop.seconds, None
    m.fit(train, callbacks=[loop.callback])
    return m.predict, loop.seconds, spent


def _fit_lightgbm(train, trees: int):
    import lightgbm as lgb
    params = {"objective": "lambdarank", "num_leaves": 2 ** DEPTH, "max_depth": DEPTH,
              "learning_rate": ETA, "num_threads": THREADS, "verbose": -1, "max_bin": 256,
              "lambdarank_truncation_level": 32, "seed": 0}
    ds = lgb.Dataset(train.X, label=train.y, group=train.group_sizes, params=params).construct()
    t0 = time.perf_counter()
    bst = lgb.train(params, ds, trees)
    return bst.predict, time.perf_counter() - t0, None


def child_fit(system: str, folder: str, trees: int) -> None:
    """In a fresh process: load, reset the peak RSS, fit, score the test file."""
    from ltr_toolkit.rank.metrics import ndcg
    folder = Path(folder)
    train, test = _load(folder, "train"), _load(folder, "test")
    loaded = _status_mib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")           # VmHWM := VmRSS
    t0 = time.perf_counter()
    if system == "lightgbm":
        predict, loop_s, objective_s = _fit_lightgbm(train, trees)
    else:
        predict, loop_s, objective_s = _fit_xgboost(system, train, trees)
    fit_s = time.perf_counter() - t0
    peak = _status_mib("VmHWM")
    scores = predict(test.X)
    spent = objective_s or {}
    print(json.dumps({"fit_s": fit_s, "loop_s": loop_s, "objective_s": spent.get("objective"),
                      "first_s": spent.get("first"),
                      "extra_mib": peak - loaded, "loaded_mib": loaded,
                      "ndcg10": float(np.mean(ndcg(np.asarray(scores, dtype=np.float64), test.y,
                                                   test.offsets, 10)))}))


def child_epoch(algo: str, variant: str, folder: str) -> None:
    """In a fresh process: two epochs of a network on the training rows (the first one
    also loads the compiled kernel)."""
    from functools import partialmethod

    from ltr_toolkit.models.neural import NeuralRanker
    if variant == "before":
        _use_blocks_before()
        # the linear model's epoch: NumPy's query steps, as before the compiled epoch
        NeuralRanker._epoch_runner = partialmethod(NeuralRanker._epoch_runner, compiled=False)
    train = _load(Path(folder), "train")
    m = NeuralRanker(algo=algo, hidden=(64, 16), epochs=2, seed=0, patience=5).fit(train)
    print(json.dumps({"first_epoch_s": m.history[0]["seconds"], "epoch_s": m.history[1]["seconds"],
                      "docs": train.n_docs}))


def _run(*args) -> dict:
    """A child's JSON line, with its CPU seconds (user + system) added."""
    with tempfile.TemporaryFile("w+") as fh_out, tempfile.TemporaryFile("w+") as fh_err:
        proc = subprocess.Popen([sys.executable, "-m", "benchmarks.trees_scale", *args], cwd=ROOT,
                                stdout=fh_out, stderr=fh_err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        fh_out.seek(0)
        fh_err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(args)} failed:\n{fh_err.read()[-3000:]}")
        result = json.loads(fh_out.read().strip().splitlines()[-1])
    result["cpu_s"] = usage.ru_utime + usage.ru_stime
    return result


def _prepare(tmp: Path) -> dict:
    """Each size's train and test sets as .npy files in a folder of its own."""
    from ltr_toolkit.data.svmlight import load_svmlight
    from .scale import draw_size
    from .svmlight import generate
    folders = {}
    for name, (rows, _) in SIZES.items():
        folder = tmp / name.replace(" ", "_")
        folder.mkdir()
        if rows is None:
            src = SHARED / "data" / "mslr-5k"
            files = {"train": src / "msn1.fold1.train.5k.txt", "test": src / "msn1.fold1.test.5k.txt"}
        else:
            files = {"train": folder / "train.txt", "test": folder / "test.txt"}
            generate(files["train"], rows, seed=1, draw_size=draw_size)
            generate(files["test"], TEST_ROWS, seed=2, draw_size=draw_size)
        n_features = None
        for part, path in files.items():
            ds = load_svmlight(path, n_features=n_features)
            n_features = ds.n_features
            for key, value in (("X", ds.X), ("y", ds.y), ("offsets", ds.offsets)):
                np.save(folder / f"{part}_{key}.npy", value)
            if rows is not None:
                path.unlink()
        folders[name] = folder
    return folders


def _measure(folders: dict) -> tuple[dict, dict]:
    fits = {(size, s): [] for size in folders for s in SYSTEMS}
    epochs = {(a, v): [] for a in NETS for v in ("after", "before")}
    for rep in range(REPEATS):
        for size, folder in folders.items():
            for system in SYSTEMS:
                r = _run("fit", system, str(folder), str(SIZES[size][1]))
                fits[size, system].append(r)
                print(f"repeat {rep + 1} {size:8s} {system:15s} fit {r['fit_s']:6.1f}s loop "
                      f"{r['loop_s']:6.1f}s +{r['extra_mib']:.0f} MiB NDCG@10 {r['ndcg10']:.4f}",
                      flush=True)
        for algo, variant in epochs:
            r = _run("epoch", algo, variant, str(folders["200k"]))
            epochs[algo, variant].append(r)
            print(f"repeat {rep + 1} {algo} {variant}: epochs {r['first_epoch_s']:.2f}s "
                  f"{r['epoch_s']:.2f}s", flush=True)
    return fits, epochs


def _med(runs, key):
    values = [r[key] for r in runs if r[key] is not None]
    return statistics.median(values) if values else None


def _write(fits: dict, epochs: dict, load: list[str], minutes: float) -> None:
    rows = []
    for (size, system), runs in fits.items():
        native, lgbm = fits[size, "native"], fits[size, "lightgbm"]
        obj, first = _med(runs, "objective_s"), _med(runs, "first_s")
        trees = SIZES[size][1]
        rows.append([size, LABELS[system], _med(runs, "fit_s"), _med(runs, "cpu_s"),
                     _med(runs, "loop_s") / trees * 1000,
                     "" if obj is None else f"{obj / (trees - 1) * 1000:.1f} ({obj / _med(runs, 'loop_s'):.0%}); "
                     f"first call {first:.2f} s" + (" (beside the matrix)" if system == "toolkit" else ""),
                     _med(runs, "fit_s") / _med(native, "fit_s"), _med(runs, "fit_s") / _med(lgbm, "fit_s"),
                     round(_med(runs, "extra_mib")), _med(runs, "ndcg10"),
                     _med(runs, "ndcg10") - _med(native, "ndcg10")])
    for algo in NETS:
        after, before = _med(epochs[algo, "after"], "epoch_s"), _med(epochs[algo, "before"], "epoch_s")
        first = (_med(epochs[algo, "after"], "first_epoch_s"), _med(epochs[algo, "before"], "first_epoch_s"))
        rows.append(["200k", f"{algo} {'136-1' if algo == 'linear' else '136-64-16-1'}, second epoch: before {before:.2f} s (first epoch: "
                     f"{first[0]:.2f} s after, {first[1]:.2f} s before)", after,
                     _med(epochs[algo, "after"], "cpu_s"), "", "", after / before, "", "", "", ""])
    notes = ["trees: " + ", ".join(f"{k} {t}" for k, (_, t) in SIZES.items()) + f"; depth {DEPTH} (LightGBM: <= {2 ** DEPTH} leaves), eta {ETA}, 256 bins, "
             f"{THREADS} threads, no early stopping; each fit in a fresh process, systems interleaved, "
             f"median of {REPEATS} runs; fit = matrix + boosting; ms/round = boosting loop / trees; "
             "objective = the toolkit's grad_hess per round after the first (share of the loop) and "
             "its first call (the compiled kernel loaded from numba's cache: for the toolkit, RankPairs.warm's "
             "call, in a thread while the matrix is built, off the fit's path; the boosting loop's "
             "first call is then counted with the others); process CPU s = the child's user + "
             "system seconds (reading the .npy files, imports, fit, scoring the test rows): less "
             "sensitive than wall time to other sessions' load on this shared machine",
             "peak MiB = the fit's peak RSS above the process with train and test loaded "
             "(VmHWM reset before the fit); NDCG@10 on the test file (MSLR 5k: its own; "
             f"generated sizes: {TEST_ROWS:,} generated rows, another seed)",
             "networks: the second training epoch on the 200k rows (the first also loads the compiled "
             "kernel, once per process), compiled lambdas vs the NumPy blocks "
             "(tests/lambdas_before.py; linear: also its compiled epoch vs NumPy's query "
             "steps); 'fit / native' column: after / before",
             "machine load (uptime) " + " / ".join(load) + f"; whole run {minutes:.0f} min"]
    write_table("trees_scale", ["data", "system", "fit s", "process CPU s", "ms / round", "objective ms / round",
                                "fit / native", "fit / LightGBM", "peak MiB above data",
                                "test NDCG@10", "NDCG@10 - native"], rows, notes)
    _plot(fits)


def _plot(fits: dict) -> None:
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    sizes = list(SIZES)
    width = 0.2
    for i, system in enumerate(SYSTEMS):
        x = np.arange(len(sizes)) + (i - 1.5) * width
        a1.bar(x, [_med(fits[s, system], "loop_s") / SIZES[s][1] * 1000 for s in sizes], width,
               label=LABELS[system])
        a2.bar(x, [_med(fits[s, system], "ndcg10") for s in sizes], width)
    for ax, label in ((a1, "ms per boosting round (log)"), (a2, "test NDCG@10")):
        ax.set_xticks(np.arange(len(sizes)), sizes)
        ax.set_ylabel(label)
    a1.set_yscale("log")
    a1.legend(fontsize=7)
    fig.suptitle(f"LambdaMART at three sizes: depth {DEPTH}, {THREADS} threads")
    finish(fig, "trees_scale")


def main():
    t0 = time.perf_counter()
    load = [open("/proc/loadavg").read().split()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        folders = _prepare(Path(tmp))
        print(f"data ready in {time.perf_counter() - t0:.0f}s", flush=True)
        fits, epochs = _measure(folders)
    load.append(open("/proc/loadavg").read().split()[0])
    _write(fits, epochs, load, (time.perf_counter() - t0) / 60)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "fit":
        child_fit(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif len(sys.argv) > 1 and sys.argv[1] == "epoch":
        child_epoch(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        main()
