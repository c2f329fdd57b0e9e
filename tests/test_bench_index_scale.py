"""benchmarks/index_scale.py's own arithmetic, offline: the steps cut from `ltr index
jsonl`'s stamped stderr lines, and the cost model recovering known costs."""

from __future__ import annotations

import pytest

from benchmarks import index_scale as bench

LINES = [(0.4, "Dask: the vectors are encoded by 2 workers at tcp://127.0.0.1:1"),
         (0.6, "[   0.2s] vectors: encoding 600 documents"),
         (0.7, "vectors: 0/600"),
         (6.0, "vectors: 600/600 (104/s)"),
         (6.1, "[   5.7s] neighbours: 3 per document by more_like_this over title, description"),
         (6.3, "neighbours (first load): 0/600"),
         (6.9, "neighbours: 0/600"),
         (7.5, "neighbours: 600/600 (1,000/s)"),
         (7.6, "[   7.2s] loading 600 documents into bench-scale-x"),
         (8.2, "[   7.8s] merging bench-scale-x into one segment per shard")]


def test_the_steps_run_from_their_first_line_to_the_next_steps():
    got = bench.steps(LINES, total=8.5)
    assert got == pytest.approx({"start": 0.6, "vectors": 5.5, "neighbours (first load)": 0.8,
                                 "neighbours": 0.7, "loading": 0.6, "merge": 0.3})
    assert sum(got.values()) == pytest.approx(8.5)


def test_a_step_not_reported_is_none_and_its_time_goes_to_the_step_before():
    got = bench.steps([ln for ln in LINES if "neighbours" not in ln[1]], total=8.5)
    assert got["neighbours"] is None and got["neighbours (first load)"] is None
    assert got["vectors"] == pytest.approx(7.0)


def _run(docs, workers, a=0.004, b=0.002, ca=1.5, cb=3.0):
    vectors = a * docs / workers + ca if workers else 0.003 * docs
    node = b * docs + cb
    return {"products": docs, "workers": workers,
            "steps": {"start": 0.5, "vectors": vectors, "neighbours (first load)": 0.2 * (node - 0.5),
                      "neighbours": 0.5 * (node - 0.5), "loading": 0.3 * (node - 0.5), "merge": 0.0}}


def test_the_cost_model_recovers_the_costs_it_was_made_of():
    runs = [_run(5000, 0)] + [_run(n, w) for n in (1000, 5000) for w in (1, 2)]
    model = bench.fit(runs)
    assert model["a"] == pytest.approx(0.004) and model["b"] == pytest.approx(0.002)
    assert model["c"] == pytest.approx(4.5)
    assert bench.predict(model, 10_000_000, 8) == pytest.approx(0.004 * 1.25e6 + 0.002 * 1e7 + 4.5)
