"""Reference implementations that only tests and benchmarks use, kept out of the
package: lambdas over padded batches of queries (allRank style; the package computes
them per query), and a NumPy reproduction of xgboost's native ``rank:ndcg`` gradient
(pair method ``topk``) for like-for-like comparisons with the toolkit's objective
(``LambdaMART(pairs=lambda y: NativeTopKPairs(y, K))``)."""

from __future__ import annotations

import numpy as np

from ltr_toolkit.rank.lambdas import _sigmoid, delta_ndcg, exp_gain, ideal_dcg, pair_signs


def _buckets(sizes: np.ndarray, budget: int):
    """Group queries of similar size so that len(group) * n_max^2 stays under budget."""
    order = np.argsort(sizes, kind="stable")
    group: list[int] = []
    n_max = 0
    for q in order:
        n = int(sizes[q])
        if group and (len(group) + 1) * max(n_max, n) ** 2 > budget:
            yield np.asarray(group), n_max
            group, n_max = [], 0
        group.append(int(q))
        n_max = max(n_max, n)
    if group:
        yield np.asarray(group), n_max


def batch_lambdas(scores: np.ndarray, labels: np.ndarray, offsets: np.ndarray,
                  kind: str = "lambdarank", sigma: float = 1.0, k: int | None = None,
                  budget: int = 4_000_000):
    """Lambdas and hessians for every document of many queries at once.

    Queries are padded into buckets of similar size ([B, n_max] arrays, at most ``budget``
    pair cells each); queries without label variance contribute zeros.
    Returns (lambdas, hessians), each aligned with ``scores``.
    """
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.float64)
    offsets = np.asarray(offsets, dtype=np.int64)
    sizes = np.diff(offsets)
    lambdas = np.zeros_like(scores)
    hess = np.zeros_like(scores)
    for group, n_max in _buckets(sizes, budget):
        col = np.arange(n_max)
        mask = col[None, :] < sizes[group][:, None]
        rows = offsets[group][:, None] + np.minimum(col[None, :], np.maximum(sizes[group][:, None] - 1, 0))
        s = np.where(mask, scores[rows], 0.0)
        y = np.where(mask, labels[rows], -1.0)
        S = pair_signs(y)
        pm = mask[:, :, None] & mask[:, None, :]
        S = np.where(pm, S, 0.0)
        diff = s[:, :, None] - s[:, None, :]
        lam = sigma * (0.5 * (1.0 - S) - _sigmoid(-sigma * diff))
        p = _sigmoid(sigma * diff)
        h = sigma * sigma * p * (1.0 - p)
        active = S != 0
        if kind == "lambdarank":
            w = delta_ndcg(s, np.where(mask, y, 0.0), k, mask=mask)
            lam = lam * w
            h = h * w
        elif kind != "ranknet":
            raise ValueError(f"unknown lambda kind {kind!r}")
        lam_i = np.where(active, lam, 0.0).sum(axis=-1)
        h_i = np.where(active, h, 0.0).sum(axis=-1)
        lambdas[rows[mask]] = lam_i[mask]
        hess[rows[mask]] = h_i[mask]
    return lambdas, hess


class NativeTopKPairs:
    """xgboost's native ``rank:ndcg`` gradient (pair method ``topk``), reproduced with
    vectorised NumPy so that a custom objective can be compared with it like for like:
    pairs (a, b) of ranks with a < b and a < K in the current order; |delta NDCG| with
    untruncated discounts and IDCG@K; optional division by (|s_a - s_b| + 0.01); the
    hessian sigmoid(1 - sigmoid) * delta * 2; and per query the scale
    log2(1 + L) / L, L = sum of 2 |lambda_ab|. Sigma is 1, as in xgboost.
    """

    def __init__(self, labels, k: int, score_normalization: bool = True,
                 normalization: bool = True):
        y = np.asarray(labels, dtype=np.float64)
        self.y = y
        self.n = len(y)
        self.k = int(k)
        self.g = exp_gain(y)
        idcg = float(ideal_dcg(self.g, self.k))
        self.inv_idcg = 1.0 / idcg if idcg > 0 else 0.0
        self.disc = 1.0 / np.log2(np.arange(self.n) + 2.0)
        a = np.arange(self.n)
        self.upper = (a[:, None] < a[None, :]) & (a[:, None] < self.k)
        self.score_normalization = score_normalization
        self.normalization = normalization

    def grad_hess(self, scores):
        s = np.asarray(scores, dtype=np.float32).astype(np.float64)
        order = np.argsort(-s, kind="stable")
        ys, gs, ss = self.y[order], self.g[order], s[order]
        M = self.upper & (ys[:, None] != ys[None, :])
        delta = np.abs((gs[:, None] - gs[None, :]) * (self.disc[:, None] - self.disc[None, :])) * self.inv_idcg
        if self.score_normalization and ss[0] != ss[-1]:
            delta = delta / (np.abs(ss[:, None] - ss[None, :]) + 0.01)
        # orientation: +1 where the row document has the higher label
        sign = np.where(ys[:, None] > ys[None, :], 1.0, -1.0)
        sig = _sigmoid(sign * (ss[:, None] - ss[None, :]))      # sigmoid(s_high - s_low)
        lam_high = np.where(M, (sig - 1.0) * delta, 0.0).astype(np.float32).astype(np.float64)
        hess = np.where(M, np.maximum(sig * (1.0 - sig), 1e-16) * delta * 2.0, 0.0)
        hess = hess.astype(np.float32).astype(np.float64)
        # row doc gets lam_high when it is the high one, -lam_high when it is the low one
        g_rank = (sign * lam_high).sum(axis=1) - (sign * lam_high).sum(axis=0)
        h_rank = hess.sum(axis=1) + hess.sum(axis=0)
        if self.normalization:
            total = float(-2.0 * lam_high.sum())
            if total > 0:
                norm = np.log2(1.0 + total) / total
                g_rank, h_rank = g_rank * norm, h_rank * norm
        grad = np.empty(self.n)
        hes = np.empty(self.n)
        grad[order] = g_rank
        hes[order] = h_rank
        return grad, hes
