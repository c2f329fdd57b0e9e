"""Live evaluation: every judged query runs against the cluster, the first stage alone
vs each reranker (metrics and tests from ``report``)."""

from __future__ import annotations

from ..data.judgments import JudgmentList
from .report import compare, per_query_json, run_metrics
from ..query.clauses import term_budget
from ..query.firststage import FirstStage
from ..stores.params import derived_depth, model_params
from ..serving.explain import explain_systems
from ..serving.serving import Serving
from ..data.querytext import distinct_words


def evaluate_live(conn, index: str, jl: JudgmentList, models: list[str] | None = None, k: int = 10,
                  window: int = 100, store: str | None = None, baseline_name: str = "bm25",
                  first_stage=None, weights=(0.0, 1.0), explain: bool = False):
    """Run every judged query live: the first stage alone, then each model reranking its
    top ``window`` with the rescore ``weights`` (query_weight, rescore_query_weight: the
    model alone by default; ``(1, beta)`` for a model deployed blended with the first
    stage); returns (report, per-query metrics, qids). The report's ``top`` holds every
    system's top 10 per query; with ``explain``, ``explanations`` holds each model's
    per-feature contributions to them (``serving.explain``)."""
    first_stage = first_stage or FirstStage.from_fields()
    first_stage.check(conn, index)
    all_qids = jl.judged_qids()
    param_list = [jl.query_params(q) for q in all_qids]
    depth = max([derived_depth(model_params(conn, m, store)) for m in models or []], default=0)
    size = max(k, 10)
    # one clause budget for every system: they all rerank the same first-stage results
    sample = max(param_list, key=lambda p: len(distinct_words(p["keywords"])), default={})
    budget = min([term_budget(conn, index, first_stage, sample, model=m, store=store)
                  for m in models or [None]])
    serving = Serving(index, first_stage, window, store, budget)
    failed: dict[int, str] = {}
    first = serving.first_ids(conn, param_list, depth=max(size, depth), failures=failed)
    keep = [i for i in range(len(all_qids)) if i not in failed]
    qids, param_list, first = [all_qids[i] for i in keep], [param_list[i] for i in keep], [first[i] for i in keep]
    per_query = {baseline_name: run_metrics(first, qids, jl, k)}
    fallbacks: dict[str, list[str]] = {}
    ranked = {baseline_name: first}
    for m in models or []:
        fell: dict[int, str] = {}
        ranked[m] = serving.for_model(m, weights).rerank(conn, param_list, size, first_ids=first,
                                                         fallbacks=fell)
        fallbacks[m] = [qids[i] for i in fell]
        per_query[m] = run_metrics(ranked[m], qids, jl, k)
    report = compare(per_query, baseline_name, k)
    report["first_stage"] = first_stage.to_dict()
    report["window"] = window
    report["max_query_terms"] = budget
    report["failed_queries"] = [[all_qids[i], why] for i, why in sorted(failed.items())]
    report["serving"] = serving.to_dict()
    report["rescore_fallbacks"] = fallbacks
    report["per_query"] = per_query_json(per_query, qids)
    report["top"] = top_lists(ranked, qids)
    if explain and models:
        everything = list(range(len(qids)))
        report["explanations"] = explain_systems(
            conn, {m: [(serving.for_model(m, weights), everything)] for m in models},
            param_list, ranked, qids, first)
    return report, per_query, qids


def top_lists(ranked: dict[str, list[list[str]]], qids: list[str], size: int = 10) -> dict:
    """{system: {qid: its top ``size`` ids}}: what a report shows side by side."""
    return {s: {q: list(ids or [])[:size] for q, ids in zip(qids, lists)} for s, lists in ranked.items()}
