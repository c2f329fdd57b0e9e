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

``doc_weights`` (one weight per document, optional everywhere): a pair's weight is
multiplied by the weight of its *preferred* document (the one with the higher label),
``W_ij * w_i`` where ``y_i > y_j``. With clicks as labels and ``w_i = 1 / P(examined at
i's position)`` this is the inverse-propensity-weighted pairwise objective of unbiased
learning to rank (Joachims et al., WSDM 2017; Hu et al., WWW 2019): in expectation over
examination, every clicked-over-skipped pair counts as if all results had been seen.
None (or all ones) is the unweighted objective, to the bit.

This module is the per-query reference, in n x n NumPy arrays; ``rank.pairs`` computes the
same numbers over a whole training set (trees) or one query at a time (networks) with a
compiled pair loop (``rank.kernel``) that stores nothing per pair.
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


def preferred_weights(labels, doc_weights) -> np.ndarray:
    """[n, n]: the weight of the preferred document of each pair (the higher label;
    either one where labels tie, where no pair weight counts)."""
    y = np.asarray(labels, dtype=np.float64)
    w = np.asarray(doc_weights, dtype=np.float64)
    return np.where(y[:, None] >= y[None, :], w[:, None], w[None, :])


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
                    k: int | None = None, mu: float = DEFAULT_MU, weights=None,
                    doc_weights=None) -> float:
    """``sum over pairs y_i > y_j of W_ij C_ij`` with W from the current ranking (or
    ``weights``), times the preferred document's ``doc_weights``. W is constant between
    rank swaps, so this is the loss whose gradient :func:`lambdaloss_lambdas` returns
    (LambdaLoss with a hard assignment)."""
    s = np.asarray(scores, dtype=np.float64)
    W = pair_weights(s, labels, weighting, k, mu) if weights is None else weights
    if doc_weights is not None:
        W = W * preferred_weights(labels, doc_weights)
    S = pair_signs(labels)
    o = sigma * (s[:, None] - s[None, :])
    c = 0.5 * (1.0 - S) * o + np.logaddexp(0.0, -o)
    return float(np.sum(np.where(S > 0, W * c, 0.0)))


def lambdaloss_lambdas(scores, labels, weighting: str = "lambdarank", sigma: float = 1.0,
                       k: int | None = None, mu: float = DEFAULT_MU, return_hessian: bool = False,
                       doc_weights=None):
    """``lambda_i = sum_j W_ij lambda_ij`` (and optionally the diagonal hessian) for one
    query; ``doc_weights``: W_ij times the preferred document's weight."""
    W = pair_weights(scores, labels, weighting, k, mu)
    if doc_weights is not None:
        W = W * preferred_weights(labels, doc_weights)
    lambdas = (pair_lambdas(scores, labels, sigma) * W).sum(axis=-1)
    if not return_hessian:
        return lambdas
    return lambdas, _hessian(scores, labels, sigma, W)


# --------------------------------------------------------------------------- document weights, normalisations

def check_doc_weights(doc_weights, n: int) -> np.ndarray:
    """Document weights as float64, one per document, finite and >= 0 (a ValueError
    otherwise)."""
    w = np.asarray(doc_weights, dtype=np.float64).ravel()
    if len(w) != n:
        raise ValueError(f"doc_weights has {len(w)} values for {n} documents")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("doc_weights must be finite and >= 0")
    return w


#: Per-query normalisations of the tree objective: ``pairs`` scales a query's lambdas and
#: hessians by log2(1 + L) / L with L = sum over pairs of 2 |lambda_ij| (LightGBM's and
#: xgboost's rank:ndcg), ``documents`` uses L = sum_i |lambda_i| (the per-document net
#: lambdas), None leaves them unscaled.
QUERY_NORMALIZATIONS = ("pairs", "documents", None)
