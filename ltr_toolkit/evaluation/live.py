"""Live evaluation: every judged query runs against the cluster, the first stage alone
vs each reranker (metrics and tests from ``report``), each model served as its serving
contract says (``stores.contract``) unless the call sets the window, the weights, the
first stage or the term budget."""

from __future__ import annotations

from ..data.judgments import JudgmentList
from .report import compare, per_query_json, run_metrics
from ..query.clauses import term_budget
from ..query.firststage import FirstStage
from ..stores.contract import DEFAULT_WINDOW
from ..stores.params import derived_depth, model_params
from ..serving.explain import explain_systems, merge_explanations
from ..serving.serving import Serving
from ..data.querytext import distinct_words


def evaluate_live(conn, index: str, jl: JudgmentList, models: list[str] | None = None, k: int = 10,
                  window: int | None = None, store: str | None = None, baseline_name: str = "bm25",
                  first_stage: FirstStage | None = None, weights=None, explain: bool = False,
                  max_terms: int | None = None):
    """Run every judged query live: the first stage alone, then each model reranking its
    top window; returns (report, per-query metrics, qids). Each model is served as its
    serving contract says where ``window``, ``weights`` ((query_weight,
    rescore_query_weight)), ``first_stage`` and ``max_terms`` are None (an explicit one
    that differs says so in one warning line); the first stage alone is ``first_stage``,
    else the one every model's contract names, with the smallest of their budgets. The
    report's ``top`` holds every system's top 10 per query and ``servings`` how each model
    was served; with ``explain``, ``explanations`` holds each model's per-feature
    contributions to them (``serving.explain``)."""
    models = list(models or [])
    all_qids = jl.judged_qids()
    param_list = [jl.query_params(q) for q in all_qids]
    sample = max(param_list, key=lambda p: len(distinct_words(p["keywords"])), default={})
    servings = {m: _served(conn, Serving(index, first_stage, window, store, max_terms, m, weights),
                           sample) for m in models}
    base = _baseline(conn, index, first_stage, window, store, max_terms, servings, sample)
    for stage in {id(s.first_stage): s.first_stage for s in [base, *servings.values()]}.values():
        stage.check(conn, index)
    size = max(k, 10)
    depth = max([_depth(conn, s) for s in servings.values()], default=0)
    failed: dict[int, str] = {}
    first = base.first_ids(conn, param_list, depth=max(size, depth), failures=failed)
    keep = [i for i in range(len(all_qids)) if i not in failed]
    qids, param_list, first = [all_qids[i] for i in keep], [param_list[i] for i in keep], [first[i] for i in keep]
    per_query = {baseline_name: run_metrics(first, qids, jl, k)}
    ranked, firsts, fallbacks = {baseline_name: first}, {}, {}
    for m, s in servings.items():
        firsts[m] = first if _same_first(s, base) else \
            s.first_ids(conn, param_list, depth=max(size, _depth(conn, s)), failures={})
        fell: dict[int, str] = {}
        ranked[m] = s.rerank(conn, param_list, size, first_ids=firsts[m], fallbacks=fell)
        fallbacks[m] = [qids[i] for i in fell]
        per_query[m] = run_metrics(ranked[m], qids, jl, k)
    report = compare(per_query, baseline_name, k)
    report.update({"first_stage": base.first_stage.to_dict(), "window": base.window,
                   "max_query_terms": base.max_terms,
                   "failed_queries": [[all_qids[i], why] for i, why in sorted(failed.items())],
                   "serving": base.to_dict(), "servings": {m: s.to_dict() for m, s in servings.items()},
                   "rescore_fallbacks": fallbacks, "per_query": per_query_json(per_query, qids),
                   "top": top_lists(ranked, qids)})
    if explain and models:
        report["explanations"] = _explanations(conn, servings, param_list, ranked, qids, firsts)
    return report, per_query, qids


def _served(conn, serving: Serving, sample: dict) -> Serving:
    """The model's serving settled (its contract), with its term budget measured when
    neither the call nor the contract gives one."""
    s = serving.served(conn)
    if s.max_terms is None:
        s = s.with_budget(term_budget(conn, s.index, s.first_stage, sample, model=s.model,
                                      store=s.store))
    return s


def _baseline(conn, index, first_stage, window, store, max_terms, servings: dict,
              sample: dict) -> Serving:
    """The first stage alone: ``first_stage``, else the one every model is served with
    (the default fields when they differ), its budget the smallest of theirs, its window
    the largest (every model's first-stage ids come from it when they share it)."""
    stages = {_key(s.first_stage): s.first_stage for s in servings.values()}
    stage = first_stage or (next(iter(stages.values())) if len(stages) == 1 else FirstStage.from_fields())
    budgets = [s.max_terms for s in servings.values() if _key(s.first_stage) == _key(stage)]
    budget = max_terms if max_terms is not None else (
        min(budgets) if budgets else term_budget(conn, index, stage, sample, store=store))
    win = window or max([s.window for s in servings.values()], default=DEFAULT_WINDOW)
    return Serving(index, stage, win, store, budget).served(conn)


def _depth(conn, s: Serving) -> int:
    """How deep a model's first-stage ids go: its window, its feedback features' depth."""
    return max(s.window, derived_depth(model_params(conn, s.model, s.store)))


def _key(stage: FirstStage) -> str:
    return repr((stage.template, stage.statistics))


def _same_first(s: Serving, base: Serving) -> bool:
    """The model reranks the first stage alone's results (same first stage and budget)."""
    return _key(s.first_stage) == _key(base.first_stage) and s.max_terms == base.max_terms


def _explanations(conn, servings: dict, param_list, ranked, qids, firsts) -> dict:
    out: dict = {"systems": {}}
    everything = list(range(len(qids)))
    for m, s in servings.items():
        merge_explanations(out, explain_systems(conn, {m: [(s, everything)]}, param_list,
                                                ranked, qids, firsts[m]))
    return out


def top_lists(ranked: dict[str, list[list[str]]], qids: list[str], size: int = 10) -> dict:
    """{system: {qid: its top ``size`` ids}}: what a report shows side by side."""
    return {s: {q: list(ids or [])[:size] for q, ids in zip(qids, lists)} for s, lists in ranked.items()}
