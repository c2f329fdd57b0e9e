"""scikit-learn conventions of LambdaMART and NeuralRanker: arguments stored unchanged,
validation in fit, get_params/set_params from the signature, sklearn.base.clone,
fit(X, y, qid=...) beside fit(dataset), artifacts still round-trip."""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

from ltr_toolkit.data.dataset import RankingDataset
from ltr_toolkit.models.base import NotFittedError, as_ranking_dataset
from ltr_toolkit.models.neural import NeuralRanker
from ltr_toolkit.models.trees import LambdaMART

ESTIMATORS = [
    (LambdaMART, dict(n_estimators=8, max_depth=3, nthread=1, early_stopping_rounds=None)),
    (NeuralRanker, dict(hidden=(6,), epochs=2, seed=3)),
]


def _data(seed=0, n_q=12, n_d=15, f=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_q * n_d, f)).astype(np.float32)
    y = np.clip(np.round(X[:, 0] + 0.5 * X[:, 1] + rng.normal(scale=0.5, size=len(X))), 0, 3)
    return RankingDataset(X=X, y=y, offsets=np.arange(0, n_q * n_d + 1, n_d),
                          qids=[f"q{q}" for q in range(n_q)])


def _signature_names(cls):
    return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]


@pytest.mark.parametrize("cls,kw", ESTIMATORS)
def test_init_stores_arguments_unchanged_and_fit_validates(cls, kw):
    odd = {"algo": "no-such-algo", "k": "10", "sigma": [1.0]}
    m = cls(**odd)
    for name, value in odd.items():
        assert getattr(m, name) is value          # no conversion, no validation in __init__
    with pytest.raises(ValueError, match="algo"):
        m.fit(_data())
    # every documented default is stored as given too
    defaults = {p.name: p.default for p in inspect.signature(cls.__init__).parameters.values()
                if p.name != "self"}
    fresh = cls()
    for name, value in defaults.items():
        assert getattr(fresh, name) is value, name


@pytest.mark.parametrize("cls,kw", ESTIMATORS)
def test_get_params_set_params_follow_the_signature(cls, kw):
    m = cls(**kw)
    params = m.get_params()
    assert list(params) == _signature_names(cls)
    for name, value in kw.items():
        assert params[name] is value
    assert m.set_params(seed=11, k=5) is m
    assert m.get_params()["seed"] == 11 and m.k == 5
    with pytest.raises(ValueError, match="no_such"):
        m.set_params(no_such=1)
    assert cls(**m.get_params()).get_params() == m.get_params()


@pytest.mark.parametrize("cls,kw", ESTIMATORS)
def test_sklearn_clone_round_trips(cls, kw):
    from sklearn.base import clone
    ds = _data()
    m = cls(**kw).fit(ds)
    c = clone(m)
    assert type(c) is cls and c is not m
    assert c.get_params() == m.get_params()
    assert not hasattr(c, "booster_") and not hasattr(c, "net_")     # unfitted
    np.testing.assert_array_equal(c.fit(ds).predict(ds.X), m.predict(ds.X))
    c2 = clone(m).set_params(seed=m.get_params()["seed"] + 1)
    assert c2.get_params()["seed"] != m.get_params()["seed"]


@pytest.mark.parametrize("cls,kw", ESTIMATORS)
def test_fit_x_y_qid_equals_fit_dataset(cls, kw):
    ds, valid = _data(0), _data(1, n_q=5)
    qid = np.repeat(np.arange(ds.n_queries) * 7, ds.group_sizes)   # any hashable ids
    vq = np.repeat(np.arange(valid.n_queries), valid.group_sizes)
    a = cls(**kw).fit(ds, valid)
    b = cls(**kw).fit(ds.X, ds.y, qid=qid, valid=(valid.X, valid.y, vq))
    np.testing.assert_array_equal(a.predict(valid.X), b.predict(valid.X))
    # rows of different queries interleaved: grouped back, order inside a query kept
    perm = np.argsort(np.tile(np.arange(ds.group_sizes[0]), ds.n_queries), kind="stable")
    c = cls(**kw).fit(ds.X[perm], ds.y[perm], qid=qid[perm], valid=valid)
    np.testing.assert_array_equal(a.predict(valid.X), c.predict(valid.X))


def test_as_ranking_dataset_groups_by_first_appearance():
    X = np.arange(12, dtype=np.float32).reshape(6, 2)
    y = np.array([0, 1, 2, 0, 1, 2.0])
    ds = as_ranking_dataset(X, y, ["b", "a", "b", "c", "a", "b"])
    assert list(ds.qids) == ["b", "a", "c"]
    np.testing.assert_array_equal(ds.offsets, [0, 3, 5, 6])
    np.testing.assert_array_equal(ds.meta["input_rows"], [0, 2, 5, 1, 4, 3])
    np.testing.assert_array_equal(ds.y, y[[0, 2, 5, 1, 4, 3]])
    with pytest.raises(ValueError, match="same number of rows"):
        as_ranking_dataset(X, y[:-1], np.zeros(6))
    with pytest.raises(ValueError, match="qid"):
        LambdaMART().fit(X, y)


@pytest.mark.parametrize("cls,kw", ESTIMATORS)
def test_state_round_trip_keeps_params_and_scores(cls, kw):
    ds = _data(2)
    m = cls(**kw).fit(ds)
    state = json.loads(json.dumps(m.state()))          # what an artifact stores
    r = cls.from_state(state)
    np.testing.assert_allclose(r.predict(ds.X), m.predict(ds.X), rtol=1e-5, atol=1e-6)
    got = r.get_params()
    for name, value in m._json_params().items():
        if name != "dtype":                            # loaded networks run in float64
            assert got[name] == value or list(got[name]) == value, name


def test_old_artifact_params_still_load():
    """Artifacts written before the convention change stored converted values (hidden as a
    list, truncation resolved, query_normalization as a bool, no truncation for trees)."""
    ds = _data(3)
    net = NeuralRanker(hidden=(4,), epochs=1, seed=0).fit(ds)
    st = net.state()
    st["params"].update(hidden=[4], truncation=10, objective="lambdarank", dtype="float32")
    assert NeuralRanker.from_state(st).predict(ds.X).shape == (ds.n_docs,)
    trees = LambdaMART(n_estimators=3, max_depth=2, nthread=1).fit(ds)
    st = trees.state()
    st["params"]["query_normalization"] = True
    for new in ("truncation", "weighting", "mu", "score_normalization"):
        del st["params"][new]
    old = LambdaMART.from_state(st)
    assert old.truncation == "k" and old._query_normalization() == "documents"
    assert old.score_normalization is False
    np.testing.assert_array_equal(old.predict(ds.X), trees.predict(ds.X))


@pytest.mark.parametrize("make", [LambdaMART, NeuralRanker])
def test_predict_before_fit_is_not_fitted_error(make):
    """As in scikit-learn: NotFittedError (a ValueError and an AttributeError), saying what
    to do; it was a bare AttributeError on a private attribute."""
    with pytest.raises(NotFittedError, match="call fit"):
        make().predict(np.zeros((3, 4)))


@pytest.mark.parametrize("cls,kw", ESTIMATORS)
def test_predict_refuses_another_number_of_features_than_fit_saw(cls, kw):
    """``n_features_in_`` as in scikit-learn, kept through the artifact: a matrix with a
    column more or less is refused in one line (a network broadcast a single column
    silently before)."""
    ds = _data()
    m = cls(**kw).fit(ds)
    assert m.n_features_in_ == 5
    for X in (ds.X[:, :4], ds.X[:, :1], np.hstack([ds.X, ds.X[:, :1]])):
        with pytest.raises(ValueError, match=f"X has {X.shape[1]} features, but {cls.__name__} "
                                             "is expecting 5 features"):
            m.predict(X)
    back = cls.from_state(json.loads(json.dumps(m.state())))
    assert back.n_features_in_ == 5
    with pytest.raises(ValueError, match="expecting 5 features"):
        back.predict(ds.X[:, :1])


@pytest.mark.parametrize("cls,name,bad,says", [
    (NeuralRanker, "epochs", 0, r"'epochs' parameter of NeuralRanker must be an int in the range \[1, inf\); got 0"),
    (NeuralRanker, "lr", -1e-3, r"'lr' parameter of NeuralRanker must be a float in the range \(0, inf\)"),
    (NeuralRanker, "truncation", 0, r"must be one of 'k' or an int in the range \[1, inf\) or None"),
    (LambdaMART, "subsample", 1.5, r"'subsample' parameter of LambdaMART must be a float in the range \(0, 1\]"),
    (LambdaMART, "nthread", 0, r"'nthread' parameter of LambdaMART must be an int in the range \[1, inf\) or None"),
    (LambdaMART, "tree_method", "gpu", r"must be one of 'hist', 'approx', 'exact'; got 'gpu'"),
])
def test_parameters_are_checked_against_their_declared_constraints(cls, name, bad, says):
    """One validator over the constraints each estimator declares (scikit-learn's
    _param_validation idea): the parameter, what it must be, what it got."""
    m = cls(**{name: bad})
    with pytest.raises(ValueError, match=says):
        m.fit(_data())
    assert set(cls._parameter_constraints) <= set(_signature_names(cls))
