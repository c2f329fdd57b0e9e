"""``ltr featureset cost``: log a feature set's candidates for the judged queries, then
measure what each feature costs at serving time and brings to NDCG@k
(:mod:`ltr_toolkit.evaluation.featurecost`)."""

from __future__ import annotations

from pathlib import Path

from ..features.featurelog import query_budget
from ..stores.params import featureset_info
from ..stores.params import DERIVED
from ..stores.store import get_featureset
from ..data.svmlight import load_logged
from ..errors import UserError
from ..evaluation.featurecost import FEEDBACK, feature_contributions, feature_costs
from .selection import grid
from .train import make_estimator

#: trees in the ablation's models (the middle of the selection grid's tree counts)
ABLATION_TREES = 100


def ablation_settings(algo: str, n_queries: int) -> dict:
    """One setting per family, the middle of :func:`.selection.grid` for this many
    queries: not tuned per feature set, the same for every row of the ablation."""
    options = grid(algo, n_queries)
    chosen = dict(options[len(options) // 2])
    if "trees" in chosen:
        chosen["trees"] = ABLATION_TREES
    return chosen


def _param_names(conn, featureset: str, store) -> dict[str, list[str]]:
    body = get_featureset(conn, featureset, store)
    body = body.get("featureset", body)
    return {f["name"]: list(f.get("params") or []) for f in body["features"]}


def cost_report(conn, serving, jl, featureset: str, workdir, algo: str = "lambdamart",
                folds: int = 5, timing_queries: int = 100, passes: int = 2, k: int = 10,
                seed: int = 42, log=lambda msg: None) -> dict:
    """{"cost": feature_costs(...), "contribution": feature_contributions(...), ...}."""
    info = featureset_info(conn, featureset, serving.store)
    qids = jl.judged_qids()
    if len(qids) < folds:
        raise UserError(f"{len(qids)} judged queries for {folds} folds", "judge more queries")
    serving = serving.with_budget(query_budget(conn, serving.index, jl, featureset,
                                               serving.first_stage, serving.store))
    out = Path(workdir)
    out.mkdir(parents=True, exist_ok=True)
    log(f"logging {featureset} for {len(qids)} queries (top {serving.window})")
    serving.log_candidates(conn, jl, featureset, out / "candidates.txt")
    ds = load_logged(out / "candidates.txt")
    uses = _param_names(conn, featureset, serving.store)
    feedback = [n for n, ps in uses.items() if any(DERIVED.match(p) for p in ps)]
    settings = ablation_settings(algo, ds.n_queries)
    log(f"ablation: {algo} {settings}, {folds}-fold cross-validation")
    contribution = feature_contributions(
        ds, lambda: make_estimator(algo, k=k, seed=seed, **settings),
        {FEEDBACK: feedback}, folds, k, seed)
    params = [jl.query_params(q) for q in qids[:timing_queries]]     # prepared as served
    log(f"timing {len(params)} queries x {passes} passes")
    cost = feature_costs(conn, serving, featureset, info["feature_names"], uses, params, passes,
                         seed)
    return {"featureset": featureset, "index": serving.index, "window": serving.window,
            "queries": len(qids), "timed_queries": len(params), "passes": passes,
            "algo": algo, "settings": settings, "folds": folds, "k": k,
            "feedback_features": feedback, "cost": cost, "contribution": contribution}
