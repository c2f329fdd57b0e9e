"""LambdaLoss weightings (Wang et al., CIKM 2018) as pair weights of the factorised
objective: the weights against the paper's formulas, finite-difference gradients and
hessians of the weighted loss, the flat tree objective (RankPairs) and the network cache
(QueryPairs) against the per-query reference."""

from __future__ import annotations

import numpy as np
import pytest

from ltr_toolkit.rank import lambdas as L
from ltr_toolkit.rank.pairs import QueryPairs, RankPairs

NDCG_WEIGHTINGS = ["lambdarank", "ndcg-loss2", "ndcg-loss2++"]


def _query(seed, n=11, grades=4):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=n) * 2.0
    y = rng.integers(0, grades, size=n).astype(float)
    if np.ptp(y) == 0:
        y[0] += 1
    return s, y


def _paper_weights(s, y, weighting, mu, k=None):
    """The weights written out pair by pair from the paper's definitions (1-based ranks,
    D(r) = log2(1 + r), G = (2^y - 1) / maxDCG@k), with a Python loop: the reference."""
    n = len(s)
    order = sorted(range(n), key=lambda i: (-s[i], i))
    rank = {d: r + 1 for r, d in enumerate(order)}
    ideal = sorted((2.0 ** v - 1 for v in y), reverse=True)
    kk = n if k is None else k
    max_dcg = sum(g / np.log2(1 + r) for r, g in enumerate(ideal[:kk], start=1))
    G = [(2.0 ** v - 1) / max_dcg for v in y]

    def inv_d(r):
        return 1.0 / np.log2(1 + r) if r <= kk else 0.0
    W = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i == j or y[i] == y[j]:
                continue
            if min(rank[i], rank[j]) > kk:
                continue
            d = abs(rank[i] - rank[j])
            delta = 1.0 / np.log2(1 + d) - 1.0 / np.log2(2 + d)
            rho = abs(inv_d(rank[i]) - inv_d(rank[j]))
            w = {"lambdarank": rho, "ndcg-loss2": delta, "ndcg-loss2++": rho + mu * delta}[weighting]
            W[i, j] = w * abs(G[i] - G[j])
    return W


def test_loss2_discount_values():
    # delta(1) = 1/log2(2) - 1/log2(3), delta(2) = 1/log2(3) - 1/log2(4)
    np.testing.assert_allclose(L.loss2_discount([0, 1, 2]),
                               [0.0, 1.0 - 1.0 / np.log2(3.0), 1.0 / np.log2(3.0) - 0.5], atol=1e-15)
    d = L.loss2_discount(np.arange(1, 200))
    assert np.all(d > 0) and np.all(np.diff(d) < 0)   # positive, shrinking with distance


@pytest.mark.parametrize("k", [None, 4])
@pytest.mark.parametrize("weighting", NDCG_WEIGHTINGS)
@pytest.mark.parametrize("seed", range(3))
def test_pair_weights_follow_the_paper(weighting, k, seed):
    s, y = _query(seed)
    np.testing.assert_allclose(L.pair_weights(s, y, weighting, k, mu=3.0),
                               _paper_weights(s, y, weighting, 3.0, k), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("k", [None, 5])
def test_loss2pp_is_lambdarank_plus_mu_loss2(k):
    s, y = _query(7, n=15)
    lr = L.lambdaloss_lambdas(s, y, "lambdarank", 1.0, k)
    l2 = L.lambdaloss_lambdas(s, y, "ndcg-loss2", 1.0, k)
    np.testing.assert_allclose(L.lambdaloss_lambdas(s, y, "ndcg-loss2++", 1.0, k, mu=0.0), lr, atol=1e-15)
    np.testing.assert_allclose(L.lambdaloss_lambdas(s, y, "ndcg-loss2++", 1.0, k, mu=2.5),
                               lr + 2.5 * l2, atol=1e-14)
    np.testing.assert_allclose(lr, L.lambdarank_lambdas(s, y, 1.0, k), atol=1e-15)
    np.testing.assert_allclose(L.lambdaloss_lambdas(s, y, "ranknet", 1.0, k),
                               L.ranknet_lambdas(s, y, 1.0), atol=1e-15)


def _fd(f, s, h=1e-6):
    out = np.zeros_like(s)
    for i in range(len(s)):
        e = np.zeros_like(s)
        e[i] = h
        out[i] = (f(s + e) - f(s - e)) / (2 * h)
    return out


@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("k", [None, 3, 6])
@pytest.mark.parametrize("weighting", L.WEIGHTINGS)
@pytest.mark.parametrize("seed", range(4))
def test_lambdas_are_the_gradient_of_the_weighted_loss(weighting, k, sigma, seed):
    """LambdaLoss with the weights of the current ranking: the weights are constant until
    two scores cross, so the loss is differentiable there and the lambdas are its gradient
    (central differences with steps far smaller than any score gap)."""
    s, y = _query(seed)
    assert np.min(np.diff(np.sort(s))) > 1e-3
    fd = _fd(lambda v: L.lambdaloss_cost(v, y, weighting, sigma, k, mu=4.0), s)
    got = L.lambdaloss_lambdas(s, y, weighting, sigma, k, mu=4.0)
    np.testing.assert_allclose(got, fd, atol=1e-7)
    assert np.abs(got).max() > 1e-3          # not a trivially zero gradient


@pytest.mark.parametrize("k", [None, 4])
@pytest.mark.parametrize("weighting", L.WEIGHTINGS)
@pytest.mark.parametrize("seed", range(3))
def test_hessian_is_the_derivative_of_the_lambdas(weighting, k, seed):
    s, y = _query(seed + 10)
    _, h = L.lambdaloss_lambdas(s, y, weighting, 1.5, k, mu=2.0, return_hessian=True)
    for i in range(len(s)):
        e = np.zeros_like(s)
        e[i] = 1e-6
        d = (L.lambdaloss_lambdas(s + e, y, weighting, 1.5, k, mu=2.0)[i]
             - L.lambdaloss_lambdas(s - e, y, weighting, 1.5, k, mu=2.0)[i]) / 2e-6
        assert h[i] == pytest.approx(d, abs=1e-6)
    assert np.all(h >= 0)


def test_the_weighted_loss_is_not_the_unweighted_one():
    """The FD test must be able to fail: a gradient of the wrong weighting is far off."""
    s, y = _query(3)
    fd = _fd(lambda v: L.lambdaloss_cost(v, y, "ndcg-loss2", 1.0, None), s)
    wrong = L.lambdaloss_lambdas(s, y, "lambdarank", 1.0, None)
    assert np.abs(wrong - fd).max() > 1e-3


def _batch(seed, n_q=25, max_n=40):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, max_n, size=n_q)
    sizes[2] = 1
    off = np.concatenate([[0], np.cumsum(sizes)])
    s = rng.normal(size=off[-1]) * 2
    s[off[4]:off[4] + 3] = 0.25                  # ties, broken by input position
    y = rng.integers(0, 5, size=off[-1]).astype(float)
    y[off[5]:off[6]] = 2.0                       # a query without label variance
    return s, y, off


@pytest.mark.parametrize("k", [None, 1, 5])
@pytest.mark.parametrize("weighting", L.WEIGHTINGS)
def test_rank_pairs_equal_the_reference_query_by_query(weighting, k):
    s, y, off = _batch(1)
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 2e-5)):
        rp = RankPairs(y, off, weighting, sigma=1.3, k=k, mu=3.0, normalization=None,
                         dtype=dtype)
        g, h = rp.grad_hess(s)
        for q in range(len(off) - 1):
            sl = slice(off[q], off[q + 1])
            if np.ptp(y[sl]) == 0:
                assert np.all(g[sl] == 0) and np.all(h[sl] == 0)
                continue
            lq, hq = L.lambdaloss_lambdas(s[sl], y[sl], weighting, 1.3, k, 3.0, return_hessian=True)
            np.testing.assert_allclose(g[sl], lq, atol=tol * max(1.0, np.abs(lq).max()))
            np.testing.assert_allclose(h[sl], hq, atol=tol * max(1.0, np.abs(hq).max()))


@pytest.mark.parametrize("weighting", L.WEIGHTINGS)
def test_rank_pairs_score_normalisation(weighting):
    """xgboost's rank:ndcg option: each pair weight over |s_i - s_j| + 0.01, except in a
    query whose scores are all equal."""
    s, y, off = _batch(3)
    s = s.copy()
    s[off[7]:off[8]] = 1.5                       # a query with all scores tied
    rp = RankPairs(y, off, weighting, sigma=0.9, k=6, mu=2.0, normalization=None,
                     score_normalization=True, dtype=np.float64)
    g, h = rp.grad_hess(s)
    for q in range(len(off) - 1):
        sl = slice(off[q], off[q + 1])
        if np.ptp(y[sl]) == 0:
            continue
        sq, yq = s[sl], y[sl]
        W = L.pair_weights(sq, yq, weighting, 6, 2.0)
        if np.ptp(sq) > 0:
            W = W / (np.abs(sq[:, None] - sq[None, :]) + 0.01)
        np.testing.assert_allclose(g[sl], (L.pair_lambdas(sq, yq, 0.9) * W).sum(axis=1), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(h[sl], L._hessian(sq, yq, 0.9, W), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("norm", ["pairs", "documents"])
def test_rank_pairs_query_normalisation(norm):
    """Each query's lambdas and hessians scaled by log2(1 + L) / L, with L the sum of
    2 |lambda_ij| over its pairs (``pairs``) or of |lambda_i| over its documents."""
    s, y, off = _batch(2)
    raw = RankPairs(y, off, "lambdarank", k=10, normalization=None, dtype=np.float64)
    scaled = RankPairs(y, off, "lambdarank", k=10, normalization=norm, dtype=np.float64)
    g0, h0 = raw.grad_hess(s)
    g1, h1 = scaled.grad_hess(s)
    for q in range(len(off) - 1):
        sl = slice(off[q], off[q + 1])
        if np.ptp(y[sl]) == 0:
            continue
        if norm == "pairs":
            lam = L.pair_lambdas(s[sl], y[sl]) * L.pair_weights(s[sl], y[sl], "lambdarank", 10)
            total = np.abs(lam).sum()            # ordered pairs: 2 |lambda_ij| per pair
        else:
            total = np.abs(g0[sl]).sum()
        scale = np.log2(1 + total) / total
        np.testing.assert_allclose(g1[sl], g0[sl] * scale, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(h1[sl], h0[sl] * scale, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("k", [None, 4])
@pytest.mark.parametrize("weighting", L.WEIGHTINGS)
def test_network_cache_equals_reference(weighting, k):
    s, y = _query(5, n=30)
    qp = QueryPairs(y, sigma=0.8, k=k, mu=2.0)
    np.testing.assert_allclose(qp.lambdas(s, weighting),
                               L.lambdaloss_lambdas(s, y, weighting, 0.8, k, 2.0), atol=1e-12)


def test_unknown_weighting_is_rejected():
    with pytest.raises(ValueError, match="weighting"):
        L.pair_weights(np.zeros(3), np.arange(3.0), "ndcg-loss3")
    with pytest.raises(ValueError, match="weighting"):
        RankPairs(np.arange(3.0), np.array([0, 3]), "listnet")


def _graded(seed, n_q=40, n_d=25, f=6):
    """Queries whose grades 0..3 are quantiles of a fixed linear relevance plus noise."""
    from ltr_toolkit.data.dataset import RankingDataset
    rng = np.random.default_rng(seed)
    w = np.random.default_rng(99).normal(size=f)
    X = rng.normal(size=(n_q * n_d, f)).astype(np.float32)
    latent = X @ w + rng.normal(scale=0.3, size=len(X))
    y = np.zeros(len(X))
    for q in range(n_q):
        sl = slice(q * n_d, (q + 1) * n_d)
        y[sl] = np.digitize(latent[sl], np.quantile(latent[sl], [0.5, 0.8, 0.95]))
    return RankingDataset(X=X, y=y, offsets=np.arange(0, n_q * n_d + 1, n_d),
                          qids=[str(q) for q in range(n_q)])


@pytest.mark.parametrize("weighting", ["ndcg-loss2", "ndcg-loss2++"])
def test_trainers_learn_with_the_lambdaloss_weightings(weighting):
    from ltr_toolkit.models.neural import NeuralRanker
    from ltr_toolkit.models.trees import LambdaMART
    from ltr_toolkit.rank.metrics import ndcg
    train, test = _graded(0), _graded(1)
    rng = np.random.default_rng(0)
    rand = np.mean([ndcg(rng.normal(size=test.n_docs), test.y, test.offsets, 10).mean() for _ in range(20)])
    net = NeuralRanker(objective=weighting, mu=5.0, hidden=(8,), epochs=10, lr=3e-3, seed=0).fit(train)
    trees = LambdaMART(weighting=weighting, mu=5.0, n_estimators=40, max_depth=3, nthread=1,
                       early_stopping_rounds=None).fit(train)
    for m in (net, trees):
        got = ndcg(m.predict(test.X), test.y, test.offsets, 10).mean()
        assert got > rand + 0.25, (type(m).__name__, got, rand)


def _stored_bytes(obj) -> int:
    """Bytes of the NumPy arrays an object keeps between calls (attributes, block dicts)."""
    total = 0
    for v in vars(obj).values():
        items = v if isinstance(v, list) else [v]
        for it in items:
            arrays = it.values() if isinstance(it, dict) else [it]
            total += sum(a.nbytes for a in arrays if isinstance(a, np.ndarray))
    return total


@pytest.mark.parametrize("weighting", ["ranknet", "lambdarank"])
def test_pair_objectives_keep_no_pair_matrices(weighting):
    """Training memory is linear in the documents: neither the tree objective nor the
    networks' per-query cache keeps anything per pair (a 3,000-document query has 4.5M
    pairs; an n x n cache would hold tens of MB)."""
    rng = np.random.default_rng(0)
    sizes = np.array([3000, 40, 7, 1200])
    off = np.concatenate([[0], np.cumsum(sizes)])
    y = rng.integers(0, 5, size=off[-1]).astype(float)
    rp = RankPairs(y, off, weighting, k=None)
    assert rp.n_pairs > 4_000_000
    assert _stored_bytes(rp) < 64 * off[-1]
    qp = QueryPairs(y[:3000], k=None)
    assert _stored_bytes(qp) < 64 * 3000
    g, h = rp.grad_hess(rng.normal(size=off[-1]))
    assert np.isfinite(g).all() and np.isfinite(h).all() and np.abs(g).sum() > 0


def test_hessian_scale_multiplies_the_hessians_only():
    s, y, off = _batch(4)
    one = RankPairs(y, off, "lambdarank", k=6, score_normalization=True, dtype=np.float64)
    two = RankPairs(y, off, "lambdarank", k=6, score_normalization=True, dtype=np.float64,
                      hessian_scale=2.0)
    (g1, h1), (g2, h2) = one.grad_hess(s), two.grad_hess(s)
    np.testing.assert_array_equal(g1, g2)
    np.testing.assert_allclose(h2, 2.0 * h1, rtol=1e-15)
    assert np.abs(h1).sum() > 0


def _traced(fn) -> tuple[int, int]:
    """(bytes still held after ``fn()`` returned, with its result dropped; peak bytes
    while it ran), by tracemalloc."""
    import tracemalloc
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()


def _peak_bytes(fn) -> int:
    return _traced(fn)[1]


@pytest.mark.parametrize("call", ["ranknet", "lambdarank", "ndcg-loss2++"])
def test_network_steps_allocate_nothing_n_by_n(call):
    """One step on a 4,000-document query (16M pairs, 128 MB as one float64 n x n array)
    peaks at a small fraction of that."""
    rng = np.random.default_rng(1)
    n = 4000
    y = rng.integers(0, 5, size=n).astype(float)
    s = rng.normal(size=n)
    qp = QueryPairs(y, k=None)
    if call == "ranknet":
        peak = _peak_bytes(lambda: qp.ranknet(s))
    else:
        peak = _peak_bytes(lambda: qp.lambdas(s, call))
    assert peak < n * n * 8 / 4, peak
