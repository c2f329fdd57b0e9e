"""Listing and pruning a store's models, live against the real plugin: listings page
past the plugin's default of 20 elements, and ``ltr model prune`` deletes exactly the
older versions of one base name."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from ltr_toolkit.stores import model_store as ms
from ltr_toolkit.stores import store as st
from ltr_toolkit.transport.client import request

pytestmark = [pytest.mark.cluster, pytest.mark.ltr]

FEATURE = {"name": "title_match", "params": ["keywords"], "template_language": "mustache",
           "template": {"match": {"title": "{{keywords}}"}}}


@pytest.fixture
def store(ltr_cluster):
    conn = ltr_cluster.conn()
    name = f"p{uuid.uuid4().hex[:8]}"
    st.init_store(conn, name)
    st.upload_featureset(conn, {"name": "fs", "features": [FEATURE]}, name)
    yield conn, name
    st.drop_store(conn, name)


def _create(conn, store, names):
    for n in names:
        request(conn, "POST", f"{st.store_path(store)}/_featureset/fs/_createmodel", store=store,
                body={"model": {"name": n, "model": {"type": "model/linear",
                                                     "definition": {"title_match": 1.0}}}})


def test_listing_pages_through_every_model(store, monkeypatch):
    conn, name = store
    made = [f"m{i}" for i in range(23)]                  # more than the plugin's default 20
    _create(conn, name, made)                            # the plugin refreshes on create
    assert sorted(ms.model_names(conn, name)) == sorted(made)
    monkeypatch.setattr(st, "LIST_PAGE", 5)              # 5 pages, the last one partial
    assert sorted(ms.model_names(conn, name)) == sorted(made)
    assert sorted(ms.model_names(conn, name, prefix="m1")) == sorted(["m1", *(f"m1{i}" for i in range(10))])
    for i in range(22):                                  # feature sets list the same way
        st.upload_featureset(conn, {"name": f"fs{i}", "features": [FEATURE]}, name)
    assert len(st.list_featuresets(conn, name)) == 23


def test_listing_at_the_default_page_would_have_stopped_at_20(store):
    """What the plugin answers without paging: 20 of them (the reason for the pages)."""
    conn, name = store
    _create(conn, name, [f"m{i}" for i in range(23)])
    resp = request(conn, "GET", f"{st.store_path(name)}/_model", store=name)
    assert len(resp["hits"]["hits"]) == 20 and resp["hits"]["total"]["value"] == 23


def test_prune_keeps_the_newest_versions_and_nothing_else(store, cli, ltr_cluster):
    conn, name = store
    base = "ranker"
    versions = [f"{base}-v{n}" for n in (1, 2, 3, 9, 10)]           # v10 sorts after v9
    others = [base, f"{base}-v2-old", f"{base}x-v1", f"{base}-vx"]
    _create(conn, name, versions + others)
    url = ("--url", ltr_cluster.url)

    r = cli(*url, "model", "prune", base, "--keep", "2", "--store", name)   # no --yes
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "nothing deleted" in r.stderr and "--yes" in r.stderr and "Traceback" not in r.stderr
    assert "ranker-v1, ranker-v2, ranker-v3" in r.stdout.replace("\n", " ")
    assert sorted(ms.model_names(conn, name)) == sorted(versions + others)

    r = cli(*url, "model", "prune", base, "--keep", "2", "--store", name, "--yes")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "deleted: ranker-v1, ranker-v2, ranker-v3" in r.stdout.replace("\n", " ")
    assert "Warning" not in r.stderr, r.stderr     # the listing's refresh warns no user
    for name_ in versions[:3]:                       # gone now (GET by id is real-time)
        assert ms.get_model(conn, name_, name) is None
    want = sorted([f"{base}-v9", f"{base}-v10", *others])
    assert sorted(ms.model_names(conn, name)) == want   # at once: prune refreshes the listing
    assert ms.next_version(base, ms.model_names(conn, name)) == f"{base}-v11"

    r = cli(*url, "model", "prune", base, "--keep", "2", "--store", name, "--yes")
    assert r.returncode == 0 and "nothing to prune" in r.stdout, r.stdout

    r = cli(*url, "model", "prune", base, "--keep", "0", "--store", name, "--yes")
    assert r.returncode == 2 and "--keep" in r.stderr
    assert len(ms.model_names(conn, name)) == 2 + len(others)


def test_uploads_version_and_prune_keeps_the_newest(store, cli, ltr_cluster, tmp_path):
    """The user's loop: ltr upload twice (-v1, -v2), --exact refuses a taken name, ltr
    model prune --keep 1 leaves the newest."""
    conn, name = store
    rng = np.random.default_rng(0)
    data = tmp_path / "train.txt"
    data.write_text("".join(f"{rng.integers(0, 3)} qid:{q} 1:{rng.random():.4f}\n"
                            for q in range(6) for _ in range(5)))
    model = tmp_path / "m.json"
    assert cli("train", str(data), "--algo", "linear", "--epochs", "2", "-o", str(model)).returncode == 0
    url = ("--url", ltr_cluster.url)
    up = ("model", "upload", str(model), "--name", "lin", "--featureset", "fs", "--store", name)
    for v in (1, 2):
        r = cli(*url, *up)
        assert r.returncode == 0 and f"lin-v{v}" in r.stdout, (r.stdout, r.stderr)
    r = cli(*url, *up[:4], "lin-v2", *up[5:], "--exact")
    assert r.returncode == 2 and "already exists" in r.stderr, r.stderr
    r = cli(*url, "model", "prune", "lin", "--keep", "1", "--store", name, "--yes")
    assert r.returncode == 0, r.stderr
    assert ms.get_model(conn, "lin-v1", name) is None and ms.get_model(conn, "lin-v2", name)


def test_a_clean_up_reports_why_a_model_was_not_deleted(store):
    conn, name = store
    _create(conn, name, ["keep-a"])
    assert ms.delete_models(conn, ["keep-a"], name) == {}
    assert "keep-a" not in ms.model_names(conn, name)
    left = ms.delete_models(conn, ["m1"], f"{name}-gone")       # a store that is not there
    assert list(left) == ["m1"] and f"feature store {name}-gone does not exist" in left["m1"]
