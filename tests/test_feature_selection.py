"""The recommended, pruned feature set (evaluation.feature_selection), offline: a dead
feature and one of two exact copies go, the signal stays, and the pruned set is held
against the whole set with the paired test."""

from __future__ import annotations

from functools import partial

import numpy as np

from ltr_toolkit.data.dataset import RankingDataset
from ltr_toolkit.evaluation.feature_selection import DEAD, prune, pruned_featureset
from ltr_toolkit.evaluation.feature_timing import ablation_scores, feature_contributions
from ltr_toolkit.features.check import dead_columns
from ltr_toolkit.pipeline.train import make_estimator


def _catalogue(seed: int = 3, queries: int = 60, docs: int = 20) -> RankingDataset:
    """signal (grades follow it), its copy, noise, a constant and an all-missing column."""
    rng = np.random.default_rng(seed)
    n = queries * docs
    signal = rng.normal(size=n)
    grade = np.clip(np.round(signal + rng.normal(scale=0.5, size=n)), 0, 3)
    X = np.c_[signal, signal, rng.normal(size=n), np.full(n, 2.0), np.full(n, np.nan)]
    return RankingDataset(X=X, y=grade, offsets=np.arange(0, n + 1, docs),
                          qids=[str(q) for q in range(queries)],
                          feature_names=["signal", "copy", "noise", "constant", "missing"])


def test_dead_features_are_the_constant_and_the_missing_columns():
    ds = _catalogue()
    missing, constant = dead_columns(ds.X)      # the one check, as prune and ltr log use it
    assert [n for n, m in zip(ds.feature_names, missing) if m] == ["missing"]
    assert [n for n, c in zip(ds.feature_names, constant) if c] == ["constant"]


def test_the_pruned_set_keeps_the_signal_once_and_drops_the_dead():
    ds = _catalogue()
    make = partial(make_estimator, "linear", k=10, seed=1, epochs=20)
    scores = ablation_scores(ds, make, folds=3, k=10, seed=0)
    contribution = feature_contributions(ds, make, k=10, scores=scores)
    costs = {"copy": {"p50_ms": 0.5}, "signal": {"p50_ms": 0.1}}
    sel = prune(ds, make, contribution, costs, scores[0], scores[1], k=10)
    gone = {p["feature"]: p["why"] for p in sel["pruned"]}
    assert gone["constant"] == DEAD and gone["missing"] == DEAD
    assert len({"signal", "copy"} & set(sel["kept"])) == 1        # one copy is enough
    assert set(sel["kept"]) | set(gone) == set(ds.feature_names)
    assert not set(sel["kept"]) & set(gone)
    assert sel["ndcg_pruned"] >= sel["ndcg_all"]                  # pruned only without loss
    t = sel["test"]
    assert t["wins"] + t["ties"] + t["losses"] == ds.n_queries and 0 < t["p_value"] <= 1
    assert sel["ms_saved"] >= 0.1                                 # the dropped copy's cost


def test_the_pruned_file_keeps_the_stored_order_and_definitions():
    feats = [{"name": n, "params": ["keywords"], "template": {"match": {n: "{{keywords}}"}}}
             for n in ("a", "b", "c")]
    fs = pruned_featureset(feats, ["c", "a"], "set-pruned")
    assert fs["name"] == "set-pruned" and [f["name"] for f in fs["features"]] == ["a", "c"]
    assert fs["features"][0] is feats[0]
