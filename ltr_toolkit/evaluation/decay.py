"""A deployed model's decay, pure (no cluster): its NDCG@k against the first stage's on a
snapshot's judged queries, now and at deployment, with the toolkit's paired tests and
intervals (:func:`ltr_toolkit.rank.stats.compare`).

The first stage's ranking is in the logged data: rows logged from the first stage's
candidates (``ltr log --window``; the sidecar's ``candidates``) are in its order, as
cross-validation reads them (``pipeline.tuning``); other rows are ranked by the
feature the sidecar names as the first stage (``first_stage_feature``). Queries whose
logged rows all share one grade are left out (NDCG tells nothing there).

The verdict is ``degraded`` when, at :data:`ALPHA`:

* the model now ranks significantly worse than the first stage; or
* it beat the first stage significantly at deployment and no longer does; or
* its gain over the first stage fell significantly: the per-query change of the gain,
  paired on the queries judged in both snapshots.

Otherwise ``ok``.
"""

from __future__ import annotations

import numpy as np

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
    sizes = np.diff(offsets)
    starts = np.minimum(offsets[:-1], max(len(y) - 1, 0))
    useful = (sizes > 0) & (np.maximum.reduceat(y, starts) > np.minimum.reduceat(y, starts)) \
        if len(y) else np.zeros(len(sizes), bool)
    return {"qids": [str(q) for q, u in zip(qids, useful) if u], MODEL: nm[useful], FIRST: nf[useful]}


def gain(pq: dict, seed: int = 0) -> dict:
    """The model vs the first stage on ``pq``: means, the mean gain, its p-value (paired
    randomisation test) and interval, wins/ties/losses."""
    found = stats.compare({FIRST: pq[FIRST], MODEL: pq[MODEL]}, FIRST, seed=seed)
    t = found.tests[MODEL]
    return {"queries": found.units, "ndcg": {MODEL: found.means[MODEL], FIRST: found.means[FIRST]},
            "gain": t.mean_delta, "p_value": t.p_value, "ci": list(t.ci) if t.ci else None,
            "wins": t.wins, "ties": t.ties, "losses": t.losses}


def change(then: dict, now: dict, seed: int = 0) -> dict | None:
    """The per-query change of the gain from ``then`` to ``now`` on the queries both
    hold (paired test, interval); None when they share no query."""
    at = {q: i for i, q in enumerate(then["qids"])}
    common = [(at[q], j) for j, q in enumerate(now["qids"]) if q in at]
    if not common:
        return None
    i, j = map(np.array, zip(*common))
    before = then[MODEL][i] - then[FIRST][i]
    after = now[MODEL][j] - now[FIRST][j]
    found = stats.compare({"deployment": before, "now": after}, "deployment", seed=seed)
    t = found.tests["now"]
    return {"queries": len(common), "change": t.mean_delta, "p_value": t.p_value,
            "ci": list(t.ci) if t.ci else None}


def decay(now: dict, then: dict | None = None, alpha: float = ALPHA, seed: int = 0) -> dict:
    """The model's decay (see the module docstring): ``now`` and ``then`` are
    :func:`per_query` of the newest snapshot and of the reference (None: not known)."""
    g_now = gain(now, seed)
    g_then = gain(then, seed) if then is not None and then["qids"] else None
    moved = change(then, now, seed) if g_then is not None else None
    reasons = []
    if g_now["gain"] < 0 and g_now["p_value"] < alpha:
        reasons.append(f"it ranks worse than the first stage (NDCG@k {g_now['gain']:+.4f}, "
                       f"p {g_now['p_value']:.4f})")
    beat_then = g_then is not None and g_then["gain"] > 0 and g_then["p_value"] < alpha
    if beat_then and not (g_now["gain"] > 0 and g_now["p_value"] < alpha):
        reasons.append(f"it no longer beats the first stage (gain {g_then['gain']:+.4f} at "
                       f"deployment, {g_now['gain']:+.4f} now, p {g_now['p_value']:.4f})")
    if moved is not None and moved["change"] < 0 and moved["p_value"] < alpha:
        reasons.append(f"its gain fell by {-moved['change']:.4f} (p {moved['p_value']:.4f}, "
                       f"95% CI {_ci(moved['ci'])})")
    return {"verdict": "degraded" if reasons else "ok", "reasons": reasons, "alpha": alpha,
            "now": g_now, "deployment": g_then, "change": moved}


def _ci(ci) -> str:
    return "?" if ci is None else f"[{ci[0]:+.4f}, {ci[1]:+.4f}]"
