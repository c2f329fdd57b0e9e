"""User Behavior Insights indices on a cluster: their mappings, reading events over a time
range into :mod:`ltr_toolkit.clicks.events.eventlog`, and writing (simulated) events.

The mappings are the UBI plugin's own (``opensearch-project/user-behavior-insights``,
``events-mapping.json`` / ``queries-mapping.json``): keyword ids, ``timestamp`` a date,
``event_attributes.position.ordinal`` an integer, ``event_attributes.object.object_id`` a
keyword. Reading takes each index's documents with ``timestamp`` in ``[since, until)``
with a point in time and search_after (:mod:`ltr_toolkit.transport.pit`), the next page
fetched while the last is added, each page parsed by pyarrow (:mod:`.pages`, the file
reader's columns):

* the query records in order of time, so the searches are numbered in order of time
  (the held-out split of :mod:`ltr_toolkit.clicks.judging.heldout` is by time);
* the events in one slice per shard (up to :data:`MAX_SLICES`), side by side: their
  order does not matter (a search's events are told apart by position), except for a
  search without a query record, numbered when its first event arrives.

Scroll, in index order, on a cluster without a PIT API.
"""

from __future__ import annotations

import datetime as _dt
import json

from ...errors import ClusterError, UserError
from ...transport.client import Connection, call, request
from ...transport.engine import detect
from ...transport.lookups import shard_count
from ...transport.pit import PAGE, NoPit, pages
from opensearchpy import helpers
from .eventlog import CLICK_ACTIONS, IMPRESSION_ACTIONS, EventReader
from .pages import add_table, page_schemas, parse_page

QUERIES, EVENTS = "ubi_queries", "ubi_events"
#: the index kinds (as a bulk action naming the index: :func:`.pages.add_table`)
QUERY_KIND, EVENT_KIND = 1, 2
#: the read's order: time, then the PIT's tiebreaker (a document without a valid
#: timestamp, kept by ``ignore_malformed``, comes last)
SORT = [{"timestamp": {"order": "asc", "unmapped_type": "date"}}, "_shard_doc"]
#: the most slices an events index is read in (one per shard up to this)
MAX_SLICES = 4

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
    """Create both indices with the UBI mappings (an existing one is kept unless
    ``recreate``), in the connected engine's types (``transport.engine``)."""
    c = conn.client()
    props = dict(QUERIES_MAPPING["properties"], query_attributes={"type": detect(conn).flat_object})
    for index, mapping in ((queries, dict(QUERIES_MAPPING, properties=props)), (events, EVENTS_MAPPING)):
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
                events: str = EVENTS, size: int = PAGE) -> dict:
    """Feed both indices' documents matching ``query`` to ``reader`` (an
    :class:`ltr_toolkit.clicks.events.eventlog.EventReader`), each in order of ``timestamp``;
    returns the counts read."""
    c = conn.client()
    for index in (events,):
        if not call(conn, c.indices.exists, index=index):
            raise ClusterError(f"index {index} does not exist on {conn.display_url}",
                               "point --events-index at your UBI events, or read a file")
    counts = {}
    for index, kind in ((queries, QUERY_KIND), (events, EVENT_KIND)):
        if not call(conn, c.indices.exists, index=index):
            counts[index] = 0           # events alone are usable (user_query on each)
            continue
        counts[index] = read_index(conn, reader, index, kind, query, size)
    return counts


def read_index(conn: Connection, reader, index: str, kind: int, query: dict, size: int = PAGE) -> int:
    """One index's matching documents into ``reader`` (``kind``: :data:`QUERY_KIND` or
    :data:`EVENT_KIND`): with a point in time and search_after, pages parsed by pyarrow;
    with scroll where the cluster has no PIT API."""
    add, totals = _page_adder(reader, index, kind), []
    slices = 1 if kind == QUERY_KIND else min(shard_count(conn, index), MAX_SLICES)
    try:
        n = sum(map(add, pages(conn, index, query, SORT if slices == 1 else SORT[1:], size,
                               slices=slices, totals=totals)))
    except NoPit:
        return call(conn, _scan, conn.client(), index, query, size, _doc_adder(reader, kind))
    if n != sum(totals):
        raise ClusterError(f"{conn.display_url} returned {n:,} of the {sum(totals):,} documents of {index} "
                           "the read should have (paging a sort with ties loses hits on some OpenSearch "
                           "versions, opensearch-project/OpenSearch#15869)",
                           "upgrade the cluster, or export the indices and read the file")
    return n


def _doc_adder(reader, kind: int):
    """``add(source, where)`` of one document of an index of ``kind``."""
    add = reader.add_query if kind == QUERY_KIND else reader.add_event

    def one(doc, where):
        if isinstance(doc, dict):
            add(doc, where)
        else:
            reader.log.problems.add("not_an_event", 1, where)
    return one


def _page_adder(reader, index: str, kind: int):
    """``add(page text) -> documents``: the page parsed by pyarrow (the fields the click
    models read; the events' without ``query_attributes`` first) and added as columns
    (:func:`.pages.add_table`), or parsed by ``json`` and added one by one where it cannot be."""
    schemas = page_schemas(kind == EVENT_KIND)
    one = _doc_adder(reader, kind)

    def add(text: bytes) -> int:
        for schema in schemas:
            got = parse_page(text, schema)
            if got is not None:
                table, ids = got
                if add_table(reader, table, kind, lambda r: f"{index}/{ids[r].as_py()}"):
                    return table.num_rows
                break
        hits = (json.loads(text).get("hits") or {}).get("hits") or []
        for hit in hits:
            one(hit.get("_source"), f"{index}/{hit.get('_id')}")
        return len(hits)
    return add


def _scan(c, index, query, size, add) -> int:
    """Stream one index's matching documents into ``add`` with scroll (one page in
    memory), for clusters without a PIT API: in index order, not by time (a scroll sorted
    by ``timestamp`` returned half the documents of an index of many equal timestamps on
    OpenSearch 3.6.0, where the PIT read returns them all)."""
    n = 0
    for hit in helpers.scan(c, index=index, query={"query": query}, size=size):
        add(hit.get("_source"), f"{index}/{hit['_id']}")
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
