"""A feature set written from an index's own mapping and a sample of its documents, for
the user to review (``ltr featureset init``): what a catalogue's fields need, not only
text.

Per field, by its mapped type:

* ``text``: BM25 of the query (``match``), all its terms (``operator: and``) and the
  phrase (``match_phrase``, slop 2); and one ``multi_match`` over every text field;
* ``keyword`` (not a text field's sub-field): 1 when the whole query is the value,
  case-insensitive (a brand, a genre, a category typed as the query);
* numbers: the value itself (``function_score`` / ``field_value_factor``, no script: it
  runs on a node without painless), ``missing`` the sample's median, ``log1p`` where the
  sample is skewed;
* ``date``: recency, an exponential decay from now whose half-life is the sample's
  median age;
* ``boolean``: 1 when true;
* a vector field the toolkit knows the encoder of: the cosine with the query's vector.

Fields that identify documents (keywords unique per document; numbers named like an id,
EAN, SKU or ISBN and unique per document), that few sampled
documents have, the toolkit's own helper fields and nested objects are left out, each
with its reason. Every feature carries, in the file (``generated.why``), why it is
there; the plugin sees only name, params and template."""

from __future__ import annotations

import datetime as _dt
import re

import numpy as np

from ..data.fields import NUMBERS, date_of, object_properties, walk
from ..data.querytext import KEYWORDS
from ..transport.client import Connection, request
from ..transport.engine import QUERY_VECTOR, VectorKind, detect

TEXT, KEYWORD, DATE, BOOLEAN = "text", "keyword", "date", "boolean"
VECTORS = {"knn_vector", "dense_vector"}
#: the toolkit's own fields of an index it made: helpers of its shipped features
OWN_SUFFIXES = ("_len",)
#: names of the numbers that identify a product or a record (an EAN typed as a number is
#: no popularity): left out when they differ in nearly every sampled document
ID_NAMES = re.compile(r"(?i:(^|[._])(id|ids|ean\d*|upc|gtin\d*|isbn\d*|sku|mpn|asin|barcode)$|_id$)|[a-z]Id$")
DEFAULT_SAMPLE = 1000
DEFAULT_MIN_COVERAGE = 0.05


def mapped_fields(properties: dict, prefix: str = "") -> dict[str, str]:
    """{dotted path: mapped type} of a mapping's ``properties`` (objects walked, their
    sub-fields left out: a text field's ``.keyword`` is its own exact form)."""
    return {path: spec.get("type", "object") for path, spec in walk(properties, object_properties, prefix)
            if object_properties(spec) is None}


def _values(doc: dict, path: str) -> list:
    """The non-null values of ``path`` in a ``_source`` (lists flattened)."""
    node = [doc]
    for part in path.split("."):
        nxt = []
        for n in node:
            v = n.get(part) if isinstance(n, dict) else None
            nxt.extend(v if isinstance(v, list) else [v])
        node = [n for n in nxt if n is not None and n != ""]
    return node


def _feature(name: str, template: dict, params=(KEYWORDS,)) -> dict:
    return {"name": name, "params": list(params), "template_language": "mustache",
            "template": template}


def _text(field: str) -> list[tuple[dict, str]]:
    q = "{{" + KEYWORDS + "}}"
    return [(_feature(f"{field}_bm25", {"match": {field: q}}),
             f"BM25 of the query in {field}"),
            (_feature(f"{field}_all_terms", {"match": {field: {"query": q, "operator": "and"}}}),
             f"BM25 when every query term is in {field} (missing otherwise)"),
            (_feature(f"{field}_phrase", {"match_phrase": {field: {"query": q, "slop": 2}}}),
             f"the query as a phrase in {field} (slop 2)")]


def _keyword(field: str) -> list[tuple[dict, str]]:
    q = "{{" + KEYWORDS + "}}"
    term = {"term": {field: {"value": q, "case_insensitive": True}}}
    return [(_feature(f"{field}_is_query", {"constant_score": {"filter": term}}),
             f"1 when the whole query is the {field} value, case-insensitive (a name typed "
             "as the query)")]


def _number(field: str, values: list) -> list[tuple[dict, str]]:
    x = np.asarray([v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)],
                   dtype=float)
    if not len(x):
        return []
    median = float(np.median(x))
    sd = float(x.std())
    skew = float(np.mean(((x - x.mean()) / sd) ** 3)) if sd > 0 else 0.0
    log = x.min() >= 0 and skew > 2
    fvf = {"field": field, "missing": median, **({"modifier": "log1p"} if log else {})}
    how = f"log10(1 + {field}), as the sample is skewed (skewness {skew:.1f})" if log else field
    return [(_feature(field, {"function_score": {"query": {"match_all": {}}, "field_value_factor": fvf,
                                                 "boost_mode": "replace"}}, params=()),
             f"the value {how}; a document without it scores as the sample's median {median:g}")]


def _date(field: str, values: list, now: _dt.datetime) -> list[tuple[dict, str]]:
    ages = [(now - t).total_seconds() / 86400 for t in map(date_of, values) if t is not None]
    if not ages:
        return []
    days = max(1, int(round(float(np.median(ages)))))
    # today, not this instant: a document's value holds all day, as logged so served
    decay = {"exp": {field: {"origin": "now/d", "scale": f"{days}d", "decay": 0.5}}}
    return [(_feature(f"{field}_recency", {"function_score": {"query": {"match_all": {}},
                                                              "functions": [decay], "boost_mode": "replace"}},
                      params=()),
             f"recency of {field}: 1 today, 0.5 at the sample's median age ({days} days); "
             "a document without it scores 1")]


def _boolean(field: str) -> list[tuple[dict, str]]:
    return [(_feature(f"{field}_true", {"constant_score": {"filter": {"term": {field: True}}}}, params=()),
             f"1 when {field} is true")]


def _vector(field: str, vectors: VectorKind | None) -> list[tuple[dict, str]]:
    if vectors is None:
        return []
    return [({"name": f"{field}_cosine", "params": vectors.feature_params(),
              "template_language": "mustache", "template": vectors.feature_template(field)},
             f"the cosine of the query's vector and {field} ({vectors.score}); the toolkit "
             f"encodes the query ({QUERY_VECTOR}) with the index's encoder")]


def generate(fields: dict[str, str], docs: list[dict], name: str,
             vectors: VectorKind | None = None, vector_fields=(), min_coverage: float = DEFAULT_MIN_COVERAGE,
             now: _dt.datetime | None = None, unsampled=()) -> dict:
    """The feature set file for ``fields`` ({path: mapped type}) given a sample of
    ``docs`` (``_source`` objects): ``{"featureset": {name, features}, "generated":
    {"sample", "why", "skipped"}}``. ``vector_fields``: the vector fields whose encoder
    the index records (the toolkit can encode a query for them); ``unsampled``: fields
    the sample cannot show (left out of ``_source``), taken as every document's."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    made: list[tuple[dict, str]] = []
    skipped: dict[str, str] = {}
    texts = []
    for path, kind in sorted(fields.items()):
        values = [_values(d, path) for d in docs]
        why_not = _left_out(path, kind, values if path not in unsampled else [["?"]] * len(docs),
                            min_coverage, vector_fields)
        if why_not:
            skipped[path] = why_not
            continue
        flat = [v for vs in values for v in vs]
        if kind == TEXT:
            texts.append(path)
            made += _text(path)
        elif kind == KEYWORD:
            made += _keyword(path)
        elif kind in NUMBERS:
            made += _number(path, flat)
        elif kind == DATE:
            made += _date(path, flat, now)
        elif kind == BOOLEAN:
            made += _boolean(path)
        elif kind in VECTORS:
            made += _vector(path, vectors)
    if len(texts) > 1:
        q = "{{" + KEYWORDS + "}}"
        made.insert(0, (_feature("all_text_bm25", {"multi_match": {
            "query": q, "fields": texts, "type": "best_fields", "tie_breaker": 0.3}}),
            f"BM25 over every text field ({', '.join(texts)}), the best field counting most"))
    return {"featureset": {"name": name, "features": [f for f, _ in made]},
            "generated": {"sample": len(docs), "why": {f["name"]: why for f, why in made},
                          "skipped": skipped}}


def _left_out(path: str, kind: str, values: list[list], min_coverage: float, vector_fields) -> str | None:
    """Why a field gets no feature (None: it gets one)."""
    if kind in ("object", "nested") or kind not in (TEXT, KEYWORD, DATE, BOOLEAN, *NUMBERS, *VECTORS):
        return f"a {kind} field: no feature is written for this type"
    if path.endswith(OWN_SUFFIXES):
        return "the toolkit's own length helper of a text field"
    if kind in VECTORS:
        return None if path in vector_fields else (
            "no encoder is recorded for it: `ltr index vectors --existing --vector-field "
            f"{path}` records yours")
    have = sum(1 for vs in values if vs)
    if not values or have < min_coverage * len(values):
        share = have / len(values) if values else 0.0
        return f"in {share:.1%} of the sampled documents (under {min_coverage:.0%})"
    flat = [str(v) for vs in values for v in vs]
    one_word = all(len(v.split()) == 1 for v in flat)
    if (kind == KEYWORD or (kind == TEXT and one_word) or (kind in NUMBERS and ID_NAMES.search(path))) \
            and have > 20 and len(set(flat)) > 0.9 * have:
        return "identifies documents (a different value almost every document): no relevance signal"
    return None


def from_index(conn: Connection, index: str, name: str | None = None,
               sample: int = DEFAULT_SAMPLE, min_coverage: float = DEFAULT_MIN_COVERAGE) -> dict:
    """:func:`generate` for a live index: its mapping, a sample of ``sample`` documents
    (the first by a seeded random order) and the vector fields its ``_meta`` records."""
    body = request(conn, "GET", f"/{index}/_mapping")
    mapping = next(iter(body.values()))["mappings"]
    hits = request(conn, "POST", f"/{index}/_search", body={
        "size": sample, "query": {"function_score": {"random_score": {"seed": 42, "field": "_seq_no"}}}})
    docs = [h.get("_source", {}) for h in hits["hits"]["hits"]]
    recorded = (mapping.get("_meta") or {}).get("vectors") or {}
    vector_fields = [recorded["field"]] if recorded.get("field") else []
    out = generate(mapped_fields(mapping.get("properties", {})), docs, name or index,
                   detect(conn).vectors, vector_fields, min_coverage,
                   unsampled=set((mapping.get("_source") or {}).get("excludes") or ()))
    out["generated"]["index"] = index
    return out
