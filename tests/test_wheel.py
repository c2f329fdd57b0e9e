"""The package as users install it: a wheel built from this tree, installed into a fresh
virtual environment (dependencies from the running interpreter's site-packages, so no
download), runs `ltr demo --help` and an offline command that needs the bundled data."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_ships_data_and_runs(tmp_path):
    dist = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-w", str(dist), str(ROOT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    wheel = next(dist.glob("ltr_toolkit-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "ltr_toolkit/datasets/cranfield/featureset.json" in names
    assert "ltr_toolkit/datasets/cranfield/cran.all.1400" in names
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = venv / "bin" / "python"
    r = subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    ltr = venv / "bin" / "ltr"
    elsewhere = tmp_path / "cwd"     # nowhere near the source tree
    elsewhere.mkdir()
    r = subprocess.run([str(ltr), "demo", "--help"], capture_output=True, text=True, cwd=elsewhere)
    assert r.returncode == 0 and "--recreate" in r.stdout, r.stderr
    r = subprocess.run([str(py), "-c", "import ltr_toolkit, sys; print(ltr_toolkit.__file__)"],
                       capture_output=True, text=True, cwd=elsewhere)
    assert str(venv) in r.stdout, r.stdout      # the installed copy, not the source tree
    out = elsewhere / "j.txt"
    r = subprocess.run([str(ltr), "judgments", "cranfield", "--split", "test", "-o", str(out)],
                       capture_output=True, text=True, cwd=elsewhere)
    assert r.returncode == 0 and out.read_text().startswith("# qid:"), r.stderr
    r = subprocess.run([str(py), "-c", "from ltr_toolkit.datasets import cranfield; "
                        "from ltr_toolkit.data.featuresets import load_featureset; "
                        "print(len(load_featureset(cranfield.FEATURE_SET)['features']))"],
                       capture_output=True, text=True, cwd=elsewhere)
    assert r.returncode == 0 and int(r.stdout) >= 10, r.stderr
