"""The naive per-pair RankNet trainer, as originally published: for every pair with
different labels, a forward and a backward pass for each of its two documents.

Kept as the reference for tests (the factorised update must equal it) and benchmarks
(it costs O(n^2) backprops per query). The Python loop over pairs is the point here.
"""

from __future__ import annotations

import numpy as np

from ltr_toolkit.models.mlp import MLP


def pair_list(labels: np.ndarray) -> list[tuple[int, int]]:
    """Pairs (i, j) with y_i > y_j: the set I of seed 003 (each pair once)."""
    y = np.asarray(labels)
    ii, jj = np.nonzero(y[:, None] > y[None, :])
    return list(zip(ii.tolist(), jj.tolist()))


def _pair_grads(net: MLP, Xq: np.ndarray, yq: np.ndarray, sigma: float):
    """Per pair: two forward passes, two backward passes. Lazy, so that a caller that
    updates the weights between pairs sees the next pair scored with the new weights."""
    for i, j in pair_list(yq):
        si, acts_i = net.forward(Xq[i:i + 1], keep=True)
        sj, acts_j = net.forward(Xq[j:j + 1], keep=True)
        # S_ij = 1: lambda_ij = dC_ij/ds_i = -sigma / (1 + exp(sigma (s_i - s_j)))
        lam = -sigma / (1.0 + np.exp(sigma * (float(si[0]) - float(sj[0]))))
        yield net.backward(acts_i, np.array([lam])), net.backward(acts_j, np.array([-lam]))


def naive_query_gradient(net: MLP, Xq: np.ndarray, yq: np.ndarray, sigma: float = 1.0):
    """Sum over pairs of dC_ij/dw, one backprop per document of every pair."""
    total = [np.zeros_like(p) for p in net.params]
    for gi, gj in _pair_grads(net, Xq, yq, sigma):
        for t, a, b in zip(total, gi, gj):
            t += a
            t += b
    return total


def naive_sgd_query(net: MLP, Xq: np.ndarray, yq: np.ndarray, lr: float, sigma: float = 1.0):
    """True stochastic gradient descent: the weights change after every pair."""
    for gi, gj in _pair_grads(net, Xq, yq, sigma):
        for p, a, b in zip(net.params, gi, gj):
            p -= lr * (a + b)
