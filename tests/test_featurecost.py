"""`ltr featureset cost`: each feature's serving cost, live, next to its drop-one
contribution under cross-validation, on the session's Cranfield index; it points to
`ltr evaluate cv --max-cost` to choose a set (no second selection here)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ltr_toolkit.stores import store as st
from ltr_toolkit.data.featuresets import load_featureset
from ltr_toolkit.evaluation.feature_timing import FEEDBACK

FEEDBACK_SET = Path(__file__).resolve().parent.parent / "feature_sets" / "cranfield-feedback.json"

pytestmark = [pytest.mark.cluster, pytest.mark.ltr]


def test_featureset_cost_reports_every_feature(ltr_cluster, cranfield_index, cli, tmp_path):
    conn = ltr_cluster.conn()
    st.init_store(conn, None)
    fs = load_featureset(FEEDBACK_SET)       # the shipped set plus query-time feedback
    name, _ = st.upload_featureset_versioned(conn, fs)
    judg = tmp_path / "test.txt"
    assert cli("judgments", "cranfield", "--split", "test", "-o", str(judg)).returncode == 0
    out = tmp_path / "cost.json"
    r = cli("--url", ltr_cluster.url, "featureset", "cost", name, str(judg),
            "--fields", "title,abstract", "--index", cranfield_index["index"], "--algo", "linear", "--folds", "3", "--window", "30",
            "--timing-queries", "8", "--passes", "1", "--workdir", str(tmp_path / "w"),
            "-o", str(out), timeout=900)
    assert r.returncode == 0, r.stderr
    rep = json.loads(out.read_text())
    names = [f["name"] for f in fs["features"]]
    feedback = [f["name"] for f in fs["features"]
                if any(p.startswith("first_stage_id_") for p in f.get("params", []))]
    assert rep["feedback_features"] == feedback and feedback
    cost, contrib = rep["cost"], rep["contribution"]
    # a row per feature, all features together, and the first request feedback needs
    depth = max(int(p.rsplit("_", 1)[1]) for f in fs["features"] for p in f.get("params", [])
                if p.startswith("first_stage_id_"))
    assert set(cost) == {"plain request", "all features", f"first request (top {depth} ids)", *names}
    assert all(np.isfinite(v["p50_ms"]) for v in cost.values())
    assert cost["plain request"]["p50_ms"] > 0 and cost[f"first request (top {depth} ids)"]["p50_ms"] > 0
    assert set(contrib["rows"]) == {*names, FEEDBACK}
    for row in contrib["rows"].values():
        assert row["delta"] == pytest.approx(row["ndcg"] - contrib["all"])
        assert 0 < row["p_value"] <= 1
    assert 0 < contrib["first_stage"] < 1 and 0 < contrib["all"] < 1
    for n in names:                      # the table names every feature
        assert n in r.stdout
    assert "selection" not in rep         # one selection: ltr evaluate cv --max-cost, in the folds
    assert "--max-cost R" in " ".join(r.stdout.split())
    settings = " ".join(f"{n}={v}" for n, v in rep["settings"].items())
    assert f"ablation: linear {settings}, 3-fold" in r.stderr and "{" not in r.stderr
    fits = 3 * (1 + len(contrib["rows"]))          # all features, then each row's drop, per fold
    assert f"model fits: {fits}/{fits} (" in r.stderr   # the ablation's progress, with its rate
