"""Search bodies for the first stage and the rescore, and sending many at once.

The integration point for users' own search code is :func:`rescore_clause` with
:func:`restrict_to`: put them in any search body, with the model's parameters
(``keywords``, any per-query parameters, and — when its feature set uses them — the
first stage's top ids, see ``stores.params``), and send the request with the
``search_type`` the model was logged with (``FirstStage.search_type``). Feature logging
and serving build their requests here, so both send the same first stage.
"""

from __future__ import annotations

from ..data.querytext import fit_params
from ..errors import MissingResourceError, PluginMissingError, StoreMissingError
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
    their number, exactly those are reranked, as the toolkit does."""
    return {"window_size": int(window),
            "query": {"rescore_query": sltr(params, model=model, store=store,
                                            active_features=active_features),
                      "query_weight": float(query_weight),
                      "rescore_query_weight": float(rescore_query_weight)}}


#: (query_weight, rescore_query_weight) of a model served alone: its score orders the window
MODEL_ONLY = (0.0, 1.0)


def restrict_to(query: dict, ids: list[str]) -> dict:
    """``query`` limited to the documents ``ids`` (a filter: their scores are unchanged)."""
    return {"bool": {"must": [query], "filter": [{"ids": {"values": list(ids)}}]}}


def search_body(first_stage: FirstStage, params: dict, model: str | None = None, size: int = 10,
                window: int = 100, store: str | None = None, model_params: dict | None = None,
                source=("title",), weights=MODEL_ONLY, top_ids: list[str] | None = None) -> dict:
    """``weights``: (query_weight, rescore_query_weight) of the rescore: the model alone
    (:data:`MODEL_ONLY`), or blended with the first stage's score (``(1, beta)``, as
    chosen in cross-validation and recorded in the model artifact's ``rescore``).
    ``top_ids``: the first stage's global top ``window`` ids: with a model, exactly they
    are reranked (see the module docstring)."""
    query = first_stage.query(params)
    if model and top_ids is not None:
        query, window = restrict_to(query, top_ids), max(1, len(top_ids))
    body = {"query": query, "size": int(size), "_source": list(source) if source else False}
    if model:
        body["rescore"] = rescore_clause(model, model_params or params, window, *weights,
                                         store=store)
    return body


def _msearch(conn: Connection, index: str, bodies: list[dict], store, batch: int,
             concurrency: int | None = None, failures: dict | None = None,
             search_type: str | None = None) -> list[dict | None]:
    """Responses in order; a failed item raises, or with ``failures`` is recorded there
    (position -> reason) and answered None."""
    out: list[dict | None] = []
    for start in range(0, len(bodies), batch):
        items = msearch_items(conn, index, bodies[start:start + batch], concurrency=concurrency,
                              search_type=search_type)
        for i, r in enumerate(items, start=start):
            if "error" in r:
                exc = item_error(r, conn, store)
                if failures is None or isinstance(exc, (PluginMissingError, StoreMissingError,
                                                        MissingResourceError)):
                    raise exc
                failures[i] = str(exc)
                r = None
            out.append(r)
    return out


def msearch_ids(conn: Connection, index: str, param_list: list[dict], first_stage: FirstStage,
                model: str | None = None, size: int = 10, window: int = 100,
                store: str | None = None, batch: int = 50,
                model_param_list: list[dict] | None = None, max_terms: int | None = None,
                failures: dict | None = None, weights=MODEL_ONLY,
                top_ids: list[list[str]] | None = None) -> list[list[str] | None]:
    """Ranked doc ids for many queries, ``batch`` queries per ``_msearch`` round trip (run
    one at a time by the node for models that are not thread-safe in the plugin).
    ``max_terms``: long queries fitted to the cluster's clause budget
    (:mod:`ltr_toolkit.data.querytext`). ``failures``: see :func:`_msearch`."""
    bodies = [search_body(first_stage, fit_params(p, max_terms), model, size, window, store,
                          fit_params(model_param_list[i], max_terms) if model_param_list else None,
                          source=None, weights=weights, top_ids=top_ids[i] if top_ids else None)
              for i, p in enumerate(param_list)]
    concurrency = None if not model or thread_safe(conn, model, store) else 1
    return [None if r is None else [h["_id"] for h in r["hits"]["hits"]]
            for r in _msearch(conn, index, bodies, store, batch, concurrency, failures,
                              first_stage.search_type)]
