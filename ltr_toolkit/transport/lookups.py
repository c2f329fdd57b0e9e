"""Cluster facts that serving reads once and then keeps for a while: a stored model's
definition and how many shards a search on an index touches.

A reranked query used to fetch its model's definition from the store before searching
(one more round trip per query). Models are immutable in the plugin under a name (a new
version gets a new name), so the definition is kept per process for :data:`TTL`
seconds; a model deleted and re-created under the same name by another process is seen
after at most that long (``ltr model delete`` in this process forgets it at once).

A model's query plan (``query.prepare.model_plan``: its contract, parameters, budget,
shard count, made from those facts) is kept here too, under the model's name and without
expiry: serving a query then sends the search alone.
"""

from __future__ import annotations

import threading
import time

from .client import Connection, call, request

#: seconds a looked-up fact is kept
TTL = 60.0

_lock = threading.Lock()
_facts: dict[tuple, tuple[float, object]] = {}


def _key(conn: Connection, *parts) -> tuple:
    return (conn.display_url, *parts)


def remembered(key: tuple, compute):
    """``compute()``'s value for ``key``, computed at most once per :data:`TTL` (None,
    e.g. a model not found, is not kept)."""
    now = time.monotonic()
    with _lock:
        hit = _facts.get(key)
    if hit is not None and now - hit[0] < TTL:
        return hit[1]
    value = compute()
    if value is not None:
        with _lock:
            _facts[key] = (now, value)
    return value


def forget_model(conn: Connection, model: str, store: str | None) -> None:
    forget(conn, "model", store, model)


def forget(conn: Connection, *parts) -> None:
    """Drop a kept fact (e.g. an index's vector record this process just rewrote); a
    model's definition or contract (``"model"`` / ``"contract"``, store, model) takes the
    model's query plans with it."""
    with _lock:
        _facts.pop(_key(conn, *parts), None)
        if parts[:1] in (("model",), ("contract",)):
            _plans.pop(_key(conn, *parts[1:]), None)


#: query plans per (connection, store, model): {settings: plan}, kept without expiry
_plans: dict[tuple, dict] = {}


def planned(conn: Connection, store: str | None, model: str, settings, make):
    """The stored ``model``'s query plan for ``settings``, ``make()`` at the first call
    and then kept: a model's name never changes meaning in the plugin (a new version is a
    new name, hence a new plan), so no expiry; dropped with the model or its contract
    (:func:`forget`)."""
    key = _key(conn, store, model)
    with _lock:
        plan = _plans.get(key, {}).get(settings)
    if plan is None:
        plan = make()
        with _lock:
            _plans.setdefault(key, {})[settings] = plan
    return plan


def replanned(conn: Connection, store: str | None, model: str, old, new) -> None:
    """Keep ``new`` wherever ``old`` was kept for the model."""
    with _lock:
        kept = _plans.get(_key(conn, store, model), {})
        for settings, plan in kept.items():
            if plan is old:
                kept[settings] = new


def fact(conn: Connection, parts: tuple, compute):
    """``compute()``'s value for this connection and ``parts``, kept a while."""
    return remembered(_key(conn, *parts), compute)


def model_document(conn: Connection, model: str, store: str | None, fetch):
    """The stored model's definition (``fetch()`` reads it from the store)."""
    return remembered(_key(conn, "model", store, model), fetch)


def shard_count(conn: Connection, index: str) -> int:
    """How many shards a search on ``index`` (a name, alias or pattern) queries; one
    copy of each counts. On one shard, OpenSearch's per-shard rescore window is the
    global top ``window``."""
    def count() -> int:
        resp = call(conn, conn.client().search_shards, index=index)
        return max(1, len(resp.get("shards", [])))
    return remembered(_key(conn, "shards", index), count)
