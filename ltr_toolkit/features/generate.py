"""A feature set written from an index's own mapping and a sample of its documents, for
the user to review (``ltr featureset init``): lean by default -- what a product-search
engineer starts from -- with every field's features in a pool the user can take whole.

Per field, by its mapped type and its sampled values (templates: :mod:`.templates`):

* main text (in half the sampled documents or more, several words a value): BM25 and
  the phrase (all terms in the pool); one ``multi_match`` over them; other text:
  BM25, ranked by coverage (and by the judged queries' words found in it, given them);
* exact matches: a brand, category or type (few values, repeated: the text's
  ``.keyword`` form or a keyword field) against the whole query; an identifier (a SKU,
  EAN or model number: a different value in nearly every document, one a document)
  against each word of the query;
* numbers (also written as text, as the engines coerce them), dates (recency at a
  reference date fixed at init) and booleans; a vector field whose encoder the index
  records: the cosine.

Numbers that are codes (named ``*_id`` and the like), fields few sampled documents
have, constant ones, the toolkit's own helper fields and nested objects are left out,
each with its reason; so is every feature past ``max_features`` (ranked: the combined
match, the semantic feature and the BM25 of the three main fields that most documents
have (or most judged queries' words reach); exact matches; four numbers and dates;
two main fields' phrases; then the other text -- :data:`QUOTAS`). The default cap,
:data:`DEFAULT_MAX_FEATURES`, is the serving cost: each feature's query runs for every
rescored hit on each request (benchmarks/results/catalogue_features.md: 0.07-0.34 ms a
feature on MSRD, 12 adding 0.69 ms to a 1.7 ms first stage; latency_breakdown.md: six
add 1.9 ms on Cranfield; the issue's 120 generated features cost 6.1x the first stage).

The file says what its values mean: ``generated`` holds each feature's why, each
left-out field's reason, the reference date, the cap and what a missing value is."""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass

from ..data.fields import NUMBERS, number_of, object_properties, subfields, walk
from ..data.querytext import STOP_WORDS, distinct_words
from ..indexing.schema import HELPER_PREFIX
from ..indexing.unfinished import check_finished
from ..transport.client import Connection, request
from ..transport.engine import VectorKind, detect
from . import templates as T

TEXT, KEYWORD, DATE, BOOLEAN = "text", "keyword", "date", "boolean"
VECTORS = {"knn_vector", "dense_vector"}
#: names of numbers that are codes, not magnitudes (an EAN typed as a number is no
#: popularity, a category_id's 17 is not more than its 3)
ID_NAMES = re.compile(r"(?i:(^|[._])(id|ids|ean\d*|upc|gtin\d*|isbn\d*|sku|mpn|asin|barcode)$|_id$)|[a-z]Id$")
DEFAULT_SAMPLE = 1000
DEFAULT_MIN_COVERAGE = 0.05
#: the features kept unless asked for more (see the module docstring)
DEFAULT_MAX_FEATURES = 12
#: a text field in this share of the sample or more is a main one
MAIN_SHARE = 0.5
#: a different value in this share of the values (one a document): an identifier, a SKU,
#: EAN or URL; in a text field, this share of them also one word (a title or a
#: description is unique per document too, but it is text to search, not a code)
IDENTIFIER_SHARE = 0.9
#: a brand/category/type: at most this share of distinct values, this many words a value
CATEGORY_SHARE, CATEGORY_WORDS = 0.5, 4
#: the fields one ``multi_match`` spans at most
COMBINED_FIELDS = 8
MISSING = ("a feature with no value for a document is missing (absent), as ltr_log "
           "reports it and ltr predict reads it; no template fills in a default")
#: ranking tiers of the pool (lower first)
CORE, EXACT, VALUE, VARIANT, OTHER_TEXT, EXTRA = range(6)
#: how many features of a kind keep their tier, and the tier the others rank with: the
#: main fields' BM25 (beside the combined match and the semantic feature), the numbers
#: and dates, the main fields' phrases -- so that a catalogue of many main text fields
#: still gets its exact matches and its numbers and dates under the cap
QUOTAS = {"main": (3, OTHER_TEXT), "value": (4, EXTRA), "phrase": (2, EXTRA)}


@dataclass
class Candidate:
    feature: dict
    why: str
    field: str
    tier: int
    score: float = 1.0
    quota: str | None = None    # a key of QUOTAS


@dataclass
class Field:
    """One mapped field as the sample shows it."""
    path: str
    kind: str
    values: list            # every sampled value (lists flattened)
    have: int               # sampled documents with a value
    sampled: int
    most: int = 0           # the most values one document has
    exact: str | None = None    # its keyword form (itself for a keyword field)
    overlap: float | None = None
    unsampled: bool = False     # left out of ``_source``: taken as every document's

    @property
    def coverage(self) -> float:
        return self.have / self.sampled if self.sampled else 0.0

    @property
    def distinct(self) -> int:
        return len({str(v) for v in self.values})

    def words(self) -> float:
        return sum(len(str(v).split()) for v in self.values) / max(1, len(self.values))

    def identifies(self) -> bool:
        return (not self.unsampled and self.have > 20 and self.most == 1
                and self.distinct > IDENTIFIER_SHARE * len(self.values)
                and (self.kind != TEXT or sum(len(str(v).split()) <= 1 for v in self.values)
                     >= IDENTIFIER_SHARE * len(self.values)))

    def categorical(self) -> bool:
        return (self.exact is not None and 1 < self.distinct <= CATEGORY_SHARE * len(self.values)
                and self.words() <= CATEGORY_WORDS)


def mapped_fields(properties: dict, prefix: str = "") -> dict[str, str]:
    """{dotted path: mapped type} of a mapping's ``properties`` (objects walked, their
    sub-fields left out: see :func:`keyword_forms`)."""
    return {path: spec.get("type", "object") for path, spec in walk(properties, object_properties, prefix)
            if object_properties(spec) is None}


def keyword_forms(properties: dict) -> dict[str, str]:
    """{text field: its keyword sub-field} (``brand`` -> ``brand.keyword``)."""
    out = {}
    for path, spec in walk(properties, object_properties):
        forms = [sub for sub, s in subfields(path, spec) if s.get("type") == KEYWORD]
        if spec.get("type") == TEXT and forms:
            out[path] = forms[0]
    return out


def shaped_text(properties: dict) -> set[str]:
    """The text fields of the toolkit's BM25 shape (``.lmd`` and ``.dfr`` forms)."""
    return {path for path, spec in walk(properties, object_properties)
            if {f"{path}.lmd", f"{path}.dfr"} <= {p for p, _ in subfields(path, spec)}}


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


def profile(path: str, kind: str, docs: list[dict], exact: str | None, unsampled: bool,
            queries: list[set] | None) -> Field:
    """``path`` as the sample shows it; ``queries``: the judged queries' words (their
    share with a word in the field's values is its overlap)."""
    per_doc = [["?"] for _ in docs] if unsampled else [_values(d, path) for d in docs]
    f = Field(path, kind, [v for vs in per_doc for v in vs], sum(1 for vs in per_doc if vs), len(docs),
              max(map(len, per_doc), default=0), exact if kind != KEYWORD else path,
              unsampled=unsampled)
    if queries is not None and kind in (TEXT, KEYWORD) and not unsampled:
        vocab = {w for v in f.values for w in distinct_words(str(v))}
        f.overlap = sum(1 for q in queries if q & vocab) / len(queries) if queries else 0.0
    return f


def _left_out(f: Field, min_coverage: float, vector_fields, old_helpers: set) -> tuple[str, str] | None:
    """(reason, why) a field gets no feature (None: it gets some)."""
    if f.kind not in (TEXT, KEYWORD, DATE, BOOLEAN, *NUMBERS, *VECTORS):
        return "type", f"a {f.kind} field: no feature is written for this type"
    if f.path.startswith(HELPER_PREFIX) or f.path in old_helpers:
        return "toolkit helper", "the toolkit's own token count of a text field"
    if f.kind in VECTORS:
        return None if f.path in vector_fields else (
            "no encoder", "no encoder is recorded for it: `ltr index vectors --existing "
            f"--vector-field {f.path}` records yours")
    if f.coverage < min_coverage or not f.have:
        return "sparse", f"in {f.coverage:.1%} of the sampled documents (under {min_coverage:.0%})"
    if f.kind in NUMBERS:
        return _number_left_out(f)
    if f.kind in (TEXT, KEYWORD) and f.identifies() and not _typed(f):
        return "identifier", ("identifies documents (a different value almost every document) "
                              "and no one types it in a query (" + (
                                  "no keyword form to match it exactly" if f.exact is None
                                  else "long or path-like values") + ")")
    if f.kind in (TEXT, KEYWORD) and f.overlap == 0.0 and not _main(f):
        return "no query overlap", "none of the judged queries has a word of its sampled values"
    if f.distinct < 2 and f.kind != DATE and f.have == f.sampled and not f.unsampled:
        return "constant", "one value in every sampled document: no signal"
    return None


def _number_left_out(f: Field) -> tuple[str, str] | None:
    numbers = [v for v in map(number_of, f.values) if v is not None]
    if not numbers:
        return "not a number", "its sampled values are text that is no number"
    distinct = len(set(numbers))
    if ID_NAMES.search(f.path):
        if f.identifies():
            return "identifier", "a number that identifies documents (a different value almost " \
                                 "every document): no relevance signal"
        return "code", (f"named like an id, {distinct} distinct values repeated over {f.have} "
                        "sampled documents: a category code, not a magnitude")
    if distinct < 2:
        return "constant", "one value in the sample: no signal"
    return None


def _typed(f: Field) -> bool:
    """Whether an identifier's values are ones a user types (a SKU, not a URL)."""
    return f.exact is not None and all(len(str(v)) <= 40 and "/" not in str(v) for v in f.values)


def _main(f: Field) -> bool:
    """A main text field: in half the sample or more, not an identifier, and not a
    brand or category of one or two words (a repeated title of more is both)."""
    return (f.kind == TEXT and f.coverage >= MAIN_SHARE and not f.identifies()
            and (not f.categorical() or f.words() > 2))


def _text_candidates(f: Field) -> list[Candidate]:
    lean = f.coverage * (f.overlap if f.overlap is not None else 1.0)
    if f.identifies():
        return [Candidate(*T.identifier(f.path, f.exact), f.path, EXACT, 1.0 + f.coverage)]
    out = [Candidate(*T.is_query(f.path, f.exact), f.path, EXACT, lean)] if f.categorical() else []
    if _main(f):
        out += [Candidate(*T.bm25(f.path), f.path, CORE, lean, "main"),
                Candidate(*T.phrase(f.path), f.path, VARIANT, lean, "phrase"),
                Candidate(*T.all_terms(f.path), f.path, EXTRA, lean)]
    elif f.kind == TEXT:
        out += [Candidate(*T.bm25(f.path), f.path, OTHER_TEXT, lean),
                Candidate(*T.phrase(f.path), f.path, EXTRA, lean / 2),
                Candidate(*T.all_terms(f.path), f.path, EXTRA, lean / 2)]
    elif not out:           # a keyword field of many values: the whole query, ranked lower
        out = [Candidate(*T.is_query(f.path, f.exact), f.path, EXACT, lean / 2)]
    return out


def _candidates(f: Field, stats: dict, reference: _dt.date, vectors: VectorKind | None) -> list[Candidate]:
    """The pool's features of a field not left out."""
    made = None
    if f.kind in (TEXT, KEYWORD):
        return _text_candidates(f)
    if f.kind in NUMBERS:
        low, high = stats.get(f.path, (None, None))
        made = T.number(f.path, f.values, low, high)
    elif f.kind == DATE:
        made = T.recency(f.path, f.values, reference)
    elif f.kind == BOOLEAN:
        made = T.flag(f.path)
    elif f.kind in VECTORS and vectors is not None:
        made = T.cosine(f.path, vectors)
    if f.kind in VECTORS:
        return [Candidate(*made, f.path, CORE, f.coverage)] if made else []
    return [Candidate(*made, f.path, VALUE, f.coverage, "value")] if made else []


def _combined(pool: list[Candidate], fields: dict[str, Field]) -> list[Candidate]:
    """One ``multi_match`` over the main text fields (and the brand/category ones), the
    most covered first, when there are two or more."""
    texts = sorted({c.field for c in pool if fields[c.field].kind == TEXT and c.tier in (CORE, EXACT)
                    and not fields[c.field].identifies()}, key=lambda p: (-fields[p].coverage, p))
    if len(texts) < 2:
        return []
    return [Candidate(*T.combined(texts[:COMBINED_FIELDS]), texts[0], CORE, 2.0)]


def _select(pool: list[Candidate], max_features: int) -> tuple[list[Candidate], list[Candidate]]:
    """(kept, cut): the pool ranked by tier, then score, past each kind's quota
    (:data:`QUOTAS`) with the tier it names; the first ``max_features`` (0: all)."""
    def key(c):
        return c.tier, -c.score, c.feature["name"]
    used: dict[str, int] = {}
    for c in sorted(pool, key=key):
        if c.quota:
            used[c.quota] = used.get(c.quota, 0) + 1
            limit, overflow = QUOTAS[c.quota]
            c.tier = c.tier if used[c.quota] <= limit else overflow
    ranked = sorted(pool, key=key)
    n = len(ranked) if max_features <= 0 else max_features
    return ranked[:n], ranked[n:]


def generate(fields: dict[str, str], docs: list[dict], name: str,
             vectors: VectorKind | None = None, vector_fields=(), min_coverage: float = DEFAULT_MIN_COVERAGE,
             now: _dt.datetime | None = None, unsampled=(), *, exact: dict | None = None,
             shaped=(), stats: dict | None = None, queries: list[str] | None = None,
             max_features: int = DEFAULT_MAX_FEATURES) -> dict:
    """The feature set file for ``fields`` ({path: mapped type}) given a sample of
    ``docs`` (``_source`` objects): ``{"featureset": {name, features}, "generated":
    {...}}`` (see the module docstring). ``vector_fields``: the vector fields whose
    encoder the index records; ``unsampled``: fields the sample cannot show (left out of
    ``_source``), taken as every document's; ``exact``: {text field: its keyword form};
    ``shaped``: the text fields of the toolkit's BM25 shape (their old ``FIELD_len``
    counts are its helpers); ``stats``: {number field: (index min, index max)};
    ``queries``: the judged queries' texts (fields none of whose words they use are left
    out, the others ranked by it); ``now``: the reference date of recency (default today)."""
    reference = (now or _dt.datetime.now(_dt.timezone.utc)).date()
    words = None if queries is None else [set(distinct_words(q)) - STOP_WORDS for q in queries]
    old = set() if any(p.startswith(HELPER_PREFIX) for p in fields) else \
        {f"{p}_len" for p in shaped}
    profiles, pool, skipped = {}, [], {}
    for path, kind in sorted(fields.items()):
        f = profiles[path] = profile(path, kind, docs, (exact or {}).get(path), path in unsampled, words)
        why_not = _left_out(f, min_coverage, vector_fields, old)
        made = [] if why_not else _candidates(f, stats or {}, reference, vectors)
        if why_not or not made:
            skipped[path] = why_not or ("no value", "no sampled value the toolkit can read as a "
                                        f"{kind} (a date it reads: ISO or epoch millis)")
        pool += made
    pool += _combined(pool, profiles)
    kept, cut = _select(_unique(pool), max_features)
    _cut_fields(kept, cut, skipped, max_features)
    return {"featureset": {"name": name, "features": [c.feature for c in kept]},
            "generated": {"sample": len(docs), "reference_date": reference.isoformat(),
                          "max_features": max_features, "pool": len(kept) + len(cut),
                          "missing": MISSING, "why": {c.feature["name"]: c.why for c in kept},
                          "skipped": {p: why for p, (_, why) in skipped.items()},
                          "left_out": _by_reason(skipped),
                          "not_selected": {c.feature["name"]: c.why for c in cut}}}


def _unique(pool: list[Candidate]) -> list[Candidate]:
    """The pool with one feature a name (the first)."""
    seen: set = set()
    return [c for c in pool if not (c.feature["name"] in seen or seen.add(c.feature["name"]))]


def _cut_fields(kept, cut, skipped: dict, max_features: int) -> None:
    """A field whose every feature the cap cut is left out, with that reason."""
    have = {c.field for c in kept}
    for c in cut:
        if c.field not in have and c.field not in skipped:
            skipped[c.field] = ("over the cap", f"its features rank below the {max_features} kept "
                                f"(--max-features N, or --all, keeps more)")


def _by_reason(skipped: dict) -> dict[str, list[str]]:
    """{reason: the fields left out for it}, the most common reason first."""
    out: dict[str, list[str]] = {}
    for path, (reason, _) in skipped.items():
        out.setdefault(reason, []).append(path)
    return dict(sorted(out.items(), key=lambda kv: -len(kv[1])))


def _number_stats(conn: Connection, index: str, fields: dict[str, str]) -> dict:
    """{number field: (min, max)} over the whole index (one ``stats`` aggregation each)."""
    numbers = sorted(p for p, k in fields.items() if k in NUMBERS)
    if not numbers:
        return {}
    aggs = {f"n{i}": {"stats": {"field": p}} for i, p in enumerate(numbers)}
    body = request(conn, "POST", f"/{index}/_search", body={"size": 0, "aggs": aggs})
    got = body.get("aggregations", {})
    return {p: (got[f"n{i}"]["min"], got[f"n{i}"]["max"]) for i, p in enumerate(numbers)
            if got.get(f"n{i}", {}).get("count")}


def from_index(conn: Connection, index: str, name: str | None = None,
               sample: int = DEFAULT_SAMPLE, min_coverage: float = DEFAULT_MIN_COVERAGE,
               queries: list[str] | None = None, max_features: int = DEFAULT_MAX_FEATURES) -> dict:
    """:func:`generate` for a live index: its mapping, a sample of ``sample`` documents
    (the first by a seeded random order), each number's min and max over the index and
    the vector fields its ``_meta`` records."""
    body = request(conn, "GET", f"/{index}/_mapping")
    mapping = next(iter(body.values()))["mappings"]
    check_finished(conn, index, mapping)      # a sample of a half-loaded index misleads
    hits = request(conn, "POST", f"/{index}/_search", body={
        "size": sample, "query": {"function_score": {"random_score": {"seed": 42, "field": "_seq_no"}}}})
    docs = [h.get("_source", {}) for h in hits["hits"]["hits"]]
    recorded = (mapping.get("_meta") or {}).get("vectors") or {}
    props = mapping.get("properties", {})
    fields = mapped_fields(props)
    out = generate(fields, docs, name or index, detect(conn).vectors,
                   [recorded["field"]] if recorded.get("field") else [], min_coverage,
                   unsampled=set((mapping.get("_source") or {}).get("excludes") or ()),
                   exact=keyword_forms(props), shaped=shaped_text(props),
                   stats=_number_stats(conn, index, fields), queries=queries, max_features=max_features)
    out["generated"]["index"] = index
    return out
