"""The recommendation's design (#52): the choice of algorithm, settings and "keep the
first stage" made in each fold's training queries as one pipeline, tested once against
the first stage on the outer folds."""

from __future__ import annotations

import numpy as np

from ltr_toolkit.data.dataset import RankingDataset
from ltr_toolkit.evaluation.report import compare, pipeline_test, recommend
from ltr_toolkit.pipeline import crossval, deploy, tuning
from ltr_toolkit.pipeline.tuning import PIPELINE

K = 10


def _selected(first: float, best: float, passed: bool, l2: float = 0.0) -> dict:
    """A select() result whose best candidate scored ``best`` (inner mean NDCG) against
    the first stage's ``first``; ``passed``: its gate's verdict."""
    model = {"first_stage": False, "params": {"l2": l2}, "blend": 1.0}
    kept = {"first_stage": True, "params": None, "blend": None}
    return dict(model if passed else kept, inner_ndcg=best if passed else first,
                first_stage_inner_ndcg=first, best_model=model, best_model_inner_ndcg=best,
                inner_p_value=0.01 if passed else 0.4)


def test_the_pipeline_chooses_by_inner_mean_without_the_gate():
    gated_out = _selected(0.40, 0.46, passed=False, l2=1e-2)
    through = _selected(0.40, 0.44, passed=True)
    free = tuning.ungated(gated_out)
    assert not free["first_stage"] and free["params"] == {"l2": 1e-2} and free["inner_ndcg"] == 0.46
    assert tuning.pipeline_choice({"linear": gated_out, "lambdamart": through}) == "linear"
    worse = _selected(0.40, 0.39, passed=False)
    assert tuning.ungated(worse)["first_stage"]
    assert tuning.pipeline_choice({"linear": worse, "lambdamart": worse}) is None
    early = dict(worse, best_model=None, best_model_inner_ndcg=None, first_stage_inner_ndcg=None)
    assert tuning.pipeline_choice({"linear": early, "lambdamart": None}) is None


def _pooled(first, per_algo, folds, picks):
    """The pipeline's per-query values: in fold f, the system picks[f] (None: the first stage)."""
    out = first.copy()
    for f, pick in enumerate(picks):
        if pick is not None:
            out[folds == f] = per_algo[pick][folds == f]
    return out


def _report(first, per_algo, pipe):
    per_query = {"first": {f"ndcg@{K}": first}, **{a: {f"ndcg@{K}": v} for a, v in per_algo.items()},
                 PIPELINE: {f"ndcg@{K}": pipe}}
    rep = compare(per_query, "first", K, n_resamples=2000, confidence_level=None)
    rep["pipeline"] = {"name": PIPELINE, "algorithms": sorted(per_algo),
                       "test": {"metric": f"ndcg@{K}", **pipeline_test(first, pipe, n_resamples=2000)}}
    return rep


def test_the_choice_per_fold_is_what_is_tested():
    """a is better on folds 0-1 and worse elsewhere, b the other way round: neither alone
    beats the first stage over all queries, the pipeline that served a in folds 0-1 and b
    in 2-4 does (deployed); with the first stage kept in every fold, nothing is deployed
    although a reranker of the table is clearly better."""
    rng = np.random.default_rng(3)
    n = 150
    folds = np.arange(n) % 5
    first = rng.uniform(0.2, 0.6, n)
    lift = np.where(folds < 2, 0.08, -0.05)
    per_algo = {"a": first + lift + rng.normal(0, 0.03, n), "b": first - lift + rng.normal(0, 0.03, n)}
    rep = _report(first, per_algo, _pooled(first, per_algo, folds, ["a", "a", "b", "b", "b"]))
    assert all(rep["tests"][a]["p_corrected"] > 0.05 for a in per_algo)
    rec = recommend(rep)
    assert rec["deploy"] == PIPELINE and "one-sided p" in rec["reason"]
    per_algo["c"] = first + 0.05 + rng.normal(0, 0.03, n)
    rep = _report(first, per_algo, _pooled(first, per_algo, folds, [None] * 5))
    assert rep["tests"]["c"]["p_corrected"] < 0.05
    rec = recommend(rep)
    assert rec["deploy"] is None and "keep the first stage" in rec["reason"]


def test_no_gain_keeps_the_first_stage_and_a_clear_gain_deploys():
    rng = np.random.default_rng(5)
    n = 120
    folds = np.arange(n) % 5
    first = rng.uniform(0.2, 0.6, n)
    same = {"a": first + rng.normal(0, 0.04, n), "b": first + rng.normal(0, 0.04, n)}
    got = recommend(_report(first, same, _pooled(first, same, folds, ["a", "b", None, "a", "b"])))
    assert got["deploy"] is None and "keep the first stage" in got["reason"]
    better = {"a": first + 0.04 + rng.normal(0, 0.04, n), "b": first + rng.normal(0, 0.04, n)}
    got = recommend(_report(first, better, _pooled(first, better, folds, ["a", "a", "b", "a", "a"])))
    assert got["deploy"] == PIPELINE


def _null_rate(runs: int, peek: bool) -> float:
    """Null runs (3 systems exchangeable with the first stage, 100 queries in 5 folds):
    the share deployed when each fold's pick is made blind to its queries (as the inner
    folds make it) or, with ``peek``, by the fold's own outer values."""
    rng = np.random.default_rng(11)
    deployed = 0
    folds = np.arange(100) % 5
    for run in range(runs):
        first = rng.uniform(0.2, 0.6, 100)
        systems = [first + rng.normal(0, 0.05, 100) for _ in range(3)]
        pipe = first.copy()
        for f in range(5):
            at = folds == f
            j = int(np.argmax([s[at].mean() for s in systems])) if peek else int(rng.integers(3))
            pipe[at] = systems[j][at]
        t = pipeline_test(first, pipe, n_resamples=1000, seed=run)
        deployed += t["p_value"] < 0.05 and t["mean_delta"] > 0
    return deployed / runs


def test_the_one_test_holds_its_level_only_when_the_choice_is_blind_to_the_tested_queries():
    """At most 5% of null runs deployed (within the binomial spread of 300 runs at 5%)
    when the folds' picks do not see the queries tested; picking per fold by the tested
    queries' own values deploys far more often (the design depends on the inner folds)."""
    blind = _null_rate(300, peek=False)
    assert blind <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 300)
    assert _null_rate(300, peek=True) > 2 * 0.05


def test_the_pipeline_serves_each_folds_pick():
    """_Run._pipeline: the fold's queries get the picked algorithm's ranking (its gated
    fold model, which is the ungated choice when the gate let it through), or the first
    stage's; the fold choices are recorded with their algorithm."""
    run = object.__new__(crossval._Run)
    run.qids, run.folds = ["q0", "q1", "q2", "q3"], 2
    run.where = {"q0": 0, "q1": 1, "q2": 0, "q3": 1}
    run.first = [["f"]] * 4
    run.pipeline_algos = ["lambdamart", "linear"]
    run.selected = {"linear": [_selected(0.4, 0.5, True), _selected(0.4, 0.3, False)],
                    "lambdamart": [_selected(0.4, 0.45, True), _selected(0.4, 0.35, False)]}
    run.runners = {"linear": [None, None], "lambdamart": [None, None]}
    run.arts = {"linear": ["lin-0", "lin-1"], "lambdamart": ["mart-0", "mart-1"]}
    run.chosen = {"linear": [{"settings": {"l2": 0.0}, "blend": 1.0}] * 2,
                  "lambdamart": [{"settings": {"depth": 2}, "blend": None}] * 2}
    ranked = {"linear": [["lin"]] * 4, "lambdamart": [["mart"]] * 4}
    assert run._pipeline(ranked) == [["lin"], ["f"], ["lin"], ["f"]]
    assert [c["algorithm"] for c in run.chosen[PIPELINE]] == ["linear", None]
    assert run.arts[PIPELINE] == ["lin-0", None]     # the picked fold model's artifact, or none
    assert crossval.describe_choice(run.chosen[PIPELINE][0]).startswith("linear: ")
    assert crossval.describe_choice(run.chosen[PIPELINE][1]) == "first stage kept"


def _learnable(queries: int = 30, docs: int = 20, seed: int = 0) -> RankingDataset:
    """Column 0 a weak first stage, column 1 a strong signal of the grades."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, queries * docs).astype(np.float32)
    X = np.column_stack([y + rng.normal(0, 3, y.size), y + rng.normal(0, 0.3, y.size),
                         rng.normal(size=y.size)]).astype(np.float32)
    order = np.concatenate([q * docs + np.argsort(-X[q * docs:(q + 1) * docs, 0])
                            for q in range(queries)])           # rows in first-stage order
    return RankingDataset(X[order], y[order], np.arange(0, y.size + 1, docs),
                          np.array([str(q) for q in range(queries)]))


def test_the_pipeline_is_trained_on_all_queries_as_in_each_fold():
    """deploy: the algorithm the pipeline picks on all queries, with its ungated choice."""
    ds = _learnable()
    report = {"pipeline": {"algorithms": ["linear"]}, "selection_options": {}}
    art = deploy.pipeline_artifact(ds, report, K, 3, "test", 0)
    chosen = tuning.select(ds, "linear", K, 3, first_col=0)
    assert tuning.pipeline_choice({"linear": chosen}) == "linear"   # the signal is learnt
    assert art["algorithm"] == "linear" and art["model"] is not None
    assert {k: art["selection"][k] for k in ("params", "blend")} == \
        {k: tuning.ungated(chosen)[k] for k in ("params", "blend")}
    flat = RankingDataset(ds.X, np.zeros_like(ds.y), ds.offsets, ds.qids)
    none = deploy.pipeline_artifact(flat, report, K, 3, "test", 0)
    assert none["model"] is None and none["algorithm"] == PIPELINE


def test_a_fold_trains_the_model_its_gate_kept_out(monkeypatch):
    """_fit_fold: the gated artifact as before, and for the pipeline the ungated choice's
    model when the gate kept it out (none when the gate let it through: the same model)."""
    ds = _learnable()
    for passed in (False, True):
        sel = _selected(0.4, 0.5, passed=passed, l2=1e-2)
        monkeypatch.setattr(crossval, "select", lambda *a, **kw: sel)
        art, _, runner = crossval._fit_fold(ds, "linear", 0, frozenset(ds.qids), K, 1, None, "t", 0)
        assert (art["model"] is not None) is passed and (runner is None) is passed
        served = art if passed else runner
        assert served["selection"]["params"] == {"l2": 1e-2} and served["selection"]["blend"] == 1.0


def test_the_report_says_which_p_value_decides():
    """The "chosen per fold" row has the table's two-sided p (plain and max-T corrected)
    and its own one-sided, uncorrected test, which decides: the table's legend and the
    recommendation line each name what their p-values test."""
    from ltr_toolkit.cli.common import _report_table
    rng = np.random.default_rng(3)
    n = 150
    folds = np.arange(n) % 5
    first = rng.uniform(0.2, 0.6, n)
    per_algo = {"a": first + 0.04 + rng.normal(0, 0.03, n), "b": first + rng.normal(0, 0.03, n)}
    rep = _report(first, per_algo, _pooled(first, per_algo, folds, ["a"] * 5))
    rep["recommendation"] = recommend(rep)
    legend = _report_table(rep).caption
    assert "p: paired randomisation test vs first, two-sided, uncorrected" in legend
    assert f"max-T: the same, corrected for the {len(per_algo) + 1} systems compared" in legend
    assert f"decided by {PIPELINE}'s own test, one-sided and uncorrected" in legend
    reason = rep["recommendation"]["reason"]
    assert rep["recommendation"]["deploy"] == PIPELINE
    assert "one-sided p" in reason and "uncorrected (the test that decides" in reason
    plain = {k: v for k, v in rep.items() if k != "pipeline"}      # ltr evaluate models: the table decides
    assert "two-sided p" in recommend(plain)["reason"] and "(max-T)" in recommend(plain)["reason"]
    assert "decided by" not in _report_table(plain).caption


def test_the_choices_are_logged_with_one_label():
    chosen = [{"settings": {"l2": 0.01}, "blend": 1.0}, {"first_stage": True}]
    assert crossval.choices_line("linear", chosen) == \
        "linear: chosen per fold: 1) l2 0.01, blend 1; 2) first stage kept"
    piped = crossval.choices_line(PIPELINE, [dict(chosen[0], algorithm="linear")])
    assert piped.count(PIPELINE) == 1 and piped == f"{PIPELINE}: 1) linear: l2 0.01, blend 1"
