"""One tie rule, live and offline: documents the model scores alike are served in the
first stage's order, as the offline metrics and the selection order them (a stable sort of
the logged rows), not in Lucene's document order, which the cluster's rescore uses; on
each engine."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from ltr_toolkit.query import clauses
from ltr_toolkit.query.firststage import FirstStage
from ltr_toolkit.rank.metrics import _order
from ltr_toolkit.serving.rerank import Rescore, rerank_ids, search
from ltr_toolkit.stores import store as st
from ltr_toolkit.transport.client import request as http

pytestmark = [pytest.mark.cluster, pytest.mark.ltr]
N = 12


@pytest.fixture(scope="module", params=[1, 3], ids=["1-shard", "3-shards"])
def tied(request, engine_cluster):
    """An index whose later documents match the query better (the first stage ranks them
    in the reverse of Lucene's order) and a model that scores every document alike
    (on ``flat``) or in three groups (on ``coarse``: by the number of "wing" words)."""
    conn, shards = engine_cluster.conn(), request.param
    c = conn.client()
    index, store = f"ties-{uuid.uuid4().hex[:6]}", f"ties{uuid.uuid4().hex[:6]}"
    c.indices.create(index=index, body={"settings": {"number_of_shards": shards,
                                                     "number_of_replicas": 0}})
    st.init_store(conn, store)
    for i in range(N):
        c.index(index=index, id=f"d{i:02d}",
                body={"title": "flow " * (i + 1) + "wing " * (i % 3), "abstract": "x"})
    c.indices.refresh(index=index)
    st.upload_featureset(conn, {"name": "ties", "features": [
        {"name": "one", "params": [], "template_language": "mustache",
         "template": {"constant_score": {"filter": {"match_all": {}}, "boost": 1.0}}},
        {"name": "wing", "params": [], "template_language": "mustache",
         "template": {"constant_score": {"filter": {"match": {"title": "wing"}}, "boost": 1.0}}}]},
        store)
    for name, weights in (("flat", {"one": 1.0, "wing": 0.0}), ("coarse", {"one": 0.0, "wing": 1.0})):
        http(conn, "POST", f"{st.store_path(store)}/_featureset/ties/_createmodel", store=store,
                body={"model": {"name": name, "model": {"type": "model/linear", "definition": weights}}})
    yield conn, index, store
    c.indices.delete(index=index, ignore_unavailable=True)
    st.drop_store(conn, store)


def _expected(first: list[str], model: str) -> list[str]:
    """Offline: the model's scores over the first stage's rows, sorted as the metrics do."""
    wing = {f"d{i:02d}": float(i % 3 > 0) for i in range(N)}
    scores = np.array([[1.0 if model == "flat" else wing[d] for d in first]])
    return [first[j] for j in _order(scores, np.array([0, len(first)]), None)[0]]


@pytest.mark.parametrize("model", ["flat", "coarse"])
@pytest.mark.parametrize("size", [3, 5, N])
def test_served_ties_follow_the_first_stage_as_offline(tied, model, size):
    conn, index, store = tied
    stage, params = FirstStage.from_fields(), {"keywords": "flow"}
    first = [h["id"] for h in search(conn, index, params, stage, None, N, max_terms=50)]
    assert first[:3] != sorted(first)[:3]      # not Lucene's order (documents by insertion)
    want = _expected(first, model)[:size]
    rescore = Rescore(model, N, store)
    got = [h["id"] for h in search(conn, index, params, stage, rescore, size, max_terms=50)]
    assert got == want
    many = rerank_ids(conn, index, [params, params], stage, rescore, size, max_terms=50)
    assert many == [want, want]


def test_a_model_without_a_recorded_budget_is_measured_once(tied, monkeypatch):
    """``search`` without ``max_terms`` measures the clause budget once for the model, not
    again for every new query (each measurement is a dozen requests)."""
    conn, index, store = tied
    calls = []
    real = clauses._bisect
    monkeypatch.setattr(clauses, "_bisect", lambda accepts: calls.append(1) or real(accepts))
    monkeypatch.setattr(clauses, "_cache", {})
    for words in ("flow", "flow wing", "wing of a flow"):
        search(conn, index, {"keywords": words}, FirstStage.from_fields(), Rescore("flat", N, store), 3)
    assert len(calls) == 2            # once for the first stage, once with the model
