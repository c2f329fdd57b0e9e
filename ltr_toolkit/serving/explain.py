"""Why a document is where it is: the reranked top N of a live query with, per document,
its rank under the first stage and under the model, its grade when judged, its feature
values as the plugin logged them in the serving request itself (``ltr_log`` on the
rescore), and per-feature contributions that add up, with the stated baseline, to the
score the plugin served (``models.shapley`` over the plugin's own scoring of the stored
model, ``models.served``). The plugin's score of each document is shown beside the sum.
"""

from __future__ import annotations

import numpy as np

from ..data.querytext import fit_params
from ..errors import UserError
from ..features.featurelog import logged_values
from ..models.served import ServedModel
from ..models.shapley import contributions
from ..query.clauses import term_budget
from ..query.requests import MODEL_ONLY, Rescore, search_body, tie_ordered
from ..stores.model_store import get_model
from ..stores.params import model_params, with_window_ids
from ..stores.store import sltr
from ..transport.client import Connection, msearch_items
from ..transport.lookups import shard_count
from .rerank import _search, serving_params
from .serving import Serving

LOG = "ltr_toolkit_explain"
BASELINE = "a document that matches no feature (every feature missing)"


def served_model(conn: Connection, model: str, store: str | None = None) -> tuple[ServedModel, dict]:
    """(the stored model as the plugin scores it, its stored document); one line when absent."""
    stored = get_model(conn, model, store)
    if stored is None:
        raise UserError(f"model {model} not found in store {store or '(default)'}",
                        "list the models with `ltr model list`")
    return ServedModel.from_stored(stored), stored


def explain_query(conn: Connection, serving: Serving, params: dict, size: int = 10,
                  grades: dict[str, float] | None = None) -> dict:
    """The explanation of one query's reranked top ``size`` (see the module docstring).
    ``serving``: with its model; its rescore weights are ignored (the model's own score is
    what is explained). ``grades``: doc id -> grade of this query, when judged."""
    if not serving.model:
        raise UserError("explaining needs a model", "pass --model NAME")
    served, stored = served_model(conn, serving.model, serving.store)
    rescore = Rescore(serving.model, serving.window, serving.store, MODEL_ONLY)
    max_terms = serving.max_terms or term_budget(conn, serving.index, serving.first_stage,
                                                 params, model=serving.model, store=serving.store)
    params = fit_params(params, max_terms)
    first = serving.with_budget(max_terms).first_ids(conn, [params])[0] or []
    top = first[:serving.window]
    if not top:
        raise UserError(f"the first stage finds nothing for {params.get('keywords', '')!r} "
                        f"in index {serving.index}", "try another query or check --fields")
    mp = serving_params(conn, serving.index, [params], serving.first_stage, rescore,
                        first_ids=[first], encoder=serving.encoder)[0]
    body = search_body(serving.first_stage, params, len(top), rescore, model_params=mp,
                       top_ids=top if shard_count(conn, serving.index) > 1 else None)
    body["ext"] = {"ltr_log": {"log_specs": [{"name": LOG, "rescore_index": 0,
                                              "missing_as_zero": False}]}}
    resp = _search(conn, serving.index, serving.first_stage, serving.store, body)
    rank = {d: r for r, d in enumerate(first)}
    hits, _ = tie_ordered(resp["hits"]["hits"], size, len(top), rank)
    return _explained(served, hits, rank, grades or {}, params, stored)


def _explained(served: ServedModel, hits, rank, grades, params, stored) -> dict:
    names = served.names
    X = np.array([[np.nan if v is None else v for v in logged_values(h, len(names), LOG)]
                  for h in hits], dtype=np.float64).reshape(len(hits), len(names))
    local = served.score(X)
    phi, base = contributions(served.score, X)
    docs = []
    for i, h in enumerate(hits):
        docs.append({
            "rank": i + 1, "first_stage_rank": rank.get(h["_id"], -1) + 1, "id": h["_id"],
            "title": (h.get("_source") or {}).get("title", ""), "grade": grades.get(h["_id"]),
            "served_score": float(h["_score"]), "local_score": float(local[i]),
            "contributions_sum": float(base + phi[i].sum()),
            "features": {n: (None if np.isnan(x) else float(x)) for n, x in zip(names, X[i])},
            "contributions": {n: float(c) for n, c in zip(names, phi[i])}})
    return {"query": params.get("keywords", ""), "model": stored.get("name"),
            "model_type": served.kind, "baseline": {"document": BASELINE, "score": base},
            "documents": docs}


def explain_ranked(conn: Connection, serving: Serving, param_list: list[dict],
                   ranked: list[list[str]], first_ids: list[list[str]] | None = None,
                   batch: int = 50) -> tuple[list[dict[str, dict[str, float]]], float]:
    """Contributions of ``serving.model``'s features for the documents ``ranked`` lists
    per query (doc id -> feature -> contribution; a query the cluster failed: {}), and
    the baseline's score: one logging ``_msearch`` of the model's features per ``batch``
    queries, scored and explained here as :func:`explain_query` does."""
    served, _ = served_model(conn, serving.model, serving.store)
    rescore = Rescore(serving.model, serving.window, serving.store, MODEL_ONLY)
    params = [fit_params(p, serving.max_terms) for p in param_list]
    mp = serving_params(conn, serving.index, params, serving.first_stage, rescore,
                        first_ids=first_ids, encoder=serving.encoder, batch=batch)
    names = model_params(conn, serving.model, serving.store)
    bodies = [_log_body(with_window_ids(p, ids, names), ids, serving) for p, ids in zip(mp, ranked)]
    out: list[dict] = []
    base = 0.0
    for start in range(0, len(bodies), batch):
        items = msearch_items(conn, serving.index, bodies[start:start + batch],
                              search_type=serving.first_stage.search_type)
        for item, ids in zip(items, ranked[start:start + batch]):
            hits = {h["_id"]: h for h in item.get("hits", {}).get("hits", [])}
            found = [d for d in ids if d in hits]
            X = np.array([[np.nan if v is None else v for v in logged_values(hits[d], len(served.names), LOG)]
                          for d in found], dtype=np.float64).reshape(len(found), len(served.names))
            phi, base = contributions(served.score, X)
            out.append({d: dict(zip(served.names, map(float, row))) for d, row in zip(found, phi)})
    return out, base


def _log_body(model_params: dict, ids: list[str], serving: Serving) -> dict:
    logged = sltr(model_params, model=serving.model, store=serving.store, name=LOG)
    return {"size": len(ids), "_source": False,
            "query": {"bool": {"must": [logged], "filter": [{"terms": {"_id": list(ids)}}]}},
            "ext": {"ltr_log": {"log_specs": [{"name": LOG, "named_query": LOG,
                                               "missing_as_zero": False}]}}}


def explain_systems(conn: Connection, servings: dict[str, list[tuple[Serving, list[int]]]],
                    param_list: list[dict], ranked: dict[str, list[list[str]]], qids: list[str],
                    first_ids: list[list[str]] | None = None, size: int = 10) -> dict:
    """The report's ``explanations``: per system, per query, each of its top ``size``
    documents' contributions (a list in the feature order), from the model that ranked
    it, and each system's baseline (its score; the last fold's in cross-validation); ``servings``: system -> [(its serving with a model, the query positions it
    ranked)] (one per fold in cross-validation)."""
    out: dict = {"systems": {}}
    for system, parts in servings.items():
        per_q = out["systems"].setdefault(system, {})
        for serving, idx in parts:
            got, base = explain_ranked(conn, serving, [param_list[i] for i in idx],
                                       [ranked[system][i][:size] for i in idx],
                                       [first_ids[i] for i in idx] if first_ids else None)
            served, _ = served_model(conn, serving.model, serving.store)
            out["features"] = served.names
            out.setdefault("baselines", {})[system] = {"document": BASELINE, "score": base}
            for i, docs in zip(idx, got):
                per_q[qids[i]] = {d: list(c.values()) for d, c in docs.items()}
    return out


def doc_titles(conn: Connection, index: str, ids, fields: tuple[str, ...] = ("title",)) -> dict[str, str]:
    """Document id -> the first non-empty of ``fields`` (for reports), one ``_mget``."""
    ids = sorted(set(ids))
    if not ids:
        return {}
    resp = conn.client().mget(index=index, body={"ids": ids}, _source_includes=list(fields))
    out = {}
    for d in resp.get("docs", []):
        src = d.get("_source") or {}
        out[d["_id"]] = next((str(src[f]) for f in fields if src.get(f)), "")[:200]
    return out
