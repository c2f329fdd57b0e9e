"""docs/own-index.md, run live on CACM (read from ../shared, not bundled): the user's own
index with its own fields, an adapted feature set, TREC-format judgments, a 5-fold
cross-validation with settings chosen inside the training folds, the recommendation, and
a deployment only of what was recommended. No reranker may be significantly worse than
the first stage, what is recommended is at least as good, and no fold model is left in
the store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CACM = ROOT.parent / "shared" / "data" / "cacm"

pytestmark = [pytest.mark.cluster, pytest.mark.ltr]


@pytest.fixture(scope="module")
def cacm_files(tmp_path_factory):
    if not (CACM / "cacm.all").is_file():
        pytest.skip(f"needs ../shared/data/cacm (not bundled): not found at {CACM}; clone the "
                    "repository beside shared/ to run it")
    out = tmp_path_factory.mktemp("cacm")
    subprocess.run([sys.executable, str(ROOT / "docs" / "cacm" / "prepare.py"), str(CACM), str(out)],
                   check=True)
    return out


def test_cacm_path_from_documents_to_a_recommended_deployment(ltr_cluster, cacm_files, cli):
    from ltr_toolkit.stores.model_store import model_names
    url, d = ltr_cluster.url, cacm_files
    r = cli("--url", url, "index", "jsonl", str(d / "docs.jsonl"), "--index", "cacm-test", "--recreate")
    assert r.returncode == 0 and "title, abstract, authors" in r.stdout, r.stderr
    r = cli("--url", url, "store", "init")
    assert r.returncode == 0, r.stderr
    r = cli("--url", url, "featureset", "upload", str(ROOT / "docs" / "cacm" / "featureset.json"))
    assert r.returncode == 0, r.stderr
    before = set(model_names(ltr_cluster.conn()))
    report_path = d / "report.json"
    r = cli("--url", url, "evaluate", "cv", str(d / "qrels.txt"), "--input-format", "trec", "--queries",
            str(d / "queries.tsv"), "--index", "cacm-test", "--fields", "title,abstract",
            "--folds", "5", "--featureset", "cacm", "--algo", "linear", "--algo", "lambdamart",
            "--workdir", str(d / "cv"), "-o", str(report_path), "--deploy", "cacm-ranker",
            timeout=1800)
    assert r.returncode == 0, r.stderr
    report = json.loads(report_path.read_text())
    print(json.dumps({n: {**report["systems"][n], **report["tests"].get(n, {})}
                      for n in report["systems"]}, indent=1))
    print(report["recommendation"], report["settings"])
    assert report["queries"] == 52 and report["failed_queries"] == []
    for name, t in report["tests"].items():      # none significantly worse
        assert not (t["mean_delta"] < 0 and t["p_value"] < 0.05), (name, t)
    rec = report["recommendation"]
    assert rec["worse"] == []
    if rec["deploy"] is not None:     # by the test that decided it: the pipeline's one-sided
        pipe = report.get("pipeline") or {}
        t = pipe["test"] if pipe.get("name") == rec["deploy"] else report["tests"][rec["deploy"]]
        assert t["mean_delta"] > 0 and t["p_value"] < 0.05
    assert all(len(s) == 5 for s in report["settings"].values())
    after = set(model_names(ltr_cluster.conn()))
    new = {n for n in after - before if n.startswith(("cv-", "cacm-ranker"))}
    # fold models (cv-*) deleted; only a deployment, if one was recommended
    if rec["deploy"] is None:
        assert new == set() and "nothing uploaded" in r.stdout
    else:
        assert len(new) == 1 and next(iter(new)).startswith("cacm-ranker-v")


def test_a_budget_of_zero_seconds_trains_one_candidate_per_fold_and_says_what_it_left_out(
        ltr_cluster, cacm_files, cli):
    """``--budget 0``: each fold's fit trains only the grid's first candidate; the log and
    the report name what was left out; ``--jobs`` sets the workers."""
    url, d = ltr_cluster.url, cacm_files
    for args in (("index", "jsonl", str(d / "docs.jsonl"), "--index", "cacm-test"),
                 ("store", "init"),
                 ("featureset", "upload", str(ROOT / "docs" / "cacm" / "featureset.json"))):
        cli("--url", url, *args)
    out = d / "budget.json"
    r = cli("--url", url, "evaluate", "cv", str(d / "qrels.txt"), "--input-format", "trec", "--queries",
            str(d / "queries.tsv"), "--index", "cacm-test", "--fields", "title,abstract",
            "--folds", "5", "--featureset", "cacm", "--algo", "lambdamart", "--budget", "0",
            "--jobs", "2", "--workdir", str(d / "cv-budget"), "-o", str(out), timeout=900)
    assert r.returncode == 0, r.stderr
    report = json.loads(out.read_text())
    folds = report["settings"]["lambdamart"]
    assert len(folds) == 5 and all(f["left_out"] for f in folds)
    assert all(f.get("first_stage") or f["settings"]["trees"] == 50 for f in folds)
    assert r.stderr.count("the budget left out") == 5 and "2 at a time" in r.stderr
    assert report["fit_seconds"]["lambdamart"] > 0
