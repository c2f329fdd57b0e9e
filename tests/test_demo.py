"""`ltr demo` end to end (needs the LTR plugin; skipped, with the reason, without it)."""

from __future__ import annotations

import json
import re

import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.ltr]


def test_demo_end_to_end(ltr_cluster, cli, tmp_path):
    """The outcome the demo exists for, live: a reranker significantly better than BM25
    on NDCG@10, none significantly worse, every query scored by a model that never saw it."""
    out = tmp_path / "report.json"
    r = cli("--url", ltr_cluster.url, "demo", "--workdir", str(tmp_path / "w"), "-o", str(out),
            "--recreate", timeout=1500, env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    rep = json.loads(out.read_text())
    # what a person reads in an 80-column terminal: no library's log line, no Python
    # literal, and every system's row named in full
    shown = r.stdout + r.stderr
    assert not re.search(r"^(DEBUG|INFO|WARNING|ERROR):", shown, re.M), shown
    assert not re.search(r"\{'|\[\{|\}\]|': ", shown), shown
    for name in rep["systems"]:
        assert re.search(rf"^{re.escape(name)} +\d", r.stdout, re.M), (name, r.stdout)
    assert rep["queries"] == 225 and rep["folds"] == 5 and "cross-validation" in rep["evaluation"]
    from ltr_toolkit.pipeline.tuning import PIPELINE      # the choice per fold, tested once
    assert set(rep["tests"]) == set(rep["settings"]) == {"linear", "lambdarank-nn", "lambdamart", PIPELINE}
    assert all(len(fold) == 5 for fold in rep["settings"].values())
    from ltr_toolkit.stores.model_store import model_names   # fold models deleted at the end
    assert model_names(ltr_cluster.conn(), prefix="cranfield-") == [] and rep["models"] == {}
    base = rep["systems"]["bm25"]["ndcg@10"]
    better = [n for n, t in rep["tests"].items()
              if rep["systems"][n]["ndcg@10"] > base and t["p_value"] < 0.05]
    worse = [n for n, t in rep["tests"].items()
             if rep["systems"][n]["ndcg@10"] < base and t["p_value"] < 0.05]
    assert better and not worse, rep["tests"]
    assert set(rep["per_query"]["bm25"]) == set(rep["per_query"]["linear"])
    assert set(rep["steps_seconds"]) >= {"plugin", "index", "featureset", "cv"}
