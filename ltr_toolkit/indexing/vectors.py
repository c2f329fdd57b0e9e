"""Dense vectors in the index, and the query vector as a derived template parameter.

Index side: each document's vector of its text fields (title and abstract by default)
in the engine's vector field (:data:`FIELD`, cosine; ``transport.engine``): on
OpenSearch a ``knn_vector`` on the k-NN plugin's ``lucene`` engine (the Maven Central zip
of the k-NN plugin carries no native libraries, and its default ``faiss`` engine kills
the node), on Elasticsearch a float ``dense_vector``; and the encoder's identity with
the text fields in the mapping's ``_meta.vectors``. Vectors the user's own ingest pipeline wrote are used as
they are: :func:`register` names the field and its model (checked on a sample when the
text fields are given).

Query side: a feature template uses ``query_vector`` (``{{#toJson}}query_vector{{/toJson}}``
in OpenSearch's ``knn_score`` script or Elasticsearch's ``knn`` query: see the shipped
feature sets and ``transport.engine``); :func:`with_query_vectors` computes it from ``keywords`` with the encoder the index
names -- the same way at logging, in cross-validation and at serving -- unless the caller
passes it (its hybrid first stage computed it already). A different encoder is refused
in one line.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from ..encoders import Encoder, check_same, fingerprint, load_encoder, query_vectors, same_model
from ..errors import ClusterError, UserError
from ..io.atomic import atomic_write
from ..io.cache import cache_dir
from ..transport.client import Connection, call, request
from ..transport.engine import QUERY_VECTOR, VectorKind, require_vectors
from ..transport.lookups import fact, forget
from .rejections import describe, rejection
from .unfinished import check_finished
from opensearchpy import helpers

#: the vector field's name in the toolkit's mappings and shipped feature sets
FIELD = "vector"
DEFAULT_TEXT_FIELDS = ("title", "abstract")


def field_mapping(kind: VectorKind, dim: int, approximate: bool = True) -> dict:
    """The engine's cosine vector field of ``dim`` dimensions (``approximate`` False, on
    OpenSearch: no HNSW graph, for an index without ``index.knn``: exact scoring only)."""
    return kind.mapping(dim, approximate)


def meta_entry(encoder: Encoder, text_fields, field: str = FIELD, written_by: str = "ltr-toolkit") -> dict:
    return {"field": field, "encoder": encoder.identity(), "text_fields": list(text_fields or []),
            "written_by": written_by}


def document_text(doc: dict, fields) -> str:
    """What a document's vector encodes: its ``fields`` joined by newlines (empty ones
    skipped)."""
    parts = ((" ".join(map(str, v)) if isinstance(v, list) else str(v)) for f in fields if (v := doc.get(f)))
    return "\n".join(p for p in parts if p.strip())


# --------------------------------------------------------------------------- cache

#: vectors shipped with the package: the bundled Cranfield collection's, by the default
#: encoder (found by the same key as the cache; another encoder or text encodes anew)
SHIPPED = Path(__file__).resolve().parent.parent / "datasets" / "cranfield"


def _runtime() -> str:
    """The version of the runtime the packaged encoder runs on ("" without onnxruntime)."""
    try:
        from importlib.metadata import version
        return "onnxruntime " + version("onnxruntime")
    except Exception:           # noqa: BLE001 (not installed: a user's own encoder)
        return ""


def _encoder_hash(encoder: Encoder):
    """The part of a vectors key that names the encoder: the model's hash, the runtime
    that ran it (an int8 model's vectors differ across onnxruntime versions: the shipped
    vectors of one version are not another's), how this machine runs it
    (:func:`ltr_toolkit.encoders.fingerprint`)."""
    return hashlib.sha256(encoder.sha256.encode() + _runtime().encode() + fingerprint(encoder))


def _texts_key(encoder_hash, texts: list[str]) -> str:
    h = encoder_hash.copy()
    for t in texts:
        h.update(t.encode() + b"\0")
    return h.hexdigest()[:32]


def vectors_key(encoder: Encoder, texts: list[str]) -> str:
    """What the vectors of ``texts`` by ``encoder`` are kept under: the encoder
    (:func:`_encoder_hash`) and the texts."""
    return _texts_key(_encoder_hash(encoder), texts)


#: texts per batch of vectors kept on disk (and per Dask task): fixed, in document order,
#: so a batch's texts and key are the same in every run, and a run killed part-way
#: encodes at most one batch again (about 3 s of the default encoder on product texts)
BATCH = 128


def encode_here(encoder: Encoder, batches):
    """(start, vectors) of each (start, texts) of ``batches``, encoded in this process,
    in order."""
    for start, texts in batches:
        yield start, encoder.encode(texts, kind="document")


def document_vectors(encoder: Encoder, texts: list[str], cache: bool = True,
                     progress=None, encode_batches=None) -> np.ndarray:
    """The encoder's document vectors of ``texts``: :func:`vector_batches` assembled
    into one array."""
    out = np.zeros((len(texts), encoder.dim), dtype=np.float32)
    for start, vecs in vector_batches(encoder, texts, cache, progress, encode_batches):
        out[start:start + len(vecs)] = vecs
    return out


def vector_batches(encoder: Encoder, texts: list[str], cache: bool = True,
                   progress=None, encode_batches=None):
    """Yields (start, vectors) of ``texts`` by the encoder, the kept batches first (in
    order), then the others as they are encoded (in any order). Vectors are kept on disk
    per :data:`BATCH` texts (keyed by the encoder and the batch's texts, each written as
    soon as encoded): a run killed part-way, run again, encodes only the batches it had
    not finished; re-indexing the same collection (the test suite, ``--recreate``)
    encodes nothing. The whole list's vectors are used when kept under its own key (the
    demo's collection ships with them: :data:`SHIPPED`): one (0, all) then.
    ``encode_batches(encoder, [(start, texts), ...])``: yields (start, vectors) of the
    batches not kept, in any order (default :func:`encode_here`;
    :mod:`ltr_toolkit.distributed.encoding`: on Dask workers). ``progress(done)``: the
    texts done, at the start and after each batch."""
    report = progress or (lambda done: None)
    base, dim = _encoder_hash(encoder), encoder.dim
    key = _texts_key(base, texts)
    whole = _kept(([_cached(key)] if cache else []) + [SHIPPED / f"vectors-{key}.npy"],
                  (len(texts), dim))
    if whole is not None:
        report(len(texts))
        yield 0, whole
        return
    paths, todo, kept = {}, [], []
    for start in range(0, len(texts), BATCH):
        batch = texts[start:start + BATCH]
        paths[start] = _cached(_texts_key(base, batch))
        if cache and _fits(paths[start], (len(batch), dim)):
            kept.append(start)
        else:
            todo.append((start, batch))
    done = len(texts) - sum(len(b) for _, b in todo)
    report(done)
    for start in kept:                  # read when used: one batch in memory
        yield start, np.load(paths[start])
    for start, vecs in (encode_batches or encode_here)(encoder, todo):
        if cache:
            _keep(paths[start], vecs)
        done += len(vecs)
        report(done)
        yield start, vecs


def _cached(key: str) -> Path:
    return cache_dir() / "vectors" / f"{key}.npy"


def _fits(path: Path, shape) -> bool:
    """Whether ``path`` holds an array of ``shape`` (its header read, not its data)."""
    try:
        return np.load(path, mmap_mode="r").shape == shape
    except (OSError, ValueError):
        return False


def _kept(paths, shape) -> np.ndarray | None:
    """The vectors of the first of ``paths`` that holds an array of ``shape``."""
    for path in paths:
        try:
            vecs = np.load(path)
        except (OSError, ValueError):
            continue
        if vecs.shape == shape:
            return vecs
    return None


def _keep(path: Path, vecs: np.ndarray) -> None:
    try:
        with atomic_write(path, "wb", encoding=None) as fh:
            np.save(fh, vecs)
    except (OSError, UserError):
        pass            # a cache only


# --------------------------------------------------------------------------- the index's record

def _mapping(conn: Connection, index: str) -> dict:
    resp = request(conn, "GET", f"/{index}/_mapping")
    return next(iter(resp.values()), {}).get("mappings", {})


def index_vectors(conn: Connection, index: str) -> dict | None:
    """The index's ``_meta.vectors`` (field, encoder identity, text fields), None without;
    read once per process and kept a while (see ``lookups``)."""
    return fact(conn, ("vectors", index),
                lambda: _mapping(conn, index).get("_meta", {}).get("vectors"))


def stale_vectors(conn: Connection, index: str, encoder: str | Encoder | None = None) -> str | None:
    """Why ``index``'s vectors are not this run's encoder's (None when they are, or when it
    has none): an index made before the encoder changed."""
    record = index_vectors(conn, index)
    if not record:
        return None
    enc = encoder if isinstance(encoder, Encoder) else load_encoder(encoder)
    if same_model(record.get("encoder"), enc):
        return None
    return (f"its vectors come from encoder {record['encoder'].get('name')}, "
            f"this run's is {enc.name}")


def _write_meta(conn: Connection, index: str, entry: dict, mappings: dict) -> None:
    meta = dict(mappings.get("_meta", {}), vectors=entry)
    request(conn, "PUT", f"/{index}/_mapping", {"_meta": meta})
    forget(conn, "vectors", index)


def _check_updatable(index: str, mappings: dict) -> None:
    src = mappings.get("_source", {})
    if src.get("enabled") is False or src.get("excludes") or src.get("includes"):
        kept = "disabled" if src.get("enabled") is False else f"filtered ({src})"
        raise UserError(f"index {index}'s _source is {kept}: writing vectors through the update "
                        "API would drop the fields _source does not keep",
                        "re-index with `ltr index jsonl` (it writes the vectors), or write them "
                        "with your own ingest pipeline and `ltr index vectors --field F --existing`")


def add_vectors(conn: Connection, index: str, fields, encoder: Encoder | None = None,
                batch: int = 64, progress=None) -> dict:
    """Each document of an existing index without a vector gets one (``fields`` encoded,
    ``batch`` per bulk update). Restartable: a second run writes only the documents still
    without one. Documents with no text in ``fields`` stay without (counted); failed
    updates are named in ``failed``. ``progress("vectors", done, total)``: the documents
    without a vector at the start, and those done, after each batch."""
    encoder = encoder or load_encoder()
    _prepare_vector_field(conn, index, fields, encoder)
    written, no_text, failed = _write_missing_vectors(conn, index, fields, encoder, batch,
                                                      progress)
    call(conn, conn.client().indices.refresh, index=index)
    return {"index": index, "field": FIELD, "fields": list(fields),
            "encoder": encoder.identity(), "written": written, "no_text": no_text,
            "failed": failed}


def _prepare_vector_field(conn: Connection, index: str, fields, encoder: Encoder) -> None:
    """Check that ``index`` can take ``encoder``'s vectors of ``fields`` (the fields exist,
    vectors already there are of the same encoder and fields, ``_source`` keeps every
    field), then add the vector field and its ``_meta`` record where missing."""
    mappings = _mapping(conn, index)
    check_finished(conn, index, mappings)
    props = mappings.get("properties", {})
    missing = [f for f in fields if f not in props]
    if missing:
        raise UserError(f"index {index} has no field {missing[0]!r}",
                        f"pass --fields with text fields of {index} ({', '.join(sorted(props))})")
    recorded = mappings.get("_meta", {}).get("vectors")
    if recorded:
        check_same(recorded["encoder"], encoder, f"index {index}'s vectors")
        if list(recorded.get("text_fields", [])) != list(fields):
            raise UserError(f"index {index}'s vectors encode {','.join(recorded['text_fields'])}, "
                            f"not {','.join(fields)}", "pass the same --fields")
    _check_updatable(index, mappings)
    if FIELD not in props:
        kind = require_vectors(conn, f"vectors in index {index}")
        settings = next(iter(request(conn, "GET", f"/{index}/_settings").values()))
        approximate = kind.approximate_on(settings["settings"]["index"])
        request(conn, "PUT", f"/{index}/_mapping",
                {"properties": {FIELD: field_mapping(kind, encoder.dim, approximate=approximate)}})
    if not recorded:
        _write_meta(conn, index, meta_entry(encoder, fields), mappings)


def _write_missing_vectors(conn: Connection, index: str, fields, encoder: Encoder, batch: int,
                           progress) -> tuple[int, int, list]:
    """The documents without a vector read (scan) and updated ``batch`` at a time:
    (vectors written, documents with no text in ``fields``, [id, reason] of the failed
    updates); ``progress`` gets the documents done after each batch (those without text
    counted as done)."""
    missing = {"bool": {"must_not": [{"exists": {"field": FIELD}}]}}
    todo = {"query": missing, "_source": list(fields)}
    total = request(conn, "POST", f"/{index}/_count", {"query": missing})["count"]
    written, no_text, failed = 0, 0, []
    c = conn.client()
    pending: list[dict] = []

    def flush():
        nonlocal written
        if not pending:
            return
        ok, errors = _update_vectors(conn, index, fields, encoder, pending)
        written += ok
        failed.extend(errors)
        pending.clear()
        if progress:
            progress("vectors", written + len(failed) + no_text, total)

    for hit in call(conn, lambda: helpers.scan(c, index=index, query=todo, size=500)):
        if not document_text(hit.get("_source") or {}, fields):
            no_text += 1
            continue
        pending.append(hit)
        if len(pending) >= batch:
            flush()
    flush()
    return written, no_text, failed


def _update_vectors(conn: Connection, index: str, fields, encoder: Encoder,
                    hits: list[dict]) -> tuple[int, list]:
    """One bulk update of ``hits``' vectors: (updates done, [id, reason] of the failed)."""
    vecs = encoder.encode([document_text(h["_source"], fields) for h in hits])
    actions = [{"_op_type": "update", "_index": index, "_id": h["_id"],
                "doc": {FIELD: np.round(v.astype(np.float64), 7).tolist()}} for h, v in zip(hits, vecs)]
    ok, errors = call(conn, helpers.bulk, conn.client(), actions, raise_on_error=False)
    return ok, [[r["id"], describe(r)] for r in map(rejection, errors)]


#: the least median cosine, over a sample of documents, between the vectors a user's
#: pipeline wrote and the encoder's own of the same texts, for them to pass as that model's.
#: Measured against the default encoder on Cranfield (benchmarks/encoder_agreement.py):
#: the same model run elsewhere (sentence-transformers' float all-MiniLM-L6-v2, the
#: packaged int8 file as is) agrees at 0.963-0.998 per text, its medians of 20 texts at
#: >= 0.984 (two-word texts: 0.99 refused 99% of such samples), >= 0.90 when it cut
#: documents at 128 tokens instead of 256; a different model of the same dimension
#: (paraphrase-MiniLM-L3-v2) at <= 0.46 per text, <= 0.38 as a median, and even the same
#: weights pooled by [CLS] instead of the mean at <= 0.74 and <= 0.66.
SAME_MODEL_COSINE = 0.8


def check_agreement(stored, mine, what: str, encoder: str, fields: str) -> float:
    """The median cosine between the ``stored`` vectors (any length) and ``mine``, the
    encoder's vectors of the same texts; one line when it is below :data:`SAME_MODEL_COSINE`
    (another model wrote them)."""
    stored = np.asarray(stored, dtype=np.float32)
    stored = stored / np.maximum(np.linalg.norm(stored, axis=1, keepdims=True), 1e-12)
    cosines = (stored * np.asarray(mine, dtype=np.float32)).sum(axis=1)
    median = float(np.median(cosines))
    if median < SAME_MODEL_COSINE:
        raise UserError(f"{what} does not hold encoder {encoder}'s vectors of {fields} (median "
                        f"cosine {median:.3f} over {len(cosines)} documents; the same model "
                        f"agrees above {SAME_MODEL_COSINE})", "give the model that wrote them with --encoder")
    return median


def register(conn: Connection, index: str, field: str, encoder: Encoder | None = None,
             text_fields=None, sample: int = 20) -> dict:
    """Record that ``field`` of ``index`` holds ``encoder``'s vectors written by the user's
    own pipeline (nothing is recomputed). With ``text_fields``, up to ``sample`` documents'
    stored vectors are compared with the encoder's (:func:`check_agreement`)."""
    encoder = encoder or load_encoder()
    kind = require_vectors(conn, "vectors written by your pipeline")
    mappings = _mapping(conn, index)
    spec = mappings.get("properties", {}).get(field)
    if not spec or spec.get("type") != kind.field_type:
        raise UserError(f"index {index} has no {kind.field_type} field {field!r}",
                        "name the field your pipeline writes the vectors to (--field)")
    if int(spec.get(kind.dims_key, 0)) != encoder.dim:
        raise UserError(f"field {field} of {index} has {spec.get(kind.dims_key)} dimensions, "
                        f"encoder {encoder.name} makes {encoder.dim}", "give the model that wrote them with --encoder")
    checked = None
    if text_fields:
        resp = request(conn, "POST", f"/{index}/_search",
                       {"size": sample, "query": {"exists": {"field": field}},
                        "_source": [field, *text_fields]})
        hits = [h for h in resp["hits"]["hits"] if isinstance(h["_source"].get(field), list)]
        if hits:
            stored = np.asarray([h["_source"][field] for h in hits], dtype=np.float32)
            mine = encoder.encode([document_text(h["_source"], text_fields) for h in hits])
            checked = check_agreement(stored, mine, f"field {field} of {index}", encoder.name,
                                      ",".join(text_fields))
    entry = dict(meta_entry(encoder, text_fields, field, written_by="user"), checked_cosine=checked)
    _write_meta(conn, index, entry, mappings)
    return {"index": index, **entry}


# --------------------------------------------------------------------------- the query side

def uses_vector(names) -> bool:
    return QUERY_VECTOR in set(names)


def unit_vector(dim: int) -> list[float]:
    """A stand-in query vector (validation, the term budget): any direction does."""
    return [1.0] + [0.0] * (int(dim) - 1)


def vector_source(conn: Connection, index: str, encoder: str | Encoder | None = None,
                  expected: dict | None = None):
    """(the index's vector record, the process's query-vector memory of its encoder).
    ``encoder``: the user's spec (None: ``$LTR_ENCODER`` or the default); ``expected``:
    the identity a model artifact recorded. Either mismatch is refused in one line."""
    record = index_vectors(conn, index)
    if not record:
        require_vectors(conn, f"a feature set using {QUERY_VECTOR}")
        raise UserError(f"the feature set uses {QUERY_VECTOR} but index {index} has no vectors",
                        f"add them with `ltr index vectors --index {index} --fields F,G`")
    enc = encoder if isinstance(encoder, Encoder) else load_encoder(encoder)
    check_same(record["encoder"], enc, f"index {index}'s vectors")
    if expected:
        check_same(expected, enc, "the model")
    return record, query_vectors(enc)


def with_query_vectors(conn: Connection, index: str, param_list: list[dict], names,
                       encoder: str | Encoder | None = None, expected: dict | None = None
                       ) -> list[dict]:
    """``param_list`` with ``query_vector`` (from ``keywords``) where ``names`` use it and a
    query does not carry one already; a given vector's dimension is checked."""
    if not uses_vector(names) or not param_list:
        return param_list
    record, vectors = vector_source(conn, index, encoder, expected)
    dim = int(record["encoder"]["dim"])
    todo = [i for i, p in enumerate(param_list) if QUERY_VECTOR not in p]
    out = list(param_list)
    for i, v in zip(todo, vectors([str(param_list[i].get("keywords", "")) for i in todo])):
        out[i] = {**param_list[i], QUERY_VECTOR: v}
    for p in out:
        if len(p[QUERY_VECTOR]) != dim:
            raise UserError(f"a query vector of {len(p[QUERY_VECTOR])} dimensions, index {index}'s "
                            f"vectors have {dim}", "pass the vector of the index's encoder")
    return out


def placeholder_vector(conn: Connection, index: str | None) -> list[float]:
    record = index_vectors(conn, index) if index else None
    if not record:
        raise ClusterError(f"a model or feature set using {QUERY_VECTOR} needs an index with vectors",
                           "pass --index with the index it serves")
    return unit_vector(record["encoder"]["dim"])
