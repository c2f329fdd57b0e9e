"""How long choosing settings takes, and what it chooses, before and after issue 31, side
by side in one run: ``python -m benchmarks.cv_speed`` (``live``, ``mslr``, ``generated``
to run one part; all by default).

* **before**: the full grid (every tree setting grown to 200 trees on every inner fold),
  every fit in one process, one after the other;
* **after**: the toolkit's default: tree settings by successive halving over the tree
  counts (``tuning._tree_trials``), the outer folds' fits in worker processes
  (``pipeline.parallel``).

Parts:

* **live**: ``cross_validate`` (5 folds, the same folds in both modes) on Cranfield and
  CACM with linear, lambdarank-nn and lambdamart: outer-CV NDCG@10 and p vs the first
  stage, each algorithm's fit seconds (summed over its folds, whichever process ran
  them), the whole run's seconds, and the settings each fold chose.
* **mslr**: the same nested cross-validation offline on the MSLR 5k extract (no first
  stage column: no blends), outer NDCG@10 of each fold's chosen model on its test queries.
* **generated**: offline selection (``tuning.select``, 3 inner folds, as ``ltr train``
  / deployment run it on all queries) of each algorithm on 2,000 queries x 100 candidates
  x 10 features shaped like a logged set (rows in a first-stage order correlated with the
  relevance, few graded documents per query): seconds and peak memory (each selection in
  a fresh process).

Table + PNG in benchmarks/results/ (cv_speed.*). ``live`` needs a node with the LTR and
k-NN plugins (``LTR_URL``, else the local node) and CACM in ../shared/data/cacm.
"""

from __future__ import annotations

import multiprocessing
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from ltr_toolkit.data.dataset import RankingDataset
from ltr_toolkit.data.svmlight import load_svmlight
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.pipeline.crossval import _fit_fold, cross_validate, fold_of
from ltr_toolkit.pipeline.parallel import run_all
from ltr_toolkit.pipeline.tuning import select
from ltr_toolkit.pipeline.train import model_from_artifact
from ltr_toolkit.rank.metrics import ndcg

from ._live import INDEX, connect, prepare, workdir
from ._report import SHARED, finish, pyplot, write_table
from .own_index import _cacm

ALGOS = ("linear", "lambdarank-nn", "lambdamart")
MODES = {"before": {"jobs": 1, "selection": {"halving": False}},
         "after": {"jobs": None, "selection": None}}
HEADER = ["part", "data", "mode", "algorithm", "ndcg@10", "p vs first stage", "fit seconds",
          "run seconds", "peak MiB", "choices"]


def _choices(settings: list[dict]) -> str:
    out = []
    for s in settings:
        if s.get("first_stage"):
            out.append("first stage")
        else:
            p = dict(s["settings"])
            out.append(",".join(f"{k}={v}" for k, v in p.items() if k != "lr" or "hidden" in p)
                       + (f"+blend {s['blend']}" if s.get("blend") else ""))
    return "; ".join(out)


def live(conn) -> list[list]:
    rows = []
    cran = (INDEX, prepare(conn), cranfield.judgments())
    for name, (index, fs, jl) in (("cranfield", cran), ("cacm", _cacm(conn))):
        for mode, opts in MODES.items():
            t0 = time.monotonic()
            rep = cross_validate(conn, index, jl, fs, {a: None for a in ALGOS},
                                 workdir() / f"cv-speed-{name}-{mode}", folds=5, seed=42,
                                 name_prefix=f"bench-cvs-{name}", log=print, **opts)
            seconds = round(time.monotonic() - t0, 1)
            for a in ALGOS:
                rows.append(["live", name, mode, a, round(rep["systems"][a]["ndcg@10"], 4),
                             round(rep["tests"][a]["p_value"], 4), rep["fit_seconds"][a],
                             seconds, "", _choices(rep["settings"][a])])
            print(rows[-3:], flush=True)
    return rows


def _outer(ds, algo, folds, seed, opts):
    """Offline nested CV: each fold's chosen model scored on the fold's own queries."""
    where = fold_of(list(ds.qids), folds, seed)
    tasks = [(algo, f, frozenset(q for q in ds.qids if where[q] != f), 10, seed + f, None,
              "bench", None, opts["selection"]) for f in range(folds)]
    t0 = time.monotonic()
    fits = run_all(_fit_fold, tasks, opts["jobs"] or 2, shared=ds)
    seconds = round(time.monotonic() - t0, 1)
    per_query = np.zeros(ds.n_queries)
    chosen = []
    for f, (art, _) in enumerate(fits):
        test = [q for q in range(ds.n_queries) if where[ds.qids[q]] == f]
        sub = ds.subset(test)
        scores = model_from_artifact(art).predict(sub.X) if art["model"] else -np.arange(sub.n_docs)
        per_query[test] = ndcg(scores, sub.y, sub.offsets, 10)
        sel = art["selection"]
        chosen.append({"first_stage": True} if sel["first_stage"]
                      else {"settings": sel["params"], "blend": sel["blend"]})
    return float(per_query.mean()), sum(s for _, s in fits), seconds, _choices(chosen)


def mslr() -> list[list]:
    ds = load_svmlight(SHARED / "data" / "mslr-5k" / "msn1.fold1.train.5k.txt", n_features=136)
    rows = []
    for mode, opts in MODES.items():
        for a in ALGOS:
            mean, fit, seconds, chosen = _outer(ds, a, 5, 42, opts)
            rows.append(["offline", f"mslr-5k ({ds.n_queries} queries)", mode, a, round(mean, 4),
                         "", round(fit, 1), seconds, "", chosen])
            print(rows[-1], flush=True)
    return rows


def generated_set(queries: int = 2000, docs: int = 100, features: int = 10,
                  seed: int = 0) -> RankingDataset:
    """A logged set's shape: per query ``docs`` candidates in first-stage order (feature
    0, the first stage's score, correlated with a hidden relevance), skewed positive
    features, a non-linear part, and graded labels for the few most relevant."""
    rng = np.random.default_rng(seed)
    n = queries * docs
    X = rng.gamma(2.0, 1.0, size=(n, features))
    w = rng.normal(0, 1, features)
    rel = X @ w / np.sqrt(features) + 0.7 * np.sin(X[:, 1] * X[:, 2]) + rng.normal(0, 0.8, n)
    X[:, 0] = rel + rng.normal(0, 1.5, n)                      # the first stage's view of it
    q = np.repeat(np.arange(queries), docs)
    order = np.lexsort((-X[:, 0], q))                          # first-stage order per query
    X, rel = X[order], rel[order]
    y = np.zeros(n)
    r = rel.reshape(queries, docs)
    for grade, quant in ((1, 0.92), (2, 0.97), (3, 0.99)):
        y[(r >= np.quantile(r, quant, axis=1, keepdims=True)).ravel()] = grade
    return RankingDataset(X=X, y=y, offsets=np.arange(0, n + 1, docs),
                          qids=[f"g{i}" for i in range(queries)])


def _select_alone(algo, halving):
    ds = generated_set()
    t0 = time.monotonic()
    got = select(ds, algo, 10, 42, first_col=0, halving=halving)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    chosen = {"first_stage": True} if got["first_stage"] else {"settings": got["params"],
                                                              "blend": got["blend"]}
    return round(time.monotonic() - t0, 1), round(peak), _choices([chosen]), got["inner_ndcg"]


def generated() -> list[list]:
    rows = []
    ctx = multiprocessing.get_context("spawn")
    for mode, opts in MODES.items():
        halving = (opts["selection"] or {}).get("halving", True)
        for a in ALGOS:        # each in a fresh process: its own peak memory
            with ProcessPoolExecutor(1, mp_context=ctx) as pool:
                seconds, peak, chosen, inner = pool.submit(_select_alone, a, halving).result()
            rows.append(["offline selection", "generated 2000 x 100 x 10", mode, a,
                         round(inner, 4), "", seconds, seconds, peak, chosen])
            print(rows[-1], flush=True)
    return rows


def _plot(rows):
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5), gridspec_kw={"width_ratios": [1, 2]})
    data = sorted({r[1] for r in rows})
    x = np.arange(len(data))
    for j, mode in enumerate(MODES):       # wall clock: a run's (live), the fits' sum (offline)
        wall = [sum({r[3]: float(r[7]) for r in rows if r[1] == d and r[2] == mode}.values())
                if not any(r[0] == "live" for r in rows if r[1] == d)
                else next(float(r[7]) for r in rows if r[1] == d and r[2] == mode) for d in data]
        left.bar(x + (j - 0.5) * 0.4, wall, 0.4, label=mode)
    left.set_xticks(x, [d.split(" ")[0] for d in data], fontsize=8)
    left.set_ylabel("seconds, wall clock (all three algorithms)")
    left.legend()
    groups = sorted({(r[1], r[3]) for r in rows})
    x = np.arange(len(groups))
    for j, mode in enumerate(MODES):
        secs = [next((float(r[6]) for r in rows if (r[1], r[3]) == g and r[2] == mode), 0)
                for g in groups]
        right.bar(x + (j - 0.5) * 0.4, secs, 0.4, label=mode)
    right.set_xticks(x, [f"{d.split(' ')[0]}\n{a}" for d, a in groups], fontsize=6, rotation=30)
    right.set_ylabel("fit seconds per family (summed over folds)")
    fig.suptitle("choosing settings: full grid in one process (before) vs halving + parallel fits (after)")
    finish(fig, "cv_speed")


def main(parts=("live", "mslr", "generated")):
    rows = []
    if "generated" in parts:
        rows += generated()
    if "mslr" in parts:
        rows += mslr()
    if "live" in parts:
        rows += live(connect())
    notes = ["before: full grid, every fit in one process in turn; after: successive halving "
             "over tree counts (50 -> 100 -> 200, the better half grows on), outer folds' fits "
             "in worker processes (2 cores here)",
             "fit seconds: a family's fits summed over its folds (the processes overlap: the "
             "run's wall clock is the run seconds); live: 5 folds, seed 42, window 100",
             "generated: selection alone (3 inner folds) in a fresh process, seconds and peak "
             "RSS; ndcg@10 there is the chosen setting's inner-CV NDCG@10"]
    write_table("cv_speed", HEADER, rows, notes)
    _plot(rows)


if __name__ == "__main__":
    main(tuple(sys.argv[1:]) or ("live", "mslr", "generated"))
