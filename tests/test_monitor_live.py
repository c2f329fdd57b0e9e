"""`ltr monitor --model`: the deployed model's served scores against its artifact's, live
on the session's Cranfield index, on each engine: equal for the artifact it was uploaded from, `broken`
(exit 6, named) when the stored model is not that artifact."""

from __future__ import annotations

import json
import uuid

import numpy as np

import pytest

from ltr_toolkit.cli import main
from ltr_toolkit.data.featuresets import load_featureset
from ltr_toolkit.data.judgments import save_ranklib
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.pipeline.train import load_model, train_from_files
from ltr_toolkit.query.firststage import FirstStage
from ltr_toolkit.serving.serving import Serving
from ltr_toolkit.stores import store as st
from ltr_toolkit.stores.model_store import upload

pytestmark = [pytest.mark.cluster, pytest.mark.ltr]
ALGOS = {"lambdamart": dict(trees=20, depth=3, lr=0.1), "linear": dict(epochs=5)}


@pytest.fixture(scope="module")
def served(engine_cluster, engine_cranfield, tmp_path_factory):
    """Two models (lambdamart, linear) trained on 40 logged queries and uploaded with their
    contracts; the judgments file and the logged file."""
    conn = engine_cluster.conn()
    st.init_store(conn, None)
    fs, _ = st.upload_featureset_versioned(conn, load_featureset(cranfield.LEXICAL_FEATURE_SET))
    index = engine_cranfield["index"]
    d = tmp_path_factory.mktemp("monlive")
    jl = cranfield.split_judgments("test")
    jl = jl.subset(jl.judged_qids()[:40])
    save_ranklib(jl, d / "j.txt")
    Serving(index, FirstStage.from_fields(("title", "abstract")), 30).log_candidates(conn, jl, fs, d / "ref.txt")
    tag, names = uuid.uuid4().hex[:6], {}
    for algo, kw in ALGOS.items():
        train_from_files(d / "ref.txt", algo=algo, output=d / f"{algo}.json", **kw)
        art, model = load_model(d / f"{algo}.json")
        names[algo] = upload(conn, art, model, f"monlive-{algo}-{tag}", fs)["name"]
    return engine_cluster.url, index, d, names


def _monitor(capsys, url, d, index, artifact, model, *extra):
    code = main(["--url", url, "monitor", str(d / "ref.txt"), str(d / "ref.txt"), "--artifact",
                 str(d / f"{artifact}.json"), "--model", model, "--index", index, "--judgments",
                 str(d / "j.txt"), "--live-queries", "6", *extra])
    return code, capsys.readouterr()


def test_the_served_model_scores_as_its_artifact(served, capsys):
    url, index, d, names = served
    for algo in ALGOS:
        code, out = _monitor(capsys, url, d, index, algo, names[algo], "--json")
        report = json.loads(out.out)
        live = report["live"]
        assert live["agree"] and live["queries"] + live["skipped"] == 6 and live["queries"] >= 5
        assert live["max_rel_diff"] <= 1e-4
        assert (code, report["verdict"]) == (0, "ok"), report["summary"]


def test_a_stored_model_that_is_not_the_artifact_is_broken(served, capsys):
    url, index, d, names = served
    code, out = _monitor(capsys, url, d, index, "linear", names["lambdamart"])
    assert code == 6
    line = next(ln for ln in out.out.splitlines() if "live:" in ln)
    assert names["lambdamart"] in line and "served and local scores differ" in line


def test_the_live_options_go_together(served, capsys):
    url, index, d, names = served
    ref = str(d / "ref.txt")
    assert main(["--url", url, "monitor", ref, ref, "--index", index]) == 2
    assert "go with --model" in capsys.readouterr().err
    assert main(["--url", url, "monitor", ref, ref, "--model", names["linear"]]) == 2
    err = capsys.readouterr().err
    assert "needs --index, --judgments, --artifact" in err and len(err.strip().splitlines()) == 1


def test_a_jobs_monitor_section_checks_the_model_live(served, tmp_path):
    """[monitor] model = NAME: the job's check serves its first live_queries judged queries."""
    import shutil
    from ltr_toolkit.jobs.jobfile import load_job
    from ltr_toolkit.pipeline.monitor import monitor_snapshot
    from ltr_toolkit.transport.client import Connection
    url, index, d, names = served
    for run in ("run-20260101T000000Z", "run-20260102T000000Z"):
        (tmp_path / "out" / run).mkdir(parents=True)
        for name in ("features.txt", "features.txt.json"):
            shutil.copy(d / name.replace("features", "ref"), tmp_path / "out" / run / name)
        (tmp_path / "out" / run / "manifest.json").write_text(json.dumps({"run_id": run}))
    job_file = tmp_path / "job.toml"
    job_file.write_text(f'[logging]\nfeatureset = "fs"\nindex = "{index}"\njudgments = "{d / "j.txt"}"\n'
                        f'[output]\ndirectory = "out"\n[monitor]\nartifact = "{d / "lambdamart.json"}"\n'
                        f'model = "{names["lambdamart"]}"\nlive_queries = 3\n')
    result = monitor_snapshot(load_job(job_file), tmp_path / "out" / "run-20260102T000000Z",
                              Connection(url=url))
    assert result.get("note") is None, result
    assert result["live"]["agree"] and result["live"]["queries"] + result["live"]["skipped"] == 3
    assert result["verdict"] == "ok"


# ------------------------------------------------------------------ issue 59's Why 1, live

@pytest.fixture(scope="module")
def growing(engine_cluster, engine_cranfield, tmp_path_factory):
    """A job whose judgment list grows, on an unchanged index: the first snapshot logs
    half of Cranfield's judged queries, the next one the other half (a seeded random
    half: new queries of the same collection; Cranfield's queries in id order are no
    random draw, and on Elasticsearch a BM25 feature of its second half differed from
    the first's beyond the drift level); a LambdaMART trained on two thirds of the first
    snapshot's queries, the last third its validation split (``ltr train --valid``: its
    held-out gains recorded)."""
    conn = engine_cluster.conn()
    st.init_store(conn, None)
    fs, _ = st.upload_featureset_versioned(conn, load_featureset(cranfield.LEXICAL_FEATURE_SET))
    index = engine_cranfield["index"]
    d = tmp_path_factory.mktemp("grow")
    jl = cranfield.judgments()
    qids = [str(q) for q in np.random.default_rng(0).permutation(jl.judged_qids())]
    half = len(qids) // 2
    parts = {"train": qids[: 2 * half // 3], "valid": qids[2 * half // 3: half], "new": qids[half:]}
    serving = Serving(index, FirstStage.from_fields(("title", "abstract")), 30)
    for name, part in parts.items():
        serving.log_candidates(conn, jl.subset(part), fs, d / f"{name}.txt")
    art = train_from_files(d / "train.txt", algo="lambdamart", valid=d / "valid.txt",
                           output=d / "model.json", trees=50, depth=3, lr=0.1)
    from ltr_toolkit.data.judgments import save_judgments
    save_judgments(jl.subset(parts["new"]), d / "new.qrels", "trec")
    for run, name in (("run-20260101T000000Z", "train"), ("run-20260102T000000Z", "new")):
        (d / "out" / run).mkdir(parents=True)
        for suffix in ("", ".json"):
            (d / "out" / run / f"features.txt{suffix}").write_bytes((d / f"{name}.txt{suffix}").read_bytes())
        (d / "out" / run / "manifest.json").write_text(json.dumps({"run_id": run}))
    return d, art, index, conn, fs


def test_new_judged_queries_on_an_unchanged_index_are_ok(growing, capsys):
    """Why 1: nothing changed, the new snapshot judges other queries of the same
    collection: ok, exit 0; the decay test held the new queries' gains against the
    held-out ones (the model was trained on neither)."""
    d, art, *_ = growing
    assert art["held_out"]["queries"] >= 20 and not art["held_out"]["selected_on"]
    for args in ([d / "train.txt", d / "new.txt"], [d / "out"]):
        code = main(["monitor", *map(str, args), "--artifact", str(d / "model.json"), "--json"])
        report = json.loads(capsys.readouterr().out)
        assert (code, report["verdict"]) == (0, "ok"), report["summary"]
        dec = report["decay"]
        assert dec["verdict"] == "ok" and dec["change"]["test"] == "two-sample"
        assert dec["change"]["queries"][1] == dec["now"]["queries"] > 50
        assert [f["feature"] for f in report["drift"]["features"] if f["flag"] != "ok"] == []


def test_a_jobs_check_of_the_growing_list_writes_ok_into_the_manifest(growing, tmp_path):
    """The job's [monitor] check takes the same path (pipeline.monitor.monitor) and writes
    the same verdict into the manifest."""
    from ltr_toolkit.jobs.jobfile import load_job
    from ltr_toolkit.jobs.runner import record_monitor
    from ltr_toolkit.pipeline.monitor import monitor_snapshot
    d, _, index, _, fs = growing
    job_file = d / "job.toml"
    job_file.write_text(f'[logging]\nfeatureset = "{fs}"\nindex = "{index}"\njudgments = "{d / "new.qrels"}"\n'
                        f'[output]\ndirectory = "out"\n[monitor]\nartifact = "{d / "model.json"}"\n')
    newest = d / "out" / "run-20260102T000000Z"
    result = record_monitor(newest, monitor_snapshot(load_job(job_file), newest))
    assert result["verdict"] == "ok" and result["model"]["verdict"] == "ok", result["summary"]
    assert json.loads((newest / "manifest.json").read_text())["monitor"]["verdict"] == "ok"


def test_the_live_check_reads_trec_judgments(growing, served, capsys):
    """--judgments takes what the other commands take: TREC qrels with their queries file."""
    d, *_ = growing
    url, index, dd, names = served
    code = main(["--url", url, "monitor", str(dd / "ref.txt"), str(dd / "ref.txt"), "--artifact",
                 str(dd / "lambdamart.json"), "--model", names["lambdamart"], "--index", index,
                 "--judgments", str(d / "new.qrels"), "--input-format", "trec", "--queries",
                 str(d / "new.qrels.queries"), "--live-queries", "4", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["live"]["agree"] and report["live"]["queries"] >= 3
