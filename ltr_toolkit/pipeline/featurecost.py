"""``ltr featureset cost``: log a feature set's candidates for the judged queries, then
measure what each feature costs at serving time and brings to NDCG@k
(:mod:`ltr_toolkit.evaluation.feature_timing`). Choosing a set is not done here:
``ltr evaluate cv --max-cost R`` (or ``--max-ms``) chooses it inside the training folds,
under a serving budget, with the same live measure of each feature's cost
(:func:`measure_costs`), so that its gain is measured on queries the choice never saw."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from ..stores.params import DERIVED, featureset_info
from ..data.svmlight import load_logged
from ..errors import UserError
from ..evaluation.feature_timing import FEEDBACK, ablation_scores, feature_contributions, feature_costs
from .tuning import grid
from .train import make_estimator

#: trees in the ablation's models (the middle of the selection grid's tree counts)
ABLATION_TREES = 100


def ablation_settings(algo: str, n_queries: int) -> dict:
    """One setting per family, the middle of :func:`.tuning.grid` for this many
    queries: not tuned per feature set, the same for every row of the ablation."""
    options = grid(algo, n_queries)
    chosen = dict(options[len(options) // 2])
    if "trees" in chosen:
        chosen["trees"] = ABLATION_TREES
    return chosen


def measure_costs(conn, serving, jl, featureset: str, info: dict, timing_queries: int = 100,
                  passes: int = 2, seed: int = 42) -> dict:
    """:func:`.feature_timing.feature_costs` of ``featureset`` (``info``: its
    ``featureset_info``) on the first ``timing_queries`` judged queries of ``jl``,
    served by ``serving`` (its term budget measured already). The timed queries' plan (that
    budget, the set's parameters, the encoder, the shards) and their parameters (vectors,
    first-stage ids) are made here, once."""
    uses = {f["name"]: list(f.get("params") or []) for f in info["features"]}
    raw = [jl.query_params(q) for q in jl.judged_qids()[:timing_queries]]
    plan = serving.query_plan(conn, [p for ps in uses.values() for p in ps])
    tops = [ids or [] for ids in plan.first_ids(conn, raw, plan.window)]
    prepared = plan.params(conn, raw, first_ids=tops)              # as serving prepares them
    return feature_costs(conn, plan, featureset, info["feature_names"], uses,
                         list(zip(raw, prepared, tops)), passes, seed)


def cost_report(conn, serving, jl, featureset: str, workdir, algo: str = "lambdamart",
                folds: int = 5, timing_queries: int = 100, passes: int = 2, k: int = 10,
                seed: int = 42, log=lambda msg: None, progress=None) -> dict:
    """{"cost": feature_costs(...), "contribution": feature_contributions(...), ...}.
    The term budget is measured once, by the logging of the candidates (recorded in their
    sidecar). ``progress(done, total)``: after each model fit of the ablation."""
    info = featureset_info(conn, featureset, serving.store)
    qids = jl.judged_qids()
    if len(qids) < folds:
        raise UserError(f"{len(qids)} judged queries for {folds} folds", "judge more queries")
    out = Path(workdir)
    out.mkdir(parents=True, exist_ok=True)
    log(f"logging {featureset} for {len(qids)} queries (top {serving.depth})")
    side, _ = serving.log_candidates(conn, jl, featureset, out / "candidates.txt")
    serving = serving.with_budget(side.get("max_query_terms"))
    ds = load_logged(out / "candidates.txt")
    uses = {f["name"]: list(f.get("params") or []) for f in info["features"]}
    feedback = [n for n, ps in uses.items() if any(DERIVED.match(p) for p in ps)]
    settings = ablation_settings(algo, ds.n_queries)
    log(f"ablation: {algo} {' '.join(f'{n}={v}' for n, v in settings.items())}, "
        f"{folds}-fold cross-validation")
    make = partial(make_estimator, algo, k=k, seed=seed, **settings)
    scores = ablation_scores(ds, make, {FEEDBACK: feedback}, folds, k, seed, progress)
    contribution = feature_contributions(ds, make, k=k, scores=scores)
    log(f"timing {min(timing_queries, len(qids))} queries x {passes} passes")
    cost = measure_costs(conn, serving, jl, featureset, info, timing_queries, passes, seed)
    return {"featureset": featureset, "index": serving.index, "window": serving.depth,
            "queries": len(qids), "timed_queries": min(timing_queries, len(qids)),
            "passes": passes, "algo": algo, "settings": settings, "folds": folds, "k": k,
            "feedback_features": feedback, "cost": cost, "contribution": contribution,
            "failed_queries": side.get("failed_queries", [])}
