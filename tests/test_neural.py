"""Neural rankers: factorised == naive per-pair update, and they learn to rank."""

from __future__ import annotations

import numpy as np
import pytest

from ltr_toolkit.data.dataset import RankingDataset
from ltr_toolkit.data.svmlight import load_svmlight
from ltr_toolkit.models.mlp import MLP, SGD
from benchmarks._naive import naive_query_gradient, naive_sgd_query
from ltr_toolkit.models.neural import NeuralRanker
from ltr_toolkit.rank.lambdas import ranknet_lambdas
from ltr_toolkit.rank.metrics import ndcg


@pytest.mark.parametrize("hidden", [(), (8,), (16, 4)])
@pytest.mark.parametrize("seed", range(3))
def test_factorised_update_equals_naive_per_pair(hidden, seed):
    rng = np.random.default_rng(seed)
    n, f = 15, 6
    Xq = rng.normal(size=(n, f))
    yq = rng.integers(0, 4, size=n).astype(float)
    net_a = MLP(f, hidden, seed=seed, dtype=np.float64, output_scale=1.0)
    net_b = MLP(f, hidden, seed=seed, dtype=np.float64, output_scale=1.0)
    # factorised: n forward passes, one lambda per document, n backward passes
    scores, acts = net_a.forward(Xq, keep=True)
    g_fact = net_a.backward(acts, ranknet_lambdas(scores, yq, sigma=1.0))
    # naive: one forward and backward per document of every pair
    g_naive = naive_query_gradient(net_b, Xq, yq, sigma=1.0)
    for a, b in zip(g_fact, g_naive):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-10)
    # and the same SGD step
    SGD(net_a.params, lr=0.1).step(net_a.params, g_fact)
    SGD(net_b.params, lr=0.1).step(net_b.params, g_naive)
    for a, b in zip(net_a.params, net_b.params):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-10)


def test_linear_network_reproduces_seed_004_update():
    X = np.array([[5.0, 4.5], [4.0, 3.7], [2.0, 1.8]])
    y = np.array([2.0, 1.0, 0.0])
    net = MLP(2, (), dtype=np.float64)
    net.params[0][:] = [[-1.0], [1.0]]
    net.params[1][:] = [0.0]
    s, acts = net.forward(X, keep=True)
    grads = net.backward(acts, ranknet_lambdas(s, y, sigma=0.1))
    SGD(net.params, lr=0.1).step(net.params, grads)
    np.testing.assert_allclose(net.params[0][:, 0], [-0.969675, 1.02729], atol=1e-6)
    assert net.params[1][0] == pytest.approx(0.0, abs=1e-12)


def test_true_sgd_per_pair_differs_from_batched_but_runs():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 3))
    y = np.array([2.0, 1, 0, 1, 2, 0])
    a = MLP(3, (4,), seed=1, dtype=np.float64)
    before = [p.copy() for p in a.params]
    naive_sgd_query(a, X, y, lr=0.1)
    assert any(np.abs(p - q).max() > 0 for p, q in zip(a.params, before))


def _graded(seed, latent_fn, n_q=60, n_docs=30, f=10, cuts=(0.5, 0.8, 0.95)):
    """Queries of n_docs normal feature rows, graded 0..3 by quantiles of a latent score."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_q * n_docs, f)).astype(np.float32)
    latent = latent_fn(X, rng)
    y = np.zeros(len(X))
    for q in range(n_q):
        sl = slice(q * n_docs, (q + 1) * n_docs)
        y[sl] = np.digitize(latent[sl], np.quantile(latent[sl], cuts))
    off = np.arange(0, n_q * n_docs + 1, n_docs)
    return RankingDataset(X=X, y=y, offsets=off, qids=np.array([str(q) for q in range(n_q)]))


def _synthetic(seed, n_q=60):
    w = np.random.default_rng(1000).normal(size=10)  # the same relevance model in every split
    return _graded(seed, lambda X, rng: X @ w + np.sin(3 * X[:, 0]) + rng.normal(scale=0.5, size=len(X)),
                   n_q=n_q)


def test_seeded_and_reproducible():
    ds = _synthetic(0, n_q=10)
    a = NeuralRanker(epochs=3, seed=5).fit(ds).predict(ds.X)
    b = NeuralRanker(epochs=3, seed=5).fit(ds).predict(ds.X)
    c = NeuralRanker(epochs=3, seed=6).fit(ds).predict(ds.X)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("algo", ["ranknet-nn", "lambdarank-nn", "linear"])
def test_models_learn_on_synthetic_data(algo):
    train, test = _synthetic(1), _synthetic(2)
    m = NeuralRanker(algo=algo, hidden=(16,), epochs=15, lr=3e-3, seed=0).fit(train)
    got = ndcg(m.predict(test.X), test.y, test.offsets, 10).mean()
    rand = ndcg(np.random.default_rng(0).normal(size=test.n_docs), test.y, test.offsets, 10).mean()
    assert got > rand + 0.3


def _interaction(seed, n_q=80):
    """Relevance driven by an interaction x0*x1 that no linear model can express."""
    return _graded(seed, lambda X, rng: 2.0 * X[:, 0] * X[:, 1] + 0.7 * X[:, 2]
                   + rng.normal(scale=0.3, size=len(X)), n_q=n_q, f=6, cuts=(0.6, 0.85, 0.95))


def test_networks_beat_random_and_linear_on_held_out_queries():
    """(d): held-out queries where relevance is non-linear in the features."""
    train, valid, test = _interaction(10), _interaction(11, n_q=20), _interaction(12)
    results = {}
    for algo in ("linear", "ranknet-nn", "lambdarank-nn"):
        m = NeuralRanker(algo=algo, hidden=(32, 8), epochs=40, lr=3e-3, patience=8, seed=0)
        m.fit(train, valid)
        results[algo] = ndcg(m.predict(test.X), test.y, test.offsets, 10).mean()
    rng = np.random.default_rng(0)
    rand = np.mean([ndcg(rng.normal(size=test.n_docs), test.y, test.offsets, 10).mean()
                    for _ in range(20)])
    assert results["linear"] > rand + 0.05, (results, rand)
    assert results["ranknet-nn"] > results["linear"] + 0.3, (results, rand)
    # LambdaRank's |delta NDCG@10| weights concentrate the gradient on the current top
    # ten; from a random start it finds the interaction far more slowly than RankNet
    # (measured: 0.56 vs 0.97). It must still beat the linear model.
    assert results["lambdarank-nn"] > results["linear"] + 0.02, (results, rand)


def test_mslr_models_beat_random(mslr_paths):
    """On the MSLR extract's test file every algorithm beats a random ranker. (Whether
    the networks beat linear there is measured by benchmarks/mslr, not asserted: with
    34 training queries the differences are within seed noise.)"""
    train_path, test_path = mslr_paths
    full = load_svmlight(train_path)
    test = load_svmlight(test_path, n_features=full.n_features)
    q = np.arange(full.n_queries)
    train, valid = full.subset(q[:34]), full.subset(q[34:])
    rng = np.random.default_rng(0)
    rand = np.mean([ndcg(rng.normal(size=test.n_docs), test.y, test.offsets, 10).mean()
                    for _ in range(20)])
    for algo in ("linear", "ranknet-nn", "lambdarank-nn"):
        m = NeuralRanker(algo=algo, epochs=40, lr=1e-3, patience=8, seed=0).fit(train, valid)
        v = ndcg(m.predict(test.X), test.y, test.offsets, 10).mean()
        assert v > rand + 0.1, (algo, v, rand)


def test_trained_artifact_reports_err_of_every_split_on_one_grade_scale():
    """train_model's ERR of each split uses the largest grade of all the splits it reports:
    a split whose labels stop lower is not scored on a shorter scale of its own."""
    from ltr_toolkit.pipeline.train import model_from_artifact, train_model
    from ltr_toolkit.rank.metrics import err
    train, test = _synthetic(3, n_q=12), _synthetic(4, n_q=8)     # grades 0..3
    test.y = np.minimum(test.y, 1.0)                                # this split's stop at 1
    art = train_model(train, "linear", test=test, epochs=2, k=10)
    model = model_from_artifact(art)
    for name, ds in (("train", train), ("test", test)):
        expected = err(model.predict(ds.X), ds.y, ds.offsets, 10, max_grade=3.0).mean()
        assert art["metrics"][name]["err@10"] == pytest.approx(expected, rel=1e-12)
