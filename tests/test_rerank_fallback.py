"""A failed rescore on several shards serves the first stage's hits once each (live)."""

from __future__ import annotations

import uuid
import warnings

import pytest

from ltr_toolkit.stores import store as st
from ltr_toolkit.query.firststage import FirstStage
from ltr_toolkit.serving.rerank import Rescore, RescoreFallbackWarning, search

pytestmark = [pytest.mark.cluster, pytest.mark.ltr]


def test_a_failed_rescore_below_a_small_window_repeats_no_hit(ltr_cluster):
    """3 shards, window 3 < size 10, 6 matches: the first request fetches the global top 10; the
    rescore fails (its feature needs a parameter the query does not have); the served
    list is the first stage's top 10, each once (it was ``... d7, d5, d6``: the hits below
    the window appended a second time)."""
    conn = ltr_cluster.conn()
    c = conn.client()
    index, store = f"fallback-{uuid.uuid4().hex[:6]}", f"fb{uuid.uuid4().hex[:6]}"
    c.indices.create(index=index, body={"settings": {"number_of_shards": 3, "number_of_replicas": 0}})
    st.init_store(conn, store)
    try:
        for i in range(12):
            title = "flow " * (i + 1) if i < 6 else "wing"          # 6 of 12 match: fewer than size
            c.index(index=index, id=f"d{i}", body={"title": title, "abstract": "x"})
        c.indices.refresh(index=index)
        st.upload_featureset(conn, {"name": "needs", "features": [
            {"name": "cat", "params": ["category"], "template_language": "mustache",
             "template": {"match": {"title": "{{category}}"}}}]}, store)
        from ltr_toolkit.transport.client import request
        request(conn, "POST", f"{st.store_path(store)}/_featureset/needs/_createmodel", store=store,
                body={"model": {"name": "m", "model": {"type": "model/linear", "definition": {"cat": 1.0}}}})
        stage = FirstStage.from_fields()
        first = search(conn, index, {"keywords": "flow"}, stage, None, 10, max_terms=50)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = search(conn, index, {"keywords": "flow"}, stage, Rescore("m", 3, store), 10,
                         max_terms=50)
        ids = [h["id"] for h in got]
        assert any(issubclass(w.category, RescoreFallbackWarning) for w in caught), caught
        assert len(ids) == len(set(ids)) == 6
        assert ids == [h["id"] for h in first]
    finally:
        c.indices.delete(index=index, ignore_unavailable=True)
        st.drop_store(conn, store)
