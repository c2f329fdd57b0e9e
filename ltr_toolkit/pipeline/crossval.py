"""Live cross-validation: every judged query scored by a model that never saw it.

1. Candidates: per query, the first stage's top ``window`` documents, labelled from the
   judgments (unjudged: grade 0), logged once with the feature set.
2. Queries are split into ``folds`` (seeded shuffle). For each fold, each algorithm is
   trained on the other folds' candidates (a seeded 20% of those queries held out for
   early stopping), uploaded under a versioned name, and reranks its fold's queries live.
3. The report pools all queries: the first stage vs each algorithm, with the paired
   randomisation test, wins/ties/losses and per-query values (``evaluation.compare``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..cluster.candidates import candidate_judgments
from ..cluster.featurelog import log_features
from ..cluster.firststage import FirstStage
from ..cluster.model_store import upload
from ..cluster.rerank import msearch_ids, rerank_ids
from ..data.judgments import JudgmentList
from ..data.svmlight import load_logged
from ..evaluation.report import compare, per_query_json, run_metrics
from .train import check_algorithm, model_from_artifact, train_model


def fold_of(qids: list[str], folds: int, seed: int) -> dict[str, int]:
    """A seeded, balanced assignment of queries to folds."""
    order = np.random.default_rng(seed).permutation(len(qids))
    return {qids[i]: int(pos % folds) for pos, i in enumerate(order)}


def _subset(ds, keep: set[str]):
    idx = [q for q in range(ds.n_queries) if ds.qids[q] in keep]
    return ds.subset(idx)


def cross_validate(conn, index: str, jl: JudgmentList, featureset: str, algos: dict[str, dict],
                   workdir, folds: int = 5, k: int = 10, window: int = 100,
                   store: str | None = None, first_stage: FirstStage | None = None,
                   seed: int = 42, name_prefix: str = "cv", baseline_name: str = "first-stage",
                   log=lambda msg: None) -> dict:
    """Returns the pooled report (see the module docstring); models are named
    ``{name_prefix}-{algo}-f{fold}-vN``."""
    if folds < 2:
        from ..errors import UserError
        raise UserError(f"--folds {folds}: cross-validation needs at least 2 folds")
    for algo in algos:
        check_algorithm(algo)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    first_stage = first_stage or FirstStage.from_fields()
    cands, info = candidate_judgments(conn, index, jl, window, first_stage)
    data = workdir / "candidates.txt"
    side = log_features(conn, cands, featureset, index, data, store, first_stage=first_stage,
                        candidates=info)
    log(f"logged {side['rows']} candidate rows for {info['queries']} queries "
        f"({info['judged']} judged, {info['unjudged']} unjudged as 0)")
    ds = load_logged(data)
    qids = jl.judged_qids()
    where = fold_of(qids, folds, seed)
    params = [jl.query_params(q) for q in qids]
    first = msearch_ids(conn, index, params, first_stage, None, max(k, 10, window), window, store)
    per_query = {baseline_name: run_metrics(first, qids, jl, k)}
    models: dict[str, list[str]] = {a: [] for a in algos}
    for algo, kw in algos.items():
        ranked: list[list[str]] = [[] for _ in qids]
        for f in range(folds):
            train_q = [q for q in qids if where[q] != f]
            rng = np.random.default_rng(seed + f)
            held = set(rng.choice(train_q, size=max(1, len(train_q) // 5), replace=False).tolist())
            tr = _subset(ds, set(train_q) - held)
            va = _subset(ds, held)
            art = train_model(tr, algo, va, source=str(data), k=k, seed=seed, **kw)
            name = upload(conn, art, model_from_artifact(art), f"{name_prefix}-{algo}-f{f}",
                          featureset, store)["name"]
            models[algo].append(name)
            idx = [i for i, q in enumerate(qids) if where[q] == f]
            got = rerank_ids(conn, index, [params[i] for i in idx], first_stage, name,
                             max(k, 10), window, store, first_ids=[first[i] for i in idx])
            for i, r in zip(idx, got):
                ranked[i] = r
        per_query[algo] = run_metrics(ranked, qids, jl, k)
        log(f"{algo}: {folds} fold models uploaded ({', '.join(models[algo])})")
    report = compare(per_query, baseline_name, k)
    report.update({
        "evaluation": f"{folds}-fold cross-validation over all {len(qids)} judged queries "
                      f"(each query reranked by a model trained without it)",
        "folds": folds, "window": window, "first_stage": first_stage.to_dict(),
        "models": models, "candidates": info, "seed": seed,
        "per_query": per_query_json(per_query, qids),
    })
    return report
