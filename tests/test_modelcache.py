"""The plugin's model cache (``ltr.caches.max_mem``): `ltr upload` measures what a model
takes in it and warns when a model cannot stay cached (it is then compiled again for
every query). Live, on the session's node; the models are built to a size measured on
the node itself, not assumed."""

from __future__ import annotations

import json
import math
import uuid

import pytest

from ltr_toolkit.stores import store as st
from ltr_toolkit.transport.client import request
from ltr_toolkit.stores.modelcache import _bytes, cache_limit, cache_warnings

pytestmark = [pytest.mark.cluster, pytest.mark.ltr]
FEATURES = ("f_title", "f_body")


def _tree(depth: int, node: int = 0, level: int = 0) -> dict:
    """A full tree of ``depth`` levels of splits (node ids as xgboost numbers them)."""
    if level == depth:
        return {"nodeid": node, "leaf": 0.01 * (node % 7)}
    yes, no = 2 * node + 1, 2 * node + 2
    return {"nodeid": node, "depth": level, "split": FEATURES[level % 2],
            "split_condition": 0.5 + node, "yes": yes, "no": no, "missing": no,
            "children": [_tree(depth, yes, level + 1), _tree(depth, no, level + 1)]}


@pytest.fixture
def place(ltr_cluster):
    conn = ltr_cluster.conn()
    tag = uuid.uuid4().hex[:8]
    store, index = f"c{tag}", f"cache-{tag}"
    st.init_store(conn, store)
    st.upload_featureset(conn, {"name": "fs", "features": [
        {"name": n, "params": ["keywords"], "template_language": "mustache",
         "template": {"match": {"title": "{{keywords}}"}}} for n in FEATURES]}, store)
    conn.client().index(index=index, id="1", body={"title": "wing flutter"}, refresh=True)
    yield conn, store, index
    st.drop_store(conn, store)
    conn.client().indices.delete(index=index, ignore_unavailable=True)
    _let_the_heap_settle(conn)


def _let_the_heap_settle(conn, timeout: float = 30.0) -> None:
    """The oversized models' definitions (tens of MB of JSON) fill a small node's heap
    for a while, and the plugin's memory breaker then refuses the next store write:
    release the caches and wait (bounded) until the heap is below 60% again."""
    request(conn, "POST", "/_ltr/_clearcache")
    _wait_for_heap(conn, timeout)


def _wait_for_heap(conn, timeout: float = 30.0) -> None:
    """Waits (bounded) until every node's heap is below 60%."""
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        nodes = request(conn, "GET", "/_nodes/stats/jvm")["nodes"].values()
        if max(n["jvm"]["mem"]["heap_used_percent"] for n in nodes) < 60:
            return
        time.sleep(0.5)


def _create(conn, store, name, trees: int):
    """Stores a model; when the plugin's memory breaker refuses it (the previous models'
    JSON still on a small heap), once more after the heap has come down."""
    from ltr_toolkit.errors import ClusterError
    definition = json.dumps({"objective": "reg:linear", "splits": [_tree(6)] * trees})
    for attempt in range(2):
        try:
            request(conn, "POST", f"{st.store_path(store)}/_featureset/fs/_createmodel",
                    store=store, body={"model": {"name": name, "model": {
                        "type": "model/xgboost+json", "definition": definition}}})
            return
        except ClusterError as exc:
            if attempt or "circuit is broken" not in str(exc):
                raise
            _wait_for_heap(conn)


def test_a_model_larger_than_the_cache_is_named_with_its_size(place):
    conn, store, index = place
    limit = cache_limit(conn)
    _create(conn, store, "small", 40)
    small, warns = cache_warnings(conn, "small", store, index)
    assert small["kept"] and small["model_bytes"] > 0 and warns == []
    per_tree = small["model_bytes"] / 40
    big_trees = math.ceil(1.2 * limit / per_tree)           # about 20% over the cache
    _create(conn, store, "big", big_trees)
    big, warns = cache_warnings(conn, "big", store, index)
    assert not big["kept"] and len(warns) == 1
    assert "did not stay in the plugin's cache" in warns[0] and "ltr.caches.max_mem" in warns[0]
    half = math.ceil(0.6 * limit / per_tree)                # two of these overfill it
    _create(conn, store, "half1", half)
    _create(conn, store, "half2", half)
    assert cache_warnings(conn, "half1", store, index)[0]["kept"]
    info, warns = cache_warnings(conn, "half2", store, index)
    # the second evicts the first, or both stay and fill over 90%: either way it is said
    assert warns and ("evict each other" in warns[0] or "did not stay" in warns[0]), info


def test_upload_prints_what_the_model_takes(ltr_cluster, cli, tmp_path):
    import numpy as np
    rng = np.random.default_rng(0)
    data = tmp_path / "train.txt"
    data.write_text("".join(f"{rng.integers(0, 3)} qid:{q} 1:{rng.random():.4f} 2:{rng.random():.4f}\n"
                            for q in range(8) for _ in range(6)))
    model = tmp_path / "m.json"
    assert cli("train", str(data), "--algo", "lambdamart", "--trees", "20", "--depth", "3",
               "-o", str(model)).returncode == 0
    conn = ltr_cluster.conn()
    tag = uuid.uuid4().hex[:8]
    store, index = f"u{tag}", f"upl-{tag}"
    st.init_store(conn, store)
    try:
        st.upload_featureset(conn, {"name": "fs", "features": [
            {"name": n, "params": ["keywords"], "template_language": "mustache",
             "template": {"match": {"title": "{{keywords}}"}}} for n in FEATURES]}, store)
        conn.client().index(index=index, id="1", body={"title": "wing"}, refresh=True)
        r = cli("--url", ltr_cluster.url, "model", "upload", str(model), "--name", "m", "--featureset", "fs",
                "--store", store, "--index", index)
        assert r.returncode == 0, r.stderr
        assert "plugin cache: the model takes" in r.stdout and "ltr.caches.max_mem" in r.stdout
    finally:
        st.drop_store(conn, store)
        conn.client().indices.delete(index=index, ignore_unavailable=True)


def test_cache_sizes_read_as_the_plugin_reads_them():
    heap = 512 * 1024 ** 2
    assert _bytes("10mb", heap) == 10 * 1024 ** 2 and _bytes("512kb", heap) == 512 * 1024
    assert _bytes("5%", heap) == int(heap * 0.05) and _bytes("123", heap) == 123
    assert _bytes("lots", heap) is None
