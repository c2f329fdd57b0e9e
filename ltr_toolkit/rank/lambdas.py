"""The factorised lambda objective, vectorised over pairs (no Python loop over pairs).

Notation (seed 003, Burges' "From RankNet to LambdaRank to LambdaMART"): for a query,
``S_ij = sign(y_i - y_j)``, pair cost

    C_ij = 1/2 (1 - S_ij) sigma (s_i - s_j) + log(1 + exp(-sigma (s_i - s_j)))

and ``lambda_ij = dC_ij/ds_i = sigma (1/2 (1 - S_ij) - 1 / (1 + exp(sigma (s_i - s_j))))``.
The per-document lambda is ``lambda_i = sum_{j: i > j} lambda_ij - sum_{j: j > i} lambda_ji``,
which equals ``sum_j |S_ij| lambda_ij`` over ordered pairs (because lambda_ji = -lambda_ij).
So ``lambda_i = dC/ds_i`` for the summed cost C = sum over pairs {i, j} in I of C_ij, and
a gradient step is ``w -= eta * sum_i lambda_i ds_i/dw``: one backward pass per document.

LambdaRank multiplies every pair's lambda by ``|delta NDCG@k|`` of swapping i and j in
the current score order. Hessians (``d^2 C / ds_i^2``, with the same weights) feed the
tree objective. Everything is computed with ``tanh`` forms that stay finite for score
gaps of any size.
"""

from __future__ import annotations

import numpy as np


def _sigmoid(x):
    """1 / (1 + exp(-x)), stable for any magnitude."""
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def pair_signs(labels: np.ndarray) -> np.ndarray:
    """S_ij = sign(y_i - y_j) over the last two axes."""
    y = np.asarray(labels, dtype=np.float64)
    return np.sign(y[..., :, None] - y[..., None, :])


def pair_lambdas(scores: np.ndarray, labels: np.ndarray, sigma: float = 1.0) -> np.ndarray:
    """Matrix of ``lambda_ij = dC_ij/ds_i`` for every ordered pair (0 where S_ij = 0)."""
    s = np.asarray(scores, dtype=np.float64)
    S = pair_signs(labels)
    diff = s[..., :, None] - s[..., None, :]
    # 1 / (1 + exp(sigma * diff)) == sigmoid(-sigma * diff)
    lam = sigma * (0.5 * (1.0 - S) - _sigmoid(-sigma * diff))
    return np.where(S != 0, lam, 0.0)


def pair_cost(scores: np.ndarray, labels: np.ndarray, sigma: float = 1.0) -> float:
    """C = sum over unordered pairs with different labels of C_ij (seed 003, eq. 2)."""
    s = np.asarray(scores, dtype=np.float64)
    S = pair_signs(labels)
    o = sigma * (s[:, None] - s[None, :])
    c = 0.5 * (1.0 - S) * o + np.logaddexp(0.0, -o)
    return float(np.sum(np.where(S > 0, c, 0.0)))


def ideal_dcg(gains: np.ndarray, k: int | None) -> np.ndarray:
    """DCG@k of the gains sorted best first (over the last axis)."""
    g = -np.sort(-np.asarray(gains, dtype=np.float64), axis=-1)
    disc = 1.0 / np.log2(np.arange(g.shape[-1]) + 2.0)
    if k is not None:
        disc[k:] = 0.0
    return np.sum(g * disc, axis=-1)


def exp_gain(labels):
    return np.power(2.0, np.asarray(labels, dtype=np.float64)) - 1.0


def delta_ndcg(scores: np.ndarray, labels: np.ndarray, k: int | None = None,
               gain=exp_gain, mask: np.ndarray | None = None) -> np.ndarray:
    """|delta NDCG@k| of swapping i and j in the current (descending score) order.

    Works on [n] or on a padded batch [Q, n] with ``mask`` marking real documents.
    Ties in score are broken by position (stable), as the metrics do.
    """
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
        y = np.where(mask, y, 0.0)
    order = np.argsort(-s, axis=-1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(s.shape[-1]), axis=-1)
    disc = 1.0 / np.log2(ranks + 2.0)
    if k is not None:
        disc = np.where(ranks < k, disc, 0.0)
    g = gain(y)
    if mask is not None:
        g = np.where(mask, g, 0.0)
    idcg = ideal_dcg(g, k)
    inv = np.divide(1.0, idcg, out=np.zeros_like(idcg), where=idcg > 0)
    d = np.abs(g[..., :, None] - g[..., None, :]) * np.abs(disc[..., :, None] - disc[..., None, :])
    return d * inv[..., None, None]


def ranknet_lambdas(scores, labels, sigma: float = 1.0, return_hessian: bool = False):
    """dC/ds_i for one query (seed 003's lambda_i). Optionally the diagonal hessian."""
    lam = pair_lambdas(scores, labels, sigma)
    lambdas = lam.sum(axis=-1)
    if not return_hessian:
        return lambdas
    return lambdas, _hessian(scores, labels, sigma, None)


def lambdarank_lambdas(scores, labels, sigma: float = 1.0, k: int | None = None,
                       return_hessian: bool = False):
    """LambdaRank: every pair's RankNet lambda times |delta NDCG@k| of swapping it."""
    w = delta_ndcg(scores, labels, k)
    lam = pair_lambdas(scores, labels, sigma) * w
    lambdas = lam.sum(axis=-1)
    if not return_hessian:
        return lambdas
    return lambdas, _hessian(scores, labels, sigma, w)


def _hessian(scores, labels, sigma, weights):
    s = np.asarray(scores, dtype=np.float64)
    S = pair_signs(labels)
    p = _sigmoid(sigma * (s[..., :, None] - s[..., None, :]))
    h = sigma * sigma * p * (1.0 - p)
    h = np.where(S != 0, h, 0.0)
    if weights is not None:
        h = h * weights
    return h.sum(axis=-1)


# --------------------------------------------------------------------------- batches

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


# --------------------------------------------------------------------------- training cache

class QueryPairs:
    """The label-only parts of one query's pair computation, computed once per query
    and reused at every step (the labels never change during training).

    ``U_ij = 1/2 (1 - S_ij)`` on pairs with different labels (1 where i is the worse
    document), ``A_ij`` marks those pairs, ``Gd_ij = |G_i - G_j|`` for LambdaRank. A step
    then costs a handful of n x n operations in the dtype of the scores.
    """

    def __init__(self, labels, sigma: float = 1.0, k: int | None = None, gain=exp_gain,
                 dtype=np.float64):
        y = np.asarray(labels, dtype=np.float64)
        self.n = len(y)
        self.sigma = float(sigma)
        self.k = k
        self.dtype = np.dtype(dtype)
        S = pair_signs(y)
        self.A = (S != 0).astype(self.dtype)
        self.U = (0.5 * (1.0 - S) * (S != 0)).astype(self.dtype)
        self.c = self.sigma * self.U.sum(axis=1)
        g = gain(y)
        idcg = float(ideal_dcg(g, k))
        self.Wg = (np.abs(g[:, None] - g[None, :]) * (1.0 / idcg if idcg > 0 else 0.0)).astype(self.dtype)
        self.useful = bool(np.ptp(y) > 0) if self.n else False
        disc = 1.0 / np.log2(np.arange(self.n) + 2.0)
        if k is not None:
            disc[k:] = 0.0
        self._disc_by_rank = disc.astype(self.dtype)

    def _p(self, scores):
        s = np.asarray(scores, dtype=self.dtype)
        x = self.sigma * (s[:, None] - s[None, :])
        # 1 / (1 + exp(sigma (s_i - s_j))), stable
        return 0.5 * (1.0 - np.tanh(0.5 * x))

    def ranknet(self, scores) -> np.ndarray:
        p = self._p(scores)
        return self.c - self.sigma * np.einsum("ij,ij->i", self.A, p)

    def lambdarank(self, scores) -> np.ndarray:
        s = np.asarray(scores, dtype=self.dtype)
        order = np.argsort(-s, kind="stable")
        D = np.empty(self.n, dtype=self.dtype)
        D[order] = self._disc_by_rank
        W = self.Wg * np.abs(D[:, None] - D[None, :])
        p = self._p(s)
        return self.sigma * np.einsum("ij,ij->i", W, self.U - p)
