"""First-stage retrieval and second-stage ``sltr`` rescoring.

What is reranked is exactly what the model was trained on: the first stage's global top
``window`` (the logged candidates are the global top K). OpenSearch's rescore window
counts per shard, so on S shards a plain rescore would rerank up to S x window documents,
most of which training never saw. On several shards the toolkit therefore serves in two
requests: the first stage's top ``window`` ids, then the first stage restricted to those
ids (an ``ids`` filter: it does not change their scores) with the rescore over all of
them. On one shard the per-shard window is the global one: one request, plus a first one
only when the model's features use the first stage's top ids (feedback). Every request
carries the first stage's ``search_type`` (``FirstStage.statistics``; by default
``dfs_query_then_fetch``: the whole index's term statistics, in the first stage and in the
rescore's features alike, as at logging, see ``featurelog``).

Ties in the model's scores are broken as offline (``query.requests.tie_ordered``): by the
first stage's order, not by Lucene's document order, which the cluster would use.

The request bodies are built in ``query.requests`` (the same for logging and serving).
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections import Counter

from ..data.querytext import fit_params
from ..errors import ClusterError, MissingResourceError, PluginMissingError, StoreMissingError
from ..transport.client import Connection, call
from ..query.clauses import term_budget
from ..query.firststage import DEFAULT_FIELDS, FirstStage
from ..stores.contract import ContractOverrideWarning
from ..query.prepare import QueryPlan, model_plan, remeasured
from ..query.requests import Rescore, msearch_ids, restrict_to, search_body, tie_ordered

__all__ = ["DEFAULT_FIELDS", "FirstStage", "Rescore", "search", "rerank_ids"]


def serving_params(conn: Connection, index: str, param_list: list[dict], first_stage: FirstStage,
                   rescore: Rescore, *, first_ids: list[list[str]] | None = None,
                   max_terms: int | None = None, encoder=None, batch: int = 50) -> list[dict]:
    """The model's parameters per query, as the one path prepares them
    (``query.prepare.QueryPlan.params``: the query's vector from the full text, the
    keywords shortened to ``max_terms`` -- else the model's contract's budget --, the
    first stage's top ids when its features use them, fetched unless ``first_ids`` are
    given, and the window's ids)."""
    plan = _plan(conn, index, rescore, first_stage, max_terms, encoder)
    return plan.params(conn, param_list, first_ids=first_ids, batch=batch)


def _plan(conn, index, rescore, first_stage, max_terms, encoder, sample=None) -> QueryPlan:
    """The model's kept plan (``query.prepare.model_plan``), its contract's override
    warning repeated for each call, as when every call settled the contract."""
    plan = model_plan(conn, index, rescore, first_stage, max_terms, encoder, sample)
    if plan.overrides:
        warnings.warn(ContractOverrideWarning(plan.overrides), stacklevel=3)
    return plan


class RescoreFallbackWarning(UserWarning):
    """The rescore of a query failed: its first stage's hits were served instead."""


def rerank_ids(conn: Connection, index: str, param_list: list[dict], first_stage: FirstStage,
               rescore: Rescore, size: int = 10, *, first_ids: list[list[str]] | None = None,
               max_terms: int | None = None, fallbacks: dict | None = None, encoder=None,
               batch: int = 50) -> list[list[str]]:
    """Reranked doc ids: the first stage's global top ``window`` (``first_ids``, fetched
    with at least that size, else fetched here), reordered by the ``sltr`` rescore, ties
    in the first stage's order. The window, weights, budget and first stage not given
    are the model's serving contract's (``query.prepare.contracted``). A query whose
    rescore the cluster rejects gets its first stage's ids (a
    :class:`RescoreFallbackWarning`; recorded in ``fallbacks``, position -> reason):
    reranking never turns a first-stage result into an error."""
    plan = _plan(conn, index, rescore, first_stage, max_terms, encoder)
    rescore, first_stage, restrict = plan.rescore, plan.first_stage, plan.restrict
    depth = max(plan.window, size, plan.first_depth)    # ties, feedback, several shards
    if first_ids is None:
        first_ids = plan.first_ids(conn, param_list, depth, batch=batch)
    first_ids = [ids or [] for ids in first_ids]
    mp = plan.params(conn, param_list, first_ids=first_ids, batch=batch)
    failed: dict[int, str] = {}
    ranked = msearch_ids(conn, index, param_list, first_stage, size, rescore=rescore,
                         model_param_list=mp, first_ids=first_ids, restrict=restrict,
                         max_terms=plan.max_terms, failures=failed, batch=batch)
    for i, ids in enumerate(first_ids):     # below the window: the first stage's order
        if restrict and ranked[i] is not None and len(ids) > plan.window:
            ranked[i] = (ranked[i] + ids[plan.window:])[:size]
    if failed:
        for i in failed:
            ranked[i] = first_ids[i][:size]
        warnings.warn(RescoreFallbackWarning(
            f"the rescore with model {rescore.model} failed for {len(failed)} of "
            f"{len(param_list)} queries: their first stage's hits are served "
            f"({next(iter(failed.values()))})"))
        if fallbacks is not None:
            fallbacks.update(failed)
    return ranked  # type: ignore[return-value]


def _search(conn: Connection, index: str, first_stage: FirstStage, store, body: dict) -> dict:
    """One search, with the first stage's term statistics (``search_type``)."""
    return call(conn, conn.client().search, index=index, body=body, store=store,
                search_type=first_stage.search_type)


def _first_stage_rank(conn, plan: QueryPlan, params: dict, hits: list[dict]) -> dict[str, int]:
    """The first stage's order of the hits the model tied (id -> rank): the first stage
    restricted to them (an ``ids`` filter: their scores unchanged; no source), ordered as
    the first stage orders them -- a small request, not the rescore again."""
    seen = Counter(h["_score"] for h in hits)
    tied = [h["_id"] for h in hits if seen[h["_score"]] > 1]
    body = search_body(plan.first_stage, params, len(tied), source=None)
    body["query"] = restrict_to(body["query"], tied)
    found = _search(conn, plan.index, plan.first_stage, plan.store, body)["hits"]["hits"]
    return {h["_id"]: r for r, h in enumerate(found)}


def _serving_inputs(conn, plan: QueryPlan, raw: dict, size):
    """(the model's parameters, the first stage's global top ``window`` ids (None when not
    fetched), whether to restrict the rescore to them, the hits below the window) of one
    query: on one shard a first request only for a model's feedback features, as deep as
    they need (ties are then ordered by the first stage's score, named in the hits); on
    several, the global top window (ties ordered by its ranks)."""
    restrict = plan.restrict
    if not restrict and not plan.first_depth:
        return plan.params(conn, [raw])[0], None, False, []
    depth = max(plan.window, size, plan.first_depth) if restrict else plan.first_depth
    source = ("title",) if restrict else None
    plain = _search(conn, plan.index, plan.first_stage, plan.store,
                    search_body(plan.first_stage, plan.keywords(raw), depth, source=source))
    hits = plain["hits"]["hits"]
    ids = [h["_id"] for h in hits]
    mp = plan.params(conn, [raw], first_ids=[ids])[0]
    if not restrict:
        return mp, None, False, []
    return mp, ids, True, hits[plan.window:size]       # below the window: first-stage order


_serial: dict[tuple, threading.Lock] = {}


def _one_at_a_time(conn, plan: QueryPlan):
    """A lock per model that is not thread-safe in the plugin (RankLib networks): this
    process's threads query it one at a time (other processes are not covered)."""
    if not plan.serial:
        return contextlib.nullcontext()
    return _serial.setdefault((conn.display_url, plan.store, plan.rescore.model), threading.Lock())


def search(conn: Connection, index: str, params: dict, first_stage: FirstStage | None = None,
           rescore: Rescore | None = None, size: int = 10, *, max_terms: int | None = None,
           encoder=None, plan: QueryPlan | None = None) -> list[dict]:
    """Hits as dicts: rank, id, score, title, of one query: the first stage's top ``size``,
    or its global top ``rescore.window`` reranked by ``rescore.model``, served as its
    serving contract says where ``first_stage``, ``max_terms`` and the rescore's window
    and weights are not given (``query.prepare.contracted``). One request on a one-shard
    index (and a small one, the first stage's order of the hits the model tied, when it
    ties some); a first one when the model's features use the
    first stage's top ids or the index has several shards (then exactly those are
    reranked). The model's plan (contract, parameters, budget, shard count) is made at the
    first query and kept (``query.prepare.model_plan``), or given as ``plan`` (then the
    other settings are not read). Long queries are fitted to the budget (None, and no
    contract: measured once per process, see ``query.clauses``; again when the cluster
    rejects a query as too long). When the rescore fails, the first stage's hits are
    returned with a :class:`RescoreFallbackWarning`. A model with semantic features gets
    the query's vector computed here from the full text (``encoder``: the user's spec),
    unless ``params`` carries ``query_vector`` already."""
    if not rescore and plan is None:
        first_stage = first_stage or FirstStage.from_fields()
        if max_terms is None:
            max_terms = term_budget(conn, index, first_stage, params)
        body = search_body(first_stage, fit_params(params, max_terms), size)
        return _hits(_search(conn, index, first_stage, None, body)["hits"]["hits"][:size])
    plan = plan or _plan(conn, index, rescore, first_stage, max_terms, encoder, sample=params)
    return _hits(_served(conn, plan, params, size)[:size])


def _served(conn, plan: QueryPlan, params: dict, size: int, again: bool = True) -> list[dict]:
    """The reranked hits, else (the rescore failed) the first stage's with a warning; a
    query the cluster rejects as too long is tried once more with the budget measured
    again when the plan measured it (``query.prepare.remeasured``)."""
    try:
        with _one_at_a_time(conn, plan):
            return _reranked(conn, plan, params, size)
    except ClusterError as exc:
        if isinstance(exc, (PluginMissingError, StoreMissingError, MissingResourceError)):
            raise
        fresh = remeasured(conn, plan, params, str(exc)) if again else None
        if fresh is not None:
            return _served(conn, fresh, params, size, again=False)
        warnings.warn(RescoreFallbackWarning(f"the rescore with model {plan.rescore.model} "
                                             f"failed: the first stage's hits are served ({exc})"))
        body = search_body(plan.first_stage, plan.keywords(params), size)
        return _search(conn, plan.index, plan.first_stage, plan.store, body)["hits"]["hits"]


def _reranked(conn, plan: QueryPlan, raw: dict, size) -> list[dict]:
    """One query's reranked hits in the toolkit's tie order (see :func:`search`): the top
    ``size + 1``, deeper (3x, up to the window) while a tie at the cut reaches the last
    hit fetched; when the model tied some of them and the first stage's order is not
    known (one shard), the tied hits' order from a small first-stage request."""
    mp, ids, restrict, below = _serving_inputs(conn, plan, raw, size)
    rescore, params = plan.rescore, plan.keywords(raw)
    top = ids[:plan.window] if restrict else None
    window = len(top) if restrict else plan.window
    rank = {d: r for r, d in enumerate(ids)} if restrict else None

    def fetch(n):
        body = search_body(plan.first_stage, params, n, rescore, model_params=mp, top_ids=top)
        return _search(conn, plan.index, plan.first_stage, rescore.store, body)["hits"]["hits"]
    n = size + 1 if size < window else size
    hits = fetch(n)
    while True:
        scores = [h["_score"] for h in hits[:window]]
        if len(set(scores)) == len(scores):                  # no tie: the cluster's order
            return hits[:size] + below
        if len(hits) == n < window and len(hits) > size and scores[-1] == scores[size - 1]:
            n = min(window, 3 * n)                           # a tie open at the end: deeper
            hits = fetch(n)
            continue
        rank = rank if rank is not None else _first_stage_rank(conn, plan, params, hits[:window])
        return tie_ordered(hits, size, window, rank)[0] + below


def _hits(hits: list[dict]) -> list[dict]:
    return [{"rank": r + 1, "id": h["_id"], "score": h["_score"],
             "title": (h.get("_source") or {}).get("title", "")} for r, h in enumerate(hits)]
