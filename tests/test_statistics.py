"""The statistics of every report, gate and verdict (``rank.stats.compare``), offline: the
paired tests at scale and at their stated level, the correction for comparing several
systems, the intervals, the recommendation and the selection gate under successive
halving."""

from __future__ import annotations

import itertools
import tracemalloc

import numpy as np
import pytest

from ltr_toolkit.evaluation.report import compare as report, recommend
from ltr_toolkit.pipeline import tuning
from ltr_toolkit.rank import stats as S


def _test(a, b, **kw) -> S.Test:
    return S.compare({"a": a, "b": b}, "a", confidence_level=None, **kw).tests["b"]


def _old_randomisation_test(a, b, n=10000, seed=0):
    """The test as it was: one (n, queries) sign matrix."""
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    if len(d) == 0 or np.all(d == 0):
        return 1.0
    obs = abs(d.mean())
    signs = np.random.default_rng(seed).choice(np.array([-1.0, 1.0]), size=(n, len(d)))
    return float((np.sum(np.abs((signs * d).mean(axis=1)) >= obs - 1e-15) + 1) / (n + 1))


@pytest.mark.parametrize("queries, shift", [(5, 0.0), (60, 0.01), (225, 0.03), (3000, 0.002)])
def test_the_blocked_test_gives_the_same_p_values(queries, shift):
    rng = np.random.default_rng(queries)
    a = rng.random(queries)
    b = np.clip(a + shift + rng.normal(scale=0.1, size=queries), 0, 1)
    b[::7] = a[::7]                                         # ties, as real runs have
    t = _test(a, b, seed=3)
    assert t.p_value == _old_randomisation_test(a, b, seed=3)
    assert t.p_corrected == t.p_value                       # one comparison: nothing to correct


def test_the_blocked_test_agrees_with_exact_enumeration():
    rng = np.random.default_rng(1)
    d = rng.normal(0.02, 0.1, size=12)
    flips = np.array(list(itertools.product((-1.0, 1.0), repeat=12)))
    exact = float(np.mean(np.abs((flips * d).mean(axis=1)) >= abs(d.mean()) - 1e-15))
    p = _test(np.zeros(12), d, n_resamples=20000, seed=5).p_value
    assert abs(p - exact) < 4 * np.sqrt(exact * (1 - exact) / 20000) + 1e-4


def test_equal_systems_and_no_queries_give_p_one():
    a = np.random.default_rng(0).random(60)
    assert _test(a, a).p_value == 1.0 and _test(a, a).p_corrected == 1.0
    assert _test(a, a + 0.2).p_value < 0.001
    with pytest.raises(ValueError, match="no queries"):
        _test(np.zeros(0), np.zeros(0))


def test_twenty_thousand_queries_in_under_50_mb():
    rng = np.random.default_rng(0)
    a, b = rng.random(20000), rng.random(20000)
    tracemalloc.start()
    S.compare({"a": a, "b": b, "c": a + 0.001, "d": b * 0.5}, "a", pairwise=True)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 50 * 2 ** 20, peak / 2 ** 20          # the old test: ~3 GiB here


def _step_down_exact(deltas: np.ndarray) -> np.ndarray:
    """Westfall and Young's step-down max-T p-values over every sign flip, written out."""
    n = deltas.shape[1]
    flips = np.array(list(itertools.product((-1.0, 1.0), repeat=n)))

    def t(x):                                           # |t| of each row of x, per flip
        m, sd = x.mean(axis=-1), x.std(axis=-1, ddof=1)
        return np.abs(m / (sd / np.sqrt(n)))
    observed = t(deltas)
    flipped = t(flips[:, None, :] * deltas[None, :, :])   # [flips, systems]
    p, floor = np.empty(len(observed)), 0.0
    for step, j in enumerate(np.argsort(-observed)):
        rest = np.argsort(-observed)[step:]
        floor = max(floor, float(np.mean(flipped[:, rest].max(axis=1) >= observed[j] * (1 - 1e-9))))
        p[j] = floor
    return p


def test_max_t_is_westfall_and_youngs_step_down():
    rng = np.random.default_rng(4)
    base = rng.random(12)
    scores = {"base": base, "x": base + rng.normal(0.08, 0.1, 12), "y": base + rng.normal(0.03, 0.05, 12),
              "z": base + rng.normal(0.0, 0.1, 12)}
    found = S.compare(scores, "base", n_resamples=20000, seed=1, confidence_level=None)
    exact = _step_down_exact(np.stack([scores[s] - base for s in "xyz"]))
    for s, e in zip("xyz", exact):
        t = found.tests[s]
        assert abs(t.p_corrected - e) < 4 * np.sqrt(e * (1 - e) / 20000) + 2e-4, (s, t, e)
        assert t.p_corrected >= t.p_value


def test_the_corrections_and_their_options():
    rng = np.random.default_rng(3)
    base = rng.random(40)
    scores = {"base": base, **{f"r{i}": base + rng.normal(0.02 * i, 0.05, 40) for i in range(4)}}
    plain = S.compare(scores, "base", correction="none", confidence_level=None)
    holm = S.compare(scores, "base", correction="holm", confidence_level=None)
    p = np.array([plain.tests[s].p_value for s in plain.tests])
    assert [plain.tests[s].p_corrected for s in plain.tests] == p.tolist()
    assert np.allclose([holm.tests[s].p_corrected for s in holm.tests], S.holm(p))
    assert S.holm(np.array([0.01, 0.04, 0.03, 0.5])).tolist() == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert S.compare(scores, "base", confidence_level=None).correction == "max-t"     # the default
    for bad in ({"correction": "bonferroni"}, {"alternative": "less"}, {"n_resamples": 0},
                {"confidence_level": 95}, {"statistic": "median"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            S.compare(scores, "base", **bad)
    with pytest.raises(ValueError, match="baseline"):
        S.compare(scores, "nope")
    with pytest.raises(ValueError, match="lengths"):
        S.compare({"a": [1.0, 2.0], "b": [1.0]}, "a")


def test_pairs_compare_the_rerankers_to_each_other():
    rng = np.random.default_rng(6)
    base = rng.random(80)
    found = S.compare({"base": base, "good": base + 0.1 + rng.normal(0, 0.05, 80),
                       "same": base + rng.normal(0, 0.05, 80)}, "base", pairwise=True)
    t = found.pairs["good", "same"]
    assert t.mean_delta < -0.05 and t.p_value < 0.001 and t.wins + t.ties + t.losses == 80
    assert t.p_corrected == t.p_value                    # one pair: nothing to correct


def test_intervals_cover_the_mean_at_their_level():
    """200 samples of 50 normal values: the 90% percentile-bootstrap interval of the mean
    holds the true mean in about 90% of them (binomial 99.9% range for 200 at 0.9:
    0.83-0.96, the bootstrap's slight narrowness on 50 values included)."""
    rng = np.random.default_rng(8)
    held = 0
    for rep in range(200):
        v = rng.normal(0.3, 0.1, 50)
        found = S.compare({"zero": np.zeros(50), "v": v}, "zero", n_resamples=2000, seed=rep,
                          confidence_level=0.9)
        lo, hi = found.mean_ci["v"]
        assert found.tests["v"].ci == pytest.approx((lo, hi), abs=0.02)
        held += lo <= 0.3 <= hi
    assert 0.83 * 200 <= held <= 0.96 * 200, held


def test_groups_are_averaged_then_tested_as_units():
    rng = np.random.default_rng(9)
    g = rng.integers(0, 15, 300)
    a, b = rng.random(300), rng.random(300) + 0.05
    by_row = S.compare({"a": a, "b": b}, "a", groups=g, n_resamples=3000)
    means = {s: np.array([v[g == k].mean() for k in range(15)]) for s, v in (("a", a), ("b", b))}
    by_group = S.compare(means, "a", n_resamples=3000)
    row, group = by_row.tests["b"], by_group.tests["b"]
    assert by_row.units == 15 and (row.p_value, row.wins, row.ties, row.losses) == (
        group.p_value, group.wins, group.ties, group.losses)
    assert row.mean_delta == pytest.approx(group.mean_delta) and row.ci == pytest.approx(group.ci)
    assert by_row.mean_ci["b"] == pytest.approx(by_group.mean_ci["b"])


# --------------------------------------------------------- the gate's max-statistic test

def test_the_best_of_many_noise_candidates_is_not_significant_after_correction():
    """40 null settings of 30 noise candidates each: the plain test of the best rejects far
    more often than 5%; the max-statistic test at most about 5% (binomial tail bound)."""
    rng = np.random.default_rng(7)
    plain = corrected = 0
    for rep in range(40):
        base = rng.random(150)
        cands = base + rng.normal(scale=0.05, size=(30, 150))   # no better than the base
        found = S.compare({"base": base, **dict(enumerate(cands))}, "base", alternative="greater",
                          statistic="mean", n_resamples=2000, seed=rep, confidence_level=None)
        best = max(found.tests.values(), key=lambda t: t.mean_delta)
        corrected += best.p_corrected < 0.05
        plain += best.p_value < 0.05
    assert corrected <= 5          # P(Bin(40, 0.05) > 5) < 0.05
    assert plain >= 10             # what the uncorrected gate let through


def test_a_candidate_that_is_better_is_still_found():
    rng = np.random.default_rng(2)
    base = rng.random(150)
    cands = base + rng.normal(scale=0.05, size=(30, 150))
    cands[17] = base + 0.03 + rng.normal(scale=0.02, size=150)
    found = S.compare({"base": base, **dict(enumerate(cands))}, "base", alternative="greater",
                      statistic="mean", seed=0, confidence_level=None)
    best = max(found.tests.values(), key=lambda t: t.mean_delta)
    assert best.system == 17 and best.p_corrected < 0.01
    worse = S.compare({"base": base, 0: base - 0.01, 1: base - 0.02}, "base", alternative="greater",
                      statistic="mean", confidence_level=None)
    assert min(t.p_corrected for t in worse.tests.values()) == 1.0       # none better


# ----------------------------------------------------------- item 1: the recommendation

def test_the_recommendation_is_corrected_for_several_rerankers():
    """300 null runs of 6 correlated rerankers (per-query deltas symmetric around 0,
    correlation 0.3; 50 queries): the recommendation deploys one in at most 5% of runs
    (it is a test at 0.05 of the family). Recommending the best of those with a plain
    p < 0.05, as before, deployed in about 12% (1 - P(no z > 1.96) for 6 such rerankers):
    the simulation can tell the two apart."""
    rng = np.random.default_rng(43)
    runs, deployed, before = 300, 0, 0
    for run in range(runs):
        base = rng.uniform(0.2, 0.6, 50)
        shared = rng.normal(size=50)
        per_query = {"first": {"ndcg@10": base}}
        for j in range(6):
            noise = np.sqrt(0.3) * shared + np.sqrt(0.7) * rng.normal(size=50)
            per_query[f"r{j}"] = {"ndcg@10": base + 0.05 * noise}
        rep = report(per_query, "first", 10, n_resamples=2000, seed=run, confidence_level=None)
        deployed += recommend(rep)["deploy"] is not None
        before += any(t["mean_delta"] > 0 and t["p_value"] < 0.05 for t in rep["tests"].values())
    assert deployed <= 0.05 * runs, deployed
    assert before > 0.05 * runs, before


def test_the_recommendation_names_the_correction():
    rng = np.random.default_rng(0)
    base = rng.uniform(0.2, 0.6, 60)
    rep = report({"first": {"ndcg@10": base}, "a": {"ndcg@10": base + 0.08 + rng.normal(0, 0.03, 60)},
                  "b": {"ndcg@10": base + rng.normal(0, 0.03, 60)}}, "first", 10)
    rec = recommend(rep)
    assert rec["deploy"] == "a" and "corrected for 2 rerankers" in rec["reason"]
    assert {"p_value", "p_corrected", "ci", "wins", "ties", "losses", "mean_delta", "metric"} <= set(rep["tests"]["a"])
    assert rep["pairs"][0]["a"] == "a" and rep["pairs"][0]["b"] == "b" and "max-t" in rep["statistics"]["correction"]
    old = {**rep, "tests": {n: {k: v for k, v in t.items() if k != "p_corrected"} for n, t in rep["tests"].items()}}
    assert recommend(old)["deploy"] == "a"          # a report written before the correction


# ------------------------------------------ item 7: successive halving and the gate

def _halving_null(rng, n=60, settings=4, blends=2, step=1.0) -> dict:
    """``per`` as ``tuning._tree_trials`` leaves it (one inner fold): candidates (setting,
    trees, blend) scored rung by rung, the better half of the settings growing on, on null
    data (per-query deltas to the first stage symmetric around 0). A setting's later rung
    is its earlier one plus new noise (``step``): more trees, a different model."""
    first = rng.uniform(0.2, 0.6, n)
    per = {tuning.FIRST_STAGE: [first]}
    grown = {i: rng.normal(size=n) for i in range(settings)}
    alive = list(range(settings))
    for rung, t in enumerate(tuning.TREE_COUNTS):
        for i in alive:
            if rung:
                grown[i] = grown[i] + step * rng.normal(size=n)
            for a in range(blends):
                per[(i, t, a)] = [first + 0.02 * ((0.5 + a) * grown[i] + 0.2 * rng.normal(size=n))]
        best = {i: max(float(per[(i, t, a)][0].mean()) for a in range(blends)) for i in alive}
        alive = sorted(alive, key=lambda i: -best[i])[: -(-len(alive) // tuning.HALVING)]
    return per


def _conditional_p_exact(per: dict) -> tuple[float, float, float]:
    """(p conditional on the halving path, p without the replay, the share of flips that
    keep the path), over every sign flip, the halving re-run in plain Python for each."""
    first = per[tuning.FIRST_STAGE][0]
    cands = [k for k in per if k != tuning.FIRST_STAGE]
    d = np.stack([per[k][0] - first for k in cands])
    flips = np.array(list(itertools.product((-1.0, 1.0), repeat=d.shape[1])))
    means = flips @ d.T / d.shape[1]                          # [flips, candidates]
    col = {k: c for c, k in enumerate(cands)}
    rungs = [sorted({k[0] for k in cands if k[1] == t}) for t in tuning.TREE_COUNTS]

    def keeps_the_path(m) -> bool:
        alive = list(rungs[0])
        for t, kept in zip(tuning.TREE_COUNTS, rungs[1:]):
            best = {i: max(m[col[k]] for k in cands if k[:2] == (i, t)) for i in alive}
            alive = sorted(alive, key=lambda i: -best[i])[: -(-len(alive) // tuning.HALVING)]
            if sorted(alive) != kept:
                return False
        return True
    same = np.array([keeps_the_path(m) for m in means])
    top, observed = means.max(axis=1), d.mean(axis=1).max()
    hit = top >= observed - 1e-12
    return float(hit[same].mean()), float(hit.mean()), float(same.mean())


def test_the_gate_replays_the_halving_exactly():
    """On 12 queries every sign flip can be enumerated: the gate's p-value is the share of
    the flips that keep the settings the search kept whose best candidate is at least as
    good as the observed best (within Monte Carlo error), not the share of all flips (what
    the gate computed before the replay)."""
    per = _halving_null(np.random.default_rng(5), n=12)
    exact, unconditional, share = _conditional_p_exact(per)
    best, p = tuning.gate(per, seed=0, halving=True)
    kept = min(S.N_RESAMPLES, S.REPLAY_DRAWS * S.N_RESAMPLES * share)   # about, at least
    tolerance = 4 * np.sqrt(exact * (1 - exact) / (0.9 * kept)) + 1e-3
    assert abs(p - exact) < tolerance, (p, exact, unconditional)
    assert abs(unconditional - exact) > 2 * tolerance                # the example tells them apart
    assert tuning.gate(per, seed=0, halving=False)[1] == pytest.approx(unconditional, abs=tolerance)


def test_the_gate_holds_its_level_under_successive_halving():
    """600 null searches (4 settings halved 4 -> 2 -> 1 over the tree counts, 2 candidates
    each): the gate with the replay rejects in at most 7% of them (P(Bin(600, 0.05) > 42)
    ~ 1%); without the replay, as before, in about 11%, above its 5%: the survivors'
    later rungs are extra chances given to the luckiest settings."""
    rng = np.random.default_rng(11)
    runs, replayed, before = 600, 0, 0
    for run in range(runs):
        per = _halving_null(rng)
        replayed += tuning.gate(per, seed=run, halving=True, n_resamples=1000)[1] < 0.05
        before += tuning.gate(per, seed=run, halving=False, n_resamples=1000)[1] < 0.05
    assert replayed <= 42, replayed
    assert before > 42, before


def test_identical_deltas_give_the_smallest_p_without_warnings():
    """Every query moved by the same amount: an infinite t; only the identity flip is as
    extreme, so p = 1 / (resamples + 1), and no RuntimeWarning (it once gave inf - inf)."""
    import warnings
    from ltr_toolkit.rank.stats import flip_test
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for sign in (1, -1):
            p, _, n = flip_test(np.full((1, 30), 0.1 * sign), n_resamples=2000)
            assert p[0] == pytest.approx(1 / (n + 1))


def test_the_baseline_alone_is_described_not_compared():
    """`ltr evaluate` without --model: one system, no test (it once failed to stack no
    deltas), its mean and interval all the same."""
    found = S.compare({"bm25": np.linspace(0.1, 0.9, 40)}, "bm25")
    assert found.tests == {} and found.means["bm25"] == pytest.approx(0.5)
    lo, hi = found.mean_ci["bm25"]
    assert lo < 0.5 < hi
