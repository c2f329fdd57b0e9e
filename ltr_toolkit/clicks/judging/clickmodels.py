"""Click models: one estimate per (query, document) pair from the rows of :mod:`ltr_toolkit.clicks.events.sessions`.

Every model is NumPy over the weighted groups of rows of :mod:`ltr_toolkit.clicks.events.groups` (``np.bincount``
per pair / per position): no loop over events or pairs; the EM models loop over
iterations only. ``prior`` is a number of
pseudo-observations pulling a pair's estimate towards the model's overall average (a Beta
prior): a pair seen twice and clicked once is not rated 0.5 with the confidence of one
seen 2,000 times.

* ``ctr`` — raw click-through rate, clicks / impressions: biased by position (the
  baseline the others are measured against).
* ``coec`` — clicks over expected clicks, as OpenSearch's Search Relevance Workbench
  computes it (its ``CoecClickModel``): the CTR of each rank r < ``max_rank`` over all
  queries, ``ctr_r = clicks at r / impressions at r``; per pair, over its impressions at
  ranks <= ``max_rank``, ``rating = clicks / (ctr_R * impressions)`` where R is the
  *smallest* rank the pair was seen at (``ctr_R`` = 0 for R = ``max_rank``), 0 when that
  is 0, rounded to 3 decimals. 1 = as often clicked as the average result at its rank.
  ``prior`` > 0 gives ``(clicks + prior) / (expected + prior)`` instead (not the
  Workbench's number; the default prior for COEC is 0). The numbers are the Workbench's
  on the same events when they carry ``user_query`` and hold no duplicates; here an event
  without ``user_query`` takes its ``ubi_queries`` record's (the Workbench skips it), a
  duplicated impression or click counts once (the Workbench counts every copy), and a
  pair seen only below ``max_rank`` is rated 0 (the Workbench does not list it).
* ``sdbn`` — simplified DBN (Chuklin et al., *Click Models for Web Search*, 2015): results
  at or above a search's last click were examined; attractiveness = clicks / examined,
  satisfaction = last clicks / clicks; estimate = attractiveness x satisfaction.
  A search without a click: the user, never satisfied, examined the whole list.
* ``pbm`` — position-based model, P(click) = theta_rank x alpha_pair, fitted by EM;
  estimate = alpha (attractiveness). theta is scaled so that position 0 is always examined.
* ``ubm`` — user browsing model: examination theta depends on the rank and on the distance
  to the previous click in the search; EM as for PBM; estimate = alpha.

PBM's and UBM's EM run to their fixed point: until a step moves no attractiveness by
``tol`` or more (at most :data:`EM_ITERATIONS` steps). From its flat start plain EM
moves slowly along the ridge where position and attractiveness trade off: on simulated
Cranfield searches (theta_r = 1/(r+1)) it needed about 1,000 steps, on 1 million
synthetic events about 5,900, and stopped at 100 (as it once was) it left theta at
about 0.5 from rank 2 down, the position bias mostly unremoved. SQUAREM (Varadhan and
Roland, 2008), the standard accelerator for such slow EM, extrapolates along the last
two steps' direction and stabilises with a third: the same fixed point (theta within
1e-4) in about a tenth of the steps (113 and 527 there).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import UserError
from ..events.groups import Groups, from_table
from ..events.sessions import Table

MODELS = ("ctr", "coec", "sdbn", "pbm", "ubm")
#: The most EM iterations of PBM and UBM (they stop earlier when converged, ``tol``).
EM_ITERATIONS = 10_000
#: a pair estimate's default prior strength, per model (COEC: 0, the Workbench's numbers)
DEFAULT_PRIOR = {"ctr": 1.0, "coec": 0.0, "sdbn": 1.0, "pbm": 1.0, "ubm": 1.0}
COEC_MAX_RANK = 20


@dataclass
class Estimates:
    model: str
    query: np.ndarray          # text code per pair
    doc: np.ndarray            # doc code per pair
    impressions: np.ndarray    # per pair
    clicks: np.ndarray         # per pair
    estimate: np.ndarray       # the model's estimate per pair
    info: dict = field(default_factory=dict)
    exam: np.ndarray | None = None      # PBM / UBM: examination per rank (UBM: and distance)
    parts: tuple | None = None          # SDBN: (attractiveness, satisfaction) per pair


def _shrunk(num, den, prior):
    """(num + prior * mean) / (den + prior), mean = sum(num) / sum(den); 0 where undefined."""
    mean = num.sum() / den.sum() if den.sum() > 0 else 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (num + prior * mean) / (den + prior)
    return np.nan_to_num(out, nan=0.0, posinf=0.0)


def ctr(g: Groups, pair, n_pairs, prior):
    clicks = np.bincount(pair, g.weight * g.click, n_pairs)
    return _shrunk(clicks, np.bincount(pair, g.weight, n_pairs), prior), {}


def coec(g: Groups, pair, n_pairs, prior, max_rank: int = COEC_MAX_RANK):
    use = g.pos <= max_rank
    pos, w, pair = g.pos[use], g.weight[use], pair[use]
    wc = w * g.click[use]
    shown = np.bincount(pos, w, max_rank + 1)[:max_rank]
    clicked = np.bincount(pos, wc, max_rank + 1)[:max_rank]
    rank_ctr = np.zeros(max_rank + 1)            # rank max_rank (kept by the filter): 0
    rank_ctr[:max_rank] = np.divide(clicked, shown, out=np.zeros(max_rank), where=shown > 0)
    low = np.full(n_pairs, max_rank, np.int64)
    np.minimum.at(low, pair, pos)
    c = np.bincount(pair, wc, n_pairs)
    expected = rank_ctr[low] * np.bincount(pair, w, n_pairs)
    if prior > 0:
        rating = (c + prior) / (expected + prior)
    else:
        rating = np.divide(c, expected, out=np.zeros(n_pairs), where=expected > 0)
    return np.round(rating, 3), {"rank_ctr": [round(float(x), 6) for x in rank_ctr[:max_rank]],
                                 "max_rank": max_rank}


def sdbn(g: Groups, pair, n_pairs, prior):
    clicks = np.bincount(pair, g.weight * g.click, n_pairs)
    attract = _shrunk(clicks, np.bincount(pair, g.weight * g.examined, n_pairs), prior)
    satisfy = _shrunk(np.bincount(pair, g.weight * g.is_last, n_pairs), clicks, prior)
    return attract * satisfy, {"_parts": (attract, satisfy)}


def _em_map(g: Groups, pair, n_pairs, prior, exam, ref, n_exam):
    """One EM step for P(click) = theta[exam] * alpha[pair], as a map of x = [alpha,
    theta] (theta[ref] scaled to 1); the work is per group (:mod:`ltr_toolkit.clicks.events.groups`), each weighted
    by its rows."""
    click, w = g.click, g.weight
    seen = np.bincount(pair, w, n_pairs)
    per_exam = np.bincount(exam, w, n_exam)

    def step(x: np.ndarray) -> np.ndarray:
        alpha, theta = x[:n_pairs], x[n_pairs:]
        a, th = alpha[pair], theta[exam]
        denom = np.maximum(1.0 - th * a, 1e-12)
        post_a = np.where(click, 1.0, (1.0 - th) * a / denom)
        post_t = np.where(click, 1.0, th * (1.0 - a) / denom)
        new = np.bincount(pair, w * post_a, n_pairs)
        new = (new + prior * new.sum() / seen.sum()) / (seen + prior)
        theta = np.divide(np.bincount(exam, w * post_t, n_exam), per_exam, out=theta.copy(), where=per_exam > 0)
        scale = theta[ref] if theta[ref] > 0 else 1.0
        return np.r_[np.clip(new * scale, 0.0, 1.0), np.clip(theta / scale, 0.0, 1.0)]
    return step


def _em(g: Groups, pair, n_pairs, prior, exam, ref, iters, tol, n_exam=None):
    """EM to its fixed point, accelerated by SQUAREM (module docstring): (alpha, theta,
    EM steps taken). Done when a plain step moves no alpha by ``tol`` or more."""
    n_exam = n_exam or int(exam.max(initial=0)) + 1
    step = _em_map(g, pair, n_pairs, prior, exam, ref, n_exam)
    x, steps = np.full(n_pairs + n_exam, 0.5), 0
    while steps < iters:
        x1 = step(x)
        x2 = step(x1)
        steps += 2
        if np.abs(x2[:n_pairs] - x1[:n_pairs]).max(initial=0.0) < tol:
            return x2[:n_pairs], x2[n_pairs:], steps
        x = _squarem(step, x, x1, x2)
        steps += 1
    return x[:n_pairs], x[n_pairs:], steps


def _squarem(step, x, x1, x2) -> np.ndarray:
    """SQUAREM's extrapolation from x through two EM steps (Varadhan & Roland, Scand. J.
    Statist. 2008, scheme S3), kept in [0, 1] and stabilised by one more EM step; the
    plain two steps' x2 when the step length is -1 or anything is not finite."""
    r, v = x1 - x, x2 - 2.0 * x1 + x
    vv = float(v @ v)
    length = min(-np.sqrt(float(r @ r) / vv), -1.0) if vv > 0 else -1.0
    if length == -1.0:
        return x2
    out = step(np.clip(x - 2.0 * length * r + length * length * v, 0.0, 1.0))
    return out if np.all(np.isfinite(out)) else x2


def pbm(g: Groups, pair, n_pairs, prior, iters: int = EM_ITERATIONS, tol: float = 1e-6):
    alpha, theta, it = _em(g, pair, n_pairs, prior, g.pos.astype(np.int64), 0, iters, tol)
    return alpha, {"theta": [round(float(x), 6) for x in theta], "iterations": it, "_exam": theta}


def ubm(g: Groups, pair, n_pairs, prior, iters: int = EM_ITERATIONS, tol: float = 1e-6):
    depth = int(g.pos.max(initial=0)) + 1
    exam = g.pos.astype(np.int64) * (depth + 1) + g.dist      # dist 1 .. depth
    alpha, theta, it = _em(g, pair, n_pairs, prior, exam, 1, iters, tol, (depth + 1) ** 2)
    return alpha, {"iterations": it, "theta_no_click": [round(float(theta[r * (depth + 1) + r + 1]), 6)
                                                        for r in range(depth)], "_exam": theta}


def estimate(t: Table | Groups, model: str, prior: float | None = None, **opts) -> Estimates:
    """The model's estimates for every (query, document) pair of ``t`` (rows or groups)."""
    fns = {"ctr": ctr, "coec": coec, "sdbn": sdbn, "pbm": pbm, "ubm": ubm}
    if model not in fns:
        raise UserError(f"unknown click model {model!r}", f"use one of {', '.join(MODELS)}")
    if not len(t):
        raise UserError("no usable impressions in the events (see the data report)")
    prior = DEFAULT_PRIOR[model] if prior is None else float(prior)
    if prior < 0:
        raise UserError(f"prior {prior:g}: expected a number >= 0")
    g = from_table(t) if isinstance(t, Table) else t
    pair, q, d = g.pairs()
    est, info = fns[model](g, pair, len(q), prior, **opts)
    exam, parts = info.pop("_exam", None), info.pop("_parts", None)
    return Estimates(model=model, query=q, doc=d, exam=exam, parts=parts,
                     impressions=np.round(np.bincount(pair, g.weight, len(q))).astype(np.int64),
                     clicks=np.round(np.bincount(pair, g.weight * g.click, len(q))).astype(np.int64),
                     estimate=np.asarray(est, float), info=dict(info, prior=prior))
