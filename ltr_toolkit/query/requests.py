"""Search bodies for the first stage and the rescore, and sending many at once.

The integration point for users' own search code is :func:`rescore_clause` with
:func:`restrict_to`: put them in any search body, with the model's parameters
(``keywords``, any per-query parameters, and — when its feature set uses them — the
first stage's top ids, see ``stores.params``), and send the request with the
``search_type`` the model was logged with (``FirstStage.search_type``). Feature logging
and serving build their requests here, so both send the same first stage.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..data.querytext import fit_params
from ..errors import MissingResourceError, PluginMissingError, StoreMissingError
from ..stores.contract import DEFAULT_WINDOW, MODEL_ONLY, Contract
from ..stores.params import thread_safe
from ..stores.store import sltr
from ..transport.client import Connection, item_error, msearch_items
from .firststage import FirstStage


def rescore_clause(model: str, params: dict, window: int = 100, query_weight: float = 0.0,
                   rescore_query_weight: float = 1.0, store: str | None = None,
                   active_features: list[str] | None = None) -> dict:
    """The ``rescore`` part of a search request that reranks the top ``window`` hits of the
    first stage with an LTR model. With ``query_weight`` 0 the model's score alone orders
    the window (the usual LTR setting); documents below the window keep their first-stage
    order after it. OpenSearch applies ``window_size`` per shard: on an index of S shards,
    each shard's top ``window`` is rescored (up to S x window documents); with the query
    restricted to the first stage's global top ids (:func:`restrict_to`) and ``window``
    their number, exactly those are reranked, as the toolkit does. Ties: see
    :func:`tie_ordered`."""
    return {"window_size": int(window),
            "query": {"rescore_query": sltr(params, model=model, store=store,
                                            active_features=active_features),
                      "query_weight": float(query_weight),
                      "rescore_query_weight": float(rescore_query_weight)}}


@dataclass(frozen=True)
class Rescore:
    """What reranks the first stage's top ``window``: a model of the store, with its
    rescore weights (``(query_weight, rescore_query_weight)``; :data:`MODEL_ONLY`, or a
    blend with the first stage's score chosen in cross-validation). ``window`` and
    ``weights`` None: the model's serving contract's (``stores.contract``), settled by
    ``query.prepare.contracted`` on the way to the cluster (``resolved``, with the
    ``contract`` read, or None when the model has none)."""
    model: str
    window: int | None = None
    store: str | None = None
    weights: tuple | None = None
    resolved: bool = field(default=False, compare=False)
    contract: Contract | None = field(default=None, compare=False, repr=False)

    @property
    def window_size(self) -> int:
        return int(self.window) if self.window is not None else DEFAULT_WINDOW

    @property
    def rescore_weights(self) -> tuple[float, float]:
        return tuple(self.weights) if self.weights is not None else MODEL_ONLY

    def clause(self, params: dict, window: int | None = None) -> dict:
        return rescore_clause(self.model, params, self.window_size if window is None else window,
                              *self.rescore_weights, store=self.store)


def restrict_to(query: dict, ids: list[str]) -> dict:
    """``query`` limited to the documents ``ids`` (a filter: their scores are unchanged)."""
    return {"bool": {"must": [query], "filter": [{"ids": {"values": list(ids)}}]}}


def search_body(first_stage: FirstStage, params: dict, size: int = 10,
                rescore: Rescore | None = None, *, model_params: dict | None = None,
                source=("title",), top_ids: list[str] | None = None) -> dict:
    """A search of the first stage's top ``size``, reranked by ``rescore`` when given.
    ``model_params``: the model's parameters when they differ from ``params`` (derived
    ones, see ``stores.params``). ``top_ids``: the first stage's global top ids: with a
    model, exactly they are reranked (see the module docstring)."""
    query = first_stage.query(params)
    window = rescore.window_size if rescore else 0
    if rescore and top_ids is not None:
        query, window = restrict_to(query, top_ids), max(1, len(top_ids))
    body = {"query": query, "size": int(size), "_source": list(source) if source else False}
    if rescore:
        body["rescore"] = rescore.clause(model_params or params, window)
    return body


def feature_body(first_stage: FirstStage, params: dict, window: int, store: str | None,
                 featureset: str, active: list[str] | None, top: list[str] | None = None,
                 depth: int = 0) -> dict:
    """A request ``ltr featureset cost`` times, as serving sends it: with ``depth``, the
    first request of feedback features (the first stage's top ``depth`` ids); else the
    first stage's top 10 (``top``: restricted to those global top ids, several shards),
    its top ``window`` rescored by ``featureset`` computing the ``active`` features only
    (None: no rescore)."""
    query = first_stage.query(params)
    if depth:
        return {"query": query, "size": int(depth), "_source": False}
    if top is not None:
        query = restrict_to(query, top)
    body = {"query": query, "size": 10, "_source": False}
    if active is not None:
        clause = sltr(params, featureset=featureset, store=store, active_features=active)
        body["rescore"] = {"window_size": window,
                           "query": {"rescore_query": clause, "query_weight": 0.0,
                                     "rescore_query_weight": 1.0}}
    return body


def tie_ordered(hits: list[dict], size: int, window: int,
                first_rank: dict[str, int] | None = None) -> tuple[list[dict], bool]:
    """The toolkit's one tie rule, the same as offline (``rank.metrics``: a stable sort of
    the logged rows, which are in the first stage's order): descending served score, then
    the first stage's order -- its rank in ``first_rank`` (id -> rank) when known --, then
    the order the cluster returned (Lucene's, as when the first stage was logged). The
    cluster itself breaks a rescore's ties by Lucene's document order. Returns (the top
    ``size``, whether a tie crosses the cut: then the hits must be fetched down to the
    window to choose). Hits below the ``window`` keep their place."""
    head, tail = hits[:window], hits[window:]

    def first(i: int, h: dict) -> int:
        return first_rank.get(h["_id"], len(first_rank) + i) if first_rank is not None else 0
    keyed = sorted(((-h["_score"], first(i, h), i) for i, h in enumerate(head)))
    ordered = [head[i] for _, _, i in keyed] + tail
    crosses = 0 < size < len(head) and head[keyed[size][2]]["_score"] == head[keyed[size - 1][2]]["_score"]
    return ordered[:size], crosses


def _msearch(conn: Connection, index: str, bodies: list[dict], store, batch: int,
             concurrency: int | None = None, failures: dict | None = None,
             search_type: str | None = None, stats: dict | None = None,
             progress=None) -> list[dict | None]:
    """Responses in order; a failed item raises, or with ``failures`` is recorded there
    (position -> reason) and answered None. ``progress(done, total)``: after each round
    trip."""
    out: list[dict | None] = []
    for start in range(0, len(bodies), batch):
        items = msearch_items(conn, index, bodies[start:start + batch], concurrency=concurrency,
                              search_type=search_type, stats=stats)
        for i, r in enumerate(items, start=start):
            if "error" in r:
                exc = item_error(r, conn, store)
                if failures is None or isinstance(exc, (PluginMissingError, StoreMissingError,
                                                        MissingResourceError)):
                    raise exc
                failures[i] = str(exc)
                r = None
            out.append(r)
        if progress:
            progress(len(out), len(bodies))
    return out


def msearch_ids(conn: Connection, index: str, param_list: list[dict], first_stage: FirstStage,
                size: int = 10, *, rescore: Rescore | None = None, store: str | None = None,
                model_param_list: list[dict] | None = None,
                first_ids: list[list[str]] | None = None, restrict: bool = False,
                max_terms: int | None = None, failures: dict | None = None,
                batch: int = 50, stats: dict | None = None,
                progress=None) -> list[list[str] | None]:
    """Ranked doc ids for many queries, ``batch`` queries per ``_msearch`` round trip (run
    one at a time by the node for models that are not thread-safe in the plugin).
    ``max_terms``: long queries fitted to the cluster's clause budget
    (:mod:`ltr_toolkit.data.querytext`); ``model_param_list``: the model's parameters,
    prepared (``query.prepare.QueryPlan.params``). ``failures``: see :func:`_msearch`;
    ``stats``: see ``msearch_items``; ``progress``: see :func:`_msearch` (the first pass). With ``rescore``: ``first_ids`` (each query's first-stage order, at least its window) break
    the model's ties (:func:`tie_ordered`; a tie across the cut fetches that query's
    window); ``restrict``: exactly the first ``window`` of them are reranked."""
    store = rescore.store if rescore else store
    n = len(param_list)
    wsize = rescore.window_size if rescore else 0
    windows = [len(first_ids[i][:wsize]) if restrict else wsize for i in range(n)]

    def send(rows, depth, progress=None):
        bodies = [search_body(first_stage, fit_params(param_list[i], max_terms),
                              depth(i), rescore, source=None,
                              model_params=model_param_list[i] if model_param_list else None,
                              top_ids=first_ids[i][:wsize] if restrict else None)
                  for i in rows]
        concurrency = None if not rescore or thread_safe(conn, rescore.model, store) else 1
        failed = None if failures is None else {}
        resp = _msearch(conn, index, bodies, store, batch, concurrency, failed,
                        first_stage.search_type, stats, progress)
        if failed:
            failures.update({rows[j]: why for j, why in failed.items()})
        return resp
    out = send(range(n), lambda i: size + 1 if 0 < size < windows[i] else size, progress)
    if not rescore:
        return [None if r is None else [h["_id"] for h in r["hits"]["hits"]] for r in out]
    ranks = [{d: r for r, d in enumerate(ids)} for ids in first_ids] if first_ids else [None] * n
    ranked: list[list[str] | None] = [None] * n
    again = []
    for i, r in enumerate(out):
        if r is not None:
            hits, crosses = tie_ordered(r["hits"]["hits"], size, windows[i], ranks[i])
            ranked[i] = [h["_id"] for h in hits]
            again += [i] if crosses else []
    for i, r in zip(again, send(again, lambda i: max(size, windows[i])) if again else []):
        ranked[i] = None if r is None else [h["_id"] for h in tie_ordered(
            r["hits"]["hits"], size, windows[i], ranks[i])[0]]
    return ranked
