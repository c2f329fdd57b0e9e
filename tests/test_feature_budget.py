"""``ltr evaluate cv --max-cost R`` on the session's Cranfield node: each feature's cost
measured live, the feature set chosen per fold within the budget, the deployed model
uploaded with a feature set of its chosen features only, and its served p50 measured
live and printed with the recommendation."""

from __future__ import annotations

import json
import uuid

import pytest

from ltr_toolkit.data.featuresets import load_featureset
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.stores import store as st

pytestmark = [pytest.mark.cluster, pytest.mark.ltr]


def test_cv_chooses_each_folds_set_within_the_budget_and_prints_the_served_cost(
        ltr_cluster, cranfield_index, shipped_featureset, cli, tmp_path):
    conn, store = ltr_cluster.conn(), f"budget{uuid.uuid4().hex[:6]}"
    st.init_store(conn, store)
    try:
        fs, _ = st.upload_featureset_versioned(conn, load_featureset(cranfield.FEATURE_SET), store)
        judg = tmp_path / "test.txt"
        assert cli("judgments", "cranfield", "--split", "test", "-o", str(judg)).returncode == 0
        out = tmp_path / "cv.json"
        r = cli("--url", ltr_cluster.url, "evaluate", "cv", str(judg), "--fields", "title,abstract",
                "--index", cranfield_index["index"], "--featureset", fs, "--store", store,
                "--algo", "linear", "--settings", "defaults", "--folds", "2", "--window", "30", "--jobs", "1",
                "--max-cost", "1.6", "--workdir", str(tmp_path / "w"), "-o", str(out),
                "--deploy", "budgeted", "--deploy-anyway", "linear", timeout=600)
        assert r.returncode == 0, r.stderr
        rep = json.loads(out.read_text())
        sel, names = rep["feature_selection"], st.get_featureset(conn, fs, store)["featureset"]
        names = [f["name"] for f in names["features"]]
        assert sel["limit_ms"] == pytest.approx(1.6 * sel["cost_model"]["first_ms"])
        assert len(sel["folds"]) == 2
        for chosen in sel["folds"]:
            assert chosen["estimated_ms"] <= sel["limit_ms"]
            assert "first_stage_bm25" in chosen["features"] and set(chosen["features"]) <= set(names)
        text = " ".join(r.stdout.split())          # the console folds long lines
        assert "feature sets chosen per fold (budget" in text
        line = text[text.rindex("recommendation: "):]
        assert "served p50" in line and "x the first stage's" in line
        used = line.split("(feature set ")[1].split(")")[0]       # the chosen features only
        served = [f["name"] for f in st.get_featureset(conn, used, store)["featureset"]["features"]]
        assert served == [n for n in names if n in served] and len(served) < len(names)
        # the sets made for the fold models went with them: the store holds what it had
        # and the deployed model's
        kept = {f.get("name") for f in st.list_featuresets(conn, store)}
        assert kept == {fs, used}, kept
        assert "choosing features" not in r.stderr or "ETA" in r.stderr
    finally:
        st.drop_store(conn, store)


def test_a_budget_below_the_rescore_itself_is_refused_in_one_line(
        ltr_cluster, cranfield_index, shipped_featureset, cli, tmp_path):
    judg = tmp_path / "test.txt"
    assert cli("judgments", "cranfield", "--split", "test", "-o", str(judg)).returncode == 0
    r = cli("--url", ltr_cluster.url, "evaluate", "cv", str(judg), "--fields", "title,abstract",
            "--index", cranfield_index["index"], "--featureset", shipped_featureset,
            "--algo", "linear", "--folds", "2", "--window", "30", "--max-ms", "0.5",
            "--workdir", str(tmp_path / "w"), timeout=600)
    assert r.returncode == 2, r.stderr
    assert "--max-ms 0.5: a served model costs at least" in r.stderr and "allow at least" in r.stderr
