"""Reading the cluster's UBI indices with a point in time and search_after: every
document once, the same events as the file reader, the query records in order of time,
sliced by shard, scroll where there is no PIT API, the PIT released, errors one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ltr_toolkit.clicks import simulate as S
from ltr_toolkit.clicks.events import files, pages, ubi
from ltr_toolkit.clicks.events.eventlog import EventReader
from ltr_toolkit.errors import ClusterError
from ltr_toolkit.transport import pit
from ltr_toolkit.transport.client import request
from ltr_toolkit.transport.lookups import shard_count

QI, EV = "test_pit_queries", "test_pit_events"
BAD = [{"action_name": "click", "user_query": "x", "event_attributes": {"object": {"object_id": "d1"}}},
       {"action_name": "hover", "query_id": "q-bad", "event_attributes": {"object": {"object_id": "d1"}}},
       {"action_name": "click", "query_id": "q-bad", "event_attributes": {
           "object": {"object_id": "d2"}, "position": {"ordinal": -3}}}]


def _docs(sessions=400):
    rankings = {f"q{i}": [f"d{(i * 7 + r) % 90}" for r in range(10)] for i in range(25)}
    truth = {(q, d): float(int(d[1:]) % 5) for q, ds in rankings.items() for d in ds}
    sim = S.simulate(rankings, {q: f"query {q}" for q in rankings}, truth, sessions, seed=3)
    docs = list(S.ubi_documents(sim))
    docs += [("ubi_events", {**d, "timestamp": docs[0][1]["timestamp"]}) for d in BAD]
    return docs


def _summary(log):
    """The log as order-free sets: events by names, records by query id, problems."""
    q, d, t = (np.array(i.names + [""], object) for i in (log.query_ids, log.docs, log.texts))
    events = sorted(zip(q[log.search], d[log.doc], log.pos.tolist(), t[log.text], log.action.tolist()))
    names = log.query_ids.names
    text = {names[k]: log.texts.names[v] for k, v in log.record_text.items()}
    hits = {names[k]: [log.docs.names[h] for h in v] for k, v in log.record_hits.items()}
    return events, text, hits, dict(log.problems.counts), dict(log.problems.unknown_actions)


@pytest.fixture(scope="module")
def ubi_sharded(ltr_cluster):
    """Simulated UBI documents on the node: records in one shard, events in three."""
    conn = ltr_cluster.conn()
    c = conn.client()
    c.indices.delete(index=f"{QI},{EV}", ignore_unavailable=True)
    ubi.create_indices(conn, QI, "test_pit_unused", recreate=True)
    c.indices.create(index=EV, body={"settings": {"number_of_shards": 3, "number_of_replicas": 0},
                                     "mappings": ubi.EVENTS_MAPPING})
    docs = _docs()
    ubi.write_documents(conn, docs, QI, EV)
    yield conn, docs
    c.indices.delete(index=f"{QI},{EV},test_pit_unused", ignore_unavailable=True)


def _read(conn, size=37):
    reader = EventReader()
    counts = ubi.read_events(conn, reader, {"match_all": {}}, QI, EV, size=size)
    return counts, reader.finish()


def _open_pits(conn) -> int:
    return len(request(conn, "GET", "/_search/point_in_time/_all").get("pits") or [])


def test_pit_reads_what_the_file_reader_reads(ubi_sharded, tmp_path, monkeypatch):
    conn, docs = ubi_sharded
    path = tmp_path / "events.ndjson"
    path.write_text("".join(json.dumps(d) + "\n" for _, d in docs))
    want = _summary(files.read_file(path))
    assert shard_count(conn, EV) == 3
    counts, log = _read(conn)
    assert counts == {QI: sum(k == "ubi_queries" for k, _ in docs), EV: sum(k == "ubi_events" for k, _ in docs)}
    assert _summary(log) == want
    assert want[3] == {"no_query_id": 1, "unknown_action": 1, "bad_position": 1}
    records = [d for k, d in docs if k == "ubi_queries"]     # written in order of time
    in_time = [d["query_id"] for d in sorted(records, key=lambda d: d["timestamp"])]
    assert log.query_ids.names[:len(records)] == in_time
    assert _open_pits(conn) == 0
    monkeypatch.setattr(ubi, "parse_page", lambda *a: None)       # json, page by page
    assert _summary(_read(conn, size=50)[1]) == want
    monkeypatch.setattr(pit, "open_pit", lambda *a, **k: None)      # no PIT API: scroll
    counts_scroll, log_scroll = _read(conn)
    assert counts_scroll == counts and _summary(log_scroll) == want


def test_pages_release_the_pit_and_raise_one_line_errors(ubi_sharded):
    conn, _ = ubi_sharded
    for slices in (1, 3):
        got = pit.pages(conn, EV, {"match_all": {}}, ["_shard_doc"], size=20, slices=slices)
        first = next(got)
        assert pit.last_sort(first) is not None
        got.close()                                   # a reader that stops early
        assert _open_pits(conn) == 0
        bad = {"range": {"timestamp": {"gte": "not a date"}}}
        with pytest.raises(ClusterError) as err:
            list(pit.pages(conn, EV, bad, ["_shard_doc"], size=20, slices=slices))
        assert "\n" not in str(err.value) and "not a date" in str(err.value)
        assert _open_pits(conn) == 0


def test_slices_cover_every_document_once(ubi_sharded):
    conn, docs = ubi_sharded
    ids, totals = [], []
    for text in pit.pages(conn, EV, {"match_all": {}}, ["_shard_doc"], size=31, slices=3, totals=totals):
        ids += [h["_id"] for h in json.loads(text)["hits"]["hits"]]
    assert len(ids) == len(set(ids)) == sum(totals) == sum(k == "ubi_events" for k, _ in docs)
    assert len(totals) == 3


def test_a_read_that_loses_documents_is_an_error(ubi_sharded, monkeypatch):
    """What opensearch-project/OpenSearch#15869 did (pages of a sort with ties losing hits)
    is caught by the PIT's exact count, not passed on as a smaller log."""
    from itertools import islice
    conn, _ = ubi_sharded
    every = ubi.pages
    monkeypatch.setattr(ubi, "pages", lambda *a, **k: islice(every(*a, **k), 2))
    with pytest.raises(ClusterError) as err:
        _read(conn)
    assert "74 of the 400 documents of test_pit_queries" in str(err.value), str(err.value)
    assert _open_pits(conn) == 0


def test_each_page_is_asked_with_the_pit_id_the_last_page_returned(ubi_sharded, monkeypatch):
    """OpenSearch returns the id it was given (read live); Elasticsearch may return a new
    one with any page, and the next search and the close must use it (its documented rule;
    no Elasticsearch node here, so its changing ids are played by wrapping the node's
    answers)."""
    conn, _ = ubi_sharded
    sent, closed, fetch = [], [], pit.fetch

    def renamed(c, body):
        sent.append(body["pit"]["id"])
        text = fetch(c, {**body, "pit": {**body["pit"], "id": opened[0].real}})
        assert pit.pit_id(text, "") == opened[0].real          # the node's own answer
        return text.replace(opened[0].real.encode(), f"renewed-{len(sent)}".encode(), 1)

    opened, open_pit = [], pit.open_pit

    def opening(*a, **k):
        p = open_pit(*a, **k)
        p.real = p.id
        opened.append(p)
        return p
    monkeypatch.setattr(pit, "open_pit", opening)
    monkeypatch.setattr(pit, "fetch", renamed)
    monkeypatch.setattr(pit, "close_pit", lambda c, p: closed.append(p.id) or pit.request(
        c, "DELETE", "/_search/point_in_time", body={"pit_id": [p.real]}))
    pages = list(pit.pages(conn, EV, {"match_all": {}}, ["_shard_doc"], size=150))
    assert len(pages) >= 3 and sent == [opened[0].real] + [f"renewed-{i}" for i in range(1, len(sent))]
    assert closed == [f"renewed-{len(sent)}"] and len(sent) == len(pages) + 1   # + the empty page
    assert _open_pits(conn) == 0


def test_a_page_parsed_by_pyarrow_adds_what_the_line_reader_adds():
    docs = [d for k, d in _docs(60) if k == "ubi_events"]
    docs.append({"action_name": "click", "query_id": "q9", "event_attributes": {
        "object": {"object_id": "d9"}, "position": {"ordinal": "4"}}})   # a string: json path
    hits = [{"_id": f"id{i}", "_source": d, "sort": [i, i]} for i, d in enumerate(docs)]
    text = json.dumps({"hits": {"hits": hits}}).encode()
    assert pit.last_sort(text) == [len(docs) - 1] * 2
    assert pit.last_sort(b"{}") is None
    assert pages.parse_page(text, pages.page_schemas(True)[0]) is None   # "4" is not an int
    good = json.dumps({"hits": {"hits": hits[:-1]}}).encode()
    table, ids = pages.parse_page(good, pages.page_schemas(True)[0])
    assert ids.to_pylist() == [h["_id"] for h in hits[:-1]]
    a, b = EventReader(), EventReader()
    assert pages.add_table(a, table, ubi.EVENT_KIND, lambda r: f"i/{ids[r].as_py()}")
    for h in hits[:-1]:
        b.add_event(h["_source"], f"i/{h['_id']}")
    la, lb = a.finish(), b.finish()
    assert _summary(la) == _summary(lb)
    assert la.problems.first_seen == lb.problems.first_seen
