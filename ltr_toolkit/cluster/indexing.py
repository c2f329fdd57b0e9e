"""Loading a document collection into an index (the bundled Cranfield collection)."""

from __future__ import annotations

from .client import Connection, call, request

FIELDS = ("title", "authors", "source", "abstract")


def pick_analyzer(conn: Connection) -> str:
    """``english`` when the node has it, else ``standard``."""
    from opensearchpy import exceptions as E
    try:
        conn.client().indices.analyze(body={"analyzer": "english", "text": "flows"})
        return "english"
    except E.RequestError:
        return "standard"
    except (E.TransportError, E.ConnectionError):
        call(conn, conn.client().info)  # raises the translated cluster error
        return "standard"


#: Recorded in the index's ``_meta``: an index made by an older mapping is re-made.
CORPUS_VERSION = "cranfield@2"


def mapping(analyzer: str) -> dict:
    """BM25 on the main fields; the same text under other similarities as multi-fields
    (``.lmd``: LM Dirichlet, ``.dfr``: divergence from randomness), for features."""
    text = {"type": "text", "analyzer": analyzer}
    subs = {"lmd": dict(text, similarity="lmd"), "dfr": dict(text, similarity="dfr")}
    return {"settings": {"number_of_shards": 1, "number_of_replicas": 0,
                         "index": {"similarity": {
                             "lmd": {"type": "LMDirichlet", "mu": 1000},
                             "dfr": {"type": "DFR", "basic_model": "g", "after_effect": "l",
                                     "normalization": "h2"}}}},
            "mappings": {"_meta": {"corpus": CORPUS_VERSION}, "properties": {
                "title": dict(text, fields={"raw": {"type": "keyword"}, **subs}),
                "authors": {"type": "text", "analyzer": "standard"},
                "source": {"type": "text", "analyzer": "standard"},
                "abstract": dict(text, fields=subs),
                "title_len": {"type": "integer"},
                "abstract_len": {"type": "integer"},
            }}}


def corpus_version(conn: Connection, index: str) -> str | None:
    """The ``_meta.corpus`` of an existing index ("" when it has none), None when absent."""
    c = conn.client()
    if not call(conn, c.indices.exists, index=index):
        return None
    resp = request(conn, "GET", f"/{index}/_mapping")
    return next(iter(resp.values()), {}).get("mappings", {}).get("_meta", {}).get("corpus", "")


def index_documents(conn: Connection, index: str, docs: list[dict], analyzer: str | None = None,
                    recreate: bool = False) -> dict:
    """Create ``index`` and bulk-load ``docs`` (each with an ``id``). An existing index is
    an error unless ``recreate`` (then it is deleted first). Returns a summary."""
    from opensearchpy import helpers
    from ..errors import UserError
    c = conn.client()
    analyzer = analyzer or pick_analyzer(conn)
    if call(conn, c.indices.exists, index=index):
        if not recreate:
            raise UserError(f"index {index} already exists on {conn.display_url}",
                            "pass --recreate to delete and re-create it, or choose another --index")
        call(conn, c.indices.delete, index=index)
    call(conn, c.indices.create, index=index, body=mapping(analyzer))
    def source(d):
        src = {f: d.get(f, "") for f in FIELDS}
        # token counts: query-independent length features
        src["title_len"] = len(src["title"].split())
        src["abstract_len"] = len(src["abstract"].split())
        return src
    actions = ({"_index": index, "_id": d["id"], "_source": source(d)} for d in docs)
    ok, errors = call(conn, helpers.bulk, c, actions, chunk_size=500, raise_on_error=False,
                      refresh="wait_for")
    count = request(conn, "GET", f"/{index}/_count")["count"]
    return {"index": index, "analyzer": analyzer, "indexed": ok, "errors": len(errors), "count": count}
