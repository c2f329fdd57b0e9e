"""First-stage retrieval and second-stage ``sltr`` rescoring: the integration point for
users' own search code is :func:`rescore_clause` (put it under ``"rescore"`` in any search
body) and :func:`search_body`."""

from __future__ import annotations

from .client import Connection, call, item_error
from .store import sltr

DEFAULT_FIELDS = ("title", "abstract")


def baseline_query(text: str, fields=DEFAULT_FIELDS) -> dict:
    """The first stage: BM25 over ``fields`` (best field, with a tie breaker)."""
    return {"multi_match": {"query": text, "fields": list(fields), "type": "best_fields",
                            "tie_breaker": 0.3}}


def rescore_clause(model: str, params: dict, window: int = 100, query_weight: float = 0.0,
                   rescore_query_weight: float = 1.0, store: str | None = None,
                   active_features: list[str] | None = None) -> dict:
    """The ``rescore`` part of a search request that reranks the top ``window`` hits of the
    first stage with an LTR model. With ``query_weight`` 0 the model's score alone orders
    the window (the usual LTR setting); documents below the window keep their first-stage
    order after it."""
    return {"window_size": int(window),
            "query": {"rescore_query": sltr(params, model=model, store=store,
                                            active_features=active_features),
                      "query_weight": float(query_weight),
                      "rescore_query_weight": float(rescore_query_weight)}}


def search_body(text: str, model: str | None = None, size: int = 10, window: int = 100,
                store: str | None = None, fields=DEFAULT_FIELDS, params: dict | None = None,
                source=("title",)) -> dict:
    body = {"query": baseline_query(text, fields), "size": int(size),
            "_source": list(source) if source else False}
    if model:
        body["rescore"] = rescore_clause(model, params or {"keywords": text}, window, store=store)
    return body


def search(conn: Connection, index: str, text: str, model: str | None = None, size: int = 10,
           window: int = 100, store: str | None = None, fields=DEFAULT_FIELDS) -> list[dict]:
    """Hits as dicts: rank, id, score, title."""
    body = search_body(text, model, size, window, store, fields)
    resp = call(conn, conn.client().search, index=index, body=body, store=store)
    return [{"rank": r + 1, "id": h["_id"], "score": h["_score"],
             "title": (h.get("_source") or {}).get("title", "")}
            for r, h in enumerate(resp["hits"]["hits"])]


def msearch_ids(conn: Connection, index: str, texts: list[str], model: str | None = None,
                size: int = 10, window: int = 100, store: str | None = None,
                fields=DEFAULT_FIELDS, batch: int = 50) -> list[list[str]]:
    """Ranked doc ids for many queries, ``batch`` queries per ``_msearch`` round trip."""
    out: list[list[str]] = []
    c = conn.client()
    for start in range(0, len(texts), batch):
        lines = []
        for t in texts[start:start + batch]:
            lines.append({"index": index})
            lines.append(search_body(t, model, size, window, store, fields, source=None))
        resp = call(conn, c.msearch, body=lines, store=store)
        for r in resp["responses"]:
            if "error" in r:
                raise item_error(r, conn, store)
            out.append([h["_id"] for h in r["hits"]["hits"]])
    return out
