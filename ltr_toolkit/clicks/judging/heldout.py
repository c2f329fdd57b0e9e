"""Which click model fits these logs: every model fitted on the earlier searches and
scored on the later ones (held out), by how well it predicts their clicks.

Searches are ordered by their first event in the log (files are written as events
happen; the cluster's query records are read in order of timestamp, :mod:`ltr_toolkit.clicks.events.ubi`): the
last ``holdout`` fraction is held out. Each model gives every held-out row (a shown document) a click probability,
conditioned on the clicks above it in its search where the model says examination
depends on them (Chuklin et al., *Click Models for Web Search*, 2015, ch. 7):

* CTR: the pair's click rate; COEC: its rating x the CTR of the row's rank;
* PBM: theta_rank x alpha_pair; UBM: theta(rank, distance to the previous click) x alpha;
* SDBN: attractiveness x P(examined | the clicks above): 1 before any click; after the
  last click j above, (1 - s_j) prod(1 - a_i, j < i < r) / ((1 - s_j) prod(...) + s_j).

Pairs never seen in training get the model's average. The report per model: the mean
log-likelihood of a held-out row and the perplexity (2^-mean log2 P(observed click or
skip) per rank, averaged over ranks; 1 is perfect, 2 a coin). ``--model auto`` takes
the model of least perplexity.
"""

from __future__ import annotations

import numpy as np

from ..events.eventlog import EventLog
from ..events.groups import _search_ids, slice_log, aggregate, previous_click
from .clickmodels import COEC_MAX_RANK, MODELS, Estimates, estimate
from ..events.problems import Problems
from ..events.sessions import Table, build_table, detect_base

HOLDOUT = 0.2
EPS = 1e-6


def split(log: EventLog, holdout: float = HOLDOUT) -> tuple[EventLog, EventLog]:
    """(earlier searches, later searches) of ``log``; their data problems are counted
    apart (the full log's report counts them once)."""
    codes = np.unique(log.search)
    cut = codes[min(len(codes) - 1, int(len(codes) * (1 - holdout)))] if len(codes) else 0
    records = np.fromiter(set(log.record_text) | set(log.record_hits), np.int64)
    parts = []
    for mask, recs in ((log.search < cut, records[records < cut]), (log.search >= cut, records[records >= cut])):
        sub = slice_log(log, mask, set(recs.tolist()))
        sub.problems = Problems()
        parts.append(sub)
    return parts[0], parts[1]


def _lookup(est: Estimates, t: Table, values: np.ndarray, default: float) -> np.ndarray:
    n = max(len(t.docs), 1)
    keys = est.query.astype(np.int64) * n + est.doc
    want = t.query.astype(np.int64) * n + t.doc
    at = np.clip(np.searchsorted(keys, want), 0, max(len(keys) - 1, 0))
    found = (keys[at] == want) if len(keys) else np.zeros(len(want), bool)
    return np.where(found, values[at] if len(keys) else default, default)


def _mean(est: Estimates, values: np.ndarray) -> float:
    w = est.impressions.astype(float)
    return float((values * w).sum() / w.sum()) if w.sum() > 0 else 0.0


def probabilities(est: Estimates, t: Table, prev: np.ndarray) -> np.ndarray:
    """Each row's click probability under the fitted model ``est`` (see the docstring)."""
    a = _lookup(est, t, est.estimate, _mean(est, est.estimate))
    if est.model == "coec":
        rank_ctr = np.asarray(est.info["rank_ctr"] + [0.0])
        rating = _lookup(est, t, est.estimate, 1.0)
        return rating * rank_ctr[np.minimum(t.pos, len(rank_ctr) - 1)]
    if est.model == "pbm":
        theta = np.asarray(est.exam)
        return theta[np.minimum(t.pos, len(theta) - 1)] * a
    if est.model == "ubm":
        depth = int(np.sqrt(len(est.exam))) - 1
        pos = np.minimum(t.pos, depth - 1)
        dist = np.minimum(t.pos - prev, depth)
        return np.asarray(est.exam)[pos * (depth + 1) + dist] * a
    if est.model == "sdbn":
        return _sdbn(est, t, prev)
    return a


def _sdbn(est: Estimates, t: Table, prev: np.ndarray) -> np.ndarray:
    attract, satisfy = est.parts
    a = _lookup(est, t, attract, _mean(est, attract))
    s = _lookup(est, t, satisfy, _mean(est, satisfy))
    j = _row_of_previous_click(t, prev)
    after = j >= 0
    jj = np.maximum(j, 0)
    log_skip = np.concatenate([[0.0], np.cumsum(np.log(np.clip(1 - a, EPS, 1)))])
    between = np.exp(log_skip[np.arange(len(t))] - log_skip[jj + 1])    # rows j+1 .. r-1
    cont = (1 - s[jj]) * between
    examined = np.where(after, cont / np.maximum(cont + s[jj], EPS), 1.0)
    return a * examined


def _row_of_previous_click(t: Table, prev: np.ndarray) -> np.ndarray:
    """Per row: the row of the previous click in its search (-1: none); rows are sorted
    by search, then position."""
    width = int(t.pos.max(initial=0)) + 2
    key = t.search.astype(np.int64) * width + t.pos
    want = t.search.astype(np.int64) * width + prev
    at = np.minimum(np.searchsorted(key, want), max(len(key) - 1, 0))
    ok = (prev >= 0) & (key[at] == want) if len(key) else np.zeros(0, bool)
    return np.where(ok, at, -1)


def scores(p: np.ndarray, t: Table) -> dict:
    """Mean log-likelihood of a row, and perplexity (averaged over ranks)."""
    p = np.clip(p, EPS, 1 - EPS)
    log2 = np.where(t.click, np.log2(p), np.log2(1 - p))
    ranks = np.unique(t.pos)
    per_rank = np.array([2 ** -log2[t.pos == r].mean() for r in ranks])
    return {"log_likelihood": round(float(np.log(2) * log2.mean()), 6),
            "perplexity": round(float(per_rank.mean()), 6),
            "perplexity_by_rank": [round(float(x), 4) for x in per_rank[:10]]}


def choose_model(log: EventLog, positions="auto", depth: int = 50, prior: float | None = None,
                 max_rank: int = COEC_MAX_RANK, holdout: float = HOLDOUT) -> dict:
    """Every model fitted on the earlier searches, scored on the later ones; the report
    with ``chosen``: the model of least held-out perplexity."""
    base = detect_base(log, positions)
    earlier, later = split(log, holdout)
    train = aggregate(earlier, base, depth)
    test = build_table(later, base, depth)
    if not len(train) or not len(test):
        return {"chosen": None, "why": "too few searches to hold some out", "models": {}}
    start, gid = _search_ids(test)
    prev = previous_click(test, start, gid)
    models = {}
    for m in MODELS:
        est = estimate(train, m, prior, **({"max_rank": max_rank} if m == "coec" else {}))
        models[m] = scores(probabilities(est, test, prev), test)
    chosen = min(models, key=lambda m: models[m]["perplexity"])
    return {"chosen": chosen, "held_out": f"the last {holdout:.0%} of searches by first event",
            "train_searches": int(train.searches), "held_out_searches": int(start.sum()),
            "held_out_rows": len(test), "models": models}
