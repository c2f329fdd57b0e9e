"""A stored model's query plan is made once per process and kept under the model's name
(issue 53, items 5 and 9): serving a query then sends the search alone (live)."""

from __future__ import annotations

import uuid

import pytest

from ltr_toolkit.query.firststage import FirstStage
from ltr_toolkit.query.prepare import model_plan
from ltr_toolkit.serving.rerank import Rescore, search
from ltr_toolkit.stores import contract as C
from ltr_toolkit.stores import contract_record as CR
from ltr_toolkit.stores import store as st
from ltr_toolkit.transport import lookups
from ltr_toolkit.transport.client import request

pytestmark = [pytest.mark.cluster, pytest.mark.ltr]

QUERY = {"keywords": "flow wing"}


@pytest.fixture
def two_versions(ltr_cluster):
    """One shard, 12 documents, a store with a one-feature set and two versions of a
    linear model, each with its serving contract (windows 5 and 7)."""
    conn = ltr_cluster.conn()
    c = conn.client()
    index, store = f"plan-{uuid.uuid4().hex[:6]}", f"plan{uuid.uuid4().hex[:6]}"
    c.indices.create(index=index, body={"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
    st.init_store(conn, store)
    models = {"m-v1": 5, "m-v2": 7}
    try:
        for i in range(12):
            c.index(index=index, id=f"d{i}", body={"title": "flow " * (i + 1) + "wing " * (12 - i),
                                                   "abstract": "x"})
        c.indices.refresh(index=index)
        st.upload_featureset(conn, {"name": "fs", "features": [
            {"name": "title", "params": ["keywords"], "template_language": "mustache",
             "template": {"match": {"title": "{{keywords}}"}}}]}, store)
        for name, window in models.items():
            request(conn, "POST", f"{st.store_path(store)}/_featureset/fs/_createmodel", store=store,
                    body={"model": {"name": name, "model": {"type": "model/linear",
                                                            "definition": {"title": 1.0}}}})
            CR.record(conn, name, store, C.Contract(window=window))
        yield conn, index, store, models
    finally:
        for name in models:
            CR.forget_record(conn, name, store)
        c.indices.delete(index=index, ignore_unavailable=True)
        st.drop_store(conn, store)


def _requests(conn, monkeypatch) -> list[tuple[str, str]]:
    """Every request the connection's client sends from now on: (method, path)."""
    transport = conn.client().transport
    sent, real = [], transport.perform_request

    def counted(method, url, *args, **kwargs):
        sent.append((method, url.split("?")[0]))
        return real(method, url, *args, **kwargs)
    monkeypatch.setattr(transport, "perform_request", counted)
    return sent


def test_a_second_query_sends_the_search_alone(two_versions, monkeypatch):
    """The cluster facts a plan is made of expire at once here (``lookups.TTL`` 0): the
    second query of the same model still sends nothing but its search, the plan being
    kept (each query read the model's contract and definition again before)."""
    conn, index, store, _ = two_versions
    monkeypatch.setattr(lookups, "TTL", 0.0)
    stage = FirstStage.from_fields()
    first = search(conn, index, QUERY, stage, Rescore("m-v1", store=store), 10, max_terms=50)
    sent = _requests(conn, monkeypatch)
    again = search(conn, index, QUERY, stage, Rescore("m-v1", store=store), 10, max_terms=50)
    assert again == first
    assert sent and set(sent) == {("POST", f"/{index}/_search")}, sent


def test_a_new_version_gets_its_own_plan_and_a_new_contract_a_new_one(two_versions, monkeypatch):
    """Plans are kept under the model's name: the next version (a new name) is planned
    from its own contract, and recording a contract again makes the plan again."""
    conn, index, store, windows = two_versions
    stage = FirstStage.from_fields()

    def plan(model):
        return model_plan(conn, index, Rescore(model, store=store), stage, 50, sample=QUERY)
    v1 = plan("m-v1")
    assert v1.window == windows["m-v1"] and v1.rescore.model == "m-v1"
    sent = _requests(conn, monkeypatch)
    assert plan("m-v1") is v1 and not sent
    v2 = plan("m-v2")
    assert v2.window == windows["m-v2"] and v2.rescore.model == "m-v2"
    assert sent                                      # v2's contract and definition were read
    assert plan("m-v1") is v1
    CR.record(conn, "m-v1", store, C.Contract(window=windows["m-v1"] + 4))
    renewed = plan("m-v1")
    assert renewed is not v1 and renewed.window == windows["m-v1"] + 4


def test_a_query_rejected_as_too_long_measures_the_budget_again(two_versions):
    """A kept plan whose measured budget the cluster no longer accepts (as when its
    clause limit was lowered after the measurement: here the kept budget is replaced by
    the probe's ceiling) gets its budget measured again at the first query rejected as
    too long, which is then served reranked, not by the first-stage fallback."""
    import warnings
    from dataclasses import replace
    from ltr_toolkit.query.clauses import PROBE_MAX, probe_words
    from ltr_toolkit.serving.rerank import RescoreFallbackWarning
    conn, index, store, _ = two_versions
    stage = FirstStage.from_fields()
    rescore = Rescore("m-v1", store=store)
    plan = model_plan(conn, index, rescore, stage, sample=QUERY)
    assert plan.measured and plan.max_terms < PROBE_MAX
    lookups.replanned(conn, store, "m-v1", plan, replace(plan, max_terms=PROBE_MAX))
    long = {"keywords": "flow " + probe_words(PROBE_MAX - 1)}    # first words are kept
    with warnings.catch_warnings():
        warnings.simplefilter("error", RescoreFallbackWarning)
        hits = search(conn, index, long, stage, rescore, 10)
    assert hits
    assert model_plan(conn, index, rescore, stage, sample=QUERY).max_terms == plan.max_terms
