"""Template parameters of a query: what the feature set's Mustache templates receive.

Per query: ``keywords`` (the text), the judgment list's extra per-query parameters, and
parameters derived from the first stage's own results, the same way at logging and at
serving time:

* ``first_stage_id_1`` ... ``first_stage_id_N``: the ids of the first stage's top N hits
  (N = the highest such name a feature set uses), for pseudo-relevance-feedback features
  such as ``more_like_this`` seeded with the top documents. A query with fewer hits
  repeats its last id; one with none gets :data:`NO_DOC`, an id no document has.

* ``query_vector``: the query's vector by the encoder that made the index's document
  vectors (:mod:`ltr_toolkit.indexing.vectors`), for semantic features (a ``knn_score`` script). Computed in
  this process (a few ms) unless the caller passes it; no round trip.

* ``window_ids``: the ids of the documents being scored -- the logged candidates at
  logging, the first stage's top ``window`` at serving -- for features that score only
  the documents they are given (Elasticsearch's ``knn`` query: see ``transport.engine``).
  At serving it costs the same first round trip as the first-stage ids.

Using first-stage ids costs one extra round trip per query at serving time: a first request for the
top ids, then the rescore request with these params (see ``rerank.rerank_ids``; in your
own search code: run your first stage, take the top N ids, pass them as these params in
the ``sltr`` clause of the rescore).
"""

from __future__ import annotations

import hashlib
import json
import re

from ..data.featuresets import load_featureset
from ..errors import UserError
from ..indexing.vectors import QUERY_VECTOR
from ..transport.engine import WINDOW_IDS
from ..transport.client import Connection
from ..transport.lookups import model_document
from .store import get_document, get_featureset, store_path

DERIVED = re.compile(r"^first_stage_id_(\d+)$")
NO_DOC = "__ltr_toolkit_no_document__"


def featureset_params(featureset: dict) -> list[str]:
    """Every parameter the features of a stored feature set (or model) use, in order."""
    body = featureset.get("featureset", featureset)
    seen: list[str] = []
    for f in body.get("features", []):
        for p in f.get("params", []) or []:
            if p not in seen:
                seen.append(p)
    return seen


def derived_depth(names) -> int:
    """How many first-stage ids the parameters ask for (0: none)."""
    return max((int(m.group(1)) for n in names if (m := DERIVED.match(n))), default=0)


def with_first_stage_ids(params: dict, ids: list[str], depth: int) -> dict:
    if depth <= 0:
        return params
    ids = list(ids[:depth]) or [NO_DOC]
    ids += [ids[-1]] * (depth - len(ids))
    return {**params, **{f"first_stage_id_{i + 1}": d for i, d in enumerate(ids)}}


def uses_window(names) -> bool:
    return WINDOW_IDS in set(names)


def first_ids_depth(names, window: int) -> int:
    """How many first-stage ids serving needs before the rescore: the feedback
    features' depth, and the whole ``window`` when a feature takes :data:`WINDOW_IDS`."""
    return max(derived_depth(names), int(window) if uses_window(names) else 0)


def with_window_ids(params: dict, ids: list[str], names) -> dict:
    """``params`` with the scored documents' ids where a feature takes them."""
    if not uses_window(names):
        return params
    return {**params, WINDOW_IDS: list(ids) or [NO_DOC]}


def placeholder_params(names, vector: list[float] | None = None) -> dict:
    """Values for a query that only has to run (validating or loading a model): first-stage
    ids name no document (:data:`NO_DOC`), the query vector is ``vector`` (of the index's
    dimension: see ``vectors.placeholder_vector``), other parameters are ``"test"``."""
    out = {p: NO_DOC if DERIVED.match(p) else [NO_DOC] if p == WINDOW_IDS else "test"
           for p in names}
    if QUERY_VECTOR in out:
        if vector is None:
            raise UserError(f"a feature set using {QUERY_VECTOR} needs an index with vectors here",
                            "pass --index")
        out[QUERY_VECTOR] = vector
    return out


def is_derived(name: str) -> bool:
    """Computed by the toolkit (first-stage ids, the query vector, the scored documents'
    ids), not given per query."""
    return bool(DERIVED.match(name)) or name in (QUERY_VECTOR, WINDOW_IDS)


def check_params(needed, available: dict, qid: str, what: str) -> None:
    """Every parameter ``needed`` (derived ones aside) is in ``available``."""
    missing = [p for p in needed if p not in available and not is_derived(p)]
    if missing:
        raise UserError(f"{what} uses parameter(s) {', '.join(missing)} that query {qid} does "
                        f"not have (it has: {', '.join(sorted(available))})",
                        "add them as columns of the judgment list (CSV/JSONL), or fix the templates")


def stored_model(conn, model: str, store: str | None = None) -> dict:
    """The stored model's definition (read once per process and kept: see ``lookups``)."""
    doc = model_document(conn, model, store,
                         lambda: get_document(conn, f"{store_path(store)}/_model/{model}", store))
    if doc is None:
        raise UserError(f"model {model} not found in store {store or '(default)'}",
                        "`ltr model list` shows the stored models; `ltr model upload` adds one")
    return doc.get("model", {})


def model_params(conn, model: str, store: str | None = None) -> list[str]:
    """The parameters a stored model's feature set uses."""
    return featureset_params(stored_model(conn, model, store).get("feature_set", {}))


def thread_safe(conn, model: str, store: str | None = None) -> bool:
    """False for ``model/ranklib`` models: RankLib networks keep their activations in the
    model object, and the plugin (3.6) shares it between concurrent queries — measured:
    concurrent ``_msearch`` items got other queries' scores. Such models are queried one
    search at a time by the toolkit."""
    return stored_model(conn, model, store).get("model", {}).get("type") != "model/ranklib"


def featureset_info(conn: Connection, name: str, store: str | None) -> dict:
    """The stored feature set ``name``: its feature names, parameters and sha256 (what
    logged data and model artifacts record), or a one-line error when it is not there."""
    fs = get_featureset(conn, name, store)
    if fs is None:
        raise UserError(f"feature set {name} not found in store {store or '(default)'}",
                        "upload it with `ltr featureset upload FILE`")
    return _info(fs, name, store)


def _info(fs: dict, name: str, store: str | None) -> dict:
    body = fs.get("featureset", fs)
    names = [f["name"] for f in body["features"]]
    digest = hashlib.sha256(json.dumps(fs, sort_keys=True).encode()).hexdigest()
    return {"name": name, "store": store, "feature_names": names, "sha256": digest,
            "params": featureset_params(fs), "features": body["features"]}


def file_featureset_info(path) -> dict:
    """:func:`featureset_info` of a feature set file (validated), without a cluster: the
    same sha256 as the set's once uploaded (the store keeps it as ``{"name", "type",
    "featureset"}``), so data logged from the file and from the store compare equal."""
    body = load_featureset(path)
    doc = {"name": body["name"], "type": "featureset", "featureset": body}
    return dict(_info(doc, body["name"], None), source=str(path))
