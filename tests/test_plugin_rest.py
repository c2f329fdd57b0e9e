"""Every REST shape of the LTR plugin the toolkit relies on, live against the real plugin on each engine (OpenSearch and Elasticsearch),
and each error the user can meet surfacing as one line that names the cause."""

from __future__ import annotations

import json
import uuid

import pytest

from ltr_toolkit.stores import store as st
from ltr_toolkit.transport.client import request
from ltr_toolkit.features.featurelog import LOG_NAME, QUERY_NAME, log_body
from ltr_toolkit.errors import ClusterError, StoreMissingError, UserError

pytestmark = [pytest.mark.cluster, pytest.mark.ltr]

FEATURES = [
    {"name": "title_match", "params": ["keywords"], "template_language": "mustache",
     "template": {"match": {"title": "{{keywords}}"}}},
    {"name": "body_match", "params": ["keywords"], "template_language": "mustache",
     "template": {"match": {"body": "{{keywords}}"}}},
]


def _one_line_exit_2(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.fixture
def named(engine_cluster):
    conn = engine_cluster.conn()
    name = f"s{uuid.uuid4().hex[:8]}"
    yield conn, name
    st.drop_store(conn, name)


@pytest.fixture(scope="module")
def tiny(engine_cluster):
    conn = engine_cluster.conn()
    c = conn.client()
    index = f"tiny-{uuid.uuid4().hex[:8]}"
    c.index(index=index, id="1", body={"title": "wing flutter", "body": "flutter of wings"})
    c.index(index=index, id="2", body={"title": "boundary layer", "body": "heat transfer"})
    c.indices.refresh(index=index)
    st.init_store(conn, None)
    fs = f"rest-{uuid.uuid4().hex[:6]}"
    st.upload_featureset(conn, {"name": fs, "features": FEATURES})
    yield conn, index, fs
    c.indices.delete(index=index, ignore_unavailable=True)


# ----------------------------------------------------------------- stores

def test_named_store_lifecycle_and_listing(named, engine_cluster):
    conn, name = named
    assert not st.store_exists(conn, name)
    assert name not in st.list_stores(conn)
    # GET _ltr/{missing} answers 404: OpenSearch's plugin {"exists": false}, Elasticsearch's
    # the store index's index_not_found error (the toolkit reads the listing instead)
    from opensearchpy import exceptions as E
    with pytest.raises(E.NotFoundError) as info:
        conn.client().transport.perform_request("GET", f"/_ltr/{name}")
    if engine_cluster.engine == "opensearch":
        assert info.value.info == {"exists": False}
    else:
        assert info.value.info["error"]["type"] == "index_not_found_exception"
    assert st.init_store(conn, name) is True
    listed = st.list_stores(conn)[name]
    assert listed["index"] == f".ltrstore_{name}" and listed["store"] == name
    assert st.store_exists(conn, name)
    assert st.init_store(conn, name) is False          # seen: no second PUT
    with pytest.raises(ClusterError, match="already exists"):
        request(conn, "PUT", f"/_ltr/{name}")          # what a second PUT answers: 400
    assert st.drop_store(conn, name) is True
    assert not st.store_exists(conn, name) and st.drop_store(conn, name) is False


def test_default_store_lifecycle(engine_cluster):
    conn = engine_cluster.conn()
    st.init_store(conn, None)
    stores = st.list_stores(conn)
    assert stores[st.DEFAULT_STORE_KEY]["index"] == ".ltrstore"
    assert st.store_exists(conn, None) and st.init_store(conn, None) is False
    try:
        assert st.drop_store(conn, None) is True
        assert not st.store_exists(conn, None)
        with pytest.raises(StoreMissingError, match="does not exist"):
            st.list_featuresets(conn, None)
    finally:
        assert st.init_store(conn, None) is True


def test_store_cli_one_lines(engine_cluster, cli):
    name = f"c{uuid.uuid4().hex[:8]}"
    r = cli("--url", engine_cluster.url, "store", "init", "--store", name)
    assert r.returncode == 0 and "created" in r.stdout
    r = cli("--url", engine_cluster.url, "store", "list")
    assert name in r.stdout
    r = cli("--url", engine_cluster.url, "store", "drop", "--store", name, "--yes")
    assert r.returncode == 0 and "dropped" in r.stdout
    r = cli("--url", engine_cluster.url, "featureset", "list", "--store", name)
    _one_line_exit_2(r, f"feature store {name} does not exist", f"ltr store init --store {name}")


# ----------------------------------------------------------------- feature sets

def test_featureset_create_update_get_list_and_errors(tiny):
    conn, _, _ = tiny
    name = f"fs-{uuid.uuid4().hex[:6]}"
    created = st.upload_featureset(conn, {"name": name, "features": FEATURES[:1]})
    assert created["result"] == "created"
    updated = st.upload_featureset(conn, {"name": name, "features": FEATURES})   # POST overwrites
    assert updated["result"] == "updated"
    got = st.get_featureset(conn, name)
    assert [f["name"] for f in got["featureset"]["features"]] == ["title_match", "body_match"]
    assert name in [fs["name"] for fs in st.list_featuresets(conn)]
    assert st.get_featureset(conn, "no-such-set") is None        # 404 {"found": false}
    with pytest.raises(ClusterError, match="HTTP 409: .*version conflict"):
        request(conn, "PUT", f"/_ltr/_featureset/{name}", body={"featureset": {"features": FEATURES}})


def test_versioned_featureset_upload(tiny):
    conn, _, _ = tiny
    name = f"vfs-{uuid.uuid4().hex[:6]}"
    assert st.upload_featureset_versioned(conn, {"name": name, "features": FEATURES[:1]}) == (name, "created")
    assert st.upload_featureset_versioned(conn, {"name": name, "features": FEATURES[:1]}) == (name, "unchanged")
    assert st.upload_featureset_versioned(conn, {"name": name, "features": FEATURES}) == (f"{name}-v2", "new version")


# ----------------------------------------------------------------- models

def _model(name, definition):
    return {"model": {"name": name, "model": {"type": "model/linear", "definition": definition}}}


def test_createmodel_and_its_errors(tiny):
    conn, _, fs = tiny
    name = f"m-{uuid.uuid4().hex[:6]}"
    path = f"/_ltr/_featureset/{fs}/_createmodel"
    with pytest.raises(ClusterError, match=r"HTTP 400: .*Feature \[nope\] is unknown"):
        request(conn, "POST", path, body=_model(name, {"nope": 1.0}))
    with pytest.raises(ClusterError, match="feature set no-such-set not found"):
        request(conn, "POST", "/_ltr/_featureset/no-such-set/_createmodel",
                body=_model(name, {"title_match": 1.0}))
    assert request(conn, "POST", path, body=_model(name, {"title_match": 1.0}))["result"] == "created"
    with pytest.raises(ClusterError, match="already exists.*immutable"):
        request(conn, "POST", path, body=_model(name, {"title_match": 2.0}))


# ----------------------------------------------------------------- logging

@pytest.mark.parametrize("missing_as_zero", [False, True])
def test_ltr_log_shape(tiny, missing_as_zero):
    conn, index, fs = tiny
    body = log_body({"keywords": "flutter"}, ["1", "2"], fs, None)
    body["ext"]["ltr_log"]["log_specs"][0]["missing_as_zero"] = missing_as_zero
    hits = {h["_id"]: h for h in conn.client().search(index=index, body=body)["hits"]["hits"]}
    one = hits["1"]["fields"]["_ltrlog"][0][LOG_NAME]
    two = hits["2"]["fields"]["_ltrlog"][0][LOG_NAME]
    assert [f["name"] for f in one] == [f["name"] for f in two] == ["title_match", "body_match"]
    assert one[0]["value"] > 0 and one[1]["value"] > 0
    if missing_as_zero:
        assert two == [{"name": "title_match", "value": 0.0}, {"name": "body_match", "value": 0.0}]
    else:
        assert two == [{"name": "title_match"}, {"name": "body_match"}]    # no value at all
    assert QUERY_NAME in hits["1"]["matched_queries"]


def test_msearch_carries_ext(tiny):
    conn, index, fs = tiny
    lines = []
    for text in ("flutter", "boundary"):
        lines += [{"index": index}, log_body({"keywords": text}, ["1", "2"], fs, None)]
    responses = conn.client().msearch(body=lines)["responses"]
    assert [r.get("status") for r in responses] == [200, 200]
    for r in responses:
        for h in r["hits"]["hits"]:
            assert len(h["fields"]["_ltrlog"][0][LOG_NAME]) == 2


# ----------------------------------------------------------------- sltr errors, as users see them

@pytest.mark.parametrize("args,needles", [
    (["--model", "no-such-model"], ["model no-such-model not found", "ltr model list"]),
    (["--model", "x", "--store", "no_such_store"], ["feature store no_such_store does not exist"]),
])
def test_sltr_errors_are_one_line(tiny, cli, engine_cluster, args, needles):
    _, index, _ = tiny
    r = cli("--url", engine_cluster.url, "query", "search", "flutter", "--index", index, "--fields", "title,body", *args)
    _one_line_exit_2(r, *needles)


def test_unknown_featureset_in_sltr_named(tiny):
    conn, index, _ = tiny
    from ltr_toolkit.transport.client import call
    body = log_body({"keywords": "flutter"}, ["1"], "no-such-set", None)
    with pytest.raises(UserError, match="feature set no-such-set not found"):
        call(conn, conn.client().search, index=index, body=body)
    resp = conn.client().msearch(body=[{"index": index}, body])["responses"][0]
    from ltr_toolkit.transport.client import item_error
    assert "feature set no-such-set not found" in str(item_error(resp, conn))
    assert json.dumps(resp["error"])   # the per-item error body is what item_error reads
