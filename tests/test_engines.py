"""One toolkit, two engines: what differs between OpenSearch and Elasticsearch is asked of
``transport.engine`` (detected from the cluster, never from ``GET /``) and
``localnode.distributions`` (how a local node is provisioned), live on a real node of
each engine with its LTR plugin."""

from __future__ import annotations

import json
import time
import uuid
import zipfile
from pathlib import Path

import numpy as np
import pytest

from ltr_toolkit import versions
from ltr_toolkit.data.featuresets import load_featureset, script_languages, semantic_field
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.encoders import load_encoder, query_vectors
from ltr_toolkit.stores import store as st
from ltr_toolkit.localnode import java as jdk, plugins
from ltr_toolkit.transport.client import Connection
from ltr_toolkit.localnode.distributions import (ELASTICSEARCH_DIST, OPENSEARCH_DIST, zip_engine)
from ltr_toolkit.transport.engine import WINDOW_IDS, detect

EXPECTED = {"opensearch": ("OpenSearch", versions.OPENSEARCH_VERSION),
            "elasticsearch": ("Elasticsearch", versions.ELASTICSEARCH_VERSION)}


# ----------------------------------------------------------------- offline

def _zip(path, descriptor: str | None):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("plugin.jar", b"x")
        if descriptor is not None:
            zf.writestr("plugin-descriptor.properties", descriptor)
    return path


def test_plugin_zips_are_told_apart_by_their_descriptor(monkeypatch, tmp_path):
    """Both engines' zips in one folder: each engine's node gets its own, built for its
    version, whatever the file names say."""
    for var in ("LTR_PLUGIN_ZIP", "LTR_ES_PLUGIN_ZIP"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LTR_HOME", str(tmp_path))
    folder = tmp_path / "plugins"
    folder.mkdir()
    os_zip = _zip(folder / "a.zip", f"name=opensearch-ltr\nopensearch.version={versions.OPENSEARCH_VERSION}\n")
    old_es = _zip(folder / "ltr-b.zip", "name=ltr\nelasticsearch.version=8.15.5\n")
    es_zip = _zip(folder / "c.zip", f"name=ltr\n# built here\nelasticsearch.version={versions.ELASTICSEARCH_VERSION}\n")
    assert zip_engine(os_zip) == "opensearch" and zip_engine(es_zip) == "elasticsearch"
    assert plugins.supplied_plugin_zip(OPENSEARCH_DIST) == os_zip
    assert plugins.supplied_plugin_zip(ELASTICSEARCH_DIST) == es_zip
    es_zip.unlink()
    assert plugins.supplied_plugin_zip(ELASTICSEARCH_DIST) is None     # built for 8.15.5: never
    monkeypatch.setenv("LTR_ES_PLUGIN_ZIP", str(tmp_path / "nowhere.zip"))
    from ltr_toolkit.errors import ProvisionError
    with pytest.raises(ProvisionError, match="LTR_ES_PLUGIN_ZIP"):
        plugins.supplied_plugin_zip(ELASTICSEARCH_DIST)


def test_a_missing_elasticsearch_zip_is_named_with_its_fix(monkeypatch, tmp_path):
    monkeypatch.delenv("LTR_ES_PLUGIN_ZIP", raising=False)
    monkeypatch.setenv("LTR_HOME", str(tmp_path))
    from ltr_toolkit.errors import ProvisionError
    with pytest.raises(ProvisionError) as ei:
        plugins.plugin_zip(dist=ELASTICSEARCH_DIST)
    assert "on no registry" in str(ei.value) and ELASTICSEARCH_DIST.zip_name in ei.value.hint


def test_java_for_each_engine():
    """Elasticsearch 8.17 refuses Java 25 (its launcher's security-manager flag):
    each engine gets a Java in its own range."""
    es, os_ = jdk.find_java(ELASTICSEARCH_DIST), jdk.find_java(OPENSEARCH_DIST)
    assert versions.ES_MIN_JAVA <= es.version <= versions.ES_MAX_JAVA
    assert os_.version >= versions.MIN_JAVA


def test_what_features_need():
    fs = load_featureset(cranfield.FEATURE_SET)
    by_name = {f["name"]: f for f in fs["features"]}
    assert semantic_field(by_name["query_doc_cosine"]) == "vector"
    assert script_languages(by_name["query_doc_cosine"]) == ["knn"]
    assert all(semantic_field(f) is None and script_languages(f) == []
               for n, f in by_name.items() if n != "query_doc_cosine")
    expr = {"name": "e", "template_language": "derived_expression", "template": "a * 2"}
    assert script_languages(expr) == ["expression"]
    painless = {"name": "p", "params": ["keywords"], "template_language": "mustache",
                "template": {"function_score": {"script_score": {"script": "_score * 2"}}}}
    assert script_languages(painless) == ["painless"]


# ----------------------------------------------------------------- live, each engine

def test_engine_detected_without_get_root(engine_cluster):
    conn = engine_cluster.conn()
    found = detect(conn)
    label, version = EXPECTED[engine_cluster.engine]
    assert found.name == engine_cluster.engine and found.version == version
    assert found.label == f"{label} {version}"
    assert found.vectors is not None
    if found.name == "elasticsearch":      # the test distribution has no rest-root module
        from ltr_toolkit.errors import ClusterError
        from ltr_toolkit.transport.client import cluster_info
        with pytest.raises(ClusterError, match="405"):
            cluster_info(conn)


def test_cluster_status_names_engine_and_plugin(engine_cluster, cli):
    r = cli("--url", engine_cluster.url, "cluster", "status")
    assert r.returncode == 0, r.stderr
    label, version = EXPECTED[engine_cluster.engine]
    assert f"{label} {version}" in r.stdout and engine_cluster.ltr_version in r.stdout


def test_a_feature_needing_an_absent_script_language_is_refused(engine_cluster, cli, tmp_path):
    """One line naming the feature and the module, exit 2, nothing uploaded. The
    Elasticsearch test distribution has no lang-expression; OpenSearch's has every
    language the feature sets use, so there a made-up language stands in."""
    conn = engine_cluster.conn()
    st.init_store(conn, None)
    absent = "expression" if engine_cluster.engine == "elasticsearch" else "nolang"
    assert absent not in detect(conn).languages
    name = f"needs-{uuid.uuid4().hex[:6]}"
    feature = ({"name": "doubled", "params": [], "template_language": "derived_expression",
                "template": "title_match * 2"} if absent == "expression" else
               {"name": "doubled", "params": ["keywords"], "template_language": "mustache",
                "template": {"function_score": {"query": {"match": {"title": "{{keywords}}"}},
                                                "script_score": {"script": {"lang": absent, "source": "x"}}}}})
    path = tmp_path / "fs.json"
    path.write_text(json.dumps({"name": name, "features": [
        {"name": "title_match", "params": ["keywords"], "template_language": "mustache",
         "template": {"match": {"title": "{{keywords}}"}}}, feature]}))
    r = cli("--url", engine_cluster.url, "featureset", "upload", str(path))
    assert r.returncode == 2, r.stdout + r.stderr
    line = r.stderr.strip().splitlines()
    assert len(line) == 1 and "Traceback" not in r.stderr
    assert "doubled" in line[0] and absent in line[0]
    if absent == "expression":
        assert "lang-expression" in line[0]
    assert st.get_featureset(conn, name) is None


def test_shipped_sets_load_with_the_engines_semantic_feature(engine_cluster):
    conn = engine_cluster.conn()
    st.init_store(conn, None)
    fs = load_featureset(cranfield.FEATURE_SET)
    name = f"shipped-{uuid.uuid4().hex[:6]}"
    st.upload_featureset(conn, dict(fs, name=name))
    stored = st.get_featureset(conn, name)["featureset"]["features"]
    cosine = next(f for f in stored if f["name"] == "query_doc_cosine")
    assert semantic_field(cosine) == "vector"
    es = engine_cluster.engine == "elasticsearch"
    assert (WINDOW_IDS in cosine["params"]) == es
    assert cosine["template"].startswith('{"knn"') == es and ("knn_score" in cosine["template"]) != es
    lexical = load_featureset(cranfield.LEXICAL_FEATURE_SET)
    st.upload_featureset(conn, dict(lexical, name=name + "-lex"))
    assert st.get_featureset(conn, name + "-lex")["featureset"]["features"] == lexical["features"]


def test_semantic_feature_value_is_the_engines_transform_of_the_cosine(engine_cluster, engine_cranfield,
                                                                        tmp_path):
    """The logged value of every candidate is the engine's stated function of the exact
    cosine between the query's vector and the document's ((1 + cos) / 2 on both; on
    Elasticsearch every candidate of the window scored through the ids filter)."""
    from ltr_toolkit.features.featurelog import log_features
    from ltr_toolkit.features.candidates import candidate_judgments
    from ltr_toolkit.data.svmlight import load_logged
    from ltr_toolkit.indexing.vectors import document_text, document_vectors
    conn, index = engine_cluster.conn(), engine_cranfield["index"]
    fs = load_featureset(cranfield.FEATURE_SET)
    name = f"cos-{uuid.uuid4().hex[:6]}"
    st.init_store(conn, None)           # whichever test runs first on this node
    st.upload_featureset(conn, dict(fs, name=name))
    jl = cranfield.split_judgments("test")
    jl = jl.subset(jl.judged_qids()[:3])
    cands, _ = candidate_judgments(conn, index, jl, 50)
    out = tmp_path / "cos.txt"
    log_features(conn, cands, name, index, out)
    ds = load_logged(out)
    col = [f["name"] for f in fs["features"]].index("query_doc_cosine")
    enc = load_encoder()
    docs = {str(d["id"]): d for d in cranfield.documents()}
    texts = [document_text(docs[d], ("title", "abstract")) for d in ds.doc_ids]
    dvec = document_vectors(enc, texts)
    queries = ds.qids[ds.row_query]
    to_vector = query_vectors(enc)
    qvec = {q: np.asarray(to_vector([jl.queries[q]])[0]) for q in set(queries)}
    cos = np.array([float(np.dot(qvec[q], v)) for q, v in zip(queries, dvec)])
    kind = detect(conn).vectors
    assert not np.isnan(ds.X[:, col]).any()            # every candidate scored
    got = np.array([kind.cosine(v) for v in ds.X[:, col]])
    assert len(got) >= 100
    np.testing.assert_allclose(got, cos, atol=2e-4)
    print(f"{engine_cluster.engine}: value = {kind.score}; max |cos diff| {np.abs(got - cos).max():.2e}")


# ----------------------------------------------------------------- every command, each engine

def _ok(r):
    assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr
    return r.stdout


def _ubi_on(conn, qi: str, ev: str) -> int:
    """Simulated UBI searches and clicks of the last two days written to the node's UBI
    indices (in its engine's mapping types); the number of events."""
    import datetime as dt
    from ltr_toolkit.clicks import simulate as S
    from ltr_toolkit.clicks.events import ubi
    rankings = {f"q{i}": [f"d{(i * 7 + r) % 90}" for r in range(10)] for i in range(20)}
    truth = {(q, d): float(int(d[1:]) % 5) for q, ds in rankings.items() for d in ds}
    now = dt.datetime.now(dt.timezone.utc)
    sim = S.simulate(rankings, {q: f"query {q}" for q in rankings}, truth, 600, seed=5,
                     start=now - dt.timedelta(days=2), seconds=86400)
    docs = list(S.ubi_documents(sim))
    ubi.create_indices(conn, qi, ev, recreate=True)
    ubi.write_documents(conn, docs, qi, ev)
    return sum(k == "ubi_events" for k, _ in docs)


def test_every_command_on_each_engine(engine_cluster, engine_cranfield, cli, tmp_path):
    """The loop a user runs, by the CLI, on each engine: feature set, logging, training,
    upload, the stored models, search with and without the model, explanation, live
    evaluation, interleaving, feature cost, a scheduled job, and judgments from the
    cluster's UBI indices (read with a point in time)."""
    url, index = engine_cluster.url, engine_cranfield["index"]

    def run(*args):
        return _ok(cli("--url", url, *args))
    tag = uuid.uuid4().hex[:6]
    run("store", "init")
    out = run("featureset", "upload", str(cranfield.FEATURE_SET))
    fs = out.split()[2]
    train_j, test_j = tmp_path / "train.txt", tmp_path / "test.txt"
    run("judgments", "cranfield", "--split", "train", "-o", str(train_j))
    run("judgments", "cranfield", "--split", "test", "-o", str(test_j))
    logged = tmp_path / "logged.txt"
    run("log", str(train_j), "--featureset", fs, "--fields", "title,abstract", "--index", index, "--window", "30", "-o", str(logged))
    for algo, extra in (("lambdamart", ["--trees", "30"]), ("linear", ["--epochs", "5"])):
        _ok(cli("train", str(logged), "--algo", algo, "-o", str(tmp_path / f"{algo}.json"),
                *extra))
        run("model", "upload", str(tmp_path / f"{algo}.json"), "--name", f"walk-{algo}-{tag}", "--exact",
            "--index", index)
    models = run("model", "list")
    assert f"walk-lambdamart-{tag}" in models and f"walk-linear-{tag}" in models
    mart, lin = f"walk-lambdamart-{tag}", f"walk-linear-{tag}"
    assert "1" in run("query", "search", "boundary layer flow", "--fields", "title,abstract", "--index", index)
    assert run("query", "search", "boundary layer flow", "--index", index, "--model", mart).strip()
    explained = json.loads(run("query", "explain", "boundary layer flow", "--index", index, "--model", mart, "--json"))
    assert explained["documents"]
    report = tmp_path / "eval.json"
    run("evaluate", "models", str(test_j), "--index", index, "--model", mart, "--model", lin, "-o", str(report))
    assert set(json.loads(report.read_text())["systems"]) >= {mart, lin}
    assert "team" in run("query", "search", "boundary layer flow", "--fields", "title,abstract", "--index", index, "--interleave", f"{mart},{lin}").lower()
    run("featureset", "cost", fs, str(test_j), "--fields", "title,abstract", "--index", index, "--folds", "2",
        "--timing-queries", "5", "--passes", "1", "--workdir", str(tmp_path / "cost"),
        "-o", str(tmp_path / "cost.json"))
    job = tmp_path / "job.toml"
    job.write_text(f'[cluster]\nurl = "{url}"\n\n[logging]\nfeatureset = "{fs}"\nindex = "{index}"\n'
                   f'judgments = "{test_j}"\n\n[output]\ndirectory = "{tmp_path / "job-out"}"\n')
    run("job", "run", str(job))
    assert list((tmp_path / "job-out").rglob("*.txt"))
    qi, ev = f"walk_ubi_queries_{tag}", f"walk_ubi_events_{tag}"
    try:
        events = _ubi_on(engine_cluster.conn(), qi, ev)
        clicks = tmp_path / "clicks.csv"
        out = run("judgments", "clicks", "--days", "7", "--queries-index", qi,
                  "--events-index", ev, "--click-model", "pbm", "--min-impressions", "3", "-o", str(clicks))
        assert clicks.is_file() and len(clicks.read_text().splitlines()) > 10, out
        assert events > 0
    finally:
        engine_cluster.conn().client().indices.delete(index=f"{qi},{ev}", ignore_unavailable=True)


# ----------------------------------------------------------------- Elasticsearch's native LTR

@pytest.fixture(scope="module")
def tree_model(tmp_path_factory):
    from ltr_toolkit.pipeline.train import train_from_files
    path = tmp_path_factory.mktemp("native") / "mart.json"
    data = __import__("pathlib").Path(__file__).parent / "data" / "cranfield-lexical-top100.txt"
    train_from_files(data, algo="lambdamart", output=path, seed=1, trees=10, depth=3, lr=0.1)
    return path


def test_native_upload_names_what_the_cluster_lacks(engine_cluster, tree_model, cli):
    """`ltr upload --target elasticsearch` on a node without x-pack-ml (the test
    distribution) or on OpenSearch: one line naming what is missing, exit 2, nothing
    created (no trained model: the refusal comes before any PUT; no plugin model either)."""
    name = f"native-{uuid.uuid4().hex[:6]}"
    r = cli("--url", engine_cluster.url, "model", "upload", str(tree_model), "--name", name,
            "--target", "elasticsearch", "--alias", "ranker", "--featureset",
            str(cranfield.LEXICAL_FEATURE_SET))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1
    need = ("no machine-learning APIs" if engine_cluster.engine == "elasticsearch"
            else "is OpenSearch")
    assert need in lines[0], lines[0]
    from ltr_toolkit.stores.model_store import get_model
    assert get_model(engine_cluster.conn(), name, None) is None


def test_show_request_prints_the_native_rescorer(cli):
    r = cli("--url", "http://127.0.0.1:9", "query", "search", "boundary layer", "--index", "cranfield", "--model", "ranker",
            "--target", "elasticsearch", "--window", "50", "--show-request")
    assert r.returncode == 0, r.stderr
    body = json.loads(r.stdout)
    assert body["rescore"] == {"window_size": 50, "learning_to_rank": {
        "model_id": "ranker", "params": {"keywords": "boundary layer"}}}
    assert body["query"]["multi_match"]["query"] == "boundary layer"


@pytest.mark.cluster
@pytest.mark.ltr
def test_elasticsearch_cluster_of_two_nodes_lifecycle(fresh_home, cli):
    """`ltr cluster start --engine elasticsearch --nodes 2` in a fresh state dir: two real
    Elasticsearch nodes with the plugin form one green cluster, an index of 2 shards and 1
    replica spreads over both, the plugin answers; `ltr cluster stop` stops exactly their
    pids."""
    zip_path = plugins.supplied_plugin_zip(ELASTICSEARCH_DIST)
    if zip_path is None:
        pytest.skip(f"no LTR plugin zip for Elasticsearch in {plugins.plugin_dir()} "
                    f"(or {ELASTICSEARCH_DIST.zip_env})")
    env = {"LTR_HOME": str(fresh_home / "home"), "LTR_URL": "", ELASTICSEARCH_DIST.zip_env: str(zip_path)}
    r = cli("--engine", "elasticsearch", "cluster", "start", "--nodes", "2", env=env, timeout=900)
    assert r.returncode == 0, r.stderr
    nodes = json.loads((fresh_home / "home" / ELASTICSEARCH_DIST.state_file("cluster.json")).read_text())["nodes"]
    try:
        conn = Connection(url=nodes[0]["url"])
        assert detect(conn).name == "elasticsearch" and len(nodes) == 2
        c = conn.client()
        c.indices.create(index="spread", body={"settings": {"number_of_shards": 2, "number_of_replicas": 1}})
        # the query string carries `timeout`: opensearch-py takes a `timeout` param as its own
        health = c.transport.perform_request(
            "GET", "/_cluster/health/spread?wait_for_status=green&timeout=60s")
        assert health["status"] == "green" and health["number_of_nodes"] == 2
        assert len({s["node"] for s in c.cat.shards(index="spread", format="json")}) == 2
        r = cli("--url", nodes[1]["url"], "store", "init", env=env)
        assert r.returncode == 0, r.stderr
    finally:
        stop = cli("--engine", "elasticsearch", "cluster", "stop", env=env)
    assert stop.returncode == 0 and all(str(n["pid"]) in stop.stdout for n in nodes), stop.stdout
    deadline = time.monotonic() + 10      # reaped by init once they exit
    while any(Path(f"/proc/{n['pid']}").exists() for n in nodes) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(Path(f"/proc/{n['pid']}").exists() for n in nodes)
