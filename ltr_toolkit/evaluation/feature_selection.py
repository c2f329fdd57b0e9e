"""A feature set chosen by evidence and by its serving cost: greedy forward selection
under a served-latency budget, fast, risk-aware.

Anchors: Gigli et al., "Fast Feature Selection for Learning to Rank" (ICTIR 2016: greedy,
a redundancy penalty, a cheap model), Lucchese and Nardini's ICTIR 2017 tutorial on
efficiency/effectiveness trade-offs (a feature is worth its ms), de Sousa et al. (CIKM
2016: a set that helps on average but fails some queries badly is not a good set).

On logged candidates (rows in the first stage's order):

1. Each query's utility against the first stage: u = d - RISK x max(0, -d), d the
   query's NDCG@k minus the first stage's (the URisk of Wang et al. 2012, alpha
   :data:`RISK`): a loss counts (1 + RISK) times a win of the same size.
2. The cheap model: least squares (ridge :data:`RIDGE`) of the grades on the
   standardised features (missing as 0, as the linear model serves it), under
   ``folds``-fold inner cross-validation: every candidate of a step is fitted at once
   from the folds' Gram matrices (one batched solve), then scored on its held-out queries.
3. Start from ``keep`` (the first stage's feature: a blend needs it); at each step, among
   the features the budget still affords (:class:`.feature_timing.CostModel`, the
   served p50 estimated as the sum of its parts), those whose gain in mean utility is
   above its noise (standard errors of the paired per-query differences: at least
   sqrt(2 ln C) of them among C candidates, about where the best of C features of pure
   noise lands, so noise is not chosen for being the luckiest of many),
   add the best gain per ms, the gain discounted for redundancy: x (1 - REDUNDANCY x the
   largest |correlation| with a feature already chosen). Stop when none is left.
4. Ties cost requests: served, a query whose model ties some of its top ``k + 1`` hits
   needs a second, small request (the first stage's order of the tied hits), and one
   tied at the cut a deeper fetch too (``serving.rerank``). Few features, or coarse ones
   (flags, exact matches), tie often: on MSRD two BM25 features tied on 60% of queries and
   served at 2.4x the first stage where twelve served at 1.8x. Each set's cost is its
   estimate plus its tie rate among the held-out queries of the cheap model (equal
   scores: equal feature values) times a first-stage request, and its rate of ties at the
   cut times a served request more; so a feature that breaks ties can lower the cost.

With more than :data:`QUERIES` useful queries the choice is made on a seeded sample of
that many. Used inside each outer fold of ``ltr evaluate cv`` (nested: the fold's own
queries play no part) and on all judged queries for the model deployed.
"""

from __future__ import annotations

import time

import numpy as np

from ..data.dataset import graded
from ..rank.metrics import ndcg
from .feature_timing import CostModel

#: a query's loss against the first stage counts (1 + RISK) times a gain of its size
RISK = 1.0
#: the gain of a feature is discounted by REDUNDANCY x its largest |correlation| with
#: the features already chosen (an exact copy: half its gain)
REDUNDANCY = 0.5
#: a feature is added only when its gain exceeds max(NOISE, sqrt(2 ln C)) standard
#: errors of the per-query differences it makes (C: the step's candidates)
NOISE = 1.0
#: the cheap model's ridge (on standardised features: a few rows' worth)
RIDGE = 1.0
#: the least ms a feature is counted to cost in the gain per ms (the measure's noise)
MIN_MS = 0.05
#: useful queries beyond which the choice is made on a seeded sample of this many
QUERIES = 2000
#: candidates fitted at once (bounds the memory of one batch of predictions)
BATCH = 32


class _Inner:
    """The inner folds of one selection: per fold, the training rows' Gram matrix and
    the held-out queries' standardised features, grades and first-stage NDCG."""

    def __init__(self, ds, k: int, seed: int, folds: int):
        useful = np.flatnonzero(graded(ds.y, ds.offsets)).tolist()
        if len(useful) > QUERIES:
            pick = np.random.default_rng(seed).choice(len(useful), QUERIES, replace=False)
            useful = [useful[i] for i in np.sort(pick)]
        self.n = len(useful)
        sub = ds.subset(useful)
        X = np.nan_to_num(sub.X.astype(np.float64))
        sd = X.std(axis=0)
        self.alive = sd > 0
        Z = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
        self.corr = np.abs(np.nan_to_num(np.corrcoef(Z.T))) if Z.shape[1] > 1 else np.ones((1, 1))
        where = np.random.default_rng(seed).permutation(self.n) % max(2, min(folds, self.n))
        rows = np.repeat(where, sub.group_sizes)
        self.k, self.sets = k, []
        for f in np.unique(where):
            tr, va = rows != f, rows == f
            y = sub.y[tr] - sub.y[tr].mean()
            off = np.concatenate([[0], np.cumsum(sub.group_sizes[where == f])])
            first = ndcg(-np.arange(int(va.sum()), dtype=np.float64), sub.y[va], off, k)
            self.sets.append((Z[tr].T @ Z[tr], Z[tr].T @ y, Z[va], sub.y[va], off, first))

    def utilities(self, chosen: list[int], cands: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """([len(cands), n] each query's utility (module docstring, 1) with the cheap
        model on ``chosen`` + one candidate, every query scored by its inner fold's;
        [len(cands), 2] the shares of the queries it ties in the top k + 1, and at the
        cut: :func:`ties_at_top`)."""
        out, ties = [], []
        for a in range(0, len(cands), BATCH):
            part = cands[a:a + BATCH]
            got = [self._fold(s, chosen, part) for s in self.sets]
            out.append(np.concatenate([u for u, _ in got], axis=1))
            ties.append(np.concatenate([t for _, t in got], axis=2).mean(axis=2))
        return np.concatenate(out, axis=0), np.concatenate(ties, axis=0)

    def _fold(self, fold, chosen, cands) -> tuple[np.ndarray, np.ndarray]:
        G, b, Z, y, off, first = fold
        idx = np.array([chosen + [c] for c in cands], dtype=np.int64)
        A = G[idx[:, :, None], idx[:, None, :]] + RIDGE * np.eye(idx.shape[1])
        W = np.linalg.solve(A, b[idx][..., None])[..., 0]
        P = Z[:, cands] * W[:, -1] + (Z[:, chosen] @ W[:, :-1].T if chosen else 0.0)
        d = np.stack([ndcg(P[:, j], y, off, self.k) for j in range(len(cands))]) - first
        return d - RISK * np.maximum(0.0, -d), ties_at_top(P, off, self.k)


def ties_at_top(P: np.ndarray, off: np.ndarray, k: int) -> np.ndarray:
    """[columns of P, 2, queries] (bool): per column of scores ``P`` ([rows, columns],
    queries at ``off``), whether the top ``k + 1`` by score hold two equal scores, and
    whether the ``k``-th and the next are equal (a tie at the cut)."""
    sizes = np.diff(off)
    width = int(max(sizes.max(initial=0), 1))
    q = np.repeat(np.arange(len(sizes)), sizes)
    pos = np.arange(len(q)) - off[q]
    pad = np.full((P.shape[1], len(sizes), width), -np.inf)
    pad[:, q, pos] = P.T
    top = -np.sort(-pad, axis=2)[:, :, :k + 1]
    same = (top[:, :, 1:] == top[:, :, :-1]) & np.isfinite(top[:, :, 1:])
    cut = same[:, :, k - 1] if k >= 1 and same.shape[2] >= k else np.zeros(same.shape[:2], bool)
    return np.stack([same.any(axis=2), cut], axis=1)


def tie_cost(cost: CostModel, names, rates) -> float:
    """The estimated served p50 of a model on ``names`` with its tie ``rates`` (any tie
    in the top k + 1, a tie at the cut): a first-stage request for the one, a served
    request more for the other (module docstring, 4)."""
    base = cost.of(names)
    return base + float(rates[0]) * cost.first_ms + float(rates[1]) * base


def forward_select(ds, cost: CostModel, limit_ms: float, k: int = 10, seed: int = 42,
                   folds: int = 3, keep: tuple = (), progress=None) -> dict:
    """The features of ``ds`` to serve under ``limit_ms`` (served p50 as ``cost``
    estimates it), chosen as the module docstring says, starting from ``keep`` (names).
    A step may pass the limit by the requests its ties cost (a feature alone ties what
    the next one breaks): the set served is the longest run of steps whose estimate,
    ties included, is within it (none: the first stage alone, ``features`` empty).
    Returns {"features" (in ``ds``'s order), "steps": [{"feature", "gain", "noise",
    "ms", "ties", "estimated_ms"}], "stopped", "utility" (mean, vs the first stage),
    "estimated_ms", "tie_rates", "limit_ms", "queries", "seconds"}. ``progress(done,
    total)``: after each step (total: the most steps the budget allows)."""
    t = time.monotonic()
    names = list(ds.feature_names)
    inner = _Inner(ds, k, seed, folds)
    chosen = [names.index(n) for n in keep if n in names]
    state = (np.zeros(inner.n), np.zeros(2))
    if chosen and inner.n:
        U, T = inner.utilities(chosen[:-1], chosen[-1:])
        state = (U[0], T[0])
    total = _most_steps(cost, names, chosen, limit_ms, inner.alive)
    steps, stopped, start = [], "every feature is chosen", len(chosen)
    fits = [(0, state)]          # (steps taken, state) of each set within the limit, ties included
    while inner.n >= 2:
        now = [names[i] for i in chosen]
        cands = [c for c in range(len(names)) if c not in chosen and inner.alive[c]
                 and cost.of(now + [names[c]]) <= limit_ms]
        j, step = _best(inner, chosen, cands, state, cost, now, names) \
            if cands else (None, {"stopped": "the budget affords no other feature"})
        if j is None:
            stopped = step["stopped"] if len(chosen) < inner.alive.sum() else stopped
            break
        chosen.append(cands[j])
        state = (step.pop("u"), step.pop("rates"))
        steps.append(step)
        if step["estimated_ms"] <= limit_ms:
            fits.append((len(steps), state))
        if progress is not None:
            progress(len(steps), max(total, len(steps)))
    taken, (base, rates) = fits[-1]
    if taken < len(steps):
        stopped += f"; the last {len(steps) - taken} steps' ties cost more than the budget"
    kept = set(chosen[:start + taken])
    feats = [n for i, n in enumerate(names) if i in kept]
    return {"features": feats, "steps": steps[:taken], "stopped": stopped,
            "utility": float(base.mean()) if inner.n else 0.0,
            "estimated_ms": tie_cost(cost, feats, rates), "tie_rates": [float(r) for r in rates],
            "limit_ms": float(limit_ms), "queries": inner.n,
            "seconds": round(time.monotonic() - t, 2)}


def _best(inner: _Inner, chosen, cands, now_state, cost: CostModel, now, names):
    """(index in ``cands`` of the feature to add, its step record with its utilities
    ``u``, tie ``rates`` and estimate with them), or (None, {"stopped": why}) when no
    candidate's gain is above its noise (``now_state``: the chosen set's utilities and
    tie rates). The gain per ms counts the ms the ties add or save."""
    base, rates = now_state
    U, T = inner.utilities(chosen, cands)
    d = U - base
    gain = d.mean(axis=1)
    noise = d.std(axis=1, ddof=1) / np.sqrt(inner.n)
    red = inner.corr[np.ix_(cands, chosen)].max(axis=1) if chosen else np.zeros(len(cands))
    est = np.array([tie_cost(cost, now + [names[c]], T[j]) for j, c in enumerate(cands)])
    ms = est - tie_cost(cost, now, rates)
    score = gain * (1.0 - REDUNDANCY * red) / np.maximum(ms, MIN_MS)
    ok = (gain > 0) & (gain > max(NOISE, np.sqrt(2 * np.log(len(cands)))) * noise)
    if not ok.any():
        return None, {"stopped": "no other feature raises the inner utility beyond its noise"}
    j = int(np.argmax(np.where(ok, score, -np.inf)))
    return j, {"feature": names[cands[j]], "gain": float(gain[j]), "noise": float(noise[j]),
               "ms": float(ms[j]), "ties": [float(r) for r in T[j]],
               "estimated_ms": float(est[j]), "u": U[j], "rates": T[j]}


def _most_steps(cost: CostModel, names, chosen, limit_ms, alive) -> int:
    """The most features the budget affords beyond ``chosen``, the cheapest first."""
    now, n = [names[i] for i in chosen], 0
    for c in sorted((c for c in range(len(names)) if c not in chosen and alive[c]),
                    key=lambda c: cost.features.get(names[c], 0.0)):
        if cost.of(now + [names[c]]) > limit_ms:
            break
        now.append(names[c])
        n += 1
    return max(n, 1)


def subset_featureset(features: list[dict], kept: list[str], name: str) -> dict:
    """The feature set file of the kept features, in the stored set's order, as
    ``ltr featureset upload`` reads it."""
    keep = set(kept)
    return {"name": name, "features": [f for f in features if f["name"] in keep]}
