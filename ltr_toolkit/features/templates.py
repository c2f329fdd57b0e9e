"""The templates ``ltr featureset init`` writes, one kind of signal each, safe on a dirty
catalogue: no template can make the engines' ``function_score`` negative (both reject
it), a document without the value does not match (its feature is missing, as every
other feature's is when it does not match, and as ``ltr predict`` reads it), and nothing
depends on the day it is computed (logged rows of different days mix in one file).

Each maker returns ``(feature, why)`` pairs: the feature as the plugin takes it, and
what its value means, kept in the file (``generated.why``)."""

from __future__ import annotations

import datetime as _dt

import numpy as np

from ..data.fields import date_of, number_of
from ..data.querytext import KEYWORDS
from ..transport.engine import QUERY_VECTOR, VectorKind

Q = "{{" + KEYWORDS + "}}"
#: skewness past which a non-negative number is log-scaled
SKEWED = 2.0
#: how far past the reference date a recency's decay starts (days): every date up to
#: twice this after the reference counts as new as the reference itself
RECENCY_HORIZON_DAYS = 36500


def feature(name: str, template, params=(KEYWORDS,)) -> dict:
    return {"name": name, "params": list(params), "template_language": "mustache",
            "template": template}


def bm25(field: str) -> tuple[dict, str]:
    return (feature(f"{field}_bm25", {"match": {field: Q}}), f"BM25 of the query in {field}")


def phrase(field: str) -> tuple[dict, str]:
    return (feature(f"{field}_phrase", {"match_phrase": {field: {"query": Q, "slop": 2}}}),
            f"the query as a phrase in {field} (slop 2)")


def all_terms(field: str) -> tuple[dict, str]:
    return (feature(f"{field}_all_terms", {"match": {field: {"query": Q, "operator": "and"}}}),
            f"BM25 when every query term is in {field} (missing otherwise)")


def combined(fields: list[str]) -> tuple[dict, str]:
    return (feature("all_text_bm25", {"multi_match": {"query": Q, "fields": fields,
                                                      "type": "best_fields", "tie_breaker": 0.3}}),
            f"BM25 over the text fields {', '.join(fields)}, the best field counting most")


def is_query(field: str, exact: str) -> tuple[dict, str]:
    """1 when the whole query is the value (``exact``: the keyword form of ``field``)."""
    term = {"term": {exact: {"value": Q, "case_insensitive": True}}}
    return (feature(f"{field}_is_query", {"constant_score": {"filter": term}}),
            f"1 when the whole query is a {field} value ({exact}), case-insensitive: a brand, "
            "category or type typed as the query; missing otherwise")


def identifier(field: str, exact: str) -> tuple[dict, str]:
    """1 when a word of the query, as typed, or the whole query, whatever its case, is
    the value: a SKU, EAN or model number typed alone or among other words."""
    each = {"match": {exact: {"query": Q, "analyzer": "whitespace"}}}
    whole = {"term": {exact: {"value": Q, "case_insensitive": True}}}
    return (feature(f"{field}_exact", {"constant_score": {"filter": {"bool": {
                "should": [each, whole], "minimum_should_match": 1}}}}),
            f"1 when a word of the query (split on spaces, as typed) or the whole query "
            f"(any case) is the {field} ({exact}): an identifier searched for; missing otherwise")


def number(field: str, values: list, low: float | None, high: float | None) -> tuple[dict, str] | None:
    """The value of ``field``: as it is, or log-scaled where the sample is skewed, when
    the index holds no negative value (``low``: its minimum, read from the index);
    else an affine map onto (0, 1] (a linear decay from the maximum). Documents without
    a value, or (first form) with a negative one indexed later, do not match. None when
    the sample has no number (text that is no number)."""
    x = np.asarray([v for v in map(number_of, values) if v is not None], dtype=float)
    if not len(x):
        return None
    low = float(x.min()) if low is None else min(low, float(x.min()))
    high = float(x.max()) if high is None else max(high, float(x.max()))
    if low >= 0:
        sd = float(x.std())
        skew = float(np.mean(((x - x.mean()) / sd) ** 3)) if sd > 0 else 0.0
        log = skew > SKEWED
        fvf = {"field": field, **({"modifier": "log1p"} if log else {})}
        how = (f"log10(1 + {field}), as the sample is skewed (skewness {skew:.1f})" if log else field)
        query = {"range": {field: {"gte": 0}}}      # a negative value added later: missing
        body = {"function_score": {"query": query, "field_value_factor": fvf, "boost_mode": "replace"}}
        return (feature(field, body, params=()),
                f"the value {how}; missing where the document has none (or a negative one)")
    span = high - low
    decay = {"linear": {field: {"origin": high + span, "offset": span, "scale": span, "decay": 0.5}}}
    body = {"function_score": {"query": {"exists": {"field": field}}, "functions": [decay],
                               "boost_mode": "replace"}}
    return (feature(field, body, params=()),
            f"{field} mapped onto (0, 1] as it holds negative values (index min {low:g}, max "
            f"{high:g}): 1 at the max or above, 0.5 at the min, 0 at {low - span:g} or below; "
            "missing where the document has none")


def recency(field: str, values: list, reference: _dt.date) -> tuple[dict, str] | None:
    """How recent ``field`` is at the fixed ``reference`` date (not now: a value is the
    same whatever day it is logged or served): 1 at or after it, halving every median
    age of the sample. Documents without a date do not match."""
    start = _dt.datetime.combine(reference, _dt.time(), _dt.timezone.utc)
    ages = [(start - t).total_seconds() / 86400 for t in map(date_of, values) if t is not None]
    if not ages:
        return None
    days = max(1, int(round(float(np.median(np.maximum(ages, 0))))))
    origin = (reference + _dt.timedelta(days=RECENCY_HORIZON_DAYS)).isoformat()
    decay = {"exp": {field: {"origin": origin, "offset": f"{RECENCY_HORIZON_DAYS}d",
                             "scale": f"{days}d", "decay": 0.5}}}
    body = {"function_score": {"query": {"exists": {"field": field}}, "functions": [decay],
                               "boost_mode": "replace"}}
    return (feature(f"{field}_recency", body, params=()),
            f"recency of {field} at the reference date {reference.isoformat()}: 1 on it or "
            f"after, 0.5 at the sample's median age ({days} days) before it; missing where "
            "the document has no date")


def flag(field: str) -> tuple[dict, str]:
    return (feature(f"{field}_true", {"constant_score": {"filter": {"term": {field: True}}}}, params=()),
            f"1 when {field} is true; missing otherwise")


def cosine(field: str, vectors: VectorKind) -> tuple[dict, str]:
    return ({"name": f"{field}_cosine", "params": vectors.feature_params(),
             "template_language": "mustache", "template": vectors.feature_template(field)},
            f"the cosine of the query's vector and {field} ({vectors.score}); the toolkit "
            f"encodes the query ({QUERY_VECTOR}) with the index's encoder")
