"""How many distinct query terms the cluster accepts for a first stage and a feature set
(or model): measured, not assumed, since the clause limit is the cluster's setting and
each feature's templates multiply it differently.

The probe sends queries of T made-up words (one token each in any analyzer that splits
on non-word characters) through the first stage, and through ``sltr`` with the feature
set or the model, and bisects T between 1 and :data:`PROBE_MAX` on the node's
"too many clauses" answer. The answer depends only on the cluster's limit, the first
stage and the features, so logging (feature set) and serving (its model) measure the same
number; it is recorded in logged data and model artifacts and is what
:func:`ltr_toolkit.data.querytext.fit_keywords` keeps.
"""

from __future__ import annotations

import json

from ..errors import UserError
from ..transport.client import Connection, item_error, msearch_items
from .firststage import FirstStage
from ..stores.params import QUERY_VECTOR, derived_depth, featureset_params, model_params
from ..stores.store import get_featureset, sltr
from ..indexing.vectors import placeholder_vector
from ..data.querytext import fit_params
from ..stores.params import NO_DOC, WINDOW_IDS, with_first_stage_ids
from .named import named_clauses

#: The largest term count probed; queries are cut to it even on a cluster without limit.
PROBE_MAX = 4096
_TOO_MANY = ("too_many_clauses", "too_many_nested_clauses", "maxclausecount",
             # a case-insensitive term's automaton (Lucene: at most 1,000 states), which a
             # long query outgrows: too long for the feature, as too many clauses are
             "automaton is too large")
_cache: dict[str, int] = {}


def probe_words(n: int) -> str:
    """``n`` distinct made-up words (letters only: one token in common analyzers)."""
    def word(i: int) -> str:
        s = ""
        while True:
            i, r = divmod(i, 26)
            s += chr(97 + r)
            if i == 0:
                return "qzx" + s
    return " ".join(word(i) for i in range(n))


def _needed(conn, featureset, model, store, features=None) -> list[str]:
    if features is not None:
        return featureset_params({"features": features})
    if not (model or featureset):
        return []
    if model:
        return model_params(conn, model, store)
    fs = get_featureset(conn, featureset, store)
    if fs is None:
        raise UserError(f"feature set {featureset} not found in store {store or '(default)'}",
                        "upload it with `ltr featureset upload FILE`")
    return featureset_params(fs)


def _bodies(n: int, params: dict, first_stage: FirstStage, featureset, model, store,
            features=None) -> list[dict]:
    p = {**params, "keywords": probe_words(n)}
    bodies = [{"size": 0, "query": first_stage.query(p)}]
    if features is not None:            # the named queries of named-query logging
        bodies.append({"size": 0, "query": {"bool": {"should": named_clauses(features, p)}}})
    elif model or featureset:
        ranked = sltr(p, featureset=featureset, model=model, store=store)
        bodies.append({"size": 0, "query": {"bool": {"filter": [ranked]}}})
    return bodies


def too_many_clauses(text: str) -> bool:
    """Whether an error's text is the cluster's "too many clauses" answer (a query too long)."""
    text = text.lower()
    return any(t in text for t in _TOO_MANY)


def _accepts(conn, index, n, params, first_stage, featureset, model, store, features=None) -> bool:
    items = msearch_items(conn, index, _bodies(n, params, first_stage, featureset, model, store,
                                               features))
    for item in items:
        if "error" in item:
            if too_many_clauses(json.dumps(item["error"])):
                return False
            raise item_error(item, conn, store)
    return True


def _bisect(accepts) -> int | None:
    """The largest T in [1, PROBE_MAX] ``accepts(T)`` holds for (None: not even 1)."""
    if accepts(PROBE_MAX):
        return PROBE_MAX
    if not accepts(1):
        return None
    lo, hi = 1, PROBE_MAX                      # lo accepted, hi rejected
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if accepts(mid) else (lo, mid)
    return lo


def _liked_ids(conn, index, first_stage, params, depth, budget) -> dict:
    """Derived first-stage id parameters from the first stage of ``params`` itself (its
    real top documents: features such as ``more_like_this`` seeded with them add their
    own clauses, which made-up ids would hide)."""
    body = {"query": first_stage.query(fit_params(params, budget)), "size": depth, "_source": False}
    item = msearch_items(conn, index, [body])[0]
    ids = [h["_id"] for h in item.get("hits", {}).get("hits", [])]
    return with_first_stage_ids({}, ids, depth)


def term_budget(conn: Connection, index: str, first_stage: FirstStage, params: dict,
                featureset: str | None = None, model: str | None = None,
                store: str | None = None, features: list[dict] | None = None,
                fresh: bool = False) -> int:
    """The most distinct query terms both the first stage and the ``sltr`` query (of the
    feature set or model, when one is given) accept on this cluster, at most
    :data:`PROBE_MAX`. ``params``: one query's template parameters (the longest query is
    the best sample): its keywords are replaced by probe words, its other parameters are
    kept, and features seeded with first-stage ids get the ids of its own first stage's
    top documents. Measured once per process for a first stage, feature set or model and
    set of parameter names, whatever the query (logging measures it once for all its
    queries and records it; serving without the record must not measure per query).
    ``features`` (the feature set's, templates included): probed as the named queries of
    named-query logging instead of ``sltr`` (no plugin needed). ``fresh``: measured again
    (the cluster rejected a query fitted to the kept budget)."""
    key = json.dumps([conn.display_url, index, first_stage.to_dict(), featureset, model, store,
                      sorted(k for k in params if k != "keywords"), features],
                     sort_keys=True, default=str)
    if key in _cache and not fresh:
        return _cache[key]
    fs_only = _bisect(lambda n: _accepts(conn, index, n, params, first_stage, None, None, store))
    best = fs_only
    needed = _needed(conn, featureset, model, store, features)
    depth = derived_depth(needed)
    if fs_only and (featureset or model or features is not None):
        liked = _liked_ids(conn, index, first_stage, params, depth, fs_only) if depth else {}
        if QUERY_VECTOR in needed and QUERY_VECTOR not in params:
            liked[QUERY_VECTOR] = placeholder_vector(conn, index)   # no clauses of its own
        if WINDOW_IDS in needed and WINDOW_IDS not in params:
            liked[WINDOW_IDS] = [NO_DOC]                            # an ids filter: no terms
        best = _bisect(lambda n: _accepts(conn, index, n, {**params, **liked}, first_stage,
                                          featureset, model, store, features))
    if not best:
        what = f"model {model}" if model else (f"feature set {featureset}" if featureset else "")
        raise UserError(f"the cluster rejects even a one-word query with the first stage {what} "
                        "for too many clauses", "check the templates and the cluster's "
                        "indices.query.bool.max_clause_count")
    _cache[key] = best
    return best
