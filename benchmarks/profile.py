"""Where training time goes: ``python -m benchmarks.profile``.

At three sizes (a Cranfield fold: 180 queries x 100 candidates x 6 features, generated
with Cranfield's shape since logged features need a live node; the MSLR 5k extract; 1M
generated MSLR-shaped rows, as benchmarks/scale.py makes them), in-process timers around
the library's own steps:

* a LambdaMART fit (toolkit defaults, 2 threads): building xgboost's matrix from the rows
  (data movement), the compiled kernel's load from numba's cache (``RankPairs.warm``, in a
  thread while the matrix is built), the lambdas in the boosting loop
  (``RankPairs.grad_hess``, its first call apart), and the rest of the boosting loop (tree
  building; xgboost's own work on the gradients); and the same fit with the NumPy block
  objective it had before (tests/lambdas_before.py), for the lambdas' share then;
* a network epoch (lambdarank-nn 136-64-16-1 or 6-64-16-1, one BLAS thread): the lambdas
  (``QueryPairs.lambdas``; its first call, loading the compiled kernel, apart), the
  training forward pass, the backward pass, the optimiser step, and the rest (slicing each
  query's rows, Python per query).

Each fit runs in a fresh process. Table (Markdown + CSV) in benchmarks/results/.
Nothing here is asserted in tests.
"""

from __future__ import annotations

import json
from importlib.util import find_spec
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from ._report import SHARED, write_table

ROOT = Path(__file__).resolve().parent.parent
THREADS = 2
#: trees per size (fewer at 1M keep the run within this shared machine's budget)
SIZES = {"Cranfield fold": 100, "MSLR 5k": 100, "1M": 10}


def cranfield_shaped(seed: int = 0):
    """180 queries x 100 candidates x 6 features: grades 0-4, ~8 judged relevant per
    query, the features noisy functions of the grade (as BM25-like scores are)."""
    from ltr_toolkit.data.dataset import RankingDataset
    rng = np.random.default_rng(seed)
    n_q, n_d = 180, 100
    y = np.zeros(n_q * n_d)
    for q in range(n_q):
        rel = rng.choice(n_d, size=8, replace=False)
        y[q * n_d + rel] = rng.integers(1, 5, size=8)
    X = (y[:, None] * rng.uniform(0.2, 1.0, size=6) + rng.normal(size=(len(y), 6)) * 2.0).astype(np.float32)
    return RankingDataset(X=X, y=y, offsets=np.arange(0, n_q * n_d + 1, n_d),
                          qids=[str(q) for q in range(n_q)])


class Timers:
    """Seconds accumulated per name by wrapping methods."""

    def __init__(self):
        self.seconds: dict = {}

    def wrap(self, owner, attr: str, name: str, first_apart: bool = False, when=None):
        """``when(*args, **kw)``: which calls count (None: all)."""
        inner = getattr(owner, attr)
        calls = [0]

        def timed(*args, **kw):
            if when is not None and not when(*args, **kw):
                return inner(*args, **kw)
            t0 = time.perf_counter()
            try:
                return inner(*args, **kw)
            finally:
                key = f"{name} (first call)" if first_apart and calls[0] == 0 else name
                calls[0] += 1
                self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - t0
        setattr(owner, attr, timed)


def _data(size: str, folder: Path):
    from ltr_toolkit.data.svmlight import load_svmlight
    if size == "Cranfield fold":
        return cranfield_shaped()
    if size == "MSLR 5k":
        return load_svmlight(SHARED / "data" / "mslr-5k" / "msn1.fold1.train.5k.txt")
    return load_svmlight(folder / "1m.txt")


def child_trees(size: str, folder: str, before: bool) -> None:
    import xgboost as xgb
    from ltr_toolkit.models import trees
    from ltr_toolkit.rank import pairs
    ds = _data(size, Path(folder))
    timers = Timers()
    if before:
        from .trees_scale import _use_blocks_before
        lambdas_before = _use_blocks_before()
        timers.wrap(lambdas_before.RankPairs, "grad_hess", "lambdas", first_apart=True)
    else:
        # the boosting loop's calls (the warm-up's, in its thread beside the matrix, apart)
        timers.wrap(pairs.RankPairs, "grad_hess", "lambdas", first_apart=True,
                    when=lambda *a, **kw: threading.current_thread() is threading.main_thread())
        timers.wrap(pairs.RankPairs, "warm", "kernel load (a thread, beside the matrix)")
    timers.wrap(trees.LambdaMART, "_dmatrix", "matrix (rows -> QuantileDMatrix)")
    timers.wrap(xgb, "train", "boosting loop")
    t0 = time.perf_counter()
    trees.LambdaMART(n_estimators=SIZES[size], nthread=THREADS).fit(ds)
    timers.seconds["fit"] = time.perf_counter() - t0
    print(json.dumps(timers.seconds))


def child_epoch(size: str, folder: str) -> None:
    from ltr_toolkit.models import mlp, neural
    from ltr_toolkit.rank import pairs
    ds = _data(size, Path(folder))
    timers = Timers()
    timers.wrap(pairs.QueryPairs, "lambdas", "lambdas", first_apart=True)
    # the training pass's forward keeps its activations; the epoch's NDCG is not timed
    timers.wrap(mlp.MLP, "forward", "forward", when=lambda *a, keep=False, **kw: keep)
    timers.wrap(mlp.MLP, "backward_flat", "backward")
    timers.wrap(mlp.Adam, "step", "optimiser step")
    m = neural.NeuralRanker(algo="lambdarank-nn", hidden=(64, 16), epochs=1, seed=0)
    m.fit(ds)
    timers.seconds["epoch"] = m.history[0]["seconds"]
    print(json.dumps(timers.seconds))


def child_demo(folder: str) -> None:
    """``ltr demo``'s job (pipeline.demo.run_demo, index there) against the benchmark's
    node, in this process, with timers around its phases: the parent's cluster work
    (logging the candidates, uploads, live reranking, explanations' logging), its local
    work beside the fits (Shapley contributions, loading artifacts, the report), and the
    fits themselves (the workers' seconds, from the report)."""
    from ltr_toolkit.pipeline import crossval, demo
    from ltr_toolkit.serving import explain, serving

    from ._live import connect
    conn = connect()
    timers = Timers()
    timers.wrap(crossval, "log_candidates", "cluster: logging the candidates (first stage + features)")
    timers.wrap(crossval._Run, "__init__", "cluster: first-stage ids of every query")
    timers.wrap(crossval, "upload", "cluster: uploading fold models")
    timers.wrap(serving.Serving, "rerank", "cluster: live reranking of each fold's queries")
    timers.wrap(explain, "msearch_items", "cluster: logging the reranked tops (explanations)")
    timers.wrap(explain, "contributions", "local: Shapley contributions (beside the fits)")
    timers.wrap(crossval, "model_from_artifact", "local: loading artifacts (beside the fits)")
    timers.wrap(demo, "write_html", "local: HTML report")
    timers.wrap(crossval, "run_all", "fits: the pool's wall time (workers start, fit, serve)")
    t0 = time.perf_counter()
    report = demo.run_demo(conn, Path(folder) / "demo", log=lambda m: None)
    timers.seconds["demo"] = time.perf_counter() - t0
    for algo, seconds in report["fit_seconds"].items():
        timers.seconds[f"fits: {algo}, {report['folds']} folds, seconds in the workers"] = seconds
    print(json.dumps(dict(timers.seconds, reason=report["recommendation"]["reason"])))


def _demo_rows(folder: str) -> tuple[list[list], str]:
    t = _run("demo", folder)
    reason = "recommendation: " + t.pop("reason")
    total = t.pop("demo")
    rows = [["Cranfield demo", "ltr demo (index there)", k, v, v / total] for k, v in t.items()]
    rows.append(["Cranfield demo", "ltr demo (index there)", "whole demo", total, 1.0])
    print("demo", t, reason, flush=True)
    return rows, reason


def _run(*args) -> dict:
    out = subprocess.run([sys.executable, "-m", "benchmarks.profile", *args], cwd=ROOT,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _rows(size: str, what: str, t: dict, total_key: str) -> list[list]:
    total = t[total_key]
    rows = []
    for key, seconds in t.items():
        if key == total_key:
            continue
        if key == "boosting loop":
            lam = t.get("lambdas", 0.0) + t.get("lambdas (first call)", 0.0)
            key, seconds = "tree building (boosting loop - lambdas)", seconds - lam
        rows.append([size, what, key, seconds, seconds / total])
    if total_key == "epoch":
        parts = sum(v for k, v in t.items() if k != "epoch")
        rows.append([size, what, "rest (per-query slicing, Python)", total - parts, (total - parts) / total])
    rows.append([size, what, f"whole {total_key}", total, 1.0])
    return rows


def main():
    from .scale import draw_size
    from .svmlight import generate
    t_start = time.perf_counter()
    load = [open("/proc/loadavg").read().split()[0]]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp) / "1m.txt", 1_000_000, seed=1, draw_size=draw_size)
        for size in SIZES:
            for before in (False, True):
                t = _run("trees", size, tmp, "before" if before else "after")
                what = f"LambdaMART fit, {SIZES[size]} trees" + (" (NumPy blocks, before)" if before else "")
                rows += _rows(size, what, t, "fit")
                print(size, what, t, flush=True)
            t = _run("epoch", size, tmp)
            rows += _rows(size, "lambdarank-nn epoch", t, "epoch")
            print(size, "epoch", t, flush=True)
        demo, reason = _demo_rows(tmp)
        rows += demo
    load.append(open("/proc/loadavg").read().split()[0])
    notes = [f"{THREADS} threads for xgboost and the kernel (one below 2^20 pairs); networks: one BLAS "
             "thread; each fit in a fresh process; in-process timers around the library's steps",
             "fit parts: matrix = LambdaMART._dmatrix (NaN filled, rows fed to a QuantileDMatrix); "
             "lambdas = RankPairs.grad_hess in the boosting loop (its first call apart); kernel load = "
             "RankPairs.warm, loading the compiled kernel in a thread while the matrix is built; tree "
             "building = the boosting loop less the lambdas; the fit's remainder is setup (the "
             "objective's per-query gains, booster parameters)",
             "machine load (uptime, 1 min) " + " / ".join(load) + f"; whole run "
             f"{(time.perf_counter() - t_start) / 60:.0f} min",
             "demo: pipeline.demo.run_demo (ltr demo's job; index there, node running: LTR_URL or "
             "the local node) in one process with timers around its phases; the fits run in "
             "worker processes (their seconds from the report, overlapping each other and the "
             "parent's cluster work); shares of the whole demo; " + reason,
             "environment: scikit-learn " + ("installed (xgboost imports it: about 1 s more in "
                                             "each process that imports xgboost)"
                                             if find_spec("sklearn") else
                                             "not installed (the README's base install)")]
    write_table("profile", ["data", "what", "part", "seconds", "share"], rows, notes)
    print((Path(__file__).resolve().parent / "results" / "profile.md").read_text())


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "trees":
        child_trees(sys.argv[2], sys.argv[3], sys.argv[4] == "before")
    elif len(sys.argv) > 1 and sys.argv[1] == "demo":
        child_demo(sys.argv[2])
    elif len(sys.argv) > 1 and sys.argv[1] == "epoch":
        child_epoch(sys.argv[2], sys.argv[3])
    else:
        main()
