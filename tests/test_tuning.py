"""Settings chosen from the user's data (inner cross-validation), and the recommendation
that never names a reranker worse than the first stage."""

from __future__ import annotations

import numpy as np

from ltr_toolkit.data.svmlight import load_svmlight
from ltr_toolkit.evaluation.report import compare, recommend
from ltr_toolkit.pipeline import tuning


def test_grids_are_sized_to_the_number_of_queries():
    small, large = tuning.grid("lambdamart", 50), tuning.grid("lambdamart", 500)
    assert max(p["depth"] for p in small) < max(p["depth"] for p in large)
    assert {p["min_child_weight"] for p in small} == {1.0, 10.0}
    assert len(tuning.grid("lambdarank-nn", 50)) < len(tuning.grid("lambdarank-nn", 500))
    assert [p["l2"] for p in tuning.grid("linear", 50)] == [0.0, 1e-3, 1e-2]


def test_inner_folds_are_balanced_and_seeded():
    f = tuning.inner_folds(10, 3, seed=1)
    assert sorted(np.bincount(f).tolist()) == [3, 3, 4]
    assert (f == tuning.inner_folds(10, 3, seed=1)).all()


def _check_choice(got, n_settings):
    """The best model of the grid is the one with the best inner NDCG; it is chosen only
    when it beats keeping the first stage with p < 0.05, else the first stage is kept."""
    tried = got["tried"]
    models = [t for t in tried if not t["first_stage"]]
    assert len(models) == n_settings and len(tried) == n_settings + 1
    top = max(t["inner_ndcg"] for t in models)
    assert round(got["best_model_inner_ndcg"], 5) == top
    assert got["best_model"] in [{k: v for k, v in t.items() if k != "inner_ndcg"}
                                 for t in models if t["inner_ndcg"] == top]
    wins = got["best_model_inner_ndcg"] > got["first_stage_inner_ndcg"] and got["inner_p_value"] < 0.05
    assert got["first_stage"] is (not wins)
    if wins:       # the best's setting and blend; trees: perhaps fewer (tuning.fewest_trees)
        best = got["best_model"]["params"]
        assert {k: v for k, v in got["params"].items() if k != "trees"} == \
            {k: v for k, v in best.items() if k != "trees"}
        assert got["params"].get("trees", 0) <= best.get("trees", 0)
        assert got["blend"] == got["best_model"]["blend"]
    else:
        assert got["params"] is None and got["inner_ndcg"] == got["first_stage_inner_ndcg"]
    assert 0 < got["first_stage_inner_ndcg"] < 1


def test_select_picks_the_best_inner_setting(mslr_paths):
    ds = load_svmlight(mslr_paths[0], n_features=136)
    small = ds.subset(list(range(20)))             # trees: 20 queries keep it quick
    got = tuning.select(small, "lambdamart", k=10, seed=3, halving=False)
    _check_choice(got, len(tuning.grid("lambdamart", 20)) * len(tuning.TREE_COUNTS))
    got = tuning.select(ds, "linear", k=10, seed=3, first_col=0)   # blends too
    _check_choice(got, len(tuning.grid("linear", ds.n_queries)) * (1 + len(tuning.BLEND_STEPS)))


def test_successive_halving_grows_only_the_better_tree_settings(mslr_paths):
    """With halving, every setting is scored at the smallest tree count, and at each
    larger count only the better 1/HALVING of those scored at the count before (by their
    best inner NDCG there); scores at a count equal those of the full grid (warm-started
    trees are the same trees)."""
    ds = load_svmlight(mslr_paths[0], n_features=136).subset(list(range(30)))
    full = tuning.select(ds, "lambdamart", k=10, seed=3, first_col=0, halving=False)
    got = tuning.select(ds, "lambdamart", k=10, seed=3, first_col=0)
    n = len(tuning.grid("lambdamart", 30))
    steps = 1 + len(tuning.BLEND_STEPS)

    def by_count(tried):
        out: dict = {}
        for t in tried:
            if not t["first_stage"]:
                p = dict(t["params"])
                out.setdefault(p.pop("trees"), {}).setdefault(str(sorted(p.items())), []).append(
                    t["inner_ndcg"])
        return out
    g, f = by_count(got["tried"]), by_count(full["tried"])
    alive = n
    for i, count in enumerate(tuning.TREE_COUNTS):
        assert len(g[count]) == alive and all(len(v) == steps for v in g[count].values())
        for setting, scores in g[count].items():
            assert scores == f[count][setting]
        if i + 1 < len(tuning.TREE_COUNTS):
            ranked = sorted(g[count], key=lambda s: -max(g[count][s]))
            alive = -(-alive // tuning.HALVING)
            assert set(g[tuning.TREE_COUNTS[i + 1]]) == set(ranked[:alive])
    _check_choice(got, sum(len(v) for v in g.values()) * steps)


def test_a_model_that_cannot_beat_the_first_stage_is_not_chosen(mslr_paths):
    """Labels that follow the row order exactly (the first stage is perfect): no model
    can beat it, and the first stage is kept."""
    ds = load_svmlight(mslr_paths[0], n_features=136).subset(list(range(20)))
    y = np.concatenate([np.linspace(4, 0, ds.offsets[q + 1] - ds.offsets[q]).round()
                        for q in range(ds.n_queries)])
    perfect = type(ds)(X=ds.X, y=y, offsets=ds.offsets, qids=ds.qids)
    got = tuning.select(perfect, "linear", k=10, seed=1)
    assert got["first_stage"] and got["first_stage_inner_ndcg"] == 1.0


def _report(deltas: dict[str, float], n: int = 40, noise: float = 0.05, seed: int = 0):
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.2, 0.6, n)
    per_query = {"first": {"ndcg@10": base}}
    for name, d in deltas.items():
        per_query[name] = {"ndcg@10": base + d + rng.normal(0, noise, n)}
    return compare(per_query, "first", 10)


def test_recommend_keeps_the_first_stage_unless_a_reranker_is_significantly_better():
    rep = _report({"worse": -0.05, "same": 0.0})
    rec = recommend(rep)
    assert rec["deploy"] is None and rec["worse"] == ["worse"] and "keep the first stage" in rec["reason"]
    rep = _report({"good": 0.03, "better": 0.06, "worse": -0.05})
    rec = recommend(rep)
    assert rec["deploy"] == "better" and rec["worse"] == ["worse"]


def test_too_few_useful_queries_keep_the_first_stage(mslr_paths):
    ds = load_svmlight(mslr_paths[0], n_features=136).subset([0, 1, 2])
    flat = type(ds)(X=ds.X, y=np.zeros_like(ds.y), offsets=ds.offsets, qids=ds.qids)
    got = tuning.select(flat, "lambdamart", k=10, seed=1)
    assert got["first_stage"] and got["params"] is None and got["tried"] == []


def test_a_budget_bounds_the_candidates_and_names_those_left_out(mslr_paths):
    """With no time at all, only the grid's first setting is trained (at the smallest
    tree count for trees); every other candidate is named in ``left_out``; without a
    budget nothing is left out."""
    ds = load_svmlight(mslr_paths[0], n_features=136).subset(list(range(20)))
    got = tuning.select(ds, "lambdamart", k=10, seed=3, budget=0)
    first = tuning.grid("lambdamart", 20)[0]
    assert [t["params"] for t in got["tried"] if not t["first_stage"]] == [
        dict(first, trees=tuning.TREE_COUNTS[0])]
    n = len(tuning.grid("lambdamart", 20))
    assert len(got["left_out"]) == n - 1 + 1            # the rest at 50 trees, then the larger counts
    assert got["left_out"][-1].startswith("100, 200 trees")
    got = tuning.select(ds, "linear", k=10, seed=3, budget=0)
    assert len([t for t in got["tried"] if not t["first_stage"]]) == 1
    assert got["left_out"] == ["l2=0.001", "l2=0.01"]
    assert tuning.select(ds, "linear", k=10, seed=3)["left_out"] == []


def test_many_queries_choose_on_a_seeded_sample(mslr_paths, monkeypatch):
    """Past SELECTION_QUERIES useful training queries, settings are chosen on a seeded
    sample of that many (the same sample for the same seed); at or below it, on all."""
    ds = load_svmlight(mslr_paths[0], n_features=136).subset(list(range(40)))
    useful = sum(np.ptp(ds.y[ds.query(q)]) > 0 for q in range(ds.n_queries))
    assert tuning.select(ds, "linear", k=10, seed=3)["queries"] == useful
    monkeypatch.setattr(tuning, "SELECTION_QUERIES", 15)
    a = tuning.select(ds, "linear", k=10, seed=3)
    assert a["queries"] == 15 and a == tuning.select(ds, "linear", k=10, seed=3)
    assert a["first_stage_inner_ndcg"] != tuning.select(ds, "linear", k=10, seed=4)["first_stage_inner_ndcg"]


def test_selection_progress_adds_up_to_its_planned_work(mslr_paths):
    """The units ``select`` reports as its inner fits end sum to what :func:`tuning.work`
    plans for it (so a progress line reaches 100% as the choice ends, not before)."""
    ds = load_svmlight(mslr_paths[0], n_features=136).subset(list(range(30)))
    for algo in ("lambdamart", "linear"):
        seen = []
        tuning.select(ds, algo, k=10, seed=1, first_col=0, progress=seen.append)
        plan = tuning.work(ds, algo)
        assert abs(sum(seen) - plan["select"]) < 1e-6 * plan["select"], algo
        assert abs(plan["round"] * plan["rounds"] - ds.n_queries * (tuning.TREE_COUNTS[-1] if algo == "lambdamart" else 1)) < 1e-9


def test_fewer_trees_are_served_when_the_inner_folds_cannot_tell_them_apart():
    """Of the best setting's tree counts, the fewest within one standard error of the
    best count's mean is chosen; a count clearly worse is not."""
    rng = np.random.default_rng(0)
    base = rng.uniform(0.3, 0.7, 300)

    def near(shift, spread):         # per-query NDCG of another count: two inner folds
        v = base + shift + rng.normal(0, spread, 300)
        return [v[:150], v[150:]]
    per = {(0, 200, None): [base[:150], base[150:]], (0, 100, None): near(0.0, 0.05),
           (0, 50, None): near(-0.05, 0.02)}                 # 100: as good; 50: clearly worse
    per[(0, 100, None)][0] = per[(0, 100, None)][0] - per[(0, 100, None)][0].mean() + base[:150].mean()
    per[(0, 100, None)][1] = per[(0, 100, None)][1] - per[(0, 100, None)][1].mean() + base[150:].mean()
    assert tuning.fewest_trees(per, (0, 200, None)) == (0, 100, None)
    per[(0, 50, None)] = near(0.0, 0.05)                     # now within its noise too
    per[(0, 50, None)] = [p - p.mean() + b.mean() for p, b in zip(per[(0, 50, None)], per[(0, 200, None)])]
    assert tuning.fewest_trees(per, (0, 200, None)) == (0, 50, None)
    per[(0, 100, None)], per[(0, 50, None)] = near(-0.02, 0.01), near(-0.03, 0.01)
    assert tuning.fewest_trees(per, (0, 200, None)) == (0, 200, None)
