"""User Behavior Insights indices on a cluster: their mappings, reading events over a time
range into :mod:`ltr_toolkit.clicks.events`, and writing (simulated) events.

The mappings are the UBI plugin's own (``opensearch-project/user-behavior-insights``,
``events-mapping.json`` / ``queries-mapping.json``): keyword ids, ``timestamp`` a date,
``event_attributes.position.ordinal`` an integer, ``event_attributes.object.object_id`` a
keyword. Reading uses a scroll over each index, ``timestamp`` in ``[since, until)``.
"""

from __future__ import annotations

import datetime as _dt

from ..errors import ClusterError, UserError
from ..transport.client import Connection, call, request
from opensearchpy import helpers
from .events import CLICK_ACTIONS, IMPRESSION_ACTIONS, EventReader

QUERIES, EVENTS = "ubi_queries", "ubi_events"

_KW = {"type": "keyword", "ignore_above": 100}
EVENTS_MAPPING = {"properties": {
    "application": {"type": "keyword", "ignore_above": 256},
    "action_name": _KW, "client_id": _KW, "query_id": _KW, "session_id": _KW,
    "message": {"type": "keyword", "ignore_above": 1024}, "message_type": _KW,
    "user_query": {"type": "keyword"},
    "timestamp": {"type": "date", "format": "strict_date_time", "ignore_malformed": True},
    "event_attributes": {"dynamic": True, "properties": {
        "position": {"properties": {n: {"type": "integer"} for n in
                                    ("ordinal", "x", "y", "page_depth", "scroll_depth")}},
        "object": {"properties": {
            "internal_id": {"type": "keyword"},
            "object_id": {"type": "keyword", "ignore_above": 256},
            "object_id_field": _KW, "name": {"type": "keyword", "ignore_above": 256},
            "object_detail": {"type": "object"}}}}}}}
QUERIES_MAPPING = {"dynamic": False, "properties": {
    "timestamp": {"type": "date", "format": "strict_date_time"},
    "query_id": _KW, "query": {"type": "text"}, "query_response_id": _KW,
    "query_response_hit_ids": {"type": "keyword"}, "user_query": {"type": "keyword"},
    "query_attributes": {"type": "flat_object"}, "client_id": _KW, "application": _KW}}


def create_indices(conn: Connection, queries: str = QUERIES, events: str = EVENTS,
                   recreate: bool = False) -> None:
    """Create both indices with the UBI mappings (an existing one is kept unless ``recreate``)."""
    c = conn.client()
    for index, mapping in ((queries, QUERIES_MAPPING), (events, EVENTS_MAPPING)):
        if call(conn, c.indices.exists, index=index):
            if not recreate:
                continue
            call(conn, c.indices.delete, index=index)
        call(conn, c.indices.create, index=index,
             body={"settings": {"number_of_shards": 1, "number_of_replicas": 0}, "mappings": mapping})


def write_documents(conn: Connection, docs, queries: str = QUERIES, events: str = EVENTS,
                    chunk: int = 2000) -> dict:
    """Bulk-index ``(kind, document)`` pairs (kind ``ubi_queries`` / ``ubi_events``, as
    :func:`ltr_toolkit.clicks.simulate.ubi_documents` yields); refreshed at the end."""
    names = {QUERIES: queries, EVENTS: events}
    actions = ({"_index": names[kind], "_source": doc} for kind, doc in docs)
    ok, errors = call(conn, helpers.bulk, conn.client(), actions, chunk_size=chunk,
                      raise_on_error=False)
    call(conn, conn.client().indices.refresh, index=f"{queries},{events}")
    if errors:
        raise ClusterError(f"{len(errors)} UBI documents were not indexed (e.g. {errors[0]})")
    return {"indexed": ok}


def time_range(since: str | None = None, until: str | None = None, days: float | None = None,
               now: _dt.datetime | None = None) -> dict:
    """The ``range`` on ``timestamp``: ``[since, until)``; ``days``: the last N days up to now."""
    if days is not None:
        if days <= 0:
            raise UserError(f"--days {days:g}: expected a number of days > 0")
        now = now or _dt.datetime.now(_dt.timezone.utc)
        since = (now - _dt.timedelta(days=days)).isoformat(timespec="seconds")
        until = until or now.isoformat(timespec="seconds")
    rng = {}
    if since:
        rng["gte"] = since
    if until:
        rng["lt"] = until
    return {"range": {"timestamp": rng}} if rng else {"match_all": {}}


def read_events(conn: Connection, reader, query: dict, queries: str = QUERIES,
                events: str = EVENTS, size: int = 5000) -> dict:
    """Feed both indices' documents matching ``query`` to ``reader`` (an
    :class:`ltr_toolkit.clicks.events.EventReader`); returns the counts read."""
    c = conn.client()
    for index in (events,):
        if not call(conn, c.indices.exists, index=index):
            raise ClusterError(f"index {index} does not exist on {conn.display_url}",
                               "point --events-index at your UBI events, or read a file")
    counts = {}
    for index, add in ((queries, reader.add_query), (events, reader.add_event)):
        if not call(conn, c.indices.exists, index=index):
            counts[index] = 0           # events alone are usable (user_query on each)
            continue
        counts[index] = call(conn, _scan, c, index, query, size, add)
    return counts


def _scan(c, index, query, size, add) -> int:
    """Stream one index's matching documents into ``add`` (one scroll page in memory)."""
    n = 0
    for hit in helpers.scan(c, index=index, query={"query": query}, size=size):
        add(hit["_source"], f"{index}/{hit['_id']}")
        n += 1
    return n


def count(conn: Connection, index: str) -> int:
    return int(request(conn, "GET", f"/{index}/_count")["count"])


def read_event_log(conn: Connection, query: dict, queries: str = QUERIES, events: str = EVENTS,
                   impression_actions=None, click_actions=None):
    """The cluster's UBI events matching ``query`` as an EventLog; none is a user error."""
    reader = EventReader(impression_actions or IMPRESSION_ACTIONS, click_actions or CLICK_ACTIONS)
    counts = read_events(conn, reader, query, queries, events)
    log = reader.finish()
    if not len(log):
        raise UserError(f"no impression or click events in {events} on {conn.display_url} "
                        f"for {query} ({counts[events]} documents read)",
                        "widen the time range (--days/--since/--until)")
    return log
