"""A deployed model's decay, pure (no cluster): its gain over the first stage (NDCG@k)
on a new snapshot's judged queries, tested against the per-query gains it showed on
queries it was not trained on, recorded in its artifact when it was made (``held_out``:
``ltr evaluate cv --deploy``'s outer folds, ``ltr train --valid``'s split;
``pipeline.evidence``). Its gain on its own training rows says nothing of decay (every
new query would look like one), and two significance results are not a test of a change.

The first stage's ranking is in the logged data: rows logged from the first stage's
candidates (``ltr log --window``; the sidecar's ``candidates``) are in its order, as
cross-validation reads them (``pipeline.tuning``); other rows are ranked by the
feature the sidecar names as the first stage (``first_stage_feature``). Queries whose
logged rows all share one grade are left out (NDCG tells nothing there).

The test (:func:`decay`), one-sided at :data:`ALPHA`: did the gain drop?

* on the new snapshot's queries the model has not seen (neither trained on nor in its
  held-out evidence), when it has at least two: their gains against the held-out gains,
  two independent samples (``rank.stats.two_sample``, Welch's statistic permuted);
* else on the held-out queries judged again: the per-query change, paired
  (``rank.stats.compare``); where the deployed model was trained on them (``ltr evaluate
  cv --deploy`` trains on every query) its gain now is optimistic, so this errs toward ok;
* else (only training queries, or no evidence recorded): not tested, and why.

The verdict follows from that test alone: ``degraded`` when p < ALPHA, else ``ok``
(``untested`` without a test). The interval is the change's at 1 - 2 ALPHA (two-sided,
so its upper end is the one-sided bound the test matches).
"""

from __future__ import annotations

import numpy as np

from ..data.dataset import graded
from ..rank import metrics as M
from ..rank import stats

ALPHA = stats.ALPHA
FIRST, MODEL = "first-stage", "model"


def first_stage_scores(X: np.ndarray, offsets: np.ndarray, side: dict) -> np.ndarray | None:
    """Per row, a score whose order within a query is the first stage's; None when the
    logged data records neither (not candidates, no first-stage feature)."""
    if side.get("candidates"):
        starts = np.repeat(offsets[:-1], np.diff(offsets))
        return -(np.arange(len(X)) - starts).astype(np.float64)    # rows in its order
    names = side.get("feature_names") or []
    feature = side.get("first_stage_feature")
    if feature in names:
        return np.nan_to_num(np.asarray(X[:, names.index(feature)], np.float64), nan=-np.inf)
    return None


def per_query(model: np.ndarray, first: np.ndarray, y: np.ndarray, offsets: np.ndarray,
              qids, k: int) -> dict:
    """{"qids", MODEL, FIRST}: NDCG@k per query of both rankings, over the queries whose
    rows do not all share one grade."""
    nm, nf = M.ndcg(model, y, offsets, k), M.ndcg(first, y, offsets, k)
    useful = graded(y, offsets)
    return {"qids": [str(q) for q, u in zip(qids, useful) if u], MODEL: nm[useful], FIRST: nf[useful]}


def gain(pq: dict, seed: int = 0) -> dict:
    """The model vs the first stage on ``pq``: means, the mean gain, its p-value (paired
    randomisation test) and interval, wins/ties/losses."""
    found = stats.compare({FIRST: pq[FIRST], MODEL: pq[MODEL]}, FIRST, seed=seed)
    t = found.tests[MODEL]
    return {"queries": found.units, "ndcg": {MODEL: found.means[MODEL], FIRST: found.means[FIRST]},
            "gain": t.mean_delta, "p_value": t.p_value, "ci": list(t.ci) if t.ci else None,
            "wins": t.wins, "ties": t.ties, "losses": t.losses}


def _take(pq: dict, at) -> dict:
    at = np.asarray(at, np.int64)
    return {"qids": [pq["qids"][i] for i in at], MODEL: np.asarray(pq[MODEL])[at],
            FIRST: np.asarray(pq[FIRST])[at]}


def _gains(pq: dict) -> np.ndarray:
    return np.asarray(pq[MODEL]) - np.asarray(pq[FIRST])


def two_sample_change(held: np.ndarray, now: np.ndarray, alpha: float = ALPHA, seed: int = 0) -> dict:
    """The change of the mean gain from the held-out queries to other, new ones: one-sided
    (a drop) permutation test, interval at 1 - 2 alpha."""
    t = stats.two_sample(held, now, alternative="less", confidence_level=1 - 2 * alpha, seed=seed)
    return {"test": "two-sample", "queries": list(t.sizes), "change": t.mean_delta,
            "p_value": t.p_value, "ci": list(t.ci), "level": 1 - 2 * alpha}


def paired_change(held: np.ndarray, now: np.ndarray, alpha: float = ALPHA, seed: int = 0) -> dict:
    """The per-query change of the gain on the same queries: one-sided (a drop) paired
    randomisation test, interval at 1 - 2 alpha."""
    found = stats.compare({"now": now, "held-out": held}, "now", alternative="greater",
                          confidence_level=1 - 2 * alpha, seed=seed)
    t = found.tests["held-out"]                       # held-out minus now: > 0 is a drop
    return {"test": "paired", "queries": [len(now), len(now)], "change": -t.mean_delta,
            "p_value": t.p_value, "ci": [-t.ci[1], -t.ci[0]], "level": 1 - 2 * alpha}


def decay(now: dict, held: dict | None, trained=(), alpha: float = ALPHA, seed: int = 0) -> dict:
    """The model's decay (see the module docstring): ``now``, :func:`per_query` of the new
    snapshot; ``held``, the artifact's ``held_out`` (None: not recorded); ``trained``, the
    queries the model was trained on."""
    if held is None:
        return untested(now, "the artifact records no gains on held-out queries (train it with "
                              "--valid, or deploy it with ltr evaluate cv --deploy)", seed)
    seen = set(map(str, trained)) | set(held["qids"])
    unseen = [i for i, q in enumerate(now["qids"]) if q not in seen]
    at = {q: i for i, q in enumerate(held["qids"])}
    common = [(at[q], j) for j, q in enumerate(now["qids"]) if q in at]
    gains_then, note = np.asarray(held["gains"], np.float64), None
    if len(unseen) >= 2:
        used = _take(now, unseen)
        moved = two_sample_change(gains_then, _gains(used), alpha, seed)
    elif len(common) >= 2:
        i, j = map(np.array, zip(*common))
        used = _take(now, j)
        moved = paired_change(gains_then[i], _gains(used), alpha, seed)
        n_trained = len(set(used["qids"]) & set(map(str, trained)))
        if n_trained:
            note = (f"the model was trained on {n_trained} of these {len(j)} queries: its gain "
                    "there is optimistic, so this test errs toward ok")
    else:
        return untested(now, f"the new snapshot's {len(now['qids'])} judged queries were all "
                              "trained on: their gain says nothing of decay", seed)
    return _verdict(gain(used, seed), held, moved, note, alpha)


def _verdict(g_now: dict, held: dict, moved: dict, note: str | None, alpha: float) -> dict:
    reasons = []
    if moved["p_value"] < alpha:
        reasons.append(f"its gain fell from {held['gain']:+.4f} (held out, {held['queries']} "
                       f"queries) to {g_now['gain']:+.4f} ({g_now['queries']} queries): change "
                       f"{moved['change']:+.4f}, one-sided p {moved['p_value']:.4f}, "
                       f"{moved['level']:.0%} CI {_ci(moved['ci'])}")
    summary = {k: held.get(k) for k in ("source", "k", "queries", "gain", "selected_on")}
    return {"verdict": "degraded" if reasons else "ok", "reasons": reasons, "alpha": alpha,
            "now": g_now, "held_out": summary, "change": moved, "note": note}


def untested(now: dict, why: str, seed: int = 0) -> dict:
    """No decay test: the gain now for information, and why not."""
    g_now = gain(now, seed) if len(now["qids"]) else None
    return {"verdict": "untested", "reasons": [], "alpha": ALPHA, "now": g_now,
            "held_out": None, "change": None, "note": f"decay not tested: {why}"}


def _ci(ci) -> str:
    return "?" if ci is None else f"[{ci[0]:+.4f}, {ci[1]:+.4f}]"
