"""Document expansion by nearest neighbours: relevance feedback paid for at index time.

A feedback feature (``more_like_this`` over the first stage's top documents) needs those
documents before the rescore can run: two requests per query, and a costly query in the
second. Expansion moves the work to index time (the cluster hypothesis, as in Tao et
al., "Language model information retrieval with document expansion", 2006): each
document gets a field holding the text of its ``k`` most similar documents
(``more_like_this`` over ``fields``), and a plain ``match`` of the query on that field is
a feedback-like feature served in the same single request as the others.

The expansion field is indexed but left out of ``_source`` by the mappings the toolkit
creates (:func:`ltr_toolkit.indexing.documents.mapping`): a larger ``_source`` slows every
search's fetch phase. Consequence: updating a document through the update API drops its
expansion; run :func:`expand` again after changing documents (their neighbours change
too). On an index whose mapping stores the field in ``_source``, :func:`expand` works
and says so. ``more_like_this`` picks its terms from each shard's statistics, so on an
index of several shards :func:`expand` may find other neighbours than on one shard;
:func:`ltr_toolkit.indexing.documents.index_documents` finds them on a one-shard load
first, whatever the shard count of the index it makes."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass

from ..transport.client import Connection, call, item_error, msearch_items, request
from opensearchpy import helpers
from ..errors import UserError
from .merge import force_merge
from .unfinished import check_finished

#: The expansion field's name in the toolkit's mappings and feature sets.
FIELD = "neighbours"


@dataclass(frozen=True)
class Expansion:
    """``k`` nearest neighbours by ``more_like_this`` over ``fields``, their text in
    ``field``. ``k`` 3: the depth of the query-time feedback feature it replaces; in
    offline cross-validation on Cranfield 3 neighbours ranked better than 5 or 10 (on
    CACM no reranker beats the first stage, with any of them)."""
    fields: tuple[str, ...] = ("title", "abstract")
    k: int = 3
    field: str = FIELD


def neighbours_query(doc_id: str, fields: tuple[str, ...], k: int) -> dict:
    """The search for ``doc_id``'s ``k`` nearest neighbours (itself excluded), returning
    their ``fields``; the same ``more_like_this`` settings as the feedback feature."""
    return {"size": int(k), "_source": list(fields),
            "query": {"more_like_this": {"fields": list(fields), "like": [{"_id": doc_id}],
                                         "include": False, "min_term_freq": 1,
                                         "min_doc_freq": 2, "max_query_terms": 50,
                                         "minimum_should_match": "10%"}}}


def neighbour_text(hits: list[dict], fields: tuple[str, ...]) -> str:
    """The neighbours' ``fields`` joined, nearest first."""
    return "\n".join(str(v) for h in hits for f in fields
                     if (v := (h.get("_source") or {}).get(f)))


def _doc_ids(conn: Connection, index: str) -> list[str]:
    return [h["_id"] for h in call(conn, lambda: list(helpers.scan(
        conn.client(), index=index, query={"query": {"match_all": {}}, "_source": False},
        size=1000)))]


def _ensure_field(conn: Connection, index: str, spec: Expansion) -> bool:
    """Adds the expansion field (the first source field's analyzer) when the mapping lacks
    it; True when ``_source`` keeps it (an index not made by the toolkit)."""
    resp = next(iter(request(conn, "GET", f"/{index}/_mapping").values()))["mappings"]
    check_finished(conn, index, resp)
    props = resp.get("properties", {})
    missing = [f for f in spec.fields if f not in props]
    if missing:
        raise UserError(f"index {index} has no field {missing[0]!r}",
                        f"pass --fields with text fields of {index} ({', '.join(sorted(props))})")
    if spec.field not in props:
        analyzer = props[spec.fields[0]].get("analyzer", "standard")
        request(conn, "PUT", f"/{index}/_mapping",
                {"properties": {spec.field: {"type": "text", "analyzer": analyzer}}})
    return spec.field not in resp.get("_source", {}).get("excludes", [])


def neighbour_texts(conn: Connection, index: str, spec: Expansion, ids: list[str],
                    search_type: str | None = "dfs_query_then_fetch") -> list[str]:
    """The neighbour text of each of ``ids`` (one ``_msearch``)."""
    items = msearch_items(conn, index, [neighbours_query(i, spec.fields, spec.k) for i in ids],
                          search_type=search_type)
    for item in items:
        if "error" in item:
            raise item_error(item, conn, None)
    return [neighbour_text(item["hits"]["hits"], spec.fields) for item in items]


def all_neighbour_texts(conn: Connection, index: str, spec: Expansion, batch: int = 50,
                        progress=None) -> dict[str, str]:
    """Every document's neighbour text, ``batch`` documents per request;
    ``progress("neighbours", done, total)`` after each."""
    ids = _doc_ids(conn, index)
    out: dict[str, str] = {}
    if progress:
        progress("neighbours", 0, len(ids))
    for start in range(0, len(ids), batch):
        chunk = ids[start:start + batch]
        out.update(zip(chunk, neighbour_texts(conn, index, spec, chunk)))
        if progress:
            progress("neighbours", len(out), len(ids))
    return out


def expand(conn: Connection, index: str, spec: Expansion = Expansion(), batch: int = 50,
           merge: bool = True, progress=None) -> dict:
    """Writes every document's neighbour text into ``spec.field`` of an existing index
    (recomputed from ``spec.fields`` alone, so running it again is safe), ``batch``
    documents per ``_msearch`` and bulk update. All neighbours are found before the first
    update: an updated document's old copy still counts in the term statistics
    ``more_like_this`` picks its terms by, so reads after writes would drift. Ids and
    texts go through temporary files (memory: one batch). The updated documents' old
    copies stay in the index as soft deletes until OpenSearch's retention lease (12 h by
    default) lets a merge drop them. ``merge``: force-merge to one segment per shard
    after. ``progress(step, done, total)``: "neighbours" (found) then "neighbours
    (writing)", after each batch. Returns a summary."""
    in_source = _ensure_field(conn, index, spec)
    report = progress or (lambda step, done, total: None)
    with tempfile.TemporaryFile("w+", encoding="utf-8") as ids, \
            tempfile.TemporaryFile("w+", encoding="utf-8") as texts:
        documents = call(conn, _spool_ids, conn, index, ids)
        ids.seek(0)
        found = 0
        report("neighbours", found, documents)
        for chunk in _batches(ids, batch, str.strip):           # reads only
            for i, t in zip(chunk, neighbour_texts(conn, index, spec, chunk)):
                texts.write(json.dumps([i, t]) + "\n")
            found += len(chunk)
            report("neighbours", found, documents)
        texts.seek(0)
        written, failed = _update_all(conn, index, spec, _batches(texts, batch, json.loads),
                                      lambda done: report("neighbours (writing)", done, documents))
    call(conn, conn.client().indices.refresh, index=index)
    if merge:
        force_merge(conn, index)
    return {"index": index, "field": spec.field, "k": spec.k, "fields": list(spec.fields),
            "documents": documents, "written": written, "errors": failed, "in_source": in_source}


def _spool_ids(conn: Connection, index: str, out) -> int:
    """Every document id of ``index`` into the open file ``out``, one per line."""
    out.seek(0)
    out.truncate()               # a retried scan starts the file again
    n = 0
    for h in helpers.scan(conn.client(), index=index,
                          query={"query": {"match_all": {}}, "_source": False}, size=1000):
        out.write(h["_id"] + "\n")
        n += 1
    return n


def _batches(lines, size: int, parse):
    chunk = []
    for line in lines:
        chunk.append(parse(line))
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _update_all(conn: Connection, index: str, spec: Expansion, batches,
                progress=lambda done: None) -> tuple[int, int]:
    """Bulk-updates each batch of (id, text); returns (written, failed); ``progress(done)``
    after each batch."""
    c = conn.client()
    written = failed = 0
    for chunk in batches:
        actions = [{"_op_type": "update", "_index": index, "_id": i, "doc": {spec.field: t}}
                   for i, t in chunk]
        ok, errors = call(conn, helpers.bulk, c, actions, raise_on_error=False)
        written, failed = written + ok, failed + len(errors)
        progress(written + failed)
    return written, failed
