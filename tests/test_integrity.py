"""Where users' data enters (issue #49): a byte-order mark, half grades, an output's
folders on failure, the suite's markers. Offline."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from ltr_toolkit.clicks.judging.grades import to_grades
from ltr_toolkit.clicks.judging.clickmodels import Estimates
from ltr_toolkit.data.judgments import load_judgments
from ltr_toolkit.cli import main

from conftest import ROOT


def test_a_csv_with_a_byte_order_mark_is_read(tmp_path):
    """Excel's "CSV UTF-8" starts with a BOM: the header is still qid, query, docid, grade."""
    path = tmp_path / "judges.csv"
    path.write_bytes(b"\xef\xbb\xbfqid,query,docid,grade\n1,wing flutter,d1,2\n1,wing flutter,d2,0\n")
    jl = load_judgments(path)
    assert jl.grades == {("1", "d1"): 2.0, ("1", "d2"): 0.0} and jl.queries == {"1": "wing flutter"}


def test_half_grades_round_up():
    """0.125 and 0.375 of 4 levels are grades 1 and 2 (half to even made them 0 and 2)."""
    x = np.array([0.125, 0.375, 0.625, 0.0, 1.0])
    n = np.zeros(len(x), dtype=int)
    est = Estimates(model="pbm", query=n, doc=n, impressions=n + 10, clicks=n, estimate=x)
    assert to_grades(est, "levels", 4).tolist() == [1.0, 2.0, 3.0, 0.0, 4.0]


def test_a_failed_command_leaves_no_folder(tmp_path, capsys):
    """The output's folders are made when it is written: a command refused before leaves
    none behind."""
    out = tmp_path / "a" / "b" / "scores.txt"
    code = main(["predict", str(tmp_path / "missing-model.json"), str(tmp_path / "missing.txt"),
                 "-o", str(out)])
    assert code == 2 and "cannot read" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()


def test_an_output_under_a_file_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    code = main(["judgments", "cranfield", "-o", str(tmp_path / "f" / "j.txt")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "not a folder" in err


def test_not_cluster_selects_no_node_test():
    """The markers come from the fixtures a test uses (one hook): every test that reaches a
    node fixture is deselected by -m "not cluster"."""
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "not cluster",
                        "--setup-plan", "tests/test_clicks.py", "tests/test_evaluate.py"],
                       capture_output=True, text=True, cwd=str(ROOT), timeout=300)
    assert r.returncode in (0, 5), r.stdout + r.stderr
    setups = [ln for ln in r.stdout.splitlines() if "SETUP" in ln]
    assert setups and not [ln for ln in setups if any(
        f" {name}" in ln for name in ("cluster", "ltr_cluster", "es_cluster", "engine_cluster",
                                      "cranfield_index"))], setups
