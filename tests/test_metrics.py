"""Metrics cross-checked against pytrec_eval (trec_eval) on random runs, and ERR /
exponential-gain NDCG against direct per-query definitions."""

from __future__ import annotations

import functools

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


def _trec(scores, labels, off, measures, docids=None):
    d = [f"d{i}" for i in range(len(scores))] if docids is None else docids
    qrel, run = {}, {}
    for q in range(len(off) - 1):
        qrel[f"q{q}"] = {d[i]: int(labels[i]) for i in range(off[q], off[q + 1])}
        run[f"q{q}"] = {d[i]: float(scores[i]) for i in range(off[q], off[q + 1])}
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
    fns = (M.ndcg, functools.partial(M.err, max_grade=4), M.average_precision,
           M.reciprocal_rank, M.precision)
    whole = [f(s, y, off) for f in fns]
    monkeypatch.setattr(M, "CHUNK_CELLS", 100)
    assert len(M._query_chunks(sizes)) > 3
    for f, w in zip(fns, whole):
        np.testing.assert_allclose(f(s, y, off), w, rtol=1e-12, atol=0)


def _tied_run(seed, n_q=30):
    """Scores from 4 values (ties everywhere) and docids in an order unrelated to the rows
    (strings: "d10" < "d9")."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 40, size=n_q)
    off = np.concatenate([[0], np.cumsum(sizes)])
    scores = rng.integers(0, 4, size=off[-1]).astype(float)
    labels = rng.integers(0, 4, size=off[-1]).astype(float)
    labels[rng.random(off[-1]) < 0.4] = 0
    docids = np.array([f"d{i}" for i in rng.permutation(off[-1])])
    return scores, labels, off, docids


_TRECS = {"ndcg_cut_10": lambda *a, **kw: M.ndcg(*a, 10, gain="linear", **kw),
          "map": M.average_precision, "recip_rank": M.reciprocal_rank,
          "P_10": lambda *a, **kw: M.precision(*a, 10, **kw)}


@pytest.mark.parametrize("seed", range(3))
def test_ties_are_broken_as_trec_eval_does_given_docids(seed):
    s, y, off, docids = _tied_run(seed)
    ref = _trec(s, y, off, {"ndcg_cut.10", "map", "recip_rank", "P.10"}, docids)
    differs = False
    for name, f in _TRECS.items():
        expected = [r[name] for r in ref]
        np.testing.assert_allclose(f(s, y, off, docids=docids), expected, rtol=0, atol=1e-9)
        differs |= not np.allclose(f(s, y, off), expected, rtol=0, atol=1e-9)
    assert differs      # the run's ties matter: by position they rank otherwise


@pytest.mark.parametrize("seed", range(3))
def test_without_docids_ties_are_broken_by_input_position(seed):
    s, y, off, docids = _tied_run(seed)
    pos = np.arange(len(s)) - np.repeat(off[:-1], np.diff(off))
    untied = s * 1000.0 - pos            # the same order, the earlier row first on a tie
    ref = _trec(untied, y, off, {"ndcg_cut.10", "map", "recip_rank", "P.10"}, docids)
    for name, f in _TRECS.items():
        np.testing.assert_allclose(f(s, y, off), [r[name] for r in ref], rtol=0, atol=1e-9)


def test_docids_follow_their_rows_through_query_chunks(monkeypatch):
    s, y, off, docids = _tied_run(4)
    fns = (*_TRECS.values(), functools.partial(M.err, max_grade=3))
    whole = [f(s, y, off, docids=docids) for f in fns]
    monkeypatch.setattr(M, "CHUNK_CELLS", 100)
    assert len(M._query_chunks(np.diff(off))) > 3
    for f, w in zip(fns, whole):
        np.testing.assert_allclose(f(s, y, off, docids=docids), w, rtol=1e-12, atol=0)
    with pytest.raises(ValueError, match="docids"):
        M.ndcg(s, y, off, docids=docids[:-1])


def test_err_needs_the_grade_scale_and_is_comparable_across_calls():
    """ERR's R = (2^y - 1) / 2^max_grade: a query scores the same whatever else is in the
    call, given the scale; there is no default taken from the call's own labels."""
    q_s, q_y = np.array([0.3, 0.9, 0.1]), np.array([1.0, 2.0, 0.0])
    other_s, other_y = np.array([0.5, 0.2]), np.array([4.0, 0.0])
    alone = M.err(q_s, q_y, np.array([0, 3]), 10, max_grade=4)
    together = M.err(np.r_[q_s, other_s], np.r_[q_y, other_y], np.array([0, 3, 5]), 10, max_grade=4)
    assert alone[0] == together[0] == pytest.approx(_err_ref(q_s, q_y, 10, 4), abs=1e-15)
    with pytest.raises(TypeError, match="max_grade"):
        M.err(q_s, q_y, np.array([0, 3]), 10)
    with pytest.raises(TypeError, match="max_grade"):
        M.evaluate(q_s, q_y, np.array([0, 3]), 10)
    assert M.evaluate(q_s, q_y, np.array([0, 3]), 10, max_grade=4)["err@10"] == alone[0]
    with pytest.raises(ValueError, match="max_grade"):
        M.err(q_s, q_y, np.array([0, 3]), 10, max_grade=1)


def test_unknown_gain_is_refused():
    s, y, off = _random_run(0)
    with pytest.raises(ValueError, match="'exp' or 'linear'"):
        M.ndcg(s, y, off, 10, gain="Exp")
    with pytest.raises(ValueError, match="'exp' or 'linear'"):
        M.ndcg(s, y, off, 10, gain="linaer")


@pytest.mark.parametrize("k", [0, -3, 2.5, "10", True])
def test_k_must_be_none_or_a_positive_integer(k):
    s, y, off = _random_run(1)
    for f in (M.ndcg, functools.partial(M.err, max_grade=4), M.precision,
              functools.partial(M.evaluate, max_grade=4)):
        with pytest.raises(ValueError, match="k must be"):
            f(s, y, off, k)
    for f in (M.average_precision, M.reciprocal_rank):
        with pytest.raises(ValueError, match="k must be"):
            f(s, y, off, k=k)
    with pytest.raises(ValueError, match="k must be"):
        M.precision(s, y, off, None)
    for f in (M.ndcg, functools.partial(M.err, max_grade=4)):
        assert np.all(np.isfinite(f(s, y, off, None)))
