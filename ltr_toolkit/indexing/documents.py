"""Loading a document collection into an index: the bundled Cranfield collection, or a
user's own documents (JSONL, one object per line with an ``id`` and text fields).

Each text field is analysed for BM25 and kept under two more similarities as
multi-fields (``.lmd``: LM Dirichlet, ``.dfr``: divergence from randomness), with its
token count in ``ltr_toolkit__<field>_len`` (Cranfield's: ``<field>_len``) and its term vectors stored (for feedback features), and
each document's nearest neighbours' text in ``neighbours`` (index-time feedback, see
:mod:`ltr_toolkit.indexing.neighbours`): the shape the shipped feature set expects."""

from __future__ import annotations

import contextlib

import numpy as np
from opensearchpy import helpers

from ..encoders import load_encoder
from ..transport.client import Connection, call, request
from ..transport.engine import VectorKind, vector_kind
from ..transport.lookups import forget
from .neighbours import Expansion, all_neighbour_texts
from .rejections import rejection
from .unfinished import check_finished, finished, marked, unfinished
from .ahead import VectorsAhead
from .merge import force_merge
from .vectors import DEFAULT_TEXT_FIELDS, FIELD as VECTOR_FIELD, document_text, \
    field_mapping, meta_entry, vector_batches
from opensearchpy import exceptions as E
from dataclasses import dataclass, field as dc_field, replace
from ..errors import UserError
import json
from ..errors import InputError
from ..io.text import read_text
from . import schema

FIELDS = ("title", "authors", "source", "abstract")


def pick_analyzer(conn: Connection) -> str:
    """``english`` when the node has it, else ``standard``."""
    try:
        conn.client().indices.analyze(body={"analyzer": "english", "text": "flows"})
        return "english"
    except E.RequestError:
        return "standard"
    except (E.TransportError, E.ConnectionError):
        call(conn, conn.client().info)  # raises the translated cluster error
        return "standard"


#: Recorded in the index's ``_meta``: an index made by an older mapping is re-made.
CORPUS_VERSION = "cranfield@5"


#: Term vectors (terms and frequencies) stored for the main text fields: ``more_like_this``
#: feedback features read the liked documents' terms from them instead of re-analysing
#: their text (the same feature values, in less time: benchmarks/results/latency.md).
TERM_VECTORS = "yes"


def mapping(analyzer: str, fields: tuple[str, ...] | None = None, meta: str = CORPUS_VERSION,
            shards: int = 1, replicas: int = 0, term_vectors: bool = True,
            expansion: str | None = None, vectors: dict | None = None,
            vector_kind: VectorKind | None = None, typed: dict | None = None) -> dict:
    """BM25 on the text fields; the same text under other similarities as multi-fields,
    and each field's token count. ``fields`` None: Cranfield's (authors and source with
    the standard analyzer, without multi-fields). ``expansion``: a field for the
    neighbours' text, indexed but not kept in ``_source`` (it would slow every fetch).
    ``vectors``: the vector field's ``_meta`` entry (:func:`.vectors.meta_entry`): the
    engine's cosine vector field (``vector_kind``), also left out of ``_source``.
    ``typed``: the mapping of a collection's other fields (:mod:`.schema`); the engine's
    limit of mapping fields is raised to fit a catalogue's many attributes."""
    text = {"type": "text", "analyzer": analyzer}
    subs = {"lmd": dict(text, similarity="lmd"), "dfr": dict(text, similarity="dfr")}
    stored = dict(text, term_vector=TERM_VECTORS) if term_vectors else text
    if fields is None:
        props = {"title": dict(stored, fields={"raw": {"type": "keyword"}, **subs}),
                 "authors": {"type": "text", "analyzer": "standard"},
                 "source": {"type": "text", "analyzer": "standard"},
                 "abstract": dict(stored, fields=subs),
                 "title_len": {"type": "integer"}, "abstract_len": {"type": "integer"}}
    else:
        # and a keyword form: a brand or category in every document is a main text field,
        # matched exactly on FIELD.keyword (long values are not kept: ignore_above)
        props = {f: dict(stored, fields={**subs, "keyword": schema.KEYWORD_FORM}) for f in fields}
        props.update({schema.length_field(f): {"type": "integer"} for f in fields})
    props.update(typed or {})
    mappings = {"_meta": {"corpus": meta}, "properties": props}
    hidden = []
    if expansion:
        props[expansion] = text
        hidden.append(expansion)
    if vectors:
        props[vectors["field"]] = field_mapping(vector_kind, vectors["encoder"]["dim"])
        mappings["_meta"]["vectors"] = vectors
        hidden.append(vectors["field"])
    if hidden:
        mappings["_source"] = {"excludes": hidden}
    index_settings = vector_kind.index_settings() if vectors else {}
    total = schema.count_fields(props) + 10
    if total > schema.DEFAULT_FIELD_LIMIT:
        index_settings["mapping.total_fields.limit"] = total
    return {"settings": {"number_of_shards": int(shards), "number_of_replicas": int(replicas),
                         "index": {**index_settings, "similarity": {
                             "lmd": {"type": "LMDirichlet", "mu": 1000},
                             "dfr": {"type": "DFR", "basic_model": "g", "after_effect": "l",
                                     "normalization": "h2"}}}},
            "mappings": mappings}


def expansion_over(spec: Expansion, fields: tuple[str, ...]) -> Expansion:
    """``spec`` restricted to a collection's ``fields``: all of them when it has none of
    the spec's (a user's collection without title and abstract)."""
    return replace(spec, fields=tuple(f for f in spec.fields if f in fields) or tuple(fields))


def corpus_version(conn: Connection, index: str) -> str | None:
    """The ``_meta.corpus`` of an existing index ("" when it has none; with "(incomplete:
    WHY)" after it when its load did not finish), None when absent."""
    c = conn.client()
    if not call(conn, c.indices.exists, index=index):
        return None
    resp = request(conn, "GET", f"/{index}/_mapping")
    mappings = next(iter(resp.values()), {}).get("mappings", {})
    why = unfinished(mappings)
    return mappings.get("_meta", {}).get("corpus", "") + (f" (incomplete: {why})" if why else "")


#: documents per bulk request (and between two progress reports of a load)
CHUNK = 500


def _load(conn: Connection, index: str, body: dict, docs: list[dict],
          fields: tuple[str, ...] | None, extra=None,
          progress=lambda done, total: None) -> tuple[int, list]:
    """Creates ``index`` with ``body`` and bulk-loads ``docs`` (plus ``extra(doc)``'s
    fields); ``progress(done, total)`` after each bulk request."""
    c = conn.client()
    names = fields or FIELDS
    # token counts: Cranfield's title_len and abstract_len, a collection's namespaced
    lengths = {f: schema.length_field(f) for f in fields} if fields else \
        {f: f"{f}_len" for f in ("title", "abstract")}

    def source(d):
        src = {k: v for k, v in d.items() if k != "id" and k not in names}    # typed fields as they are
        src.update({f: d.get(f, "") or "" for f in names})
        # token counts: query-independent length features
        src.update({name: len(_joined(src[f]).split()) for f, name in lengths.items()})
        return src | (extra(d) if extra else {})
    call(conn, c.indices.create, index=index, body=marked(body, len(docs)))
    forget(conn, "vectors", index)      # what this process read of an index deleted before
    actions = ({"_index": index, "_id": d["id"], "_source": source(d)} for d in docs)
    # one refresh after the load: ``refresh="wait_for"`` on each bulk request waited for
    # the next scheduled refresh (up to a second) once per chunk
    done = call(conn, _bulk, c, actions, lambda n: progress(n, len(docs)))
    call(conn, c.indices.refresh, index=index)
    return done


def _bulk(client, actions, progress) -> tuple[int, list]:
    """``helpers.bulk(client, actions, raise_on_error=False)``: (documents loaded, the
    failed items), with ``progress(done)`` after each :data:`CHUNK`."""
    loaded, errors = 0, []
    progress(0)
    for ok, item in helpers.streaming_bulk(client, actions, chunk_size=CHUNK,
                                           raise_on_error=False):
        if ok:
            loaded += 1
        else:
            errors.append(item)
        if (loaded + len(errors)) % CHUNK == 0:
            progress(loaded + len(errors))
    progress(loaded + len(errors))
    return loaded, errors


def _joined(value) -> str:
    """A text field's words, an array's joined."""
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)


def index_documents(conn: Connection, index: str, docs: list[dict], analyzer: str | None = None,
                    recreate: bool = False, fields: tuple[str, ...] | None = None,
                    meta: str = CORPUS_VERSION, shards: int = 1, replicas: int = 0,
                    term_vectors: bool = True, merge: bool = True,
                    expansion: Expansion | None = Expansion(),
                    vector_fields: tuple[str, ...] | None = DEFAULT_TEXT_FIELDS,
                    encoder=None, typed: dict | None = None, log=lambda msg: None,
                    progress=None, encode_batches=None, beside_node: bool = False) -> dict:
    """Create ``index`` and bulk-load ``docs`` (each with an ``id``). An existing index is
    an error unless ``recreate`` (then it is deleted first). ``fields`` None: Cranfield's
    fields and mapping. ``term_vectors``: store them (:data:`TERM_VECTORS`; off saves
    index space where no feature uses ``more_like_this``). ``merge``: force-merge the
    loaded collection to one segment per shard: every feature of an ``sltr`` rescore
    builds its query once per segment (on Cranfield the rescore of 100 documents by the
    bundled feature set costs the node 2.9 ms on one segment, 4.8 ms on the three a bulk
    load leaves). ``expansion``: each document's nearest neighbours' text
    (:mod:`ltr_toolkit.indexing.neighbours`), found in a first load on one shard and written by
    the real one (no updated copies left behind); None: no expansion field.
    ``vector_fields``: each document's vector of these fields (those the collection has;
    all its fields when it has none of them) by ``encoder`` (None: ``$LTR_ENCODER`` or the
    default) in :data:`.vectors.FIELD`; None: no vectors; ``encode_batches``: where the
    batches are encoded (:func:`.vectors.vector_batches`); ``beside_node``: while the node
    finds the neighbours (else all before: they would share cores). ``typed``: the
    mapping of the collection's other fields (numbers, dates, ...). ``log``: each phase
    as it starts. ``progress(step, done, total)``: how far each long step is ("vectors",
    "neighbours (first load)", "neighbours", "loading" ``after="vectors"`` if beside).
    Returns a summary: ``errors`` documents the engine refused (the others are loaded),
    each in ``rejected`` (:func:`.rejections.rejection`: id, field, value, why)."""
    report = progress or (lambda step, done, total: None)
    analyzer = analyzer or pick_analyzer(conn)
    expansion = expansion and expansion_over(expansion, fields or FIELDS)
    _clear_index(conn, index, recreate)
    vector_fields, no_vectors = _vector_support(conn, vector_fields)
    with _vectors(docs, fields or FIELDS, vector_fields, encoder, report, log,
                  encode_batches, beside_node) as (vec_fields, vec_of):
        body = mapping(analyzer, fields, meta, shards, replicas, term_vectors,
                       expansion.field if expansion else None, vec_fields, vector_kind(conn), typed)
        texts = _neighbour_texts(conn, index, docs, expansion, mapping(
            analyzer, fields, meta, 1, 0, term_vectors, None, typed=typed), fields, report, log)

        def extra(d):
            out = {expansion.field: texts.get(str(d["id"]), "")} if expansion else {}
            return out | vec_of(d)
        log(f"loading {len(docs)} documents into {index}")
        behind = {"after": "vectors"} if beside_node and vec_fields else {}
        ok, errors = _load(conn, index, body, docs, fields, extra,
                           progress=lambda done, total: report("loading", done, total, **behind))
    _finish(conn, index, merge, log)
    return {"index": index, "analyzer": analyzer, "indexed": ok, "errors": len(errors),
            **_outcome(conn, index, errors), "vectors": vec_fields, "no_vectors": no_vectors}


def _outcome(conn: Connection, index: str, errors: list) -> dict:
    """The loaded index's document count and the refused documents, described."""
    return {"count": request(conn, "GET", f"/{index}/_count")["count"],
            "rejected": [rejection(e) for e in errors]}


def _finish(conn: Connection, index: str, merge: bool, log) -> None:
    """The loaded index force-merged to one segment per shard (``merge``), then no longer
    marked as being loaded (:mod:`.unfinished`)."""
    if merge:
        log(f"merging {index} into one segment per shard")
        force_merge(conn, index, log)
    finished(conn, index)


def _clear_index(conn: Connection, index: str, recreate: bool) -> None:
    """Make room for ``index``: an existing one is an error unless ``recreate`` (then it
    is deleted); one whose load did not finish says so."""
    c = conn.client()
    if call(conn, c.indices.exists, index=index):
        if not recreate:
            check_finished(conn, index)
            raise UserError(f"index {index} already exists on {conn.display_url}",
                            "pass --recreate to delete and re-create it, or choose another --index")
        call(conn, c.indices.delete, index=index)


def _vector_support(conn: Connection, vector_fields):
    """(the vector fields to encode, None or why there are none): none on a cluster
    without the k-NN plugin."""
    if vector_fields and vector_kind(conn) is None:
        return None, ("the cluster has no k-NN plugin (opensearch-knn): the "
                      "semantic features are not available on this index")
    return vector_fields, None


def _neighbour_texts(conn: Connection, index: str, docs: list[dict], expansion: Expansion | None,
                     body: dict, fields, progress, log) -> dict:
    """Each document's nearest neighbours' text, found in a first load of ``docs`` into
    ``index`` with ``body`` (one shard), deleted afterwards: more_like_this picks its
    terms from a shard's statistics, so the neighbours are the same whatever the real
    load's shard count, and the real load writes them (no updated copies left behind).
    None of them without ``expansion``."""
    if not expansion:
        return {}
    log(f"neighbours: {expansion.k} per document by more_like_this over {', '.join(expansion.fields)}")
    _load(conn, index, body, docs, fields,
          progress=lambda done, total: progress("neighbours (first load)", done, total))
    texts = all_neighbour_texts(conn, index, expansion, progress=progress)
    call(conn, conn.client().indices.delete, index=index)
    return texts


@contextlib.contextmanager
def _vectors(docs, fields, vector_fields, encoder, progress, log, encode_batches=None,
             beside_node: bool = False):
    """Yields (the vector field's ``_meta`` entry or None, document -> ``{field:
    vector}``, empty for a document with no text in the fields: its semantic features are
    missing; each of ``docs`` its own, a repeated id too). The vectors are encoded in the
    background (:class:`.ahead.VectorsAhead`: while the node finds the neighbours when
    ``beside_node``, else all first) and taken in document order by the load; each is a
    JSON-ready list (7 decimals) only when its document is loaded.
    ``progress("vectors", done, total)``: the texts encoded."""
    if not vector_fields:
        yield None, lambda doc: {}
        return
    log(f"vectors: encoding {len(docs)} documents")
    encoder = encoder or load_encoder()
    over = tuple(f for f in vector_fields if f in fields) or tuple(fields)
    texts = [(id(d), t) for d in docs if (t := document_text(d, over))]
    row = {key: i for i, (key, _) in enumerate(texts)}
    batches = vector_batches(encoder, [t for _, t in texts], encode_batches=encode_batches,
                             progress=lambda done: progress("vectors", done, len(texts)))
    with VectorsAhead(batches) as ahead:
        if not beside_node:
            # the encoder's threads and the node's searches and loads on the same cores
            # (20,000 products in one process: 140 s one after the other; at the same time
            # 155 s, the load beside the encoding 156 s)
            ahead.wait()

        def vector_of(doc: dict) -> dict:
            i = row.get(id(doc))
            return {} if i is None else {
                VECTOR_FIELD: np.round(ahead.row(i).astype(np.float64), 7).tolist()}
        yield meta_entry(encoder, over), vector_of


@dataclass
class Collection:
    """A JSONL collection read for indexing: its documents, its main text fields (the
    toolkit's BM25 shape), the mapping of its other fields, and what was done with each."""
    docs: list[dict]
    text_fields: tuple[str, ...]
    fields: dict = dc_field(default_factory=dict)

    def properties(self, analyzer: str) -> dict:
        return schema.properties(self.fields, self.text_fields, analyzer)

    def report(self) -> list[dict]:
        return schema.report(self.fields, self.text_fields, len(self.docs))


def read_jsonl_documents(path) -> Collection:
    """A JSONL file's documents: one object per line with a non-empty ``id``; its fields
    typed by their values (:mod:`.schema`: text, numbers, booleans, dates, arrays,
    objects, nulls). Errors name ``file:line``."""
    docs = []
    for i, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except ValueError as exc:
            raise InputError(path, i, f"invalid JSON: {exc}") from None
        if not isinstance(d, dict) or d.get("id") is None or not str(d["id"]).strip():
            raise InputError(path, i, 'each line is an object with an "id" and its fields')
        d["id"] = str(d["id"])
        docs.append((i, d))
    if not docs:
        raise InputError(path, None, "no documents")
    fields = schema.infer(docs, path)
    return Collection([d for _, d in docs], schema.main_text(fields, len(docs)), fields)
