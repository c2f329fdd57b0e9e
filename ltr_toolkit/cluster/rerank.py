"""First-stage retrieval and second-stage ``sltr`` rescoring.

The integration point for users' own search code is :func:`rescore_clause`: put it under
``"rescore"`` in any search body, with the model's parameters (``keywords``, any
per-query parameters, and — when its feature set uses them — the first stage's top ids,
see ``params``).
"""

from __future__ import annotations

from .client import Connection, call, item_error, msearch_items
from .firststage import DEFAULT_FIELDS, FirstStage
from .params import derived_depth, model_params, thread_safe, with_first_stage_ids
from .store import sltr

__all__ = ["DEFAULT_FIELDS", "FirstStage", "rescore_clause", "search_body", "search",
           "msearch_ids", "rerank_ids"]


def rescore_clause(model: str, params: dict, window: int = 100, query_weight: float = 0.0,
                   rescore_query_weight: float = 1.0, store: str | None = None,
                   active_features: list[str] | None = None) -> dict:
    """The ``rescore`` part of a search request that reranks the top ``window`` hits of the
    first stage with an LTR model. With ``query_weight`` 0 the model's score alone orders
    the window (the usual LTR setting); documents below the window keep their first-stage
    order after it. OpenSearch applies ``window_size`` per shard: on an index of S shards,
    each shard's top ``window`` is rescored (up to S x window documents), while logged
    candidates (``--candidates K``) are the global top K; on one shard they are the same."""
    return {"window_size": int(window),
            "query": {"rescore_query": sltr(params, model=model, store=store,
                                            active_features=active_features),
                      "query_weight": float(query_weight),
                      "rescore_query_weight": float(rescore_query_weight)}}


def search_body(first_stage: FirstStage, params: dict, model: str | None = None, size: int = 10,
                window: int = 100, store: str | None = None, model_params: dict | None = None,
                source=("title",)) -> dict:
    body = {"query": first_stage.query(params), "size": int(size),
            "_source": list(source) if source else False}
    if model:
        body["rescore"] = rescore_clause(model, model_params or params, window, store=store)
    return body


def _msearch(conn: Connection, index: str, bodies: list[dict], store, batch: int,
             concurrency: int | None = None) -> list[dict]:
    out: list[dict] = []
    for start in range(0, len(bodies), batch):
        for r in msearch_items(conn, index, bodies[start:start + batch], concurrency=concurrency):
            if "error" in r:
                raise item_error(r, conn, store)
            out.append(r)
    return out


def msearch_ids(conn: Connection, index: str, param_list: list[dict], first_stage: FirstStage,
                model: str | None = None, size: int = 10, window: int = 100,
                store: str | None = None, batch: int = 50,
                model_param_list: list[dict] | None = None) -> list[list[str]]:
    """Ranked doc ids for many queries, ``batch`` queries per ``_msearch`` round trip (run
    one at a time by the node for models that are not thread-safe in the plugin)."""
    bodies = [search_body(first_stage, p, model, size, window, store,
                          model_param_list[i] if model_param_list else None, source=None)
              for i, p in enumerate(param_list)]
    concurrency = None if not model or thread_safe(conn, model, store) else 1
    return [[h["_id"] for h in r["hits"]["hits"]]
            for r in _msearch(conn, index, bodies, store, batch, concurrency)]


def serving_params(conn: Connection, index: str, param_list: list[dict], first_stage: FirstStage,
                   model: str, store: str | None = None, batch: int = 50,
                   first_ids: list[list[str]] | None = None) -> list[dict]:
    """The model's parameters per query: with the first stage's top ids when its feature
    set uses them (one first-stage round trip, unless ``first_ids``, fetched with a size
    of at least that depth, are given)."""
    depth = derived_depth(model_params(conn, model, store))
    if depth == 0:
        return param_list
    if first_ids is None:
        first_ids = msearch_ids(conn, index, param_list, first_stage, None, depth, depth, store, batch)
    return [with_first_stage_ids(p, ids, depth) for p, ids in zip(param_list, first_ids)]


def rerank_ids(conn: Connection, index: str, param_list: list[dict], first_stage: FirstStage,
               model: str, size: int = 10, window: int = 100, store: str | None = None,
               batch: int = 50, first_ids: list[list[str]] | None = None) -> list[list[str]]:
    """Reranked doc ids: the first stage, then the ``sltr`` rescore of its top ``window``."""
    mp = serving_params(conn, index, param_list, first_stage, model, store, batch, first_ids)
    return msearch_ids(conn, index, param_list, first_stage, model, size, window, store, batch, mp)


def search(conn: Connection, index: str, params: dict, first_stage: FirstStage | None = None,
           model: str | None = None, size: int = 10, window: int = 100,
           store: str | None = None) -> list[dict]:
    """Hits as dicts: rank, id, score, title (one query; two round trips when the model
    needs the first stage's ids)."""
    first_stage = first_stage or FirstStage.from_fields()
    mp = serving_params(conn, index, [params], first_stage, model, store)[0] if model else None
    body = search_body(first_stage, params, model, size, window, store, mp)
    resp = call(conn, conn.client().search, index=index, body=body, store=store)
    return [{"rank": r + 1, "id": h["_id"], "score": h["_score"],
             "title": (h.get("_source") or {}).get("title", "")}
            for r, h in enumerate(resp["hits"]["hits"])]
