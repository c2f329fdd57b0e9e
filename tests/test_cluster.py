"""Foundation tests against the real local node: CLI status, error paths, lifecycle."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from ltr_toolkit.localnode import java as jdk, maven, plugins, process, provision
from ltr_toolkit.stores import store as st
from ltr_toolkit import versions

pytestmark = pytest.mark.cluster


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_status_reports_version_plugin_and_health(cluster, cli):
    r = cli("--url", cluster.url, "cluster", "status")
    assert r.returncode == 0, r.stderr
    assert versions.OPENSEARCH_VERSION in r.stdout
    assert "ltr plugin" in r.stdout
    assert (cluster.ltr_version or "not installed") in r.stdout
    assert "green" in r.stdout or "yellow" in r.stdout


def test_status_exit_1_when_nothing_answers(cli):
    r = cli("--url", f"http://127.0.0.1:{_closed_port()}", "cluster", "status")
    assert r.returncode == 1
    assert "no cluster answers" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


@pytest.mark.parametrize("args", [["store", "list"], ["store", "init"], ["featureset", "list"]])
def test_no_cluster_is_one_line_exit_2(cli, args):
    r = cli("--url", f"http://127.0.0.1:{_closed_port()}", *args)
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: no cluster answers"), r.stderr
    assert "ltr cluster start" in lines[0]


def test_credentials_never_echoed(cli):
    r = cli("--url", f"http://127.0.0.1:{_closed_port()}", "store", "list",
            env={"LTR_USER": "alice", "LTR_PASSWORD": "s3cret-pw"})
    assert r.returncode == 2
    assert "s3cret-pw" not in r.stderr + r.stdout
    r = cli("--url", f"http://bob:hunter2@127.0.0.1:{_closed_port()}", "store", "list")
    assert r.returncode == 2 and "--url carries credentials" in r.stderr   # refused on argv
    assert "hunter2" not in r.stderr + r.stdout
    r = cli("store", "list", env={"LTR_URL": f"http://bob:hunter2@127.0.0.1:{_closed_port()}"})
    assert r.returncode == 2 and "no cluster answers" in r.stderr         # the environment is fine
    assert "hunter2" not in r.stderr + r.stdout


def test_missing_plugin_named(cluster, cli):
    if cluster.ltr_version is not None:
        pytest.skip("this node has the LTR plugin; the missing-plugin path needs one without")
    r = cli("--url", cluster.url, "store", "list")
    assert r.returncode == 2
    assert "LTR plugin is not installed" in r.stderr
    assert "Traceback" not in r.stderr


def test_second_start_reports_running_node(cluster):
    if not cluster.started:
        pytest.skip("the suite uses LTR_TEST_URL or a node it did not start")
    info, started = process.start(require_plugin=False)
    assert not started
    assert info.url == cluster.url


def test_cli_lifecycle_in_fresh_home(fresh_home, cli, tmp_path):
    """`ltr cluster start && status && stop` in a separate state dir; no process left.
    Then a second cycle in the same dir (the pid file is read as OpenSearch writes it: it
    once read empty) with --no-knn: no vectors (said so), the semantic feature set refused
    naming the plugin, the lexical set uploaded and logged."""
    env = {"LTR_HOME": str(fresh_home / "home"), "LTR_URL": ""}
    supplied = plugins.supplied_plugin_zip()   # the main state dir's plugins/ folder
    if supplied is not None:
        env["LTR_PLUGIN_ZIP"] = str(supplied)
    start_args = ["cluster", "start"]
    probe = cli(*start_args, env=env, timeout=900)
    assert probe.returncode == 0, probe.stderr
    info = process.NodeInfo(**__import__("json").loads((fresh_home / "home" / "node.json").read_text()))
    try:
        assert Path(f"/proc/{info.pid}").exists()
        again = cli(*start_args, env=env)
        assert again.returncode == 0 and "already runs" in again.stdout
        status = cli("--url", info.url, "cluster", "status", env=env)
        assert status.returncode == 0 and versions.OPENSEARCH_VERSION in status.stdout
    finally:
        stop = cli("cluster", "stop", env=env)
    assert stop.returncode == 0 and f"stopped pid {info.pid}" in stop.stdout
    deadline = time.monotonic() + 10
    while Path(f"/proc/{info.pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{info.pid}").exists()
    status = cli("--url", info.url, "cluster", "status", env=env)
    assert status.returncode == 1
    r = cli(*start_args, "--no-knn", env=env, timeout=600)
    assert r.returncode == 0 and "healthy" in r.stdout, r.stderr
    url = __import__("json").loads((fresh_home / "home" / "node.json").read_text())["url"]
    try:
        _lexical_path_without_knn(cli, url, env, tmp_path)
    finally:
        r = cli("cluster", "stop", env=env)
    assert r.returncode == 0 and "stopped pid" in r.stdout, r.stderr


def _lexical_path_without_knn(cli, url, env, tmp_path):
    from ltr_toolkit.datasets import cranfield
    r = cli("--url", url, "cluster", "status", env=env)
    assert "no k-NN plugin (lexical features only)" in r.stdout
    r = cli("--url", url, "index", "cranfield", "--index", "lex", env=env)
    assert r.returncode == 0 and "no k-NN plugin" in r.stderr, r.stderr
    assert cli("--url", url, "store", "init", env=env).returncode == 0
    root = cranfield.FEATURE_SET.parent
    r = cli("--url", url, "featureset", "upload", str(root / "featureset.json"), env=env)
    assert r.returncode == 2 and "opensearch-knn" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = cli("--url", url, "featureset", "upload", str(cranfield.LEXICAL_FEATURE_SET), env=env)
    assert r.returncode == 0, r.stderr
    jl = cranfield.split_judgments("test")
    jfile = tmp_path / "j.txt"
    jfile.write_text("".join(f"# qid:{q}: {jl.queries[q]}\n" + "".join(
        f"{int(g)} qid:{q} # {d}\n" for d, g in jl.docs_of(q)) for q in jl.judged_qids()[:3]))
    r = cli("--url", url, "log", str(jfile), "--featureset", "cranfield-lexical", "--fields", "title,abstract",
            "--index", "lex", "-o", str(tmp_path / "lex.txt"), env=env)
    assert r.returncode == 0 and (tmp_path / "lex.txt").read_text().count("qid:") > 10, r.stderr


def test_supplied_plugin_zip_lookup(monkeypatch, tmp_path):
    monkeypatch.delenv("LTR_PLUGIN_ZIP", raising=False)
    monkeypatch.setenv("LTR_HOME", str(tmp_path))
    assert plugins.supplied_plugin_zip() is None
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "notes.txt").write_text("x")
    (folder / "opensearch-ltr-2.19.0.0.zip").write_bytes(b"old")
    assert plugins.supplied_plugin_zip() == folder / "opensearch-ltr-2.19.0.0.zip"
    pinned = folder / f"ltr-{versions.LTR_PLUGIN_VERSION}.zip"
    pinned.write_bytes(b"pinned")
    assert plugins.supplied_plugin_zip() == pinned
    other = tmp_path / "elsewhere.zip"
    monkeypatch.setenv("LTR_PLUGIN_ZIP", str(other))
    from ltr_toolkit.errors import ProvisionError
    with pytest.raises(ProvisionError, match="no such file"):
        plugins.supplied_plugin_zip()
    other.write_bytes(b"z")
    assert plugins.supplied_plugin_zip() == other


def test_pid_file_is_read_only_when_whole(tmp_path):
    """The race seen once: the file exists before its content does."""
    import threading
    pidfile = tmp_path / "opensearch.pid"
    pidfile.write_text("")
    gone = 2 ** 22 + 12345          # above pid_max: never a live process
    threading.Timer(0.5, lambda: pidfile.write_text(f"{gone}\n")).start()
    t0 = time.monotonic()
    assert process._read_pid(pidfile, "/nowhere", time.monotonic() + 10) == gone
    assert time.monotonic() - t0 >= 0.4
    pidfile.write_text("")
    assert process._read_pid(pidfile, "/nowhere", time.monotonic() + 0.5) is None


def test_java_discovery_finds_supported_jdk():
    java = jdk.find_java()
    assert java.version >= versions.MIN_JAVA
    assert (java.home / "bin" / "java").is_file()


def test_java_discovery_names_what_it_found(monkeypatch, tmp_path):
    # an environment with no usable JDK: the error names what it saw
    fake = tmp_path / "jdk8"
    (fake / "bin").mkdir(parents=True)
    (fake / "bin" / "java").write_text("")
    (fake / "release").write_text('JAVA_VERSION="1.8.0_352"\n')
    monkeypatch.setenv("JAVA_HOME", str(fake))
    monkeypatch.delenv("OPENSEARCH_JAVA_HOME", raising=False)
    monkeypatch.setattr(jdk, "_java_version",
                        lambda home: 8 if home == fake else None)
    from ltr_toolkit.errors import ProvisionError
    with pytest.raises(ProvisionError) as ei:
        jdk.find_java()
    assert "no Java >= 21" in str(ei.value) and str(fake) in str(ei.value)


def test_artifacts_cached():
    path = maven.artifact_path(versions.OPENSEARCH_ARTIFACT)
    assert path.is_file()
    t0 = time.monotonic()
    again, downloaded = maven.resolve_artifact(versions.OPENSEARCH_ARTIFACT)
    assert again == path and not downloaded
    assert time.monotonic() - t0 < 1.0


# ----------------------------------------------------------------- with the LTR plugin

TRIVIAL_SET = {
    "name": "trivial",
    "features": [
        {"name": "title_match", "params": ["keywords"], "template_language": "mustache",
         "template": {"match": {"title": "{{keywords}}"}}},
        {"name": "body_match", "params": ["keywords"], "template_language": "mustache",
         "template": {"match": {"body": "{{keywords}}"}}},
    ],
}


@pytest.mark.ltr
def test_store_featureset_and_sltr_query(ltr_cluster):
    conn = ltr_cluster.conn()
    store = f"t{uuid.uuid4().hex[:8]}"
    index = f"tiny-{store}"
    c = conn.client()
    try:
        assert st.init_store(conn, store)
        assert not st.init_store(conn, store)
        st.upload_featureset(conn, TRIVIAL_SET, store)
        got = st.get_featureset(conn, "trivial", store)
        assert [f["name"] for f in got["featureset"]["features"]] == ["title_match", "body_match"]
        c.index(index=index, id="1", body={"title": "wing flutter", "body": "flutter of wings"})
        c.index(index=index, id="2", body={"title": "boundary layer", "body": "heat transfer"})
        c.indices.refresh(index=index)
        body = {"query": {"bool": {
            "filter": [{"terms": {"_id": ["1", "2"]}}],
            "should": [st.sltr({"keywords": "flutter"}, featureset="trivial", store=store,
                               name="logged")]}},
            "ext": {"ltr_log": {"log_specs": [{"name": "main", "named_query": "logged",
                                               "missing_as_zero": True}]}}}
        resp = c.search(index=index, body=body)
        hits = {h["_id"]: h for h in resp["hits"]["hits"]}
        assert set(hits) == {"1", "2"}
        log1 = hits["1"]["fields"]["_ltrlog"][0]["main"]
        assert [f["name"] for f in log1] == ["title_match", "body_match"]
        assert log1[0]["value"] > 0
        log2 = hits["2"]["fields"]["_ltrlog"][0]["main"]
        assert log2[0]["value"] == 0
    finally:
        c.indices.delete(index=index, ignore_unavailable=True)
        st.drop_store(conn, store)
    assert not st.store_exists(conn, store)


@pytest.mark.ltr
def test_missing_store_named(ltr_cluster, cli):
    r = cli("--url", ltr_cluster.url, "featureset", "list", "--store", "does_not_exist_x")
    assert r.returncode == 2
    assert "does_not_exist_x does not exist" in r.stderr and "ltr store init" in r.stderr


def test_docker_compose_config():
    docker = shutil.which("docker")
    if not docker:
        pytest.skip("no docker client on this machine")
    r = subprocess.run([docker, "compose", "version"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("docker client has no compose plugin")
    root = Path(__file__).resolve().parent.parent
    r = subprocess.run([docker, "compose", "-f", str(root / "docker-compose.yml"), "config",
                        "--format", "json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    cfg = __import__("json").loads(r.stdout)
    svc = next(iter(cfg["services"].values()))
    assert svc["image"] == versions.DOCKER_IMAGE
    assert "healthcheck" in svc
    assert any(str(p.get("published")) == "9200" for p in svc["ports"])
    env = svc["environment"]
    assert env.get("discovery.type") == "single-node"
    assert env.get("DISABLE_SECURITY_PLUGIN") == "true"


def test_unreachable_state_dir_named(monkeypatch, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only root runs the node as `nobody`")
    from ltr_toolkit.errors import ProvisionError
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    os.chmod(tmp_path, 0o700)
    monkeypatch.setenv("LTR_HOME", str(locked / "home"))
    with pytest.raises(ProvisionError, match="cannot enter"):
        provision.provision(require_plugin=False)


def test_the_plugins_memory_breaker_is_named_with_its_fixes():
    """The answer the plugin gave this project's node when its heap was over 85% used
    (creating a model); the toolkit asks again for a while, then says why and what to do."""
    from opensearchpy import exceptions as E
    from ltr_toolkit.transport import client as C
    reason = "Store [.ltrstore] creating model is not allowed as memory circuit is broken."
    exc = E.TransportError(500, "exception", {"error": {"root_cause": [{"type": "exception", "reason": reason}],
                                                        "type": "exception", "reason": reason}, "status": 500})
    assert C._breaker_open(exc)
    assert not C._breaker_open(E.TransportError(500, "exception", {"error": {"reason": "boom"}}))
    err = C.translate(exc, C.Connection(url="http://127.0.0.1:9200"), None)
    assert "heap" in str(err) and "85%" in str(err) and "ltr.breaker.enabled" in err.hint
