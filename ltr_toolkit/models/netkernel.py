"""The linear model's epoch compiled by numba: per query, in the epoch's order, the
factorised update of :meth:`NeuralRanker.step_query` (scores ``X w + b``, one lambda per
document from ``rank.kernel``, the gradient ``X^T lambda`` and ``sum lambda``, one
optimiser step), with no Python between the queries.

Why: a query holds about a hundred documents and a linear model a few weights, so
NumPy's per-call overhead was nearly all of a step (measured: 20 us a step through
NumPy, 6.5 us compiled). Networks with hidden layers keep NumPy's step: there BLAS's
matrix products and NumPy's vectorised tanh beat the loops numba compiles here (6-64-16-1:
72 us a step through NumPy, 180 us compiled). The arithmetic is NumPy's, in the model's
dtype, summed in another order: a step agrees with ``step_query`` to rounding
(tests/test_netkernel.py), not bit for bit.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..rank.kernel import _pair_sums, _sorted


@njit(cache=True, nogil=True, fastmath=True, error_model="numpy")
def _update(flat, grad, decay, state, hyper):
    """One optimiser step on ``flat``: ``hyper`` (lr, beta1, beta2, eps, adam?) with
    ``state`` (m, v, step count in a 1-array); weight decay first (``decay`` x flat)."""
    m, v, t = state
    lr, b1, b2, eps, adam = hyper
    grad += decay * flat
    if not adam:
        flat -= lr * grad
        return
    t[0] += 1
    c1 = 1.0 - b1 ** t[0]
    c2 = 1.0 - b2 ** t[0]
    for i in range(len(flat)):
        g = grad[i]
        m[i] = m[i] * b1 + (1.0 - b1) * g
        v[i] = v[i] * b2 + (1.0 - b2) * (g * g)
        flat[i] -= (lr / c1) * m[i] / (np.sqrt(v[i] / c2) + eps)


@njit(cache=True, nogil=True, fastmath=True, error_model="numpy")
def _lambdas(s, labels, lo, hi, mode, lam_opts):
    """One query's lambdas in row order (``rank.kernel.query_lambdas`` on rows lo..hi)."""
    y, G, w, _, order = labels
    (disc, cl, cd, delta), k, ranknet, sigma = lam_opts
    n = hi - lo
    ss, ys, Gs, ws, idx = _sorted(s, y, G, w, order, lo, hi)
    m = n if (k < 0 or ranknet) else min(k, n)
    g = np.zeros(n)
    h = np.zeros(n)
    _pair_sums(ss, ys, Gs, ws, m, ranknet, disc, cl, cd, delta, sigma, False, mode, g, h)
    out = np.empty(n)
    out[idx - lo] = g
    return out


@njit(cache=True, nogil=True, fastmath=True, error_model="numpy")
def linear_epoch(X, offsets, queries, labels, net, opt, lam_opts):
    """One pass over ``queries`` (in that order) of the linear model's factorised update.
    ``labels``: (y, normalised gains, document weights or an empty array, each query's
    commonest label, the last scores' order per query), by row of ``X``
    (``rank.pairs.QueryLambdas.labels``); ``net``: (flat parameters: the weights then the
    bias, flat gradient buffer, decay); ``opt``: (state, hyper) of :func:`_update`;
    ``lam_opts``: ``QueryLambdas.options``."""
    flat, grad, decay = net
    d = X.shape[1]
    s = np.empty(len(labels[0]))
    for q in queries:
        lo, hi = offsets[q], offsets[q + 1]
        for r in range(lo, hi):
            acc = flat[d]
            for i in range(d):
                acc += X[r, i] * flat[i]
            s[r] = acc
        lam = np.empty(hi - lo, dtype=flat.dtype)       # the lambdas in the model's dtype
        lam[:] = _lambdas(s, labels, lo, hi, labels[3][q], lam_opts)
        grad[:] = 0.0
        for r in range(lo, hi):
            delta = lam[r - lo]
            for i in range(d):
                grad[i] += X[r, i] * delta
            grad[d] += delta
        _update(flat, grad, decay, opt[0], opt[1])
