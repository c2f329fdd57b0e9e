"""The linear model's compiled epoch (models.netkernel) against NumPy's step
(NeuralRanker.step_query, query by query in the same order): the same parameters and
optimiser state to rounding, for every weighting, truncation, optimiser, weight decay,
document weights and float32/float64, over two epochs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ltr_toolkit.data.dataset import RankingDataset
from ltr_toolkit.models.neural import NeuralRanker


def _data(seed: int, weights: bool) -> RankingDataset:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 60, size=30)
    off = np.concatenate([[0], np.cumsum(sizes)])
    y = np.where(rng.random(off[-1]) < 0.8, 0.0, rng.integers(1, 5, size=off[-1]))
    X = (y[:, None] * rng.uniform(0.1, 1, size=7) + rng.normal(size=(off[-1], 7))).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    w = rng.exponential(size=off[-1]) if weights else None
    return RankingDataset(X=X, y=y, offsets=off, qids=[str(q) for q in range(30)], weights=w)


CASES = list(itertools.product(["lambdarank", "ranknet", "ndcg-loss2++"], [None, "k"],
                               ["adam", "sgd"], [0.0, 0.01], [False, True], ["float32", "float64"]))


@pytest.mark.parametrize("objective,truncation,optimizer,l2,weights,dtype", CASES)
def test_linear_epoch_equals_numpy_steps(objective, truncation, optimizer, l2, weights, dtype):
    ds = _data(len(objective) + int(weights), weights)
    kw = dict(algo="linear", objective=objective, truncation=truncation, optimizer=optimizer,
              l2=l2, lr=0.01, dtype=dtype, k=5, mu=1.5)
    compiled = NeuralRanker(**kw).init(ds.n_features, ds.X)
    numpy = NeuralRanker(**kw).init(ds.n_features, ds.X)
    Xt = compiled._transform(ds.X)
    run = compiled._epoch_runner(ds, Xt)
    rng = np.random.default_rng(1)
    for _ in range(2):
        order = rng.permutation(ds.n_queries)
        run(order)
        for q in order:
            sl = ds.query(q)
            numpy.step_query(Xt[sl], numpy.pairs_for(ds.y[sl], None if ds.weights is None
                                                     else ds.weights[sl]))
    # the weights, not the bias: its gradient, a query's lambdas summed, is zero but for
    # rounding (each pair's lambda goes to both documents with opposite signs), and
    # Adam's normalised step turns that rounding into a step of either sign in both
    # implementations; a bias does not change a ranking.
    w_new, w_old = compiled.net_.flat[:-1], numpy.net_.flat[:-1]
    moved = np.abs(w_old - NeuralRanker(**kw).init(ds.n_features, ds.X).net_.flat[:-1]).max()
    assert moved > 1e-3                                    # the steps did something
    tol = 2e-4 if dtype == "float32" else 1e-9
    np.testing.assert_allclose(w_new, w_old, rtol=tol, atol=tol * moved)
    if optimizer == "adam":
        assert compiled.opt_.t == numpy.opt_.t == 2 * ds.n_queries
        np.testing.assert_allclose(compiled.opt_.v[0][:-1], numpy.opt_.v[0][:-1], rtol=10 * tol)
