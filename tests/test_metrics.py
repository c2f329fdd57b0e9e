"""Metrics cross-checked against pytrec_eval (trec_eval) on random runs, and ERR /
exponential-gain NDCG against direct per-query definitions."""

from __future__ import annotations

import numpy as np
import pytest

from ltr_toolkit.rank import metrics as M

pytrec_eval = pytest.importorskip("pytrec_eval")


def _random_run(seed, n_q=25):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 60, size=n_q)
    off = np.concatenate([[0], np.cumsum(sizes)])
    scores = rng.normal(size=off[-1])       # continuous: no ties
    labels = rng.integers(0, 5, size=off[-1]).astype(float)
    labels[rng.random(off[-1]) < 0.4] = 0
    return scores, labels, off


def _trec(scores, labels, off, measures):
    qrel, run = {}, {}
    for q in range(len(off) - 1):
        qrel[f"q{q}"] = {f"d{i}": int(labels[i]) for i in range(off[q], off[q + 1])}
        run[f"q{q}"] = {f"d{i}": float(scores[i]) for i in range(off[q], off[q + 1])}
    res = pytrec_eval.RelevanceEvaluator(qrel, measures).evaluate(run)
    return [res[f"q{q}"] for q in range(len(off) - 1)]


@pytest.mark.parametrize("seed", range(4))
def test_against_trec_eval(seed):
    s, y, off = _random_run(seed)
    ref = _trec(s, y, off, {"ndcg_cut.5,10", "map", "recip_rank", "P.5,10"})
    np.testing.assert_allclose(M.ndcg(s, y, off, 10, gain="linear"), [r["ndcg_cut_10"] for r in ref], atol=1e-4)
    np.testing.assert_allclose(M.ndcg(s, y, off, 5, gain="linear"), [r["ndcg_cut_5"] for r in ref], atol=1e-4)
    np.testing.assert_allclose(M.average_precision(s, y, off), [r["map"] for r in ref], atol=1e-4)
    np.testing.assert_allclose(M.reciprocal_rank(s, y, off), [r["recip_rank"] for r in ref], atol=1e-4)
    np.testing.assert_allclose(M.precision(s, y, off, 10), [r["P_10"] for r in ref], atol=1e-4)
    np.testing.assert_allclose(M.precision(s, y, off, 5), [r["P_5"] for r in ref], atol=1e-4)


def _err_ref(s, y, k, gmax):
    order = np.argsort(-s, kind="stable")[:k]
    p, total = 1.0, 0.0
    for r, i in enumerate(order, start=1):
        R = (2 ** y[i] - 1) / 2 ** gmax
        total += p * R / r
        p *= 1 - R
    return total


def _ndcg_exp_ref(s, y, k):
    order = np.argsort(-s, kind="stable")[:k]
    dcg = sum((2 ** y[i] - 1) / np.log2(r + 2) for r, i in enumerate(order))
    ideal = sorted(y, reverse=True)[:k]
    idcg = sum((2 ** g - 1) / np.log2(r + 2) for r, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


@pytest.mark.parametrize("seed", range(3))
def test_err_and_exp_ndcg_against_definitions(seed):
    s, y, off = _random_run(seed)
    err = M.err(s, y, off, 10, max_grade=4)
    nd = M.ndcg(s, y, off, 10)
    for q in range(len(off) - 1):
        sl = slice(off[q], off[q + 1])
        assert err[q] == pytest.approx(_err_ref(s[sl], y[sl], 10, 4), abs=1e-12)
        assert nd[q] == pytest.approx(_ndcg_exp_ref(s[sl], y[sl], 10), abs=1e-12)


def test_perfect_and_worst_orders():
    y = np.array([3.0, 2.0, 0.0, 1.0])
    off = np.array([0, 4])
    assert M.ndcg(y, y, off, 10)[0] == pytest.approx(1.0)
    assert M.ndcg(-y, y, off, 10)[0] < 0.7
    assert M.ndcg(np.zeros(4), np.zeros(4), off, 10)[0] == 0.0


def test_metrics_are_the_same_computed_in_chunks_of_queries(monkeypatch):
    """Padded arrays are built for runs of queries (bounded memory with one long query):
    the per-query values do not depend on the chunking."""
    from ltr_toolkit.rank import metrics as M
    rng = np.random.default_rng(3)
    sizes = np.array([5, 400, 3, 17, 1, 60, 9])
    off = np.concatenate([[0], np.cumsum(sizes)])
    s = rng.normal(size=off[-1])
    y = rng.integers(0, 5, size=off[-1]).astype(float)
    whole = {f.__name__: f(s, y, off) for f in (M.ndcg, M.err, M.average_precision,
                                                 M.reciprocal_rank, M.precision)}
    monkeypatch.setattr(M, "CHUNK_CELLS", 100)
    assert len(M._query_chunks(sizes)) > 3
    for f in (M.ndcg, M.err, M.average_precision, M.reciprocal_rank, M.precision):
        np.testing.assert_allclose(f(s, y, off), whole[f.__name__], rtol=1e-12, atol=0)
