"""A feature set held against the index it will be logged on, before it costs a run:
the fields its templates name (a misspelt field is a feature missing on every row), the
decays on fields that are no dates or numbers (a raw HTTP 400 at logging), and the
parameters the toolkit will not send (``{{query}}`` where it sends ``{{keywords}}``);
and, after logging, the features that were missing or constant on every row."""

from __future__ import annotations

import numpy as np

from ..data.featuresets import _parsed, _walk, template_params
from ..data.fields import NUMBERS, sub_properties, subfields, walk
from ..data.querytext import KEYWORDS
from ..stores.params import is_derived

#: queries whose keys are field names (``{"match": {"title": ...}}``)
_BY_KEY = ("match", "match_phrase", "match_phrase_prefix", "match_bool_prefix", "term", "terms",
           "prefix", "wildcard", "fuzzy", "regexp", "range", "rank_feature_field")
#: queries and functions that name their fields under "field" / "fields"
_BY_FIELD = ("exists", "field_value_factor", "knn", "rank_feature")
_BY_FIELDS = ("multi_match", "query_string", "simple_query_string", "more_like_this",
              "combined_fields")
DECAYS = ("gauss", "exp", "linear")
DECAY_TYPES = {"date", "date_nanos", "geo_point", *NUMBERS}
_DECAY_OPTIONS = ("multi_value_mode",)


def all_paths(properties: dict, prefix: str = "") -> dict[str, str]:
    """{dotted path: type} of every field a query can name, multi-fields included."""
    out = {}
    for path, spec in walk(properties, sub_properties, prefix):
        if "type" in spec or "properties" not in spec:
            out[path] = spec.get("type", "object")
        out.update((sub, sub_spec.get("type", "object")) for sub, sub_spec in subfields(path, spec))
    return out


def named_fields(template) -> list[tuple[str, str]]:
    """(field, how it is used) for every field a template names (wildcards and boosts
    stripped of their ``^N``; patterns with ``*`` left out)."""
    found = []
    for node in _walk(_parsed(template)):
        for key, value in node.items():
            if key in _BY_KEY and isinstance(value, dict):
                found += [(f, key) for f in value if f not in ("boost", "_name")]
            elif key in _BY_FIELD and isinstance(value, dict) and isinstance(value.get("field"), str):
                found.append((value["field"], key))
            elif key in _BY_FIELDS and isinstance(value, dict) and isinstance(value.get("fields"), list):
                found += [(str(f).split("^")[0], key) for f in value["fields"]]
            elif key in DECAYS and isinstance(value, dict):
                found += [(f, key) for f in value if f not in _DECAY_OPTIONS]
    return [(f, how) for f, how in found if "*" not in f and "{{" not in f]


def problems(featureset: dict, index: str, paths: dict[str, str], query_params=()) -> list[str]:
    """One line per problem of ``featureset`` on an index of these field ``paths``
    (:func:`all_paths`); ``query_params``: the parameters the user's judgments give per
    query (besides the query text, ``keywords``)."""
    known = {KEYWORDS, *query_params}
    out = []
    for f in featureset["features"]:
        if f.get("template_language", "mustache") != "mustache":
            continue
        name = f["name"]
        for field, how in named_fields(f["template"]):
            if field not in paths:
                out.append(f"feature {name}: field {field!r} ({how}) is not in {index}'s mapping: "
                           "it would be missing on every row; name a mapped field")
            elif how in DECAYS and paths[field] not in DECAY_TYPES:
                out.append(f"feature {name}: the {how} decay on {field!r}, a {paths[field]} field: "
                           "decays take dates, numbers or geo points")
        for p in sorted(template_params(f["template"])):
            if p not in known and not is_derived(p):
                out.append(f"feature {name}: the toolkit does not send {{{{{p}}}}}: it sends the query "
                           f"text as {{{{{KEYWORDS}}}}}; a parameter your judgments give per query "
                           f"is declared with --query-param {p}")
    return out


def dead_columns(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(missing on every row, one value on every row) per column of ``X`` (NaN: missing),
    vectorised; no rows: both False."""
    X = np.asarray(X, np.float64)
    have = ~np.isnan(X)
    missing = ~have.any(axis=0) & (len(X) > 0)
    lo = np.where(have, X, np.inf).min(axis=0, initial=np.inf)
    hi = np.where(have, X, -np.inf).max(axis=0, initial=-np.inf)
    return missing, have.all(axis=0) & (lo == hi) & (len(X) > 0)


def dead_features(X: np.ndarray, names: list[str]) -> list[str]:
    """One line per feature that no logged row can use: missing on every row, or one
    value on every row."""
    missing, constant = dead_columns(X)
    out = []
    for j, name in enumerate(names):
        if missing[j]:
            out.append(f"feature {name} is missing on every logged row (no candidate matched it): "
                       "check its template, or drop it")
        elif constant[j]:
            out.append(f"feature {name} is {X[0, j]:g} on every row: it tells the documents nothing apart")
    return out
