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

The request bodies are built in ``query.requests`` (the same for logging and serving).
"""

from __future__ import annotations

import contextlib
import threading
import warnings

from ..data.querytext import fit_params
from ..errors import ClusterError, MissingResourceError, PluginMissingError, StoreMissingError
from ..transport.client import Connection, call
from ..query.firststage import DEFAULT_FIELDS, FirstStage
from ..transport.lookups import shard_count
from ..stores.params import derived_depth, model_params, thread_safe, with_first_stage_ids
from ..indexing.vectors import with_query_vectors
from ..query.requests import MODEL_ONLY, msearch_ids, search_body

__all__ = ["DEFAULT_FIELDS", "FirstStage", "search", "rerank_ids"]


def serving_params(conn: Connection, index: str, param_list: list[dict], first_stage: FirstStage,
                   model: str, store: str | None = None, batch: int = 50,
                   first_ids: list[list[str]] | None = None, max_terms: int | None = None,
                   encoder=None) -> list[dict]:
    """The model's parameters per query: with the query's vector when its feature set
    uses one (computed here from ``keywords`` by the index's encoder, unless the query
    carries ``query_vector``), and the first stage's top ids when it uses them (one
    first-stage round trip, unless ``first_ids``, fetched with a size of at least that
    depth, are given)."""
    names = model_params(conn, model, store)
    param_list = with_query_vectors(conn, index, param_list, names, encoder)
    depth = derived_depth(names)
    if depth == 0:
        return param_list
    if first_ids is None:
        first_ids = msearch_ids(conn, index, param_list, first_stage, None, depth, depth, store,
                                batch, max_terms=max_terms)
    return [with_first_stage_ids(p, ids, depth) for p, ids in zip(param_list, first_ids)]


class RescoreFallbackWarning(UserWarning):
    """The rescore of a query failed: its first stage's hits were served instead."""


def _first_depth(conn, index, model, size, window, store) -> tuple[int, bool]:
    """(how deep the first request goes, whether the rescore must be restricted to it).
    On one shard OpenSearch's rescore window is the global top ``window``: a first request
    is needed only for the ids a model's feedback features use (0: none). On several
    shards the first request fetches the global top ``window`` ids to restrict to."""
    depth = derived_depth(model_params(conn, model, store))
    if shard_count(conn, index) == 1:
        return depth, False
    return max(window, size, depth), True


def rerank_ids(conn: Connection, index: str, param_list: list[dict], first_stage: FirstStage,
               model: str, size: int = 10, window: int = 100, store: str | None = None,
               batch: int = 50, first_ids: list[list[str]] | None = None,
               max_terms: int | None = None, fallbacks: dict | None = None,
               weights=MODEL_ONLY, encoder=None) -> list[list[str]]:
    """Reranked doc ids: the first stage's global top ``window`` (``first_ids``, fetched
    with at least that size, else fetched here when needed), reordered by the ``sltr``
    rescore. A query whose rescore the cluster rejects gets its first stage's ids (a
    :class:`RescoreFallbackWarning`; recorded in ``fallbacks``, position -> reason):
    reranking never turns a first-stage result into an error."""
    depth, restrict = _first_depth(conn, index, model, size, window, store)
    if first_ids is None:
        first_ids = msearch_ids(conn, index, param_list, first_stage, None, depth, depth, store,
                                batch, max_terms=max_terms) if depth else [[]] * len(param_list)
    mp = serving_params(conn, index, param_list, first_stage, model, store, batch, first_ids,
                        max_terms, encoder)
    failed: dict[int, str] = {}
    first_ids = [ids or [] for ids in first_ids]
    top = [ids[:window] for ids in first_ids] if restrict else None
    ranked = msearch_ids(conn, index, param_list, first_stage, model, size, window, store, batch,
                         mp, max_terms, failed, weights, top)
    for i, ids in enumerate(first_ids):     # below the window: the first stage's order
        if restrict and ranked[i] is not None and len(ids) > window:
            ranked[i] = (ranked[i] + ids[window:])[:size]
    if failed:
        plain = msearch_ids(conn, index, [param_list[i] for i in failed], first_stage, None,
                            size, window, store, batch, max_terms=max_terms)
        for i, ids in zip(failed, plain):
            ranked[i] = ids
        warnings.warn(RescoreFallbackWarning(
            f"the rescore with model {model} failed for {len(failed)} of {len(param_list)} "
            f"queries: their first stage's hits are served ({next(iter(failed.values()))})"))
        if fallbacks is not None:
            fallbacks.update(failed)
    return ranked  # type: ignore[return-value]


def _search(conn: Connection, index: str, first_stage: FirstStage, store, body: dict) -> dict:
    """One search, with the first stage's term statistics (``search_type``)."""
    return call(conn, conn.client().search, index=index, body=body, store=store,
                search_type=first_stage.search_type)


def _serving_inputs(conn, index, params, first_stage, model, size, window, store):
    """(the model's parameters, the global top ids to restrict the rescore to or None,
    the hits below the window) of one query: no request at all on one shard for a model
    without feedback features, else one first request (see :func:`_first_depth`)."""
    depth, restrict = _first_depth(conn, index, model, size, window, store)
    if not depth:
        return params, None, []
    source = ("title",) if restrict else None
    plain = _search(conn, index, first_stage, store,
                    search_body(first_stage, params, None, depth, window, store, source=source))
    hits = plain["hits"]["hits"]
    ids = [h["_id"] for h in hits]
    mp = serving_params(conn, index, [params], first_stage, model, store, first_ids=[ids])[0]
    if not restrict:
        return mp, None, []
    return mp, ids[:window], hits[window:size]       # below the window: first-stage order


_serial: dict[tuple, threading.Lock] = {}


def _one_at_a_time(conn, model, store):
    """A lock per model that is not thread-safe in the plugin (RankLib networks): this
    process's threads query it one at a time (other processes are not covered)."""
    if not model or thread_safe(conn, model, store):
        return contextlib.nullcontext()
    return _serial.setdefault((conn.display_url, store, model), threading.Lock())


def search(conn: Connection, index: str, params: dict, first_stage: FirstStage | None = None,
           model: str | None = None, size: int = 10, window: int = 100,
           store: str | None = None, max_terms: int | None = None,
           weights=MODEL_ONLY, encoder=None) -> list[dict]:
    """Hits as dicts: rank, id, score, title, of one query, the first stage's global top
    ``window`` reranked by ``model``. One request on a one-shard index; two when the
    model's features use the first stage's top ids or the index has several shards (the
    first stage's top ids, then exactly those reranked). The model's definition and the
    shard count are read once per process (``lookups``). A long query is fitted to the
    cluster's clause budget (measured once per process when ``max_terms`` is None). When
    the rescore fails, the first stage's hits are returned with a
    :class:`RescoreFallbackWarning`. A model with semantic features gets the query's
    vector computed here (``encoder``: the user's spec), unless ``params`` carries
    ``query_vector`` already."""
    first_stage = first_stage or FirstStage.from_fields()
    if model:
        params = with_query_vectors(conn, index, [params], model_params(conn, model, store),
                                    encoder)[0]
    if max_terms is None:
        from ..query.clauses import term_budget
        max_terms = term_budget(conn, index, first_stage, params, model=model, store=store)
    params = fit_params(params, max_terms)
    mp, top, below = (_serving_inputs(conn, index, params, first_stage, model, size, window, store)
                      if model else (None, None, []))
    body = search_body(first_stage, params, model, size, window, store, mp, weights=weights,
                       top_ids=top)
    try:
        with _one_at_a_time(conn, model, store):
            resp = _search(conn, index, first_stage, store, body)
    except ClusterError as exc:
        if not model or isinstance(exc, (PluginMissingError, StoreMissingError, MissingResourceError)):
            raise
        warnings.warn(RescoreFallbackWarning(f"the rescore with model {model} failed: the first "
                                             f"stage's hits are served ({exc})"))
        resp = _search(conn, index, first_stage, store,
                       search_body(first_stage, params, None, size, window, store))
        below = []            # the first stage's own top `size` already holds them
    return [{"rank": r + 1, "id": h["_id"], "score": h["_score"],
             "title": (h.get("_source") or {}).get("title", "")}
            for r, h in enumerate((resp["hits"]["hits"] + below)[:size])]
