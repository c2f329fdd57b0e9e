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
        disc = 1.0 / np.log2(np.arange(self.n) + 2.0)
        if k is not None:
            disc[k:] = 0.0
        self._disc_by_rank = disc.astype(self.dtype)

    def _p(self, scores, rows=None):
        """1 / (1 + exp(sigma (s_i - s_j))) for i in ``rows`` (all by default), every j."""
        s = np.asarray(scores, dtype=self.dtype)
        x = self.sigma * ((s if rows is None else s[rows])[:, None] - s[None, :])
        # 1 / (1 + exp(sigma (s_i - s_j))), stable
        return 0.5 * (1.0 - np.tanh(0.5 * x))

    def ranknet(self, scores) -> np.ndarray:
        p = self._p(scores)
        return self.c - self.sigma * np.einsum("ij,ij->i", self.A, p)

    def _weights(self, s) -> np.ndarray:
        order = np.argsort(-s, kind="stable")
        D = np.empty(self.n, dtype=self.dtype)
        D[order] = self._disc_by_rank
        return self.Wg * np.abs(D[:, None] - D[None, :])

    def lambdarank(self, scores) -> np.ndarray:
        s = np.asarray(scores, dtype=self.dtype)
        W = self._weights(s)
        p = self._p(s)
        return self.sigma * np.einsum("ij,ij->i", W, self.U - p)

    def grad_hess(self, scores, kind: str = "lambdarank"):
        """(lambdas, diagonal hessians) for the tree objective."""
        s = np.asarray(scores, dtype=self.dtype)
        if kind == "lambdarank" and self.k is not None and self.k < self.n:
            return self._grad_hess_topk(s)
        p = self._p(s)
        W = self._weights(s) if kind == "lambdarank" else self.A
        grad = self.sigma * np.einsum("ij,ij->i", W, self.U - p)
        hess = (self.sigma * self.sigma) * np.einsum("ij,ij->i", W, p * (1.0 - p))
        return grad, hess


    def _grad_hess_topk(self, s):
        """LambdaRank@k only over pairs with a document in the current top k: the others
        have |delta NDCG@k| = 0. k x n cells instead of n x n; the same numbers."""
        order = np.argsort(-s, kind="stable")
        top = order[: self.k]
        D = np.zeros(self.n, dtype=self.dtype)
        D[top] = self._disc_by_rank[: self.k]
        W = self.Wg[top] * np.abs(D[top][:, None] - D[None, :])
        p = self._p(s, top)
        T = W * (self.U[top] - p)
        H = W * (p * (1.0 - p))
        in_top = np.zeros(self.n, dtype=bool)
        in_top[top] = True
        # a pair (i in top, j outside) counts for j with the opposite sign (antisymmetry)
        grad = -np.where(in_top, 0.0, T.sum(axis=0))
        hess = np.where(in_top, 0.0, H.sum(axis=0))
        grad[top] += T.sum(axis=1)
        hess[top] += H.sum(axis=1)
        return self.sigma * grad, (self.sigma * self.sigma) * hess


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
