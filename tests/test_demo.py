"""`ltr demo` end to end (needs the LTR plugin; skipped, with the reason, without it)."""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.ltr]


def test_demo_end_to_end(ltr_cluster, cli, tmp_path):
    out = tmp_path / "report.json"
    r = cli("--url", ltr_cluster.url, "demo", "--workdir", str(tmp_path / "w"), "--json", str(out),
            timeout=1200)
    assert r.returncode == 0, r.stderr
    rep = json.loads(out.read_text())
    assert rep["queries"] == 45 and set(rep["tests"]) == set(rep["models"].values())
    assert "bm25" in rep["systems"] and len(rep["systems"]) == 3
