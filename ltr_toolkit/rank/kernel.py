"""The pair loop of the lambda objective, compiled by numba: one pass over each query's
kept pairs computes the pair's weight, its lambda and its hessian together, with nothing
stored per pair (O(n) memory per query, whatever its size).

Per query (documents sorted once per call by descending score, ties by position, by an
insertion sort from the last call's order, a merge sort when that order is far off): rows are the
positions a < m (m: the truncation, or every position), columns b > a; a pair of two
documents with the same label is skipped. For a pair of positions (a, b):

* ``W = |G_a - G_b| * (cl |disc_a - disc_b| + cd delta(b - a))`` (1 for RankNet), over
  ``s_a - s_b + 0.01`` with score normalisation (unless all the query's scores tie);
* ``q = 1 / (1 + exp(sigma (s_a - s_b)))``; the pair's ``p`` (the probability that the
  better document loses) is q when a is the better one, else 1 - q;
* ``|lambda_ab| = sigma W p`` (summed, unweighted, for the per-query normalisation), times
  the preferred document's weight; the hessian ``sigma |lambda_ab| (1 - p)`` goes to both
  documents, the lambda with its sign to each.

The sigmoid costs no exponential per pair: with ``E_j = exp(sigma (s_j - s_0))`` computed
once per document, ``q = E_b / (E_a + E_b)``. That holds while no pair's ``sigma (s_a -
s_b)`` exceeds 50 (the reference clips there, and no E underflows); a query whose
scores span more than that takes one exponential per pair, clipped as the reference is.
Everything is float64 (scalar code: no slower than float32 here).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

#: sigma (s_a - s_b) beyond which the reference clips the logistic's argument
CLIP = 50.0


@njit(cache=True, nogil=True, fastmath=True, error_model="numpy")
def _pair_sums(ss, ys, Gs, ws, m, ranknet, disc, cl, cd, delta, sigma, score_norm, mode, g, h):
    """Add each document's lambda (``g``) and hessian (``h``) over the pairs of rows a < m
    of one query sorted by descending score; return the sum of unweighted |lambda_ab|.
    A row of the query's commonest label ``mode`` visits only the positions of other
    labels (most candidates share one grade: no pair), any other row every later one."""
    n = len(ss)
    fast = sigma * (ss[0] - ss[n - 1]) <= CLIP
    norm = score_norm and ss[0] - ss[n - 1] > 0
    has_w = len(ws) > 0
    E = np.exp(sigma * (ss - ss[0]))
    others = np.flatnonzero(ys != mode)
    n_others = len(others)
    total = 0.0
    t0 = 0
    for a in range(m):
        while t0 < n_others and others[t0] <= a:
            t0 += 1
        ya, Ga, sa, da, Ea = ys[a], Gs[a], ss[a], disc[a], E[a]
        wa = ws[a] if has_w else 1.0
        ga = 0.0
        ha = 0.0
        common = ya == mode
        stop = n_others if common else n
        for t in range(t0 if common else a + 1, stop):
            b = others[t] if common else t
            yb = ys[b]
            if ya == yb:
                continue
            W = 1.0 if ranknet else abs(Ga - Gs[b]) * (cl * (da - disc[b]) + cd * delta[b - a])
            if norm:
                W /= sa - ss[b] + 0.01
            if fast:
                q = E[b] / (Ea + E[b])
            else:
                q = 1.0 / (1.0 + np.exp(min(sigma * (sa - ss[b]), CLIP)))
            better = ya > yb
            p = q if better else 1.0 - q
            lam = sigma * W * p
            total += lam
            if has_w:
                lam *= wa if better else ws[b]
            hh = sigma * lam * (1.0 - p)
            signed = lam if better else -lam
            ga -= signed
            g[b] += signed
            ha += hh
            h[b] += hh
        g[a] += ga
        h[a] += ha
    return total


@njit(cache=True, nogil=True, error_model="numpy")
def _insertion_sort(s, order, lo, hi, budget):
    """Sort ``order[lo:hi]`` (document indices) by descending score, ties by index, in
    place, starting from the order it holds (the last round's: scores move little between
    rounds, so few documents move). False, after at most ``budget`` moves, when the order
    was too far from sorted (it is then some permutation of itself)."""
    for i in range(lo + 1, hi):
        o = order[i]
        v = s[o]
        j = i - 1
        while j >= lo and (s[order[j]] < v or (s[order[j]] == v and order[j] > o)):
            order[j + 1] = order[j]
            j -= 1
            budget -= 1
        order[j + 1] = o
        if budget < 0:
            return False
    return True


@njit(cache=True, nogil=True, error_model="numpy")
def _sorted(s, y, G, w, order, lo, hi):
    """One query's scores, labels, gains, weights (or an empty array) sorted by
    descending score, ties by position, and that order (``order[lo:hi]``, updated)."""
    if not _insertion_sort(s, order, lo, hi, 4 * (hi - lo) + 32):
        order[lo:hi] = np.argsort(-s[lo:hi], kind="mergesort") + lo
    idx = order[lo:hi]
    ws = w[idx] if len(w) else w
    return s[idx], y[idx], G[idx], ws, idx


@njit(cache=True, nogil=True, error_model="numpy")
def _query_grad_hess(s, y, G, w, lo, hi, mode, order, terms, opts, grad, hess):
    """One query's (documents lo to hi) lambdas and hessians into ``grad`` and ``hess``.
    ``terms``: (disc, cl, cd, delta), the position weights' parts; ``opts``: (k, ranknet,
    sigma, score normalisation, query normalisation, hessian scale), k < 0: every row;
    query normalisation: 0 none, 1 log2(1 + L) / L with L the sum of 2 |lambda_ab|
    ("pairs"), 2 with L the sum of |lambda_i| ("documents")."""
    disc, cl, cd, delta = terms
    k, ranknet, sigma, score_norm, normalization, hessian_scale = opts
    n = hi - lo
    ss, ys, Gs, ws, idx = _sorted(s, y, G, w, order, lo, hi)
    m = n if (k < 0 or ranknet) else min(k, n)
    g = np.zeros(n)
    h = np.zeros(n)
    total = _pair_sums(ss, ys, Gs, ws, m, ranknet, disc, cl, cd, delta, sigma, score_norm, mode,
                       g, h)
    if normalization == 2:
        total = np.sum(np.abs(g))
    elif normalization == 1:
        total *= 2.0
    scale = 1.0
    if normalization > 0:
        scale = np.log2(1.0 + total) / total if total > 0 else 0.0
    for j in range(n):
        grad[idx[j]] = g[j] * scale
        hess[idx[j]] = h[j] * scale * hessian_scale


@njit(parallel=True, cache=True, nogil=True, error_model="numpy")
def tree_grad_hess(s, y, G, w, offsets, modes, queries, terms, opts, grad, hess, order):
    """Every document's lambda and hessian into ``grad`` and ``hess`` (left as they are
    for documents outside ``queries``), the queries shared out among numba's threads;
    ``order``: each query's documents in the last call's score order (any order the first
    time), updated. ``terms``, ``opts``: as :func:`_query_grad_hess`'s."""
    for i in prange(len(queries)):
        q = queries[i]
        _query_grad_hess(s, y, G, w, offsets[q], offsets[q + 1], modes[q], order, terms, opts,
                         grad, hess)


@njit(cache=True, nogil=True, error_model="numpy")
def tree_grad_hess_serial(s, y, G, w, offsets, modes, queries, terms, opts, grad, hess, order):
    """:func:`tree_grad_hess` in the calling thread alone (small training sets: handing
    out little work to threads costs more than it saves, the more so on a busy machine)."""
    for i in range(len(queries)):
        q = queries[i]
        _query_grad_hess(s, y, G, w, offsets[q], offsets[q + 1], modes[q], order, terms, opts,
                         grad, hess)


@njit(cache=True, nogil=True, error_model="numpy")
def query_lambdas(s, y, G, w, mode, terms, k, ranknet, sigma, order):
    """One query's lambdas (input order), no normalisation: the networks' step
    (``order`` as in :func:`tree_grad_hess`, ``terms`` as :func:`_query_grad_hess`'s)."""
    disc, cl, cd, delta = terms
    n = len(s)
    ss, ys, Gs, ws, idx = _sorted(s, y, G, w, order, 0, n)
    m = n if (k < 0 or ranknet) else min(k, n)
    g = np.zeros(n)
    h = np.zeros(n)
    _pair_sums(ss, ys, Gs, ws, m, ranknet, disc, cl, cd, delta, sigma, False, mode, g, h)
    out = np.empty(n)
    out[idx] = g
    return out
