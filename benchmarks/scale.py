"""Training at MSLR scale on one machine: ``python -m benchmarks.scale``.

Generates an MSLR-shaped SVMlight file of ``ROWS`` rows x 136 features in a temporary
directory (rows resampled from the MSLR 5k extract; query sizes drawn from a log-normal
with median 95 and sigma 0.8, capped at 1,251 documents, MSLR-WEB30K's largest query:
mean ~130 documents, a few queries above 1,000), then measures, side by side in one run:

1. **memory**: peak RSS of ``ltr train`` (lambdamart, lambdarank-nn) in a fresh process
   (read the file, train, score the training set, write the artifact), against the
   bound 3 x the float32 feature matrix + a constant; the constant is the peak RSS of a
   process that imports what ``ltr train`` imports and stops;
2. **time per boosting round**: the toolkit's custom objective (LambdaMART defaults) vs
   xgboost's native ``rank:ndcg`` on the same QuantileDMatrix, same depth, learning rate,
   bins and threads, ``ROUNDS`` rounds each, interleaved ``REPEATS`` times, medians; and the
   objective alone (one ``grad_hess`` call);
3. **network epoch**: seconds of one training pass (the model's ``history``), per
   document, for a 136-64-16-1 lambdarank-nn and ranknet-nn.

Table (Markdown + CSV) and PNG in benchmarks/results/. Nothing here is asserted in tests.
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ._report import finish, pyplot, write_table
from .svmlight import FEATURES, generate

ROWS = 1_000_000
ROUNDS, REPEATS, THREADS = 10, 3, 2
EPOCHS = 2
MiB = 1 << 20
ROOT = Path(__file__).resolve().parent.parent
LARGEST = 1251


def draw_size(rng) -> int:
    return int(min(LARGEST, max(1, round(rng.lognormvariate(math.log(95), 0.8)))))


IMPORTS = ("import numpy, xgboost; import ltr_toolkit.cli, ltr_toolkit.pipeline.train, "
           "ltr_toolkit.models.trees, ltr_toolkit.models.neural")


def peak_rss(args: list[str]) -> tuple[float, float]:
    """(peak RSS MiB, wall seconds) of a fresh Python process running ``args``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    err = proc.stderr.read().decode()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{err}")
    return usage.ru_maxrss / 1024, seconds


def ltr_train(path: Path, out: Path, *options: str) -> tuple[float, float]:
    return peak_rss(["-c", "from ltr_toolkit.cli import main; main()", "train", str(path),
                     "-o", str(out), *options])


def round_times(ds) -> dict:
    import xgboost as xgb
    from ltr_toolkit.models.trees import LambdaMART
    m = LambdaMART(nthread=THREADS)
    t0 = time.perf_counter()
    dtrain = m._dmatrix(ds)
    qdm_s = time.perf_counter() - t0
    base = dict(m.booster_params(), disable_default_eval_metric=1)
    obj = m.objective(ds)
    runs = {"native": [], "toolkit": []}
    for rep in range(REPEATS):
        for name in runs:
            t0 = time.perf_counter()
            if name == "native":
                xgb.train(dict(base, objective="rank:ndcg"), dtrain, ROUNDS)
            else:
                xgb.train(base, dtrain, ROUNDS, obj=obj)
            runs[name].append((time.perf_counter() - t0) / ROUNDS)
            print(f"repeat {rep + 1} {name:8s}: {runs[name][-1]:.3f} s/round", flush=True)
    preds = np.random.default_rng(0).normal(size=ds.n_docs)
    obj_s = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        obj(preds, None)
        obj_s.append(time.perf_counter() - t0)
    return {"native": statistics.median(runs["native"]), "toolkit": statistics.median(runs["toolkit"]),
            "objective": statistics.median(obj_s), "qdm": qdm_s}


def epoch_times(ds) -> dict:
    from ltr_toolkit.models.neural import NeuralRanker
    out = {}
    for algo in ("lambdarank-nn", "ranknet-nn"):
        m = NeuralRanker(algo=algo, hidden=(64, 16), epochs=EPOCHS, seed=0).fit(ds)
        per_doc = [h["seconds"] / ds.n_docs * 1e6 for h in m.history]
        out[algo] = statistics.median(per_doc)
        print(f"{algo}: {', '.join(f'{u:.2f}' for u in per_doc)} us/doc per epoch", flush=True)
    return out


def main():
    from ltr_toolkit.data.svmlight import load_svmlight
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mslr_shaped_1m.txt"
        t0 = time.perf_counter()
        generate(path, ROWS, seed=1, draw_size=draw_size)
        print(f"generated {ROWS:,} rows ({path.stat().st_size / 1e6:.0f} MB) in "
              f"{time.perf_counter() - t0:.0f}s", flush=True)
        const, _ = peak_rss(["-c", IMPORTS])
        mem = {}
        for algo, opts in (("lambdamart", ["--algo", "lambdamart", "--trees", "20"]),
                           ("lambdarank-nn", ["--algo", "lambdarank-nn", "--epochs", str(EPOCHS)])):
            mem[algo] = ltr_train(path, Path(tmp) / f"{algo}.json", *opts)
            print(f"ltr train {algo}: peak {mem[algo][0]:.0f} MiB, {mem[algo][1]:.0f}s", flush=True)
        ds = load_svmlight(path)
    sizes = ds.group_sizes
    matrix = ds.n_docs * ds.n_features * 4 / MiB
    rounds = round_times(ds)
    epochs = epoch_times(ds)
    total = time.perf_counter() - t_start

    rows = []
    for algo, (peak, secs) in mem.items():
        ratio = (peak - const) / matrix
        rows.append([f"ltr train --algo {algo}: peak RSS MiB", round(peak), f"(peak - constant) / "
                     f"matrix = {ratio:.2f}", "<= 3", "met" if ratio <= 3 else "NOT met"])
    ratio = rounds["toolkit"] / rounds["native"]
    rows.append(["seconds per boosting round, toolkit objective", round(rounds["toolkit"], 3),
                 f"x native rank:ndcg ({rounds['native']:.3f} s) = {ratio:.2f}", "<= 1.5",
                 "met" if ratio <= 1.5 else "NOT met"])
    rows.append(["seconds of the toolkit objective alone (grad_hess)", round(rounds["objective"], 3),
                 f"{rounds['objective'] / rounds['toolkit']:.0%} of a toolkit round", "", ""])
    for algo, us in epochs.items():
        rows.append([f"{algo} 136-64-16-1: us per document per epoch", round(us, 2), "", "<= 5",
                     "met" if us <= 5 else "NOT met"])
    notes = [
        f"data: {ds.n_docs:,} rows x {FEATURES} features, {ds.n_queries:,} queries; documents per "
        f"query mean {sizes.mean():.0f}, median {np.median(sizes):.0f}, max {sizes.max()}, "
        f"{int((sizes > 1000).sum())} queries above 1,000; float32 matrix {matrix:.0f} MiB",
        f"constant: peak RSS of a process that imports numpy, xgboost and the toolkit's training "
        f"modules: {const:.0f} MiB; `ltr train` runs read the file (the reader peaks at ~1.4x "
        "the matrix), train (lambdamart: 20 trees, no validation; lambdarank-nn: "
        f"{EPOCHS} epochs), score the training set and write the artifact; "
        f"wall {mem['lambdamart'][1]:.0f} s and {mem['lambdarank-nn'][1]:.0f} s",
        f"boosting rounds: depth 6, eta 0.1, 256 bins, {THREADS} threads, base_score 0, hist, the same "
        f"QuantileDMatrix (built in {rounds['qdm']:.0f} s); {ROUNDS} rounds per run, {REPEATS} runs "
        "interleaved, median seconds / round; native = objective rank:ndcg with its defaults "
        "(top-32 pairs), toolkit = LambdaMART() defaults",
        f"network epochs: the training pass over every query ({EPOCHS} epochs, median), one BLAS "
        "thread (NeuralRanker.fit's choice); the per-epoch NDCG of the monitor set is not included",
        f"whole run {total / 60:.1f} min on {os.cpu_count()} cores",
    ]
    write_table("scale", ["measure", "value", "ratio", "target", "status"], rows, notes)

    plt = pyplot()
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(13, 4.4))
    names = list(mem)
    a1.bar(names, [mem[a][0] for a in names], color=["tab:orange", "tab:green"])
    a1.axhline(const + 3 * matrix, color="tab:red", ls="--", lw=1, label="constant + 3x matrix")
    a1.axhline(const + matrix, color="k", ls=":", lw=1, label="constant + matrix")
    a1.axhline(const, color="grey", ls="-.", lw=1, label="constant (imports)")
    a1.set_ylabel("peak RSS (MiB)")
    a1.set_title(f"ltr train, {ds.n_docs / 1e6:.0f}M rows x 136")
    a1.legend(fontsize=8)
    a2.bar(["native\nrank:ndcg", "toolkit\nobjective"], [rounds["native"], rounds["toolkit"]],
           color=["tab:blue", "tab:orange"])
    a2.bar(["toolkit\nobjective"], [rounds["objective"]], color="tab:red", alpha=0.5,
           label="grad_hess alone")
    a2.axhline(1.5 * rounds["native"], color="tab:red", ls="--", lw=1, label="1.5x native")
    a2.set_ylabel("seconds per boosting round")
    a2.set_title(f"depth 6, {THREADS} threads")
    a2.legend(fontsize=8)
    a3.bar(list(epochs), list(epochs.values()), color="tab:green")
    a3.axhline(5, color="tab:red", ls="--", lw=1, label="5 us/doc")
    a3.set_ylabel("us per document per epoch")
    a3.set_title("136-64-16-1 network")
    a3.legend(fontsize=8)
    finish(fig, "scale")


if __name__ == "__main__":
    main()
