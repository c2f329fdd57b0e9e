"""Trees scored with NumPy from the saved booster (models.forest): xgboost's scores bit
for bit, and ``ltr predict`` of a tree model without importing xgboost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xgboost as xgb

from ltr_toolkit.data.dataset import RankingDataset
from ltr_toolkit.data.svmlight import load_logged, save_svmlight
from ltr_toolkit.models.forest import Forest
from ltr_toolkit.models.trees import LambdaMART
from ltr_toolkit.models.xgbjson import score_trees

ROOT = Path(__file__).resolve().parent.parent


def _data(seed=0, n_q=30, n_d=25, f=6) -> RankingDataset:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_q * n_d, f)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = rng.integers(0, 4, size=n_q * n_d).astype(float)
    return RankingDataset(X=X, y=y, offsets=np.arange(0, n_q * n_d + 1, n_d),
                          qids=[str(q) for q in range(n_q)])


@pytest.fixture(params=["numpy", "compiled"])
def walk(request, monkeypatch):
    """The forest's NumPy walk or its compiled one (``io.compiled.pays`` decides)."""
    from ltr_toolkit.models import forest
    monkeypatch.setattr(forest.compiled, "pays", lambda seconds: request.param == "compiled")
    return request.param


@pytest.mark.parametrize("seed", [0, 1])
def test_forest_scores_are_xgboosts_bit_for_bit(seed, walk, monkeypatch):
    """A toolkit model (early stopped: trees up to its best round), rows with NaN and
    +-inf, in float32 and float64, in blocks and threads (values on thresholds:
    tests/test_trees.py), by either walk."""
    from ltr_toolkit.models import forest as forest_module
    monkeypatch.setattr(forest_module, "_ROWS_PER_THREAD", 100)
    ds = _data(seed)
    m = LambdaMART(n_estimators=40, max_depth=5, early_stopping_rounds=3).fit(ds, valid=_data(seed + 7))
    assert m.best_iteration_ < 39
    forest = Forest.from_state(json.loads(json.dumps(m.state())))
    X = ds.X.copy()
    X[1::9, 0], X[2::9, 0] = np.inf, -np.inf
    X[3::9, -1], X[4::9, :] = np.inf, np.inf      # what a leaf's test must not read
    np.testing.assert_array_equal(forest.predict(X), m.predict(X))
    np.testing.assert_array_equal(forest.predict(X, threads=1), score_trees(m.trees_json(), X))
    X64 = X.astype(np.float64) * 1.0000001
    np.testing.assert_array_equal(forest.predict(X64, threads=3), m.predict(X64))


def test_forest_of_a_plain_booster_adds_its_intercept_and_skips_deleted_nodes(walk):
    """xgboost's own objective with an intercept; trees of uneven depths with deleted
    nodes (the exact method prunes by gamma after growing)."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(2000, 8)).astype(np.float32)
    y = X[:, 0] * 2 + np.sin(X[:, 1] * 3) + rng.normal(scale=0.1, size=2000)
    params = {"objective": "reg:squarederror", "base_score": 0.375, "max_depth": 6,
              "gamma": 5.0, "tree_method": "exact"}
    booster = xgb.train(params, xgb.DMatrix(X, y), 25)
    saved = json.loads(bytes(booster.save_raw("json")).decode())
    assert any(int(t["tree_param"]["num_deleted"]) for t in
               saved["learner"]["gradient_booster"]["model"]["trees"])
    forest = Forest.from_state({"booster": saved, "best_iteration": 19})
    ref = booster.inplace_predict(X, iteration_range=(0, 20), predict_type="margin")
    np.testing.assert_array_equal(forest.predict(X), ref.astype(np.float64))
    assert forest.base == np.float32(0.375)


@pytest.mark.parametrize("breakage", ["no booster", "best_iteration", "feature", "categorical"])
def test_a_broken_booster_is_a_value_or_key_error(breakage):
    m = LambdaMART(n_estimators=3, max_depth=2).fit(_data())
    state = json.loads(json.dumps(m.state()))
    tree = state["booster"]["learner"]["gradient_booster"]["model"]["trees"][0]
    if breakage == "no booster":
        del state["booster"]
    elif breakage == "best_iteration":
        state["best_iteration"] = 3
    elif breakage == "feature":
        tree["split_indices"][0] = 99
    else:
        tree["split_type"][0] = 1
    with pytest.raises((KeyError, ValueError)):
        Forest.from_state(state)


def test_predict_of_a_tree_model_does_not_import_xgboost(tmp_path):
    """``ltr predict`` with a tree artifact: the scores of the model xgboost trained,
    and neither xgboost nor the cluster client imported."""
    from ltr_toolkit.pipeline.train import train_from_files
    ds = _data(2)
    save_svmlight(ds, tmp_path / "train.txt")
    train_from_files(tmp_path / "train.txt", "lambdamart", output=tmp_path / "m.json", trees=20)
    code = ("import sys; from ltr_toolkit.cli import main; rc = main(sys.argv[1:]); "
            "print(sorted(m for m in ('xgboost', 'opensearchpy', 'numba', 'sklearn') if m in sys.modules)); "
            "sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code, "predict", str(tmp_path / "m.json"),
                        str(tmp_path / "train.txt"), "-o", str(tmp_path / "s.txt")],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"
    art = json.loads((tmp_path / "m.json").read_text())
    expected = LambdaMART.from_state(art["model"]).predict(load_logged(tmp_path / "train.txt").X)
    got = np.loadtxt(tmp_path / "s.txt")
    np.testing.assert_array_equal(got, np.array(["%.9g" % s for s in expected], dtype=float))


def test_a_broken_tree_artifact_is_named_before_any_row_is_read(tmp_path):
    from ltr_toolkit.errors import InputError
    from ltr_toolkit.pipeline.artifact import ARTIFACT_FORMAT, predict_file
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"format": ARTIFACT_FORMAT, "algorithm": "lambdamart",
                                "n_features": 3, "model": {"booster": {}, "best_iteration": 0}}))
    with pytest.raises(InputError, match="m.json.*broken model artifact"):
        predict_file(path, tmp_path / "no-such-data.txt", tmp_path / "s.txt")
