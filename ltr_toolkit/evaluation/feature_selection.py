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

With more than :data:`QUERIES` useful queries the choice is made on a seeded sample of
that many. Used inside each outer fold of ``ltr evaluate cv`` (nested: the fold's own
queries play no part) and on all judged queries for the model deployed.
"""

from __future__ import annotations

import time

import numpy as np

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
        useful = [q for q in range(ds.n_queries) if np.ptp(ds.y[ds.query(q)]) > 0]
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

    def utilities(self, chosen: list[int], cands: list[int]) -> np.ndarray:
        """[len(cands), n]: each query's utility (module docstring, 1) with the cheap
        model on ``chosen`` + one candidate, every query scored by its inner fold's."""
        out = []
        for a in range(0, len(cands), BATCH):
            part = cands[a:a + BATCH]
            out.append(np.concatenate([self._fold(s, chosen, part) for s in self.sets], axis=1))
        return np.concatenate(out, axis=0)

    def _fold(self, fold, chosen, cands) -> np.ndarray:
        G, b, Z, y, off, first = fold
        idx = np.array([chosen + [c] for c in cands], dtype=np.int64)
        A = G[idx[:, :, None], idx[:, None, :]] + RIDGE * np.eye(idx.shape[1])
        W = np.linalg.solve(A, b[idx][..., None])[..., 0]
        P = Z[:, cands] * W[:, -1] + (Z[:, chosen] @ W[:, :-1].T if chosen else 0.0)
        d = np.stack([ndcg(P[:, j], y, off, self.k) for j in range(len(cands))]) - first
        return d - RISK * np.maximum(0.0, -d)


def forward_select(ds, cost: CostModel, limit_ms: float, k: int = 10, seed: int = 42,
                   folds: int = 3, keep: tuple = (), progress=None) -> dict:
    """The features of ``ds`` to serve under ``limit_ms`` (served p50 as ``cost``
    estimates it), chosen as the module docstring says, starting from ``keep`` (names).
    Returns {"features" (in ``ds``'s order), "steps": [{"feature", "gain", "noise",
    "ms"}], "stopped", "utility" (mean, vs the first stage), "estimated_ms",
    "limit_ms", "queries", "seconds"}. ``progress(done, total)``: after each step
    (total: the most steps the budget allows)."""
    t = time.monotonic()
    names = list(ds.feature_names)
    inner = _Inner(ds, k, seed, folds)
    chosen = [names.index(n) for n in keep if n in names]
    base = inner.utilities(chosen[:-1], chosen[-1:])[0] if chosen else np.zeros(inner.n)
    total = _most_steps(cost, names, chosen, limit_ms, inner.alive)
    steps, stopped = [], "every feature is chosen"
    while inner.n >= 2:
        now = [names[i] for i in chosen]
        cands = [c for c in range(len(names)) if c not in chosen and inner.alive[c]
                 and cost.of(now + [names[c]]) <= limit_ms]
        if not cands:
            stopped = "the budget affords no other feature" if len(chosen) < inner.alive.sum() \
                else stopped
            break
        j, step = _best(inner, chosen, cands, base, cost, now, names)
        if j is None:
            stopped = "no other feature raises the inner utility beyond its noise"
            break
        chosen.append(cands[j])
        base = step.pop("u")
        steps.append(step)
        if progress is not None:
            progress(len(steps), max(total, len(steps)))
    feats = [n for i, n in enumerate(names) if i in set(chosen)]
    return {"features": feats, "steps": steps, "stopped": stopped,
            "utility": float(base.mean()) if inner.n else 0.0,
            "estimated_ms": cost.of(feats), "limit_ms": float(limit_ms), "queries": inner.n,
            "seconds": round(time.monotonic() - t, 2)}


def _best(inner: _Inner, chosen, cands, base, cost: CostModel, now, names):
    """(index in ``cands`` of the feature to add, its step record with its utilities
    ``u``), or (None, None) when no candidate's gain is above its noise."""
    U = inner.utilities(chosen, cands)
    d = U - base
    gain = d.mean(axis=1)
    noise = d.std(axis=1, ddof=1) / np.sqrt(inner.n)
    red = inner.corr[np.ix_(cands, chosen)].max(axis=1) if chosen else np.zeros(len(cands))
    ms = np.array([cost.of(now + [names[c]]) - cost.of(now) for c in cands])
    score = gain * (1.0 - REDUNDANCY * red) / np.maximum(ms, MIN_MS)
    ok = (gain > 0) & (gain > max(NOISE, np.sqrt(2 * np.log(len(cands)))) * noise)
    if not ok.any():
        return None, None
    j = int(np.argmax(np.where(ok, score, -np.inf)))
    return j, {"feature": names[cands[j]], "gain": float(gain[j]), "noise": float(noise[j]),
               "ms": float(ms[j]), "u": U[j]}


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
