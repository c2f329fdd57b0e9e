"""The factorised lambda objective: seed 004's worked example, finite differences,
LambdaRank weighting, batching, stability."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks._reference import batch_lambdas
from ltr_toolkit.rank import lambdas as L
from ltr_toolkit.rank.pairs import QueryPairs

# seed 004: three documents, features x = (1, x1, x2), labels U1 > U2 > U3
X = np.array([[1.0, 5.0, 4.5], [1.0, 4.0, 3.7], [1.0, 2.0, 1.8]])
Y = np.array([2.0, 1.0, 0.0])
W = np.array([0.0, -1.0, 1.0])
SIGMA, ETA = 0.1, 0.1


def test_seed_004_worked_example():
    s = X @ W
    np.testing.assert_allclose(s, [-0.5, -0.3, -0.2], atol=1e-12)
    lam = L.pair_lambdas(s, Y, SIGMA)
    assert lam[0, 1] == pytest.approx(-0.050500, abs=1e-6)
    assert lam[0, 2] == pytest.approx(-0.050750, abs=1e-6)
    assert lam[1, 2] == pytest.approx(-0.050250, abs=1e-6)
    li = L.ranknet_lambdas(s, Y, SIGMA)
    np.testing.assert_allclose(li, [-0.10125, 0.00025, 0.101], atol=1e-6)
    dw = -ETA * (li @ X)
    np.testing.assert_allclose(dw, [0.0, 0.030325, 0.02729], atol=1e-6)
    s_new = X @ (W + dw)
    # the seed's new scores, right to about 1e-4
    np.testing.assert_allclose(s_new, [-0.225545, -0.077707, -0.090218], atol=1e-4)
    assert list(np.argsort(-s_new)) == [1, 2, 0]  # U2 > U3 > U1, as the seed says


def _fd_grad(f, s, h=1e-6):
    g = np.zeros_like(s)
    for i in range(len(s)):
        e = np.zeros_like(s)
        e[i] = h
        g[i] = (f(s + e) - f(s - e)) / (2 * h)
    return g


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0])
def test_ranknet_lambdas_are_gradient_of_pair_cost(seed, sigma):
    rng = np.random.default_rng(seed)
    n = 12
    s = rng.normal(size=n)
    y = rng.integers(0, 4, size=n).astype(float)
    fd = _fd_grad(lambda v: L.pair_cost(v, y, sigma), s)
    np.testing.assert_allclose(L.ranknet_lambdas(s, y, sigma), fd, atol=1e-7)


@pytest.mark.parametrize("seed", range(5))
def test_ranknet_hessian_is_derivative_of_lambdas(seed):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=9)
    y = rng.integers(0, 3, size=9).astype(float)
    _, h = L.ranknet_lambdas(s, y, 1.5, return_hessian=True)
    for i in range(len(s)):
        e = np.zeros_like(s)
        e[i] = 1e-6
        d = (L.ranknet_lambdas(s + e, y, 1.5)[i] - L.ranknet_lambdas(s - e, y, 1.5)[i]) / 2e-6
        assert h[i] == pytest.approx(d, abs=1e-6)


def _ndcg_at(order_scores, y, k):
    order = np.argsort(-order_scores, kind="stable")
    g = 2.0 ** y[order] - 1
    disc = 1 / np.log2(np.arange(len(y)) + 2)
    if k is not None:
        disc[k:] = 0
    ideal = np.sort(2.0 ** y - 1)[::-1]
    return (g * disc).sum() / (ideal * disc).sum()


@pytest.mark.parametrize("k", [None, 3, 5])
@pytest.mark.parametrize("seed", range(4))
def test_lambdarank_is_ranknet_times_abs_delta_ndcg_pair_by_pair(k, seed):
    rng = np.random.default_rng(seed)
    n = 10
    s = rng.normal(size=n)
    y = rng.integers(0, 4, size=n).astype(float)
    if np.ptp(y) == 0:
        y[0] += 1
    rn = L.pair_lambdas(s, y, 1.0)
    base = _ndcg_at(s, y, k)
    expected = np.zeros(n)
    for i in range(n):
        for j in range(n):
            if y[i] == y[j]:
                continue
            swapped = s.copy()
            swapped[i], swapped[j] = s[j], s[i]
            dn = abs(_ndcg_at(swapped, y, k) - base)
            expected[i] += rn[i, j] * dn
    np.testing.assert_allclose(L.lambdarank_lambdas(s, y, 1.0, k), expected, atol=1e-12)


def test_equal_labels_and_no_variance_give_zero():
    s = np.array([3.0, -1.0, 0.5, 2.0])
    assert np.all(L.ranknet_lambdas(s, np.ones(4)) == 0)
    assert np.all(L.lambdarank_lambdas(s, np.full(4, 2.0), k=3) == 0)
    lam = L.ranknet_lambdas(s, np.array([1.0, 1.0, 0.0, 0.0]))
    # docs 0,1 share a label: their mutual pair contributes nothing
    manual = L.pair_lambdas(s, np.array([1.0, 1.0, 0.0, 0.0]))
    assert manual[0, 1] == 0 and manual[1, 0] == 0
    assert lam.sum() == pytest.approx(0.0, abs=1e-12)  # forces are equal and opposite


def test_stable_for_huge_score_gaps():
    s = np.array([1e4, -1e4, 0.0, 5e3])
    y = np.array([0.0, 2.0, 1.0, 3.0])
    for fn in (L.ranknet_lambdas, L.lambdarank_lambdas):
        lam, h = fn(s, y, return_hessian=True)
        assert np.all(np.isfinite(lam)) and np.all(np.isfinite(h))
    lam = L.ranknet_lambdas(s, y)
    # doc 0 (worst label, top score) is pushed down with the full force of its 3 pairs
    assert lam[0] == pytest.approx(3.0)
    assert np.isfinite(L.pair_cost(s, y))


@pytest.mark.parametrize("kind", ["ranknet", "lambdarank"])
def test_batched_equals_per_query(kind):
    rng = np.random.default_rng(7)
    sizes = rng.integers(1, 40, size=30)
    sizes[3] = 1
    off = np.concatenate([[0], np.cumsum(sizes)])
    s = rng.normal(size=off[-1]) * 3
    y = rng.integers(0, 5, size=off[-1]).astype(float)
    y[off[5]:off[6]] = 2.0  # a query without label variance
    lam, hess = batch_lambdas(s, y, off, kind, sigma=1.3, k=10, budget=5000)
    for q in range(len(sizes)):
        sl = slice(off[q], off[q + 1])
        if kind == "ranknet":
            l1, h1 = L.ranknet_lambdas(s[sl], y[sl], 1.3, return_hessian=True)
        else:
            l1, h1 = L.lambdarank_lambdas(s[sl], y[sl], 1.3, 10, return_hessian=True)
        np.testing.assert_allclose(lam[sl], l1, atol=1e-12)
        np.testing.assert_allclose(hess[sl], h1, atol=1e-12)
    assert np.all(lam[off[5]:off[6]] == 0)


@pytest.mark.parametrize("n", [1, 2, 9, 60])
@pytest.mark.parametrize("k", [None, 5])
def test_training_cache_equals_reference(n, k):
    rng = np.random.default_rng(n)
    s = rng.normal(size=n) * 4
    y = rng.integers(0, 4, size=n).astype(float)
    qp = QueryPairs(y, sigma=0.7, k=k)
    np.testing.assert_allclose(qp.ranknet(s), L.ranknet_lambdas(s, y, 0.7), atol=1e-12)
    np.testing.assert_allclose(qp.lambdarank(s), L.lambdarank_lambdas(s, y, 0.7, k), atol=1e-12)
    qp32 = QueryPairs(y, sigma=0.7, k=k, dtype=np.float32)
    np.testing.assert_allclose(qp32.lambdarank(s.astype(np.float32)),
                               L.lambdarank_lambdas(s, y, 0.7, k), atol=1e-5)
