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


# --------------------------------------------------------------------------- LambdaLoss weightings

WEIGHTINGS = ("ranknet", "lambdarank", "ndcg-loss2", "ndcg-loss2++")

#: NDCG-Loss2++'s default mu: LambdaRank's weight and NDCG-Loss2's in equal parts
#: (TF-Ranking's smooth_fraction 0.5; allRank defaults to 10). On the MSLR 5k extract,
#: 5-fold cross-validation over the training queries put mu = 1 ahead of mu = 10 for trees.
DEFAULT_MU = 1.0


def check_weighting(weighting: str) -> str:
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}, not {weighting!r}")
    return weighting


def loss2_discount(d) -> np.ndarray:
    """NDCG-Loss2's ``delta = 1/log2(1 + d) - 1/log2(2 + d)`` for a rank distance d >= 1
    (0 where d = 0: a document is not paired with itself)."""
    d = np.asarray(d, dtype=np.float64)
    safe = np.maximum(d, 1.0)
    return np.where(d >= 1, 1.0 / np.log2(1.0 + safe) - 1.0 / np.log2(2.0 + safe), 0.0)


def pair_weights(scores, labels, weighting: str = "lambdarank", k: int | None = None,
                 mu: float = DEFAULT_MU, gain=exp_gain) -> np.ndarray:
    """The [n, n] matrix W_ij of one query for a weighting of :data:`WEIGHTINGS` (0 on
    pairs with equal labels), from the current (descending, stable) score order."""
    check_weighting(weighting)
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    S = pair_signs(y)
    if weighting == "ranknet":
        return (S != 0).astype(np.float64)
    if weighting == "lambdarank":
        return delta_ndcg(s, y, k, gain)
    n = len(s)
    order = np.argsort(-s, kind="stable")
    ranks = np.empty(n, dtype=np.int64)
    ranks[order] = np.arange(n)
    g = gain(y)
    idcg = float(ideal_dcg(g, k))
    dG = np.abs(g[:, None] - g[None, :]) * (1.0 / idcg if idcg > 0 else 0.0)
    top = np.ones(n, dtype=bool) if k is None else ranks < k
    delta = loss2_discount(np.abs(ranks[:, None] - ranks[None, :])) * (top[:, None] | top[None, :])
    if weighting == "ndcg-loss2":
        return dG * delta
    return delta_ndcg(s, y, k, gain) + mu * dG * delta


def lambdaloss_cost(scores, labels, weighting: str = "lambdarank", sigma: float = 1.0,
                    k: int | None = None, mu: float = DEFAULT_MU, weights=None) -> float:
    """``sum over pairs y_i > y_j of W_ij C_ij`` with W from the current ranking (or
    ``weights``). W is constant between rank swaps, so this is the loss whose gradient
    :func:`lambdaloss_lambdas` returns (LambdaLoss with a hard assignment)."""
    s = np.asarray(scores, dtype=np.float64)
    W = pair_weights(s, labels, weighting, k, mu) if weights is None else weights
    S = pair_signs(labels)
    o = sigma * (s[:, None] - s[None, :])
    c = 0.5 * (1.0 - S) * o + np.logaddexp(0.0, -o)
    return float(np.sum(np.where(S > 0, W * c, 0.0)))


def lambdaloss_lambdas(scores, labels, weighting: str = "lambdarank", sigma: float = 1.0,
                       k: int | None = None, mu: float = DEFAULT_MU, return_hessian: bool = False):
    """``lambda_i = sum_j W_ij lambda_ij`` (and optionally the diagonal hessian) for one query."""
    W = pair_weights(scores, labels, weighting, k, mu)
    lambdas = (pair_lambdas(scores, labels, sigma) * W).sum(axis=-1)
    if not return_hessian:
        return lambdas
    return lambdas, _hessian(scores, labels, sigma, W)


# --------------------------------------------------------------------------- tree objective

#: Per-query normalisations of the tree objective: ``pairs`` scales a query's lambdas and
#: hessians by log2(1 + L) / L with L = sum over pairs of 2 |lambda_ij| (LightGBM's and
#: xgboost's rank:ndcg), ``documents`` uses L = sum_i |lambda_i| (the per-document net
#: lambdas), None leaves them unscaled.
QUERY_NORMALIZATIONS = ("pairs", "documents", None)


class RankPairs:
    """Lambdas and hessians of every document of a training set for the tree objective,
    vectorised over one flat list of pairs (no Python loop over queries or pairs per round).

    Pairs are held as pairs of *rank positions* (a, b), a < b, inside a query: with a
    truncation k only a < k (at least one document in the current top k), otherwise all.
    Everything that depends on positions only (the discount part of W) is computed once.
    Every round sorts the documents of each query by score, reads labels, gains and scores
    at the two positions of each pair, and sums ``W_ab lambda_ab`` into position a and
    ``-W_ab lambda_ab`` into position b (``np.bincount``), then maps positions back to
    documents. The numbers are those of :func:`lambdaloss_lambdas` query by query
    (``tests/test_lambdaloss.py``), optionally scaled per query (:data:`QUERY_NORMALIZATIONS`).
    ``score_normalization`` divides every pair weight by ``|s_a - s_b| + 0.01`` as xgboost's
    ``rank:ndcg`` does: pairs the model barely separates weigh more (the lambdas are then
    no longer the gradient of a fixed-weight loss). Pair arithmetic runs in ``dtype``
    (float32 by default: xgboost keeps gradients in float32), sums in float64.
    """

    def __init__(self, labels, offsets, weighting: str = "lambdarank", sigma: float = 1.0,
                 k: int | None = None, mu: float = DEFAULT_MU,
                 normalization: str | None = "pairs", score_normalization: bool = False,
                 gain=exp_gain, dtype=np.float32, chunk: int = 1 << 21):
        check_weighting(weighting)
        if normalization not in QUERY_NORMALIZATIONS:
            raise ValueError(f"query normalization must be one of {QUERY_NORMALIZATIONS}")
        y = np.asarray(labels, dtype=np.float64)
        offsets = np.asarray(offsets, dtype=np.int64)
        sizes = np.diff(offsets)
        self.n = int(offsets[-1])
        self.n_queries = len(sizes)
        self.sigma = float(sigma)
        self.normalization = normalization
        self.score_normalization = bool(score_normalization)
        self.weighting = weighting
        self.dtype = np.dtype(dtype)
        self.chunk = int(chunk)
        self.y = y
        self.row_query = np.repeat(np.arange(self.n_queries), sizes)
        self._tiebreak = np.arange(self.n)
        # gains normalised by the query's IDCG@k (a query without any gain: 0)
        g = gain(y)
        idcg = np.array([ideal_dcg(g[offsets[q]:offsets[q + 1]], k) for q in range(self.n_queries)])
        inv = np.divide(1.0, idcg, out=np.zeros_like(idcg), where=idcg > 0)
        self.G = g * inv[self.row_query]
        n_max = int(sizes.max()) if len(sizes) else 0
        disc = 1.0 / np.log2(np.arange(n_max) + 2.0)
        if k is not None:
            disc[k:] = 0.0
        A, B, W, starts, queries = [], [], [], [], []
        count = 0
        for q, n in enumerate(sizes.tolist()):
            if n < 2 or np.ptp(y[offsets[q]:offsets[q + 1]]) == 0:
                continue          # no pair with different labels: zero lambdas
            m = n if (k is None or weighting == "ranknet") else min(int(k), n)
            a, b = np.triu_indices(n, 1, m=n)
            keep = a < m
            a, b = a[keep], b[keep]
            if weighting == "ranknet":
                w = np.ones(len(a))
            elif weighting == "lambdarank":
                w = np.abs(disc[a] - disc[b])
            elif weighting == "ndcg-loss2":
                w = loss2_discount(b - a)
            else:
                w = np.abs(disc[a] - disc[b]) + mu * loss2_discount(b - a)
            nz = w > 0             # positions whose weight is 0 whatever the labels
            A.append(a[nz] + offsets[q])
            B.append(b[nz] + offsets[q])
            W.append(w[nz])
            starts.append(count)
            queries.append(q)
            count += int(nz.sum())
        cat = (lambda parts, dt: np.concatenate(parts).astype(dt) if parts else np.zeros(0, dt))
        self.A, self.B = cat(A, np.int64), cat(B, np.int64)
        self.Wpos = cat(W, self.dtype)
        self._starts = np.asarray(starts, dtype=np.int64)
        self._queries = np.asarray(queries, dtype=np.int64)
        if self.score_normalization:
            # per pair: positions of its query's first and last document
            qa = np.searchsorted(offsets, self.A, side="right") - 1
            self._first, self._last = offsets[qa], offsets[qa + 1] - 1

    @property
    def n_pairs(self) -> int:
        return len(self.A)

    def grad_hess(self, scores):
        """(lambdas, diagonal hessians) of every document for the current scores."""
        s = np.asarray(scores, dtype=np.float64)
        # positions: documents by (query, descending score); ties by input position
        order = np.lexsort((self._tiebreak, -s, self.row_query))
        ys, Gs = self.y[order].astype(self.dtype), self.G[order].astype(self.dtype)
        ss = s[order].astype(self.dtype)
        sig = self.dtype.type(self.sigma)
        pos_grad = np.zeros(self.n)
        pos_hess = np.zeros(self.n)
        pair_total = []
        for lo in range(0, self.n_pairs, self.chunk):
            hi = min(lo + self.chunk, self.n_pairs)
            a, b = self.A[lo:hi], self.B[lo:hi]
            sign = np.sign(ys[a] - ys[b])          # +1 where a is the better one
            if self.weighting == "ranknet":
                W = np.abs(sign)
            else:
                W = np.abs(Gs[a] - Gs[b]) * self.Wpos[lo:hi]
            gap = ss[a] - ss[b]                   # >= 0: a is ranked above b
            if self.score_normalization:
                # xgboost's rank:ndcg: W / (|s_a - s_b| + 0.01), unless the query's
                # scores are all equal (its first and last positions tie)
                spread = ss[self._first[lo:hi]] - ss[self._last[lo:hi]]
                W = np.where(spread > 0, W / (gap + self.dtype.type(0.01)), W)
            # p = 1 / (1 + exp(sigma (s_better - s_worse))), finite for any gap
            z = np.clip(sig * sign * gap, -50.0, 50.0)
            p = 1.0 / (1.0 + np.exp(z))
            lam = sig * W * p                      # |lambda_ab|; the better one gets -lam
            h = sig * lam * (1.0 - p)              # sigma^2 W p (1 - p)
            signed = sign * lam
            pos_grad -= np.bincount(a, signed, minlength=self.n)
            pos_grad += np.bincount(b, signed, minlength=self.n)
            pos_hess += np.bincount(a, h, minlength=self.n)
            pos_hess += np.bincount(b, h, minlength=self.n)
            if self.normalization == "pairs":
                pair_total.append(lam)
        grad = np.empty(self.n)
        hess = np.empty(self.n)
        grad[order] = pos_grad
        hess[order] = pos_hess
        if self.normalization is not None:
            if self.normalization == "pairs":
                total = np.zeros(self.n_queries)
                if self.n_pairs:
                    lam_all = np.concatenate(pair_total).astype(np.float64)
                    total[self._queries] = 2.0 * np.add.reduceat(lam_all, self._starts)
            else:
                total = np.bincount(self.row_query, np.abs(grad), minlength=self.n_queries)
            scale = np.divide(np.log2(1.0 + total), total, out=np.zeros_like(total), where=total > 0)
            grad *= scale[self.row_query]
            hess *= scale[self.row_query]
        return grad, hess


# --------------------------------------------------------------------------- batches

# --------------------------------------------------------------------------- training cache

class QueryPairs:
    """The label-only parts of one query's pair computation, computed once per query
    and reused at every step (the labels never change during training).

    ``U_ij = 1/2 (1 - S_ij)`` on pairs with different labels (1 where i is the worse
    document), ``A_ij`` marks those pairs, ``Wg_ij = |G_i - G_j|`` (gains over IDCG@k) for
    the NDCG weightings. A step then costs a handful of n x n operations in the dtype of
    the scores. :meth:`lambdas` gives any weighting of :data:`WEIGHTINGS`.
    """

    def __init__(self, labels, sigma: float = 1.0, k: int | None = None, gain=exp_gain,
                 dtype=np.float64, mu: float = DEFAULT_MU):
        y = np.asarray(labels, dtype=np.float64)
        self.n = len(y)
        self.sigma = float(sigma)
        self.k = k
        self.mu = float(mu)
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
        self._delta_by_distance = loss2_discount(np.arange(self.n)).astype(self.dtype)

    def _p(self, scores, rows=None):
        """1 / (1 + exp(sigma (s_i - s_j))) for i in ``rows`` (all by default), every j."""
        s = np.asarray(scores, dtype=self.dtype)
        x = self.sigma * ((s if rows is None else s[rows])[:, None] - s[None, :])
        # 1 / (1 + exp(sigma (s_i - s_j))), stable
        return 0.5 * (1.0 - np.tanh(0.5 * x))

    def ranknet(self, scores) -> np.ndarray:
        p = self._p(scores)
        return self.c - self.sigma * np.einsum("ij,ij->i", self.A, p)

    def _weights(self, s, weighting: str = "lambdarank") -> np.ndarray:
        order = np.argsort(-s, kind="stable")
        D = np.empty(self.n, dtype=self.dtype)
        D[order] = self._disc_by_rank
        if weighting == "lambdarank":
            return self.Wg * np.abs(D[:, None] - D[None, :])
        ranks = np.empty(self.n, dtype=np.int64)
        ranks[order] = np.arange(self.n)
        delta = self._delta_by_distance[np.abs(ranks[:, None] - ranks[None, :])]
        if self.k is not None and self.k < self.n:
            top = ranks < self.k
            delta = delta * (top[:, None] | top[None, :])
        if weighting == "ndcg-loss2":
            return self.Wg * delta
        return self.Wg * (np.abs(D[:, None] - D[None, :]) + self.dtype.type(self.mu) * delta)

    def lambdarank(self, scores) -> np.ndarray:
        return self.lambdas(scores, "lambdarank")

    def lambdas(self, scores, weighting: str = "lambdarank") -> np.ndarray:
        """One lambda per document for a weighting of :data:`WEIGHTINGS`."""
        if weighting == "ranknet":
            return self.ranknet(scores)
        check_weighting(weighting)
        s = np.asarray(scores, dtype=self.dtype)
        W = self._weights(s, weighting)
        p = self._p(s)
        return self.sigma * np.einsum("ij,ij->i", W, self.U - p)
