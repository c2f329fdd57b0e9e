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
    assert got == pytest.approx({"start": 0.6, "vectors": 5.4, "neighbours (first load)": 0.8,
                                 "neighbours": 0.6, "loading": 0.6, "merge": 0.3})


#: on Dask: the vectors beside the neighbours, the load streaming behind the vectors
OVERLAPPING = [(0.4, "Dask: the vectors are encoded by 2 workers at tcp://127.0.0.1:1"),
               (0.6, "[   0.2s] vectors: encoding 600 documents"),
               (0.7, "vectors: 0/600"),
               (0.8, "[   0.4s] neighbours: 3 per document by more_like_this over title"),
               (1.0, "neighbours (first load): 0/600"),
               (1.5, "neighbours: 0/600"),
               (2.0, "neighbours: 600/600 (1,200/s)"),
               (2.1, "[   1.7s] loading 600 documents into bench-scale-x"),
               (3.0, "vectors: 300/600 (104/s, ETA 3s)"),
               (6.0, "vectors: 600/600 (104/s)"),
               (6.5, "[   6.1s] merging bench-scale-x into one segment per shard")]


def test_overlapping_steps_each_end_at_their_own_last_line():
    got = bench.steps(OVERLAPPING, total=7.0)
    assert got == pytest.approx({"start": 0.6, "vectors": 5.4, "neighbours (first load)": 0.7,
                                 "neighbours": 0.5, "loading": 4.4, "merge": 0.5})


def test_a_step_not_reported_is_none_and_its_time_goes_to_the_step_before():
    got = bench.steps([ln for ln in LINES if "neighbours" not in ln[1]], total=8.5)
    assert got["neighbours"] is None and got["neighbours (first load)"] is None
    assert got["vectors"] == pytest.approx(5.4) and got["loading"] == pytest.approx(0.6)


def _run(docs, workers, a=0.004, b=0.002, ca=1.5, cb=3.0, m=0.0005):
    vectors = a * docs / workers + ca if workers else 0.003 * docs
    node = b * docs + cb
    return {"products": docs, "workers": workers,
            "steps": {"start": 0.5, "vectors": vectors, "neighbours (first load)": 0.2 * node,
                      "neighbours": 0.5 * node, "loading": 0.3 * node, "merge": m * docs}}


def test_the_cost_model_recovers_the_costs_it_was_made_of():
    runs = [_run(n, w) for n in (1000, 5000) for w in (0, 1, 2)]
    model = bench.fit(runs)
    assert model["a"] == pytest.approx(0.004) and model["b"] == pytest.approx(0.002)
    assert model["c_encoding"] == pytest.approx(1.5) and model["c_node"] == pytest.approx(3.0)
    assert model["m"] == pytest.approx(0.0005)
    few, many = bench.predict(model, 1e7, 1), bench.predict(model, 1e7, 64)
    assert few == pytest.approx(0.004 * 1e7 + 1.5 + 0.0005 * 1e7)          # the encoding's
    assert many == pytest.approx(0.002 * 1e7 + 3.0 + 0.0005 * 1e7)         # the node's
