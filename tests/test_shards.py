"""Serving reranks exactly what the model was trained on, whatever the number of shards:
the first stage's global top `window`, as logged. On a 3-shard index OpenSearch's own
rescore window counts per shard (a plain rescore reranks up to 3 x window documents); the
toolkit's rerank returns exactly the global top window's documents, in the order of the
scores `ltr predict` computes from the logged features. Live, on the real plugin."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.ltr]

WINDOW = 20
QIDS = ["1", "2", "4", "8", "9", "10", "12", "13"]


@pytest.fixture(scope="module")
def sharded(ltr_cluster, tmp_path_factory):
    from conftest import run_cli
    from ltr_toolkit.stores import store as st
    from ltr_toolkit.indexing.documents import index_documents
    from ltr_toolkit.data.featuresets import load_featureset
    from ltr_toolkit.data.judgments import save_ranklib
    from ltr_toolkit.datasets import cranfield
    conn = ltr_cluster.conn()
    index_documents(conn, "cran-3-shards", cranfield.documents(), recreate=True, shards=3)
    st.init_store(conn, None)
    fs, _ = st.upload_featureset_versioned(conn, load_featureset(cranfield.FEATURE_SET))
    d = tmp_path_factory.mktemp("shards")
    save_ranklib(cranfield.judgments().subset(QIDS), d / "j.txt")
    url = ltr_cluster.url
    for args in (("--url", url, "log", str(d / "j.txt"), "--featureset", fs, "--index",
                  "cran-3-shards", "--fields", "title,abstract", "--window", str(WINDOW), "-o", str(d / "c.txt")),
                 ("train", str(d / "c.txt"), "--algo", "lambdamart", "--trees", "20", "--depth", "3",
                  "-o", str(d / "m.json")),
                 ("predict", str(d / "m.json"), str(d / "c.txt"), "-o", str(d / "s.txt")),
                 ("--url", url, "model", "upload", str(d / "m.json"), "--name", "shards", "--featureset", fs)):
        r = run_cli(*args)
        assert r.returncode == 0, r.stderr
    model = r.stdout.split("uploaded ")[1].split()[0]
    yield conn, d, model
    conn.client().indices.delete(index="cran-3-shards", ignore_unavailable=True)


def test_rerank_returns_exactly_the_global_top_window_in_the_models_order(sharded):
    from ltr_toolkit.query.firststage import FirstStage
    from ltr_toolkit.query.requests import search_body
    from ltr_toolkit.serving.rerank import Rescore, serving_params
    from ltr_toolkit.serving.serving import Serving
    from ltr_toolkit.datasets import cranfield
    conn, d, model = sharded
    jl = cranfield.judgments()
    params = [jl.query_params(q) for q in QIDS]
    stage = FirstStage.from_fields()
    serving = Serving("cran-3-shards", stage, WINDOW)
    first = serving.first_ids(conn, params)
    ranked = serving.for_model(model).rerank(conn, params, WINDOW)
    # logged candidates (the global top WINDOW) and `ltr predict`'s scores of them
    rows = [ln.split("#")[0].split()[1][4:] + " " + ln.split("#")[1].strip()
            for ln in (d / "c.txt").read_text().splitlines() if not ln.startswith("#")]
    scores = dict(zip(rows, np.loadtxt(d / "s.txt")))
    logged = {}
    for row in rows:
        q, doc = row.split()
        logged.setdefault(q, []).append(doc)
    plain_differs = 0
    for q, top, got in zip(QIDS, first, ranked):
        assert sorted(got) == sorted(top) == sorted(logged[q]), q   # exactly what was logged
        local = sorted(top, key=lambda doc: -scores[f"{q} {doc}"])
        s = [scores[f"{q} {doc}"] for doc in got]
        assert all(a >= b - 1e-4 for a, b in zip(s, s[1:])), (q, got, local)
        # OpenSearch's own window (per shard) reranks other documents than training saw
        mp = serving_params(conn, "cran-3-shards", [jl.query_params(q)], stage, Rescore(model, WINDOW),
                            first_ids=[top])[0]
        body = search_body(stage, jl.query_params(q), WINDOW, Rescore(model, WINDOW), model_params=mp,
                           source=None)
        hits = conn.client().search(index="cran-3-shards", body=body)["hits"]["hits"]
        plain_differs += sorted(h["_id"] for h in hits) != sorted(top)
    assert plain_differs > 0
    sidecar = json.loads((d / "c.txt.json").read_text())
    assert sidecar["candidates"]["k"] == WINDOW
    hits = serving.for_model(model).search(conn, jl.query_params(QIDS[0]), 5)   # ltr search's path
    assert [h["id"] for h in hits] == ranked[0][:5]


def test_below_the_window_the_first_stage_order_follows(sharded):
    """size > window: the reranked window, then the first stage's next documents in its
    own order (the restricted request alone would return only the window)."""
    from ltr_toolkit.query.firststage import FirstStage
    from ltr_toolkit.serving.serving import Serving
    from ltr_toolkit.datasets import cranfield
    conn, _, model = sharded
    params = [cranfield.judgments().query_params(q) for q in QIDS[:3]]
    serving = Serving("cran-3-shards", FirstStage.from_fields(), window=5)
    first = Serving("cran-3-shards", FirstStage.from_fields(), window=12).first_ids(conn, params)
    ranked = serving.for_model(model).rerank(conn, params, size=12)
    for top, got in zip(first, ranked):
        assert sorted(got[:5]) == sorted(top[:5]) and got[5:] == top[5:12]
    hits = serving.for_model(model).search(conn, params[0], 12)
    assert [h["id"] for h in hits] == ranked[0]


def _logged(conn, index, fs, jl, stage, out):
    """{(qid, doc): [feature value text]} of ``jl``'s pairs logged from ``index``."""
    from ltr_toolkit.features.featurelog import log_features
    log_features(conn, jl, fs, index, out, first_stage=stage)
    rows = {}
    for ln in out.read_text().splitlines()[1:]:            # after the header line
        head, doc = ln.split("#")
        parts = head.split()
        rows[(parts[1][4:], doc.strip())] = dict(p.split(":") for p in parts[2:])
    return rows


def test_dfs_statistics_log_serve_and_rank_as_one_shard_does(sharded, tmp_path):
    """With ``statistics="dfs"`` (the default) the first stage's ranking and every logged
    feature on 3 shards equal a 1-shard copy's (the plugin's logger would use each shard's
    statistics without the cached query-phase values); ``"shard"`` differs. The feedback
    feature is left out: more_like_this picks its terms per shard."""
    from ltr_toolkit.stores import store as st
    from ltr_toolkit.query.firststage import FirstStage
    from ltr_toolkit.indexing.documents import index_documents
    from ltr_toolkit.serving.serving import Serving
    from ltr_toolkit.data.featuresets import load_featureset
    from ltr_toolkit.datasets import cranfield
    conn, _, _ = sharded
    index_documents(conn, "cran-1-shard", cranfield.documents(), recreate=True, shards=1)
    fs_doc = load_featureset(cranfield.FEATURE_SET)
    fs, _ = st.upload_featureset_versioned(conn, fs_doc)
    feedback = {str(i + 1) for i, f in enumerate(fs_doc["features"]) if "first_stage_id" in json.dumps(f)}
    jl = cranfield.judgments().subset(QIDS)
    params = [jl.query_params(q) for q in QIDS]
    dfs, shard = FirstStage.from_fields(), FirstStage.from_fields(statistics="shard")
    assert dfs.statistics == "dfs"
    try:
        one = _logged(conn, "cran-1-shard", fs, jl, dfs, tmp_path / "one.txt")
        three = {s.statistics: _logged(conn, "cran-3-shards", fs, jl, s, tmp_path / f"{s.statistics}.txt")
                 for s in (dfs, shard)}
        plain = lambda rows: {k: {f: v for f, v in r.items() if f not in feedback} for k, r in rows.items()}
        assert len(one) == len(jl) and plain(three["dfs"]) == plain(one)
        assert sum(plain(three["shard"])[k] != plain(one)[k] for k in one) > len(one) / 2
        top_one = Serving("cran-1-shard", dfs, 50).first_ids(conn, params)
        assert Serving("cran-3-shards", dfs, 50).first_ids(conn, params) == top_one
        assert Serving("cran-3-shards", shard, 50).first_ids(conn, params) != top_one
    finally:
        conn.client().indices.delete(index="cran-1-shard", ignore_unavailable=True)
