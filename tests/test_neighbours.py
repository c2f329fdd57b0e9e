"""Index-time feedback: each document's nearest neighbours' text in its ``neighbours``
field, written at load time (no updated copies left) or into an existing index."""

from __future__ import annotations

import pytest

from ltr_toolkit.indexing.neighbours import Expansion, neighbour_text, neighbours_query


def test_neighbour_text_joins_the_fields_nearest_first():
    hits = [{"_source": {"title": "a", "abstract": "b c"}}, {"_source": {"title": "d"}},
            {"_source": {"abstract": ""}}]
    assert neighbour_text(hits, ("title", "abstract")) == "a\nb c\nd"
    assert neighbour_text([], ("title",)) == ""


def test_neighbours_query_excludes_the_document_itself():
    q = neighbours_query("7", ("title", "abstract"), 3)
    assert q["size"] == 3 and q["_source"] == ["title", "abstract"]
    mlt = q["query"]["more_like_this"]
    assert mlt["like"] == [{"_id": "7"}] and mlt["include"] is False


@pytest.mark.cluster
def test_loaded_index_holds_each_documents_neighbours(cluster, cranfield_index):
    conn = cluster.conn()
    c = conn.client()
    index = cranfield_index["index"]
    spec = Expansion()
    mapping = c.indices.get_mapping(index=index)[index]["mappings"]
    assert spec.field in mapping["_source"]["excludes"]       # with the vector field
    segments = c.indices.segments(index=index)["indices"][index]["shards"]["0"][0]["segments"]
    assert sum(s["deleted_docs"] for s in segments.values()) == 0    # no updated copies
    for doc in ("1", "184", "1400"):
        hits = c.search(index=index, body=neighbours_query(doc, spec.fields, spec.k))["hits"]["hits"]
        assert len(hits) == spec.k and doc not in [h["_id"] for h in hits]
        # the field holds the neighbours' text: each neighbour's title is a phrase of it,
        # and a title of a document that is not a neighbour is not
        others = c.search(index=index, body={"size": 1, "query": {"bool": {"must_not": [
            {"ids": {"values": [doc] + [h["_id"] for h in hits]}}]}}})["hits"]["hits"]
        for h, want in [(h, 1) for h in hits] + [(others[0], 0)]:
            phrase = {"match_phrase": {spec.field: h["_source"]["title"]}}
            got = c.count(index=index, body={"query": {"bool": {
                "must": [phrase], "filter": [{"ids": {"values": [doc]}}]}}})["count"]
            assert got == want, (doc, h["_id"])
        assert "neighbours" not in c.get(index=index, id=doc)["_source"]


@pytest.mark.cluster
def test_index_neighbours_command_expands_an_existing_index(cluster, cli):
    from ltr_toolkit.indexing.documents import index_documents
    from ltr_toolkit.datasets import cranfield
    conn = cluster.conn()
    index_documents(conn, "nbr-plain", cranfield.documents()[:120], recreate=True, expansion=None)
    try:
        c = conn.client()
        assert "neighbours" not in c.indices.get_mapping(index="nbr-plain")["nbr-plain"]["mappings"]["properties"]
        r = cli("--url", cluster.url, "index", "neighbours", "--index", "nbr-plain", "--neighbours", "2")
        assert r.returncode == 0, r.stderr
        assert "for 120 of 120 documents" in r.stdout and "_source keeps neighbours" in r.stdout
        src = c.get(index="nbr-plain", id="5")["_source"]
        hits = c.search(index="nbr-plain", body=neighbours_query("5", ("title", "abstract"), 2))["hits"]["hits"]
        assert src["neighbours"] == neighbour_text(hits, ("title", "abstract")) != ""
        bad = cli("--url", cluster.url, "index", "neighbours", "--index", "nbr-plain", "--neighbour-fields", "body")
        assert bad.returncode == 2 and "no field 'body'" in bad.stderr and "Traceback" not in bad.stderr
    finally:
        conn.client().indices.delete(index="nbr-plain", ignore_unavailable=True)


def test_expand_finds_every_neighbour_before_the_first_update(monkeypatch):
    """Reads after writes drift (an updated document's old copy still counts in the term
    statistics more_like_this uses): every _msearch of neighbours comes before any bulk
    update, and ids and texts are spooled, in batches."""
    from types import SimpleNamespace

    from opensearchpy import helpers

    from ltr_toolkit.indexing import neighbours as nb
    events = []

    def spool(conn, index, out):
        out.seek(0)
        for i in range(7):
            out.write(f"d{i}\n")
        return 7

    def texts(conn, index, spec, ids):
        events.append(("read", list(ids)))
        return [f"text of {i}" for i in ids]

    def fake_call(conn, fn, *args, **kw):
        if fn is helpers.bulk:
            events.append(("write", [a["_id"] for a in args[1]]))
            return len(args[1]), []
        return fn(*args, **kw) if fn is spool else None

    monkeypatch.setattr(nb, "_ensure_field", lambda *a: False)
    monkeypatch.setattr(nb, "_spool_ids", spool)
    monkeypatch.setattr(nb, "neighbour_texts", texts)
    monkeypatch.setattr(nb, "call", fake_call)
    monkeypatch.setattr(nb, "force_merge", lambda conn, index: events.append(("merge", index)))
    stub = SimpleNamespace(client=lambda: SimpleNamespace(indices=SimpleNamespace(refresh=None)))
    got = nb.expand(stub, "idx", batch=3)
    kinds = [k for k, _ in events]
    assert kinds == ["read"] * 3 + ["write"] * 3 + ["merge"], events
    assert [ids for k, ids in events if k == "write"] == [["d0", "d1", "d2"], ["d3", "d4", "d5"], ["d6"]]
    assert (got["documents"], got["written"], got["errors"]) == (7, 7, 0)
