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


def mapping(analyzer: str) -> dict:
    text = {"type": "text", "analyzer": analyzer}
    return {"settings": {"number_of_shards": 1, "number_of_replicas": 0},
            "mappings": {"properties": {
                "title": dict(text, fields={"raw": {"type": "keyword"}}),
                "authors": {"type": "text", "analyzer": "standard"},
                "source": {"type": "text", "analyzer": "standard"},
                "abstract": text,
                "title_len": {"type": "integer"},
                "abstract_len": {"type": "integer"},
            }}}


def index_documents(conn: Connection, index: str, docs: list[dict], analyzer: str | None = None,
                    recreate: bool = True) -> dict:
    """(Re)create ``index`` and bulk-load ``docs`` (each with an ``id``). Returns a summary."""
    from opensearchpy import helpers
    c = conn.client()
    analyzer = analyzer or pick_analyzer(conn)
    if recreate and call(conn, c.indices.exists, index=index):
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
