"""Exports to the plugin's model formats, checked offline against independent readers.
(Parity against the node itself needs the LTR plugin: see test_parity, skipped without it.)"""

from __future__ import annotations

import json

import numpy as np
import pytest

from ltr_toolkit.data.dataset import RankingDataset
from ltr_toolkit.models import export as E
from ltr_toolkit.models.neural import NeuralRanker
from ltr_toolkit.models.trees import LambdaMART


def _data(seed=0, n_q=20, n_d=15, f=5):
    rng = np.random.default_rng(seed)
    X = (rng.normal(size=(n_q * n_d, f)) * [1, 10, 100, 0.1, 5] + [0, 5, 50, 0, -3]).astype(np.float32)
    y = rng.integers(0, 3, size=n_q * n_d).astype(float)
    return RankingDataset(X=X, y=y, offsets=np.arange(0, n_q * n_d + 1, n_d),
                          qids=[str(q) for q in range(n_q)])


def _artifact(algo, names):
    return {"algorithm": algo, "feature_names": names}


NAMES = ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize("hidden", [(8,), (6, 3)])
def test_ranknet_text_scores_like_ranklib(hidden):
    ds = _data()
    m = NeuralRanker("lambdarank-nn", hidden=hidden, epochs=3, seed=0).fit(ds)
    body, info = E.plugin_model(_artifact("lambdarank-nn", NAMES), m, ds.X)
    text = body["definition"]
    assert text.startswith("## RankNet\n") and body["type"] == "model/ranklib"
    assert set(body["feature_normalizers"]) == set(NAMES)
    # the plugin normalises first (float32), then RankLib evaluates the text
    Z = ((ds.X - m.mean_.astype(np.float32)) / m.std_.astype(np.float32)).astype(np.float32)
    ranklib = E.score_ranknet_text(text, Z)
    expected = E.plugin_scores(dict(_artifact("lambdarank-nn", NAMES), **info), m, ds.X)
    np.testing.assert_allclose(ranklib, expected, rtol=1e-6)
    # same order as the model's own scores wherever float32 does not tie them
    ours = m.predict(ds.X)
    for q in range(ds.n_queries):
        sl = ds.query(q)
        a, b = ours[sl], ranklib[sl]
        if len(np.unique(b)) == len(b):
            assert list(np.argsort(-a)) == list(np.argsort(-b))


@pytest.mark.parametrize("boost", [1.0, 500.0])
def test_served_network_scores_stay_distinct_in_float32(boost):
    ds = _data(1)
    m = NeuralRanker("ranknet-nn", hidden=(4,), epochs=1, seed=0).fit(ds)
    m.net_.params[-2][:] *= boost   # 500: huge output weights, sigmoid would saturate to 1.0f
    _, info = E.plugin_model(_artifact("ranknet-nn", NAMES), m, ds.X)
    omap = info["output_map"]
    assert 0 < omap["scale"] <= 1.0 and (omap["scale"] < 1.0) == (boost > 1)
    logits = m.predict(ds.X)
    s = E.plugin_scores(dict(_artifact("ranknet-nn", NAMES), **info), m, ds.X)
    assert np.max(s) < 0.5     # every training logit mapped below 0
    # no two different local scores share one float32 served score, and the order is kept
    order = np.argsort(logits, kind="stable")
    distinct = np.diff(logits[order]) > 1e-9 * np.abs(logits[order][1:])
    assert np.all(np.diff(s[order])[distinct] > 0)


def test_nan_weights_refused():
    ds = _data()
    m = NeuralRanker("ranknet-nn", hidden=(4,), epochs=1).fit(ds)
    m.net_.params[0][0, 0] = np.nan
    with pytest.raises(E.ExportError, match="NaN"):
        E.plugin_model(_artifact("ranknet-nn", NAMES), m, ds.X)


def test_feature_name_mismatch_refused():
    ds = _data()
    m = NeuralRanker("linear", epochs=1).fit(ds)
    with pytest.raises(E.ExportError, match="not in the feature set"):
        E.plugin_model(_artifact("linear", NAMES), m, ds.X, featureset_names=["a", "b", "x", "d", "e"])
    with pytest.raises(E.ExportError, match="order"):
        E.plugin_model(_artifact("linear", NAMES), m, ds.X, featureset_names=list(reversed(NAMES)))


def test_linear_definition_reproduces_scores_up_to_a_constant():
    ds = _data()
    m = NeuralRanker("linear", epochs=3).fit(ds)
    body, info = E.plugin_model(_artifact("linear", NAMES), m, ds.X)
    weights = json.loads(body["definition"])
    assert body["type"] == "model/linear" and list(weights) == NAMES
    plugin = E.plugin_scores(_artifact("linear", NAMES), m, ds.X)
    np.testing.assert_allclose(plugin + float(m.net_.biases[0][0]), m.predict(ds.X), rtol=1e-4, atol=1e-4)


def test_xgboost_definition_names_features_and_scores_sum_of_leaves():
    ds = _data()
    m = LambdaMART(n_estimators=15, max_depth=3, early_stopping_rounds=None).fit(ds)
    body, info = E.plugin_model(_artifact("lambdamart", NAMES), m)
    d = json.loads(body["definition"])
    assert body["type"] == "model/xgboost+json"
    assert d["objective"] in E.PLUGIN_XGB_OBJECTIVES and d["objective"] == "reg:linear"
    used = set()

    def walk(n):
        if "split" in n:
            used.add(n["split"])
            for c in n["children"]:
                walk(c)
    for t in d["splits"]:
        walk(t)
    assert used and used <= set(NAMES)
    from ltr_toolkit.models.xgbjson import score_trees
    np.testing.assert_allclose(score_trees(d["splits"], ds.X, NAMES), m.predict(ds.X), rtol=1e-5, atol=1e-6)
    with pytest.raises(E.ExportError, match="beyond"):
        E.plugin_model(_artifact("lambdamart", NAMES[:2]), m)
