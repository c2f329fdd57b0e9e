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


def test_ties_at_top_reads_equal_scores_in_the_top_k_plus_one_and_at_the_cut():
    P = np.array([[3.0, 1.0], [2.0, 1.0], [2.0, 0.5], [1.0, 0.2],     # query 0
                  [5.0, 9.0], [4.0, 8.0], [3.0, 7.0]])                 # query 1
    got = FS.ties_at_top(P, np.array([0, 4, 7]), k=2)
    assert got.shape == (2, 2, 2)
    assert got[0, 0].tolist() == [True, False]      # column 0: query 0 ties 2.0 twice
    assert got[0, 1].tolist() == [True, False]      # ... at ranks 2 and 3: at the cut
    assert got[1, 0].tolist() == [True, False]      # column 1: 1.0 twice, ranks 1-2
    assert got[1, 1].tolist() == [False, False]     # not at the cut


def _coarse(seed: int = 5, queries: int = 200, docs: int = 30) -> RankingDataset:
    """Grades follow a flag (two values: a model on it alone ties nearly every query)
    and, less, a fine score that breaks those ties."""
    rng = np.random.default_rng(seed)
    n = queries * docs
    flag, fine = (rng.random(n) < 0.3).astype(float), rng.normal(size=n)
    grade = np.clip(np.round(2 * flag + 0.5 * fine + rng.normal(scale=0.3, size=n)), 0, 3)
    return RankingDataset(X=np.c_[flag, fine], y=grade, offsets=np.arange(0, n + 1, docs),
                          qids=[str(q) for q in range(queries)], feature_names=["flag", "fine"])


def test_a_set_that_ties_costs_its_extra_requests_and_a_tie_breaker_can_fit_the_budget():
    """Served, ties cost a second request (and a deeper fetch at the cut): the flag
    alone is estimated with them; under a budget the flag alone would exceed with its
    ties, the fine score is added, which makes the set cheaper to serve."""
    ds = _coarse()
    cost = CostModel(first_ms=1.0, fixed_ms=0.1, features={"flag": 0.1, "fine": 0.1})
    alone = forward_select(_only(ds, ["flag"]), cost, 10.0, keep=("flag",))
    assert alone["tie_rates"][0] > 0.9
    assert alone["estimated_ms"] == pytest.approx(FS.tie_cost(cost, ["flag"], alone["tie_rates"]))
    assert alone["estimated_ms"] > cost.of(["flag"]) + 0.9 * cost.first_ms
    both = forward_select(ds, cost, 1.5, keep=("flag",))
    assert both["features"] == ["flag", "fine"] and both["tie_rates"] == [0.0, 0.0]
    assert both["estimated_ms"] == pytest.approx(cost.of(["flag", "fine"])) and both["estimated_ms"] <= 1.5


def test_a_budget_the_ties_break_leaves_the_first_stage_not_a_model_over_it():
    """The flag fits the budget without its ties and not with them, and nothing breaks
    them: no feature is served (the first stage alone), never a set over the budget."""
    ds = _only(_coarse(), ["flag"])
    cost = CostModel(first_ms=1.0, fixed_ms=0.1, features={"flag": 0.1})
    sel = forward_select(ds, cost, 1.25)
    assert sel["features"] == [] and sel["steps"] == []
    assert sel["estimated_ms"] == pytest.approx(cost.first_ms)
    assert "ties cost more than the budget" in sel["stopped"]
