"""Feature values without the LTR plugin: each feature's query as a named query.

What Elasticsearch's native learning to rank computes for a feature is its query's
score on the document (absent when the document does not match), and eland's feature
logger reads the same number from a search: per query, one search over its candidate
ids whose ``bool.should`` holds every feature's rendered template wrapped as
``{"bool": {"must": QUERY, "_name": FEATURE}}``, sent with
``include_named_queries_score=true``; each hit's ``matched_queries`` then maps the
features it matches to their scores (Elasticsearch >= 8.8, OpenSearch >= 2.13).

The templates are rendered here (:mod:`ltr_toolkit.data.mustache`, the plugin's rules),
so the query of a feature is the one the plugin scores, and the same on a cluster
without the plugin.

One ``_search`` per query: OpenSearch 3.6 takes ``include_named_queries_score`` only as
a parameter of ``_search`` (``_msearch`` refuses it in its URL and in an item's header,
and ignores it in an item's body: names without scores), so the searches of a round go
out side by side (:func:`search_each`), each asked again with backoff when the node is
overloaded.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from ..data.mustache import render_query
from ..errors import ClusterError
from ..transport.client import (RETRY_BUDGET, Connection, _backoff, _partial_as_error,
                                _transient, translate)
from opensearchpy import exceptions as E

#: the URL parameter that makes ``matched_queries`` a map of name -> score
SCORES = {"include_named_queries_score": "true"}
#: searches of one round in flight at once
SEARCH_WORKERS = 4
_LOCK = threading.Lock()


def named_clauses(features: list[dict], params: dict) -> list[dict]:
    """Every feature's query for one query's ``params``, named after the feature."""
    return [{"bool": {"must": render_query(f, params), "_name": f["name"]}} for f in features]


def named_body(features: list[dict], params: dict, docids: list[str]) -> dict:
    """The search that logs one query's ``docids``: each hit's ``matched_queries`` holds
    the value of every feature the document matches."""
    return {"size": len(docids), "_source": False,
            "query": {"bool": {"should": named_clauses(features, params),
                               "filter": [{"ids": {"values": list(docids)}}]}}}


def named_values(hit: dict, names: list[str]) -> list[float | None]:
    """A hit's feature values in ``names`` order (None: the feature did not match)."""
    matched = hit.get("matched_queries", {})
    if isinstance(matched, list):
        raise ClusterError("the cluster named the matching features without their scores",
                           "named-query logging needs include_named_queries_score "
                           "(Elasticsearch >= 8.8, OpenSearch >= 2.13)")
    return [float(matched[n]) if n in matched else None for n in names]


def _search_item(conn: Connection, index: str, body: dict, params: dict, stats,
                 retries: int = 8, base: float = 0.25) -> dict:
    """One search as an ``_msearch`` item would be: the response, or ``{"status",
    "error"}`` for a query the cluster refuses; overloaded answers asked again."""
    waited = [0.0, RETRY_BUDGET]
    c = conn.client()
    for attempt in range(retries + 1):
        try:
            item = _partial_as_error(c.search(index=index, body=body, params=params))
        except E.ConnectionTimeout:
            item = {"status": 504, "error": "timeout"}
        except E.TransportError as exc:
            if not isinstance(exc.status_code, int):       # no answer at all: the run stops
                raise translate(exc, conn) from None
            info = exc.info if isinstance(exc.info, dict) else {}
            item = {"status": exc.status_code, "error": info.get("error", str(exc.error))}
        if not (_transient(item.get("status")) and "error" in item):
            return item
        if attempt == retries or not _backoff(attempt, base, waited):
            return item
        if stats is not None:
            with _LOCK:
                stats["retried"] = stats.get("retried", 0) + 1
    return item


def search_each(conn: Connection, index: str, bodies: list[dict],
                search_type: str | None = None, stats: dict | None = None) -> list[dict]:
    """``bodies`` as ``_search`` requests with :data:`SCORES`, up to
    :data:`SEARCH_WORKERS` at once; items in order, as :func:`msearch_items` returns them."""
    params = dict(SCORES, **({"search_type": search_type} if search_type else {}))
    if not bodies:
        return []
    with ThreadPoolExecutor(max_workers=min(SEARCH_WORKERS, len(bodies))) as pool:
        return list(pool.map(lambda b: _search_item(conn, index, b, params, stats), bodies))
