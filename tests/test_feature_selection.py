"""The feature set chosen by evidence and serving cost (evaluation.feature_selection),
offline on synthetic logged candidates: informative cheap features among many noisy
ones and an informative expensive one; the budget is respected, the cheap signal is
chosen, noise is not, and a feature that helps on average but fails a third of the
queries badly is left out by the risk-aware objective (chosen without it)."""

from __future__ import annotations

import numpy as np
import pytest

from ltr_toolkit.data.dataset import RankingDataset
from ltr_toolkit.evaluation import feature_selection as FS
from ltr_toolkit.evaluation.feature_selection import forward_select, subset_featureset
from ltr_toolkit.evaluation.feature_timing import CostModel, cost_model


def _logged(seed: int = 3, queries: int = 120, docs: int = 50, noisy: int = 60) -> RankingDataset:
    """Rows in a weak first stage's order; grades follow a + b; ``costly`` is a + b
    itself; ``risky`` is the grade on 70% of the queries, its opposite on the others."""
    rng = np.random.default_rng(seed)
    n = queries * docs
    a, b = rng.normal(size=n), rng.normal(size=n)
    grade = np.clip(np.round(a + b + rng.normal(scale=0.7, size=n)), 0, 3)
    first = 0.3 * (a + b) + rng.normal(size=n)
    order = np.concatenate([q * docs + np.argsort(-first[q * docs:(q + 1) * docs])
                            for q in range(queries)])
    bad = np.repeat(rng.random(queries) < 0.3, docs)
    risky = np.where(bad, -grade, grade) + rng.normal(scale=0.3, size=n)
    cols = [first, a, b, a + b, risky, *(rng.normal(size=n) for _ in range(noisy))]
    names = ["first", "cheap_a", "cheap_b", "costly", "risky", *(f"noise{i}" for i in range(noisy))]
    return RankingDataset(X=np.c_[tuple(cols)][order], y=grade[order],
                          offsets=np.arange(0, n + 1, docs), qids=[str(q) for q in range(queries)],
                          feature_names=names)


def _costs(ds) -> CostModel:
    ms = dict.fromkeys(ds.feature_names, 0.35)
    ms["costly"] = 5.0
    return CostModel(first_ms=5.0, fixed_ms=0.8, features=ms)


def test_the_budget_is_respected_and_the_cheap_signal_chosen_not_the_noise():
    ds = _logged()
    cost = _costs(ds)
    seen = []
    sel = forward_select(ds, cost, 7.0, keep=("first",), progress=lambda d, t: seen.append((d, t)))
    assert sel["features"][0] == "first" and {"cheap_a", "cheap_b"} <= set(sel["features"])
    assert "costly" not in sel["features"]                      # 5 ms: over the budget
    assert not [n for n in sel["features"] if n.startswith("noise")]
    assert sel["estimated_ms"] == pytest.approx(cost.of(sel["features"]))
    assert sel["estimated_ms"] <= 7.0
    assert seen and seen[-1][0] == len(sel["steps"]) <= seen[-1][1]
    tight = forward_select(ds, cost, 5.0 + 0.8 + 0.7, keep=("first",))   # one feature more
    assert len(tight["features"]) == 2 and tight["estimated_ms"] <= 6.5
    assert tight["stopped"] == "the budget affords no other feature"


def _only(ds, names) -> RankingDataset:
    idx = [ds.feature_names.index(n) for n in names]
    return RankingDataset(X=ds.X[:, idx], y=ds.y, offsets=ds.offsets, qids=ds.qids,
                          feature_names=list(names))


def test_a_feature_that_fails_some_queries_badly_is_penalised(monkeypatch):
    full = _logged()
    ds = _only(full, [n for n in full.feature_names if n not in ("cheap_a", "cheap_b", "costly")])
    cost = _costs(ds)
    assert "risky" not in forward_select(ds, cost, 20.0, keep=("first",))["features"]
    monkeypatch.setattr(FS, "RISK", 0.0)                       # the mean alone takes it
    assert "risky" in forward_select(ds, cost, 20.0, keep=("first",))["features"]


def test_the_cost_model_adds_up_to_the_whole_sets_measured_row():
    rows = {"plain request": {"p50_ms": 4.0}, "all features": {"p50_ms": 2.0},
            "a": {"p50_ms": 1.0}, "b": {"p50_ms": 1.2}, "c": {"p50_ms": 1.4}}
    cost = cost_model(rows, ["a", "b", "c"], {})
    assert cost.fixed_ms == pytest.approx((3.6 - 2.0) / 2)
    assert cost.of(["a", "b", "c"]) == pytest.approx(4.0 + 2.0)
    assert cost.of([]) == 4.0 and cost.of(["b"]) == pytest.approx(4.0 + 1.2)
    assert CostModel.from_dict(cost.to_dict()) == cost


def test_the_subset_file_keeps_the_stored_order_and_definitions():
    feats = [{"name": n, "params": ["keywords"], "template": {"match": {n: "{{keywords}}"}}}
             for n in ("a", "b", "c")]
    fs = subset_featureset(feats, ["c", "a"], "set-2f")
    assert fs["name"] == "set-2f" and [f["name"] for f in fs["features"]] == ["a", "c"]
    assert fs["features"][0] is feats[0]
