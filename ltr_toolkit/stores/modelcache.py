"""The plugin's model cache: how much each node keeps, and what a model takes in it.

Each node compiles a model on first use and keeps it in a cache bounded by the node
setting ``ltr.caches.max_mem`` (default: 10 MB, or a tenth of the heap when that is
less). A model larger than the cache is compiled again for every query; models that
together exceed it evict each other. The size a model takes is what the plugin itself
accounts (``ramBytesUsed``), read from ``GET _ltr/_cachestats`` before and after one
query loads the new model.
"""

from __future__ import annotations

import re

from ..transport.client import Connection, request
from .params import QUERY_VECTOR, model_params, placeholder_params
from ..indexing.vectors import placeholder_vector
from .store import sltr

DEFAULT_MAX = 10 * 1024 * 1024
_UNITS = {"b": 1, "kb": 1024, "mb": 1024 ** 2, "gb": 1024 ** 3, "tb": 1024 ** 4}


def _bytes(value: str, heap: int) -> int | None:
    m = re.fullmatch(r"\s*([\d.]+)\s*(%|[kmgt]?b)?\s*", str(value).lower())
    if not m:
        return None
    number, unit = float(m.group(1)), m.group(2) or "b"
    return int(heap * number / 100) if unit == "%" else int(number * _UNITS[unit])


def cache_limit(conn: Connection) -> int:
    """The smallest node's model cache, in bytes."""
    nodes = request(conn, "GET", "/_nodes/settings,jvm").get("nodes", {})
    limits = []
    for node in nodes.values():
        heap = node.get("jvm", {}).get("mem", {}).get("heap_max_in_bytes") or 0
        setting = node.get("settings", {}).get("ltr", {}).get("caches", {}).get("max_mem")
        given = _bytes(setting, heap) if setting is not None else None
        limits.append(given if given is not None else min(DEFAULT_MAX, heap // 10 or DEFAULT_MAX))
    return min(limits, default=DEFAULT_MAX)


def _per_node(conn: Connection) -> dict[str, dict]:
    """{node: {"ram", "count"}} of the models each node's cache holds (all stores)."""
    stats = request(conn, "GET", "/_ltr/_cachestats")
    return {n: v.get("stats", {}).get("models", {}) for n, v in stats.get("nodes", {}).items()}


def measure_model(conn: Connection, model: str, store: str | None, index: str) -> tuple[int | None, bool]:
    """(bytes the model takes in one node's cache, whether any node kept it) after one
    query on ``index`` loads a model no node has used yet (as after its upload). Not kept:
    larger than the cache, or evicted at once."""
    names = model_params(conn, model, store)
    vector = None
    if QUERY_VECTOR in names:
        vector = placeholder_vector(conn, index)
    clause = sltr(placeholder_params(names, vector), model=model, store=store)
    before = _per_node(conn)
    request(conn, "POST", f"/{index}/_search", body={"size": 0, "query": clause})
    grown = [a.get("ram", 0) - before.get(n, {}).get("ram", 0) for n, a in _per_node(conn).items()
             if a.get("count", 0) > before.get(n, {}).get("count", 0)]
    return (int(max(grown)) if grown else None), bool(grown)


def cache_warnings(conn: Connection, model: str, store: str | None,
                   index: str | None) -> tuple[dict, list[str]]:
    """({"model_bytes", "kept", "cached_bytes", "limit_bytes"}, warnings) right after an
    upload; without ``index`` the model is not loaded, and only the cache's use is read."""
    limit = cache_limit(conn)
    size, kept = measure_model(conn, model, store, index) if index else (None, True)
    cached = max((v.get("ram", 0) for v in _per_node(conn).values()), default=0)
    info = {"model_bytes": size, "kept": kept, "cached_bytes": int(cached), "limit_bytes": limit}
    mb = 1024 ** 2
    if not kept:
        return info, [f"model {model} did not stay in the plugin's cache (ltr.caches.max_mem "
                      f"{limit / mb:.1f} MB): it is larger, and is compiled again for every query; "
                      "raise ltr.caches.max_mem on every node, or train a smaller model"]
    if cached > limit * 0.9:
        return info, [f"the models cached on a node take {cached / mb:.1f} MB of ltr.caches.max_mem "
                      f"({limit / mb:.1f} MB): served models may evict each other; prune old "
                      "versions (ltr model prune) or raise the limit"]
    return info, []
