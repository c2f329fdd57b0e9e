"""Clusters as users run them, live: `ltr cluster start --nodes 3` (three real OpenSearch
nodes with the plugin, stopped exactly by their pids), an index of 3 shards and 1 replica.

* Served scores equal `ltr predict`'s for a tree and a linear model whichever copy
  answers (primaries, replicas).
* A model uploaded, replaced (a new version: models are immutable) and deleted is seen
  the same by every node (the plugin caches models per node).
* A logging job keeps running when a data node is SIGKILLed mid-run, and its rows equal
  an undisturbed run's.
* A job on a red index says so in one line and exits 2; on a yellow one it warns in one
  line and runs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, run_cli

pytestmark = [pytest.mark.cluster, pytest.mark.ltr]
INDEX = "cran-3x2"


def _env(home: Path) -> dict:
    from ltr_toolkit.localnode import plugins
    env = {"LTR_HOME": str(home), "LTR_URL": ""}
    zip_path = plugins.supplied_plugin_zip()
    if zip_path is None:
        pytest.skip(f"no LTR plugin zip in {plugins.plugin_dir()} (or LTR_PLUGIN_ZIP)")
    env["LTR_PLUGIN_ZIP"] = str(zip_path)
    return env


@pytest.fixture(scope="module")
def three():
    """A 3-node cluster in its own state dir (reachable by `nobody`), the Cranfield index
    (3 shards, 1 replica), the store and feature set; stopped by pid at the end."""
    base = Path(tempfile.mkdtemp(prefix="ltr-three-", dir="/var/tmp"))
    os.chmod(base, 0o755)
    home = base / "home"
    env = _env(home)
    r = run_cli("cluster", "start", "--nodes", "3", env=env, timeout=900)
    assert r.returncode == 0, r.stderr
    nodes = json.loads((home / "cluster.json").read_text())["nodes"]
    url = nodes[0]["url"]
    try:
        for args in (("index", "cranfield", "--index", INDEX, "--shards", "3", "--replicas", "1"),
                     ("store", "init"),
                     ("featureset", "upload", str(ROOT / "feature_sets" / "cranfield.json"))):
            r = run_cli("--url", url, *args, env=env)
            assert r.returncode == 0, r.stderr
        yield {"home": home, "env": env, "nodes": nodes, "url": url, "dir": base}
    finally:
        r = run_cli("cluster", "stop", env=env, timeout=300)
        pids = [n["pid"] for n in nodes]
        shutil.rmtree(base, ignore_errors=True)
        assert r.returncode == 0, r.stderr
        assert not [p for p in pids if Path(f"/proc/{p}").exists() and
                    b"OpenSearch" in Path(f"/proc/{p}/cmdline").read_bytes()]


def _conn(url):
    from ltr_toolkit.transport.client import Connection
    return Connection(url=url, timeout=60)


def test_cluster_of_three_nodes_each_with_the_plugin(three):
    health = _conn(three["url"]).client().cluster.health(index=INDEX)
    assert health["number_of_nodes"] == 3 and health["status"] == "green"
    assert health["active_shards"] == 6                 # 3 primaries + 3 replicas
    for node in three["nodes"]:
        r = run_cli("--url", node["url"], "cluster", "status", env=three["env"])
        assert r.returncode == 0 and "3.6.0.0" in r.stdout, r.stderr


@pytest.fixture(scope="module")
def models(three):
    """Candidates logged on the cluster, a tree and a linear model trained and uploaded,
    and `ltr predict`'s scores of the candidates."""
    d, env, url = three["dir"], three["env"], three["url"]
    r = run_cli("judgments", "cranfield", "--split", "test", "-o", str(d / "j.txt"))
    assert r.returncode == 0, r.stderr
    r = run_cli("--url", url, "log", str(d / "j.txt"), "--featureset", "cranfield", "--index",
                INDEX, "--fields", "title,abstract", "--window", "30", "-o", str(d / "c.txt"), env=env)
    assert r.returncode == 0, r.stderr
    out = {}
    for algo, extra in (("lambdamart", ["--trees", "30", "--depth", "3"]), ("linear", ["--epochs", "3"])):
        m = d / f"{algo}.json"
        for args in (("train", str(d / "c.txt"), "--algo", algo, *extra, "-o", str(m)),
                     ("predict", str(m), str(d / "c.txt"), "-o", str(d / f"{algo}.scores"))):
            r = run_cli(*args, env=env)
            assert r.returncode == 0, r.stderr
        r = run_cli("--url", url, "model", "upload", str(m), "--name", f"mn-{algo}", "--featureset",
                    "cranfield", env=env)
        assert r.returncode == 0, r.stderr
        out[algo] = (r.stdout.split("uploaded ")[1].split()[0], np.loadtxt(d / f"{algo}.scores"))
    return out


def _served(url, model, preference, rows):
    """The plugin's scores of the logged candidate rows (qid, docid, params), with the
    term statistics they were logged with (the default: dfs)."""
    from ltr_toolkit.query.firststage import FirstStage
    from ltr_toolkit.stores.store import sltr
    c = _conn(url).client()
    got = []
    for qid, docs, params in rows:
        body = {"size": len(docs), "_source": False, "query": {"bool": {
            "filter": [{"ids": {"values": docs}}], "should": [sltr(params, model=model)]}}}
        hits = c.search(index=INDEX, body=body, params={
            "preference": preference, "search_type": FirstStage.from_fields().search_type})["hits"]["hits"]
        score = {h["_id"]: h["_score"] for h in hits}
        got += [score[d] for d in docs]
    return np.array(got)


def _rows(three):
    from ltr_toolkit.query.firststage import FirstStage
    from ltr_toolkit.stores.params import with_first_stage_ids
    from ltr_toolkit.query.requests import msearch_ids
    from ltr_toolkit.data.judgments import load_judgments
    jl = load_judgments(three["dir"] / "j.txt")
    order: dict[str, list[str]] = {}
    for line in (three["dir"] / "c.txt").read_text().splitlines()[1:]:     # after the header
        order.setdefault(line.split()[1][4:], []).append(line.split("#")[1].strip())
    qids = list(order)
    tops = msearch_ids(_conn(three["url"]), INDEX, [jl.query_params(q) for q in qids],
                       FirstStage.from_fields(), 10)
    from ltr_toolkit.indexing.vectors import with_query_vectors
    params = with_query_vectors(_conn(three["url"]), INDEX, [jl.query_params(q) for q in qids],
                                ["query_vector"])     # the shipped set's semantic feature
    return [(q, order[q], with_first_stage_ids(p, top, 10)) for q, p, top in zip(qids, params, tops)]


def test_served_scores_equal_ltr_predict_whichever_copy_answers(three, models):
    rows = _rows(three)
    for algo, (name, local) in models.items():
        for node in three["nodes"]:
            for pref in ("_primary", "_replica"):
                served = _served(node["url"], name, pref, rows)
                np.testing.assert_allclose(served, local, rtol=1e-5, atol=1e-5,
                                           err_msg=f"{algo} via {node['url']} {pref}")


def test_models_are_seen_the_same_by_every_node(three, models):
    rows = _rows(three)[:3]
    name = models["linear"][0]
    first = [_served(n["url"], name, "_primary", rows) for n in three["nodes"]]
    assert all(np.array_equal(first[0], f) for f in first)
    # a replacement is a new version; the old one stays as it was until deleted
    r = run_cli("--url", three["url"], "model", "upload", str(three["dir"] / "lambdamart.json"), "--name",
                "mn-linear", "--featureset", "cranfield", env=three["env"])
    assert r.returncode == 0, r.stderr
    newer = r.stdout.split("uploaded ")[1].split()[0]
    assert newer != name
    replaced = [_served(n["url"], newer, "_primary", rows) for n in three["nodes"]]
    assert all(np.array_equal(replaced[0], f) for f in replaced)
    assert not np.allclose(replaced[0], first[0])
    for n in three["nodes"]:                 # the old version is unchanged on every node
        assert np.array_equal(_served(n["url"], name, "_primary", rows), first[0])
    r = run_cli("--url", three["url"], "model", "delete", name, env=three["env"])
    assert r.returncode == 0, r.stderr
    for n in three["nodes"]:                 # deleted: no node serves it from its cache
        with pytest.raises(Exception, match="Unknown model"):
            _served(n["url"], name, "_primary", rows)


def _job(three, out: str) -> Path:
    d = three["dir"]
    path = d / f"{out}.toml"
    path.write_text("\n".join([
        "[cluster]", f'url = "{three["url"]}"', "timeout = 60", "[logging]",
        'featureset = "cranfield"', f'index = "{INDEX}"', f'judgments = "{d / "all.txt"}"',
        "candidates = 60", "batch = 5", "[output]", f'directory = "{d / out}"', "keep = 2"]) + "\n")
    return path


def _rows_of(snapshot: Path) -> list[str]:
    """The logged rows, each run of candidates tied on the first stage's score (feature 1)
    in a fixed order: which copy answers decides the order of ties (its segment layout)."""
    from itertools import groupby
    rows = (snapshot / "latest" / "features.txt").read_text().splitlines()[1:]   # no header
    tie = lambda r: (r.split()[1], next((t for t in r.split() if t.startswith("1:")), ""))
    return [r for _, group in groupby(rows, key=tie) for r in sorted(group)]


def test_a_logging_job_survives_a_node_killed_mid_run(three, models):
    d, env = three["dir"], three["env"]
    r = run_cli("judgments", "cranfield", "--split", "all", "-o", str(d / "all.txt"))
    assert r.returncode == 0, r.stderr
    r = run_cli("job", "run", str(_job(three, "ref")), "--json", env=env, timeout=900)
    assert r.returncode == 0, r.stderr
    ref = _rows_of(d / "ref")
    job = subprocess.Popen([sys.executable, "-m", "ltr_toolkit.cli", "job", "run",
                            str(_job(three, "killed")), "--json"], cwd=str(ROOT),
                           env=dict(os.environ, **env), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    work = d / "killed" / ".work"
    deadline = time.monotonic() + 300
    while not list(work.glob("features.txt.partial")) and time.monotonic() < deadline:
        time.sleep(0.05)                     # logging has begun
    time.sleep(0.5)
    victim = three["nodes"][2]               # a data node the job does not talk to
    os.kill(victim["pid"], signal.SIGKILL)
    out, err = job.communicate(timeout=900)
    assert job.returncode == 0, err
    manifest = json.loads(out)
    assert manifest["status"] == "complete" and manifest["counts"]["failed_queries"] == 0
    assert _rows_of(d / "killed") == ref
    print(f"rows {len(ref)}; retried items {manifest['counts']['retried_items']}")


def test_a_job_on_a_red_index_says_so_and_on_a_yellow_one_runs(three, models):
    """After the kill (previous test) node 3 is gone: an index whose shard copies lived
    only there is red; one asking for more replicas than 2 nodes hold is yellow."""
    from ltr_toolkit.indexing.documents import index_documents
    from ltr_toolkit.datasets import cranfield
    conn = _conn(three["url"])
    if Path(f"/proc/{three['nodes'][2]['pid']}").exists():
        os.kill(three["nodes"][2]["pid"], signal.SIGKILL)
    red = "cran-red"
    c = conn.client()
    c.indices.create(index=red, body={"settings": {
        "number_of_shards": 1, "number_of_replicas": 0,
        "index.routing.allocation.require._name": "ltr-node-3"}},   # cannot be allocated
        params={"wait_for_active_shards": "0"})
    index_documents(conn, "cran-yellow", cranfield.documents()[:50], recreate=True, replicas=2)
    d = three["dir"]
    for name, index in (("red", red), ("yellow", "cran-yellow")):
        path = d / f"{name}.toml"
        path.write_text(_job(three, name).read_text().replace(f'index = "{INDEX}"', f'index = "{index}"'))
    r = run_cli("job", "run", str(d / "red.toml"), env=three["env"], timeout=300)
    assert r.returncode == 2 and "is red" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (d / "red" / "latest").exists()
    r = run_cli("job", "run", str(d / "yellow.toml"), env=three["env"], timeout=900)
    assert "is yellow" in r.stderr and "warning" in r.stderr, r.stderr
    assert r.returncode in (0, 3), r.stderr           # candidates among 50 docs: most judged docs missing
