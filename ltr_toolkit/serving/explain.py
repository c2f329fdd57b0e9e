"""Why a document is where it is: the reranked top N of a live query with, per document,
its rank under the first stage and under the model, its grade when judged, its feature
values as the plugin logged them in the serving request itself (``ltr_log`` on the
rescore), and per-feature contributions that add up, with the stated baseline, to the
score the plugin served (``models.shapley`` over the plugin's own scoring of the stored
model, ``models.served``). The plugin's score of each document is shown beside the sum.

What is explained is what ranked: the model served as its serving contract says
(``stores.contract``), with the query prepared by the one path (``query.prepare``: the
query vector from the full text, then the long query shortened). A model served blended
with the first stage (``query_weight`` q, ``rescore_query_weight`` beta) scored
q x first stage + beta x model: its contributions are those of that function (the
model's scaled by beta, and the first stage's feature adding q x its value), and its
baseline beta x the model's.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from ..features.featurelog import logged_values
from ..models.served import ServedModel
from ..models.shapley import contributions
from ..query.prepare import QueryPlan
from ..query.requests import Rescore, search_body, tie_ordered
from ..stores.model_store import get_model
from ..stores.store import sltr
from ..transport.client import Connection, msearch_items
from ..transport.lookups import shard_count
from .rerank import _search
from .serving import Serving

LOG = "ltr_toolkit_explain"


class NothingFound(UserError):
    """The first stage finds no document for the query: nothing to explain."""
BASELINE = "a document that matches no feature (every feature missing)"


def served_model(conn: Connection, model: str, store: str | None = None) -> tuple[ServedModel, dict]:
    """(the stored model as the plugin scores it, its stored document); one line when absent."""
    stored = get_model(conn, model, store)
    if stored is None:
        raise UserError(f"model {model} not found in store {store or '(default)'}",
                        "list the models with `ltr model list`")
    return ServedModel.from_stored(stored), stored


def served_scorer(served: ServedModel, rescore: Rescore, model: str):
    """The served score of rows X (columns: ``served.names``) under ``rescore``'s weights:
    q x the first stage's feature + beta x the model (see the module docstring)."""
    q, beta = rescore.rescore_weights
    if q == 0.0:
        return served.score if beta == 1.0 else (lambda X: beta * served.score(X))
    feature = rescore.contract.first_stage_feature if rescore.contract else None
    if feature not in served.names:
        raise UserError(f"model {model} is served blended with the first stage (query_weight "
                        f"{q:g}), whose score is not one of its features: the explanation "
                        "would not add up to the served score",
                        "explain it served alone (--query-weight 0 --rescore-weight 1)")
    col = served.names.index(feature)
    return lambda X: q * np.nan_to_num(np.asarray(X, dtype=np.float64)[:, col]) + beta * served.score(X)


def _plan(conn: Connection, serving: Serving, sample: dict | None = None) -> tuple[Serving, QueryPlan]:
    if not serving.model:
        raise UserError("explaining needs a model", "pass --model NAME")
    s = serving.served(conn)
    return s, QueryPlan.for_model(conn, s.index, s.first_stage, s.rescore, s.max_terms,
                                  s.encoder, sample=sample)


def explain_query(conn: Connection, serving: Serving, params: dict, size: int = 10,
                  grades: dict[str, float] | None = None) -> dict:
    """The explanation of one query's reranked top ``size`` (see the module docstring).
    ``serving``: with its model, served as its contract says where ``serving`` leaves a
    setting None. ``grades``: doc id -> grade of this query, when judged."""
    s, plan = _plan(conn, serving, sample=params)
    served, stored = served_model(conn, s.model, s.store)
    scorer = served_scorer(served, s.rescore, s.model)
    first = plan.first_ids(conn, [params], max(plan.window, size, plan.first_depth))[0] or []
    top = first[:plan.window]
    if not top:
        raise NothingFound(f"the first stage finds nothing for {params.get('keywords', '')!r} "
                        f"in index {s.index}", "try another query or check --fields")
    mp = plan.params(conn, [params], first_ids=[first])[0]
    body = search_body(s.first_stage, plan.keywords(params), len(top), s.rescore, model_params=mp,
                       top_ids=top if shard_count(conn, s.index) > 1 else None)
    body["ext"] = {"ltr_log": {"log_specs": [{"name": LOG, "rescore_index": 0,
                                              "missing_as_zero": False}]}}
    resp = _search(conn, s.index, s.first_stage, s.store, body)
    rank = {d: r for r, d in enumerate(first)}
    hits, _ = tie_ordered(resp["hits"]["hits"], size, len(top), rank)
    rep = _explained(served, scorer, hits, rank, grades or {}, plan.keywords(params), stored)
    return dict(rep, rescore={"query_weight": s.rescore.rescore_weights[0],
                              "rescore_query_weight": s.rescore.rescore_weights[1]},
                contract=s.contract.to_dict() if s.contract else None)


def _explained(served: ServedModel, scorer, hits, rank, grades, params, stored) -> dict:
    names = served.names
    X = np.array([[np.nan if v is None else v for v in logged_values(h, len(names), LOG)]
                  for h in hits], dtype=np.float64).reshape(len(hits), len(names))
    local = scorer(X)
    phi, base = contributions(scorer, X)
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
    """Contributions of ``serving.model``'s features to its served score (as
    :func:`explain_query`: blended when its contract blends it) for the documents
    ``ranked`` lists per query (doc id -> feature -> contribution; a query the cluster
    failed: {}), and the baseline's score: one logging ``_msearch`` of the model's
    features per ``batch`` queries, the queries prepared as served (``query.prepare``)."""
    s, plan = _plan(conn, serving)
    served, _ = served_model(conn, s.model, s.store)
    scorer = served_scorer(served, s.rescore, s.model)
    mp = plan.params(conn, param_list, first_ids=first_ids, batch=batch)
    bodies = [_log_body(p, ids, s) for p, ids in zip(mp, ranked)]
    out: list[dict] = []
    base = float(scorer(np.full((1, len(served.names)), np.nan))[0])
    for start in range(0, len(bodies), batch):
        items = msearch_items(conn, s.index, bodies[start:start + batch],
                              search_type=s.first_stage.search_type)
        found, rows = [], []
        for item, ids in zip(items, ranked[start:start + batch]):
            hits = {h["_id"]: h for h in item.get("hits", {}).get("hits", [])}
            found.append([d for d in ids if d in hits])
            rows += [[np.nan if v is None else v for v in logged_values(hits[d], len(served.names), LOG)]
                     for d in found[-1]]
        # one call for the batch's documents (each row's contributions are its own)
        phi, base = contributions(scorer, np.array(rows, dtype=np.float64).reshape(
            len(rows), len(served.names)))
        at = np.cumsum([0] + [len(f) for f in found])
        out += [{d: dict(zip(served.names, map(float, row))) for d, row in zip(f, phi[a:b])}
                for f, a, b in zip(found, at[:-1], at[1:])]
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
    documents' contributions (a list in the feature order) to the score that ranked it,
    from the model that ranked it (one per fold in cross-validation: ``servings``: system
    -> [(its serving with a model, the query positions it ranked)]), and per system its
    baseline: the score of each query's own model (``by_query``; ``score``: theirs when
    they all agree, else None), with each model's weights (``models``)."""
    out: dict = {"systems": {}}
    for system, parts in servings.items():
        per_q = out["systems"].setdefault(system, {})
        base = out.setdefault("baselines", {}).setdefault(
            system, {"document": BASELINE, "score": None, "by_query": {}, "models": {}})
        for serving, idx in parts:
            got, score = explain_ranked(conn, serving, [param_list[i] for i in idx],
                                        [ranked[system][i][:size] for i in idx],
                                        [first_ids[i] for i in idx] if first_ids else None)
            served, _ = served_model(conn, serving.model, serving.store)
            out["features"] = served.names
            base["models"][serving.model] = {"score": score, "weights": list(
                serving.served(conn).rescore.rescore_weights)}
            for i, docs in zip(idx, got):
                per_q[qids[i]] = {d: list(c.values()) for d, c in docs.items()}
                base["by_query"][qids[i]] = score
        scores = {m["score"] for m in base["models"].values()}
        base["score"] = scores.pop() if len(scores) == 1 else None
    return out


def merge_explanations(into: dict, part: dict) -> dict:
    """``part`` (an :func:`explain_systems` answer, e.g. one fold's) merged into ``into``:
    each query keeps the contributions and the baseline of the model that ranked it."""
    into.setdefault("systems", {})
    for system, per_q in part.get("systems", {}).items():
        into["systems"].setdefault(system, {}).update(per_q)
    if "features" in part:
        into["features"] = part["features"]
    for system, b in part.get("baselines", {}).items():
        mine = into.setdefault("baselines", {}).setdefault(
            system, {"document": b["document"], "score": None, "by_query": {}, "models": {}})
        mine["by_query"].update(b["by_query"])
        mine["models"].update(b["models"])
        scores = {m["score"] for m in mine["models"].values()}
        mine["score"] = scores.pop() if len(scores) == 1 else None
    return into


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
