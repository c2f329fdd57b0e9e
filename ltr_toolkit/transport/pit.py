"""Every document of an index that a query matches, page by page in a stable order: a
point in time (PIT) and ``search_after``, as both engines now recommend over scroll for
deep reads.

A PIT freezes the index's segments for the read (documents indexed meanwhile are not
seen, none is seen twice); each page is a search of the PIT sorted by the caller's sort
(it must end in the ``_shard_doc`` tiebreaker), after the last page's sort values.
OpenSearch (2.4 or later) opens one with ``POST /INDEX/_search/point_in_time`` and closes
it with ``DELETE /_search/point_in_time``; Elasticsearch (7.10 or later) with
``POST /INDEX/_pit`` and ``DELETE /_pit``; the searches are alike. :func:`open_pit`
returns None where neither answers (an older cluster): the caller reads with scroll.
Each page's response carries the PIT's id, which Elasticsearch may change from one
search to the next ("always use the most recently received ID"): each stream sends the
last id it received, and the PIT is closed with the last one.

:func:`pages` fetches the next page in a second thread while the caller works on the
last one: the node serialises page k+1 while this process parses and adds page k (the
next page's ``search_after`` is read from the end of the page's text, a few bytes; the
whole page is parsed once, by the caller).

With ``slices`` (``"slice": {"id": i, "max": n}`` on the same PIT), n threads read n
slices side by side, so the shards serialise their pages at once; the order is then
the arrival's. With no more slices than shards each slice reads whole shards; with more,
each filters every document by its id's hash, which measured slower than one stream
(``benchmarks/results/ubi_reading.md``): callers slice by the number of shards.
"""

from __future__ import annotations

import json
import queue
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from opensearchpy import exceptions as E

from .client import Connection, call, request, translate

KEEP_ALIVE = "2m"
PAGE = 5000
_TOTAL = re.compile(rb'"total"\s*:\s*\{\s*"value"\s*:\s*(\d+)')
_PIT_ID = re.compile(rb'"pit_id"\s*:\s*"([^"]+)"')
#: what a cluster answers to the other engine's (or an older version's) PIT request
NOT_THIS_API = (400, 404, 405)


class NoPit(Exception):
    """The cluster has no point-in-time API (read with scroll)."""


@dataclass
class Pit:
    """An open point in time: its id (the last one a page returned) and the engine's API
    (``opensearch``/``elasticsearch``)."""
    id: str
    api: str


def open_pit(conn: Connection, index: str, keep_alive: str = KEEP_ALIVE) -> Pit | None:
    """A PIT over ``index``; None when the cluster has no PIT API."""
    for api, path, key in (("opensearch", f"/{index}/_search/point_in_time", "pit_id"),
                           ("elasticsearch", f"/{index}/_pit", "id")):
        try:
            got = conn.client().transport.perform_request("POST", path, params={"keep_alive": keep_alive})
        except (E.TransportError, E.ConnectionError) as exc:
            if getattr(exc, "status_code", None) in NOT_THIS_API:
                continue
            raise translate(exc, conn) from None
        if isinstance(got, dict) and got.get(key):
            return Pit(str(got[key]), api)
    return None


def close_pit(conn: Connection, pit: Pit) -> None:
    """Release the PIT (it would expire after its keep-alive anyway)."""
    if pit.api == "opensearch":
        request(conn, "DELETE", "/_search/point_in_time", body={"pit_id": [pit.id]})
    else:
        request(conn, "DELETE", "/_pit", body={"id": pit.id})


def page_body(pit_id: str, query: dict, sort: list, size: int, after, keep_alive: str) -> dict:
    """A page's search; the first (no ``after``) also counts every match exactly."""
    body = {"size": size, "query": query, "sort": sort, "track_total_hits": after is None,
            "pit": {"id": pit_id, "keep_alive": keep_alive}}
    if after is not None:
        body["search_after"] = after
    return body


def fetch(conn: Connection, body: dict) -> bytes:
    """One search's response as the node sent it (no decoding: the caller parses), only
    its total and its hits' ids, sources and sort values."""
    node = conn.client().transport.get_connection()
    _, _, text = call(conn, node.perform_request, "POST", "/_search",
                      params={"filter_path": "pit_id,hits.total.value,hits.hits._id,"
                                              "hits.hits._source,hits.hits.sort"},
                      body=json.dumps(body).encode())
    return text.encode() if isinstance(text, str) else text


def pit_id(text: bytes, default: str) -> str:
    """The PIT id a page's response carries before its hits (``pit_id``: both engines),
    else ``default``."""
    end = text.find(b'"hits"', 0, 65536)
    got = _PIT_ID.search(text, 0, end if end >= 0 else 65536)
    return got.group(1).decode() if got else default


def total(text: bytes) -> int:
    """The exact number of matches a first page reports (before its hits, after its PIT id)."""
    got = _TOTAL.search(text, 0, 65536)
    if got is None:
        raise ValueError(f"no total in the search response {text[:80]!r}")
    return int(got.group(1))


def last_sort(text: bytes):
    """The last hit's sort values, read from the end of a page's text (a hit's ``sort``
    comes after its ``_source``, so the last ``"sort"`` key is the last hit's); None for
    a page without hits."""
    at = text.rfind(b'"sort"')
    if at < 0:
        return None
    tail = text[at + 6:at + 6 + 4096].decode("utf-8", "replace").lstrip()
    if not tail.startswith(":"):
        raise ValueError(f"unexpected search response near {tail[:40]!r}")
    return json.JSONDecoder().raw_decode(tail[1:].lstrip())[0]


def pages(conn: Connection, index: str, query: dict, sort: list, size: int = PAGE,
          keep_alive: str = KEEP_ALIVE, slices: int = 1, totals: list | None = None):
    """Yields the text of every page of ``index``'s documents matching ``query``: in the
    order of ``sort`` (ending in ``"_shard_doc"``) with one slice, the next page fetched
    meanwhile; with ``slices`` > 1, the slices read side by side and their pages in the
    order they arrive. ``totals`` gets each slice's exact number of matches (their sum:
    what the pages should hold; some OpenSearch versions lose hits paging a sort with
    ties, opensearch-project/OpenSearch#15869). Raises :class:`NoPit` when the cluster
    has no PIT API (read with scroll instead)."""
    pit = open_pit(conn, index, keep_alive)
    if pit is None:
        raise NoPit(f"{conn.display_url} has no point-in-time API")
    try:
        if slices > 1:
            yield from _sliced(conn, pit, query, sort, size, keep_alive, slices, totals)
        else:
            yield from _stream(conn, pit, query, sort, size, keep_alive, None, totals)
    finally:
        close_pit(conn, pit)


def _stream(conn, pit, query, sort, size, keep_alive, part=None, totals=None):
    """One slice's (or the whole PIT's) pages, each fetched while the last is used, each
    with the PIT id the last page returned (kept in ``pit`` for closing)."""
    def step(after, last):
        body = page_body(last, query, sort, size, after, keep_alive)
        return fetch(conn, {**body, "slice": part} if part else body)

    with ThreadPoolExecutor(1) as pool:
        ahead, last = pool.submit(step, None, pit.id), pit.id
        if totals is not None:
            totals.append(total(ahead.result()))
        while True:
            last = pit.id = pit_id(text := ahead.result(), last)
            if (after := last_sort(text)) is None:
                return
            ahead = pool.submit(step, after, last)
            yield text


def _sliced(conn, pit, query, sort, size, keep_alive, n: int, totals=None):
    """The pages of ``n`` slices read by ``n`` threads, as they arrive (at most ``n``
    waiting); a slice's error is raised here, and an early stop ends the threads."""
    box, stop = queue.Queue(maxsize=n), threading.Event()

    def offer(item) -> bool:
        while not stop.is_set():
            try:
                box.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run(i):
        try:
            for text in _stream(conn, pit, query, sort, size, keep_alive, {"id": i, "max": n}, totals):
                if not offer(text):
                    return
            offer(None)
        except BaseException as exc:            # handed to the reading thread
            offer(exc)

    with ThreadPoolExecutor(n) as pool:
        for i in range(n):
            pool.submit(run, i)
        try:
            done = 0
            while done < n:
                item = box.get()
                if isinstance(item, BaseException):
                    raise item
                done += item is None
                if item is not None:
                    yield item
        finally:
            stop.set()

