"""LambdaMART through a custom xgboost objective."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xgboost as xgb

from ltr_toolkit.data.dataset import RankingDataset
from ltr_toolkit.data.svmlight import load_svmlight
from benchmarks._reference import NativeTopKPairs
from ltr_toolkit.models.export import plugin_scores
from ltr_toolkit.models.forest import Forest
from ltr_toolkit.models.trees import LambdaMART
from ltr_toolkit.models.xgbjson import score_trees
from ltr_toolkit.rank.lambdas import lambdarank_lambdas, ranknet_lambdas
from ltr_toolkit.rank.metrics import ndcg


def _small(seed=0, n_q=8, n_d=12, f=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_q * n_d, f)).astype(np.float32)
    y = rng.integers(0, 4, size=n_q * n_d).astype(float)
    return RankingDataset(X=X, y=y, offsets=np.arange(0, n_q * n_d + 1, n_d),
                          qids=[str(q) for q in range(n_q)])


def _same_structure(a: dict, b: dict, path="") -> None:
    """Split for split: same features, thresholds, shape; leaves equal to float32 noise."""
    if "leaf" in a or "leaf" in b:
        assert "leaf" in a and "leaf" in b, path
        assert a["leaf"] == pytest.approx(b["leaf"], rel=1e-5, abs=1e-9), path
        return
    assert (a["split"], a["split_condition"], a["yes"], a["no"], a["missing"]) == \
        (b["split"], b["split_condition"], b["yes"], b["no"], b["missing"]), path
    ca = {c["nodeid"]: c for c in a["children"]}
    cb = {c["nodeid"]: c for c in b["children"]}
    assert ca.keys() == cb.keys(), path
    for k in ca:
        _same_structure(ca[k], cb[k], f"{path}/{k}")


def _same_trees(model: LambdaMART, native, n_trees: int) -> None:
    mine = [json.loads(t) for t in model.booster_.get_dump(dump_format="json")]
    theirs = [json.loads(t) for t in native.get_dump(dump_format="json")]
    assert len(mine) == len(theirs) == n_trees
    for a, b in zip(mine, theirs):
        _same_structure(a, b)


@pytest.mark.parametrize("K", [4, 32])
@pytest.mark.parametrize("seed", [0, 1])
def test_native_mirroring_matches_rank_ndcg_split_for_split(K, seed):
    ds = _small(seed)
    m = LambdaMART(n_estimators=6, max_depth=3, pairs=lambda y: NativeTopKPairs(y, K), early_stopping_rounds=None,
                   nthread=1).fit(ds)
    params = dict(m.booster_params(), objective="rank:ndcg", lambdarank_pair_method="topk",
                  lambdarank_num_pair_per_sample=K)
    _same_trees(m, xgb.train(params, m._dmatrix(ds), 6), 6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_default_objective_is_rank_ndcg_gradient(seed):
    """LambdaMART()'s own lambdas (RankPairs blocks) with its defaults are xgboost's
    rank:ndcg gradient and hessian, as reproduced pair by pair in benchmarks/_reference.py:
    queries longer and shorter than the truncation 32, tied scores, a query of one grade."""
    rng = np.random.default_rng(seed)
    sizes = np.array([50, 7, 33, 90, 5, 40])
    off = np.concatenate([[0], np.cumsum(sizes)])
    y = rng.integers(0, 5, size=off[-1]).astype(float)
    y[off[4]:off[5]] = 2.0                           # no pair in this query
    X = rng.normal(size=(off[-1], 3)).astype(np.float32)
    ds = RankingDataset(X=X, y=y, offsets=off, qids=[str(q) for q in range(len(sizes))])
    preds = rng.normal(size=off[-1]).astype(np.float32)
    preds[off[1]:off[1] + 4] = 0.5                   # ties keep their order
    grad, hess = LambdaMART().objective(ds)(preds, None)
    for q in range(len(sizes)):
        sl = ds.query(q)
        if np.ptp(y[sl]) == 0:
            assert not grad[sl].any() and not hess[sl].any()
            continue
        g, h = NativeTopKPairs(y[sl], 32).grad_hess(preds[sl])
        np.testing.assert_allclose(grad[sl], g, rtol=1e-4, atol=1e-7)
        np.testing.assert_allclose(hess[sl], h, rtol=1e-4, atol=1e-7)
    # and NDCG@32's truncated discounts, the option, are not that
    alt, _ = LambdaMART(truncate_discounts=True).objective(ds)(preds, None)
    assert not np.allclose(alt[ds.query(0)], grad[ds.query(0)], rtol=1e-3)


def test_defaults_grow_native_rank_ndcg_trees_split_for_split():
    """Same data, trees, depth and learning rate: LambdaMART() and xgboost's rank:ndcg
    with its defaults grow the same trees."""
    ds = _small(12, n_q=10, n_d=45, f=5)
    m = LambdaMART(n_estimators=8, max_depth=4, early_stopping_rounds=None, nthread=1).fit(ds)
    params = dict(m.booster_params(), objective="rank:ndcg")
    _same_trees(m, xgb.train(params, m._dmatrix(ds), 8), 8)


@pytest.mark.parametrize("algo,fn", [("lambdamart", lambdarank_lambdas), ("ranknet-tree", ranknet_lambdas)])
def test_objective_gives_the_toolkit_lambdas(algo, fn):
    ds = _small(3)
    m = LambdaMART(algo=algo, k=5, truncation="k", query_normalization=None, score_normalization=False,
                   hessian_scale=1.0, truncate_discounts=True)
    obj = m.objective(ds)
    preds = np.random.default_rng(0).normal(size=ds.n_docs).astype(np.float32)
    grad, hess = obj(preds, None)
    for q in range(ds.n_queries):
        sl = ds.query(q)
        kw = {"k": 5} if algo == "lambdamart" else {}
        g, h = fn(preds[sl].astype(np.float64), ds.y[sl], 1.0, return_hessian=True, **kw)
        np.testing.assert_allclose(grad[sl], g, atol=1e-5)
        np.testing.assert_allclose(hess[sl], h, atol=1e-5)


def test_score_is_sum_of_leaves_in_float32():
    ds = _small(4, n_q=20)
    m = LambdaMART(n_estimators=20, max_depth=4, early_stopping_rounds=None).fit(ds)
    X = ds.X.copy()
    X[::7, 1] = np.nan  # missing values follow each node's missing branch
    ours = score_trees(m.trees_json(), X)
    np.testing.assert_allclose(m.predict(X), ours, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("seed", [0, 1])
def test_plugin_scores_of_trees_are_the_plugin_walk_bit_for_bit(seed):
    """``plugin_scores`` scores trees with xgboost's predictor, ``ltr predict`` with a
    Forest (no xgboost): the same float32 numbers as walking the exported JSON trees the
    plugin's way (NaN right, float32 sums), missing, infinite and threshold-equal values
    included."""
    ds = _small(seed, n_q=30, n_d=25, f=6)
    X = ds.X.copy()
    X[::5, 2] = np.nan
    X[1::9, 0] = np.inf
    X[2::9, 0] = -np.inf
    m = LambdaMART(n_estimators=40, max_depth=5, early_stopping_rounds=None).fit(ds)
    trees = m.trees_json()
    nodes, splits = list(trees), []
    while nodes:
        node = nodes.pop()
        if "split" in node:
            splits.append((int(node["split"][1:]), np.float32(node["split_condition"])))
            nodes += node["children"]
    for row, (j, threshold) in zip(range(3, len(X), 4), splits):
        X[row, j] = threshold                            # on the threshold itself
    ours = plugin_scores({"algorithm": "lambdamart"}, m, X)
    np.testing.assert_array_equal(ours, score_trees(trees, X))
    # and without xgboost (ltr predict's scorer): the same numbers
    np.testing.assert_array_equal(Forest.from_state(m.state()).predict(X), ours)


def test_lambdamart_learns_and_early_stops(mslr_paths):
    train_path, test_path = mslr_paths
    full = load_svmlight(train_path)
    test = load_svmlight(test_path, n_features=full.n_features)
    q = np.arange(full.n_queries)
    m = LambdaMART(n_estimators=400, max_depth=4, learning_rate=0.1, early_stopping_rounds=20,
                   k=10).fit(full.subset(q[:34]), full.subset(q[34:]))
    assert m.best_iteration_ < 399
    got = ndcg(m.predict(test.X), test.y, test.offsets, 10).mean()
    rand = ndcg(np.random.default_rng(0).normal(size=test.n_docs), test.y, test.offsets, 10).mean()
    assert got > rand + 0.05


def test_early_stopping_watches_the_validation_ndcg_by_name():
    """xgboost's default metric is off: the log holds only the toolkit's ndcg@k on the
    validation set, and early stopping keeps its first best round."""
    train, valid = _small(5, n_q=30), _small(6, n_q=10)
    log = {}

    class Record(xgb.callback.TrainingCallback):
        def after_iteration(self, booster, epoch, evals_log):
            log.update({d: {m: list(v) for m, v in ms.items()} for d, ms in evals_log.items()})
            return False
    m = LambdaMART(k=5, n_estimators=80, max_depth=3, early_stopping_rounds=6, nthread=1)
    m.fit(train, valid, callbacks=[Record()])
    assert m.metric_name == "ndcg@5"
    assert list(log) == ["valid"] and list(log["valid"]) == ["ndcg@5"]
    curve = np.asarray(log["valid"]["ndcg@5"])
    assert m.best_iteration_ == int(np.argmax(curve))
    assert len(curve) == min(80, m.best_iteration_ + 1 + 6)
    # the logged value is NDCG@5 of the validation predictions at that round
    m.best_iteration_ = len(curve) - 1
    assert curve[-1] == pytest.approx(ndcg(m.predict(valid.X), valid.y, valid.offsets, 5).mean(), abs=1e-6)


@pytest.mark.parametrize("weighting", ["ranknet", "lambdarank", "ndcg-loss2", "ndcg-loss2++"])
def test_objective_weightings_give_the_lambdaloss_lambdas(weighting):
    from ltr_toolkit.rank.lambdas import lambdaloss_lambdas
    ds = _small(7)
    m = LambdaMART(weighting=weighting, mu=3.0, truncation=4, sigma=1.5, query_normalization=None,
                   score_normalization=False, hessian_scale=1.0, truncate_discounts=True)
    preds = np.random.default_rng(1).normal(size=ds.n_docs).astype(np.float32)
    grad, hess = m.objective(ds)(preds, None)
    for q in range(ds.n_queries):
        sl = ds.query(q)
        g, h = lambdaloss_lambdas(preds[sl].astype(np.float64), ds.y[sl], weighting, 1.5, 4, 3.0,
                                  return_hessian=True)
        np.testing.assert_allclose(grad[sl], g, atol=2e-5)
        np.testing.assert_allclose(hess[sl], h, atol=2e-5)


def test_fit_rejects_bad_parameters_only_in_fit():
    ds = _small(8)
    for bad in (dict(weighting="listnet"), dict(query_normalization="queries"), dict(truncation=0),
                dict(learning_rate=0.0), dict(subsample=1.5)):
        m = LambdaMART(**bad)                      # stored as given
        with pytest.raises(ValueError):
            m.fit(ds)


def test_rows_fed_to_xgboost_in_batches_give_the_same_model(monkeypatch):
    """The training matrix and the predictions go through xgboost in batches of rows
    (no second full copy of the features): every row is fed once, in order, so the model
    and its scores do not depend on the batch size."""
    from ltr_toolkit.models import base
    ds = _small(11, n_q=9, n_d=13)
    ds.X[::5, 1] = np.nan                           # missing values go through the batches too
    whole = LambdaMART(n_estimators=8, max_depth=3, early_stopping_rounds=None, nthread=1).fit(ds)
    monkeypatch.setattr(base, "BATCH_ROWS", 10)   # 117 rows: 12 batches
    batched = LambdaMART(n_estimators=8, max_depth=3, early_stopping_rounds=None, nthread=1).fit(ds)
    assert batched.booster_.num_features() == ds.n_features
    np.testing.assert_array_equal(batched.predict(ds.X), whole.predict(ds.X))
    np.testing.assert_array_equal(whole.predict(ds.X[:50]), whole.predict(ds.X)[:50])


def test_tree_threads_come_from_the_machine_unless_set():
    """nthread was a fixed 2 (#30): None now means every core, a number is kept."""
    import os
    from ltr_toolkit.models.trees import LambdaMART
    assert LambdaMART().booster_params()["nthread"] == (os.cpu_count() or 1)
    assert LambdaMART(nthread=1).booster_params()["nthread"] == 1


def test_warm_start_adds_trees_equal_to_fitting_them_at_once(mslr_paths):
    """scikit-learn's warm_start: raising n_estimators and fitting again grows the same
    trees a single fit makes; fewer trees than fitted is refused."""
    ds = load_svmlight(mslr_paths[0], n_features=136).subset(list(range(20)))
    once = LambdaMART(n_estimators=12, max_depth=3, nthread=1).fit(ds)
    grown = LambdaMART(n_estimators=5, max_depth=3, nthread=1, warm_start=True).fit(ds)
    grown.set_params(n_estimators=12).fit(ds)
    assert grown.booster_.num_boosted_rounds() == 12
    np.testing.assert_array_equal(grown.predict(ds.X), once.predict(ds.X))
    with pytest.raises(ValueError, match="fewer than"):
        grown.set_params(n_estimators=4).fit(ds)


def test_matrix_batches_never_cut_a_query(monkeypatch):
    """The QuantileDMatrix is fed in batches of whole queries: a query cut between two
    batches would be two groups to xgboost (its native objectives, its group info)."""
    from ltr_toolkit.models import base
    monkeypatch.setattr(base, "BATCH_ROWS", 50)
    rng = np.random.default_rng(3)
    sizes = np.array([30, 30, 120, 7, 45, 45, 1])
    off = np.concatenate([[0], np.cumsum(sizes)])
    ds = RankingDataset(X=rng.normal(size=(off[-1], 4)).astype(np.float32),
                        y=rng.integers(0, 3, off[-1]).astype(float), offsets=off,
                        qids=[str(q) for q in range(len(sizes))])
    batches = list(base.query_batches(off))
    assert batches[0] == (0, 30) and (60, 180) in batches          # one query over 50: alone
    assert [lo for lo, _ in batches[1:]] == [hi for _, hi in batches[:-1]]
    assert set(lo for lo, _ in batches) <= set(off.tolist())
    d = LambdaMART(nthread=1)._dmatrix(ds)
    np.testing.assert_array_equal(d.get_uint_info("group_ptr"), off)
