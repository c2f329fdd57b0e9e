"""The paired tests at scale and at their stated level (offline)."""

from __future__ import annotations

import itertools
import tracemalloc

import numpy as np
import pytest

from ltr_toolkit.evaluation import report as R


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
    assert R.randomisation_test(a, b, seed=3) == _old_randomisation_test(a, b, seed=3)


def test_the_blocked_test_agrees_with_exact_enumeration():
    rng = np.random.default_rng(1)
    d = rng.normal(0.02, 0.1, size=12)
    flips = np.array(list(itertools.product((-1.0, 1.0), repeat=12)))
    exact = float(np.mean(np.abs((flips * d).mean(axis=1)) >= abs(d.mean()) - 1e-15))
    p = R.randomisation_test(np.zeros(12), d, n=20000, seed=5)
    assert abs(p - exact) < 4 * np.sqrt(exact * (1 - exact) / 20000) + 1e-4


def test_twenty_thousand_queries_in_under_50_mb():
    rng = np.random.default_rng(0)
    a, b = rng.random(20000), rng.random(20000)
    tracemalloc.start()
    R.randomisation_test(a, b)
    R.best_of_test(a, np.stack([b, a + 0.001, b * 0.5]))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 50 * 2 ** 20, peak / 2 ** 20          # the old test: ~3 GiB here


def test_the_best_of_many_noise_candidates_is_not_significant_after_correction():
    """40 null settings of 30 noise candidates each: the plain test of the best rejects far
    more often than 5%; the max-statistic test at most about 5% (binomial tail bound)."""
    rng = np.random.default_rng(7)
    plain = corrected = 0
    for rep in range(40):
        base = rng.random(150)
        cands = base + rng.normal(scale=0.05, size=(30, 150))   # no better than the base
        row, p = R.best_of_test(base, cands, n=2000, seed=rep)
        corrected += p < 0.05
        plain += R.randomisation_test(base, cands[row], n=2000, seed=rep) < 0.05
    assert corrected <= 5          # P(Bin(40, 0.05) > 5) < 0.05
    assert plain >= 10             # what the uncorrected gate let through


def test_a_candidate_that_is_better_is_still_found():
    rng = np.random.default_rng(2)
    base = rng.random(150)
    cands = base + rng.normal(scale=0.05, size=(30, 150))
    cands[17] = base + 0.03 + rng.normal(scale=0.02, size=150)
    row, p = R.best_of_test(base, cands, seed=0)
    assert row == 17 and p < 0.01
    row, p = R.best_of_test(base, base[None, :] - 0.01)   # none better: p 1
    assert p == 1.0
