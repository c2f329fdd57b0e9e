"""The compiled lambda kernel (rank.pairs over rank.kernel) against a frozen copy of the
NumPy block implementation it replaced (tests/lambdas_before.py), on random blocks of
queries: every weighting, truncation, sigma, score and query normalisation, hessian
scale, discount truncation, document weights (zeros among them), tied scores, queries of
one grade or one document, queries where most documents share one grade (the
kernel visits only the other grades' positions from a row of that grade), and score spreads on both sides of the kernel's fast sigmoid
(sigma |s_a - s_b| <= 50) — equal within 1e-6 relative."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import lambdas_before as before
from ltr_toolkit.rank.lambdas import WEIGHTINGS
from ltr_toolkit.rank import pairs
from ltr_toolkit.rank.pairs import QueryPairs, RankPairs

RTOL = 1e-6


def _block(seed: int, spread: float, weights: bool):
    """(scores, labels, offsets, document weights or None) of ~25 random queries."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 90, size=25)
    sizes[:3] = (1, 2, 40)
    off = np.concatenate([[0], np.cumsum(sizes)])
    y = rng.integers(0, 5, size=off[-1]).astype(float)
    y[off[2]:off[3]] = 3.0                                  # one grade: no pair
    for q in range(12, 25):      # logged candidates: most of one grade (0, or 2 for odd q)
        sl = slice(off[q], off[q + 1])
        y[sl] = np.where(rng.random(sizes[q]) < 0.85, 2.0 * (q % 2), y[sl])
    s = rng.normal(size=off[-1]) * spread
    s[off[3]:off[3] + 6] = s[off[3]]                         # tied scores
    s[off[4]:off[5]] = 0.25                                  # a query of tied scores
    s = np.round(s, 2) if seed % 2 else s                    # many ties
    w = rng.exponential(size=off[-1]) if weights else None
    if w is not None:
        w[::7] = 0.0
    return s, y, off, w


def _close(new, old):
    scale = max(float(np.abs(old).max(initial=0.0)), 1e-300)
    np.testing.assert_allclose(new, old, rtol=RTOL, atol=1e-12 * scale)


TREE_CASES = list(itertools.product(
    WEIGHTINGS, [None, 1, 5, 32], ["pairs", "documents", None], [False, True]))


@pytest.mark.parametrize("weighting,k,norm,score_norm", TREE_CASES)
def test_tree_objective_equals_the_block_implementation(weighting, k, norm, score_norm):
    for seed, spread, weights in ((0, 1.0, False), (1, 3.0, True), (2, 40.0, True)):
        s, y, off, w = _block(seed + 10 * len(TREE_CASES), spread, weights)
        kw = dict(weighting=weighting, sigma=[0.7, 1.0, 2.3][seed], k=k, mu=1.5,
                  normalization=norm, score_normalization=score_norm,
                  hessian_scale=[1.0, 2.0, 1.0][seed], truncate_discounts=seed != 1,
                  doc_weights=w)
        old = before.RankPairs(y, off, dtype=np.float64, chunk=500, **kw)
        new = RankPairs(y, off, dtype=np.float64, **kw)
        # rounds in a row: scores that move a little, then anywhere (the kernel sorts each
        # query from the last round's order)
        for step in (s, s + 0.01 * np.sin(np.arange(len(s))), s[::-1].copy()):
            g0, h0 = old.grad_hess(step)
            g1, h1 = new.grad_hess(step)
            _close(g1, g0)
            _close(h1, h0)
            assert np.abs(g0).sum() > 0


@pytest.mark.parametrize("threads", [1, 2])
def test_float32_scores_rank_as_before_and_threads_change_nothing(threads, monkeypatch):
    """dtype float32 (the trees' default): the scores are ranked as float32, as the block
    implementation ranked them; the pair arithmetic is then at least as exact as its
    float64 mode, whatever the number of threads (the parallel kernel even on few pairs)."""
    monkeypatch.setattr(pairs, "PARALLEL_PAIRS", 0)
    s, y, off, w = _block(3, 2.0, True)
    s32 = s.astype(np.float32)
    kw = dict(weighting="lambdarank", k=32, normalization="pairs", score_normalization=True,
              hessian_scale=2.0, truncate_discounts=False, doc_weights=w)
    g0, h0 = before.RankPairs(y, off, dtype=np.float64, **kw).grad_hess(s32.astype(np.float64))
    g1, h1 = RankPairs(y, off, threads=threads, **kw).grad_hess(s32)
    _close(g1, g0)
    _close(h1, h0)


@pytest.mark.parametrize("k", [None, 1, 4, 32])
@pytest.mark.parametrize("weighting", WEIGHTINGS)
def test_network_lambdas_equal_the_block_implementation(weighting, k):
    s, y, off, w = _block(4, 2.5, True)
    for q in range(len(off) - 1):
        sl = slice(off[q], off[q + 1])
        for wq in (None, w[sl]):
            old = before.QueryPairs(y[sl], sigma=1.3, k=k, mu=2.0, chunk=200, doc_weights=wq)
            new = QueryPairs(y[sl], sigma=1.3, k=k, mu=2.0, doc_weights=wq)
            for step in (s[sl], -s[sl]):                     # steps in a row
                _close(new.lambdas(step, weighting), old.lambdas(step, weighting))


def test_query_modes_are_each_querys_commonest_label():
    y = np.array([0, 0, 1, 2, 2, 1, 1, 3, 3, 0.5, 4, 4, 4], dtype=float)
    off = np.array([0, 3, 7, 7, 9, 10, 13])
    # ties go to the smaller label; an empty query gets 0
    np.testing.assert_array_equal(pairs.query_modes(y, off), [0, 1, 0, 3, 0.5, 4])
    assert len(pairs.query_modes(np.zeros(0), np.array([0]))) == 0


@pytest.mark.parametrize("parallel", [False, True])
def test_warm_up_loads_the_kernel_grad_hess_calls(parallel, monkeypatch):
    """RankPairs.warm (run beside xgboost's matrix building) calls the same compiled
    function, serial or parallel, that grad_hess then calls, and changes nothing."""
    s, y, off, w = _block(5, 1.0, True)
    calls = []
    real = pairs._kernel

    class Spy:
        def __getattr__(self, name):
            calls.append(name)
            return getattr(real(), name)
    monkeypatch.setattr(pairs, "_kernel", lambda threads=None: Spy())
    monkeypatch.setattr(pairs, "PARALLEL_PAIRS", 1 if parallel else 1 << 60)
    rp = RankPairs(y, off, k=32, doc_weights=w, threads=2)
    before = rp.grad_hess(s)
    rp.warm()
    after = rp.grad_hess(s)
    assert calls[0] == calls[1] == calls[2] == ("tree_grad_hess" if parallel else "tree_grad_hess_serial")
    np.testing.assert_array_equal(before[0], after[0])
