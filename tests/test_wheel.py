"""The package as users install it: a wheel built from this tree, installed into a fresh
virtual environment, runs `ltr demo --help` and an offline command that needs the bundled
data. The new environment has no system site packages; its dependencies come from the
running interpreter's own site-packages through a .pth file, so no download is needed and
it works when the suite itself runs inside a virtual environment (``--system-site-packages``
would then see the base interpreter, not the environment's packages)."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
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
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    here = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # the running interpreter's packages, after the new environment's own (a .pth file
    # adds folders but runs none of their .pth files: this tree's editable install stays out)
    Path(site, "running_interpreter.pth").write_text("\n".join(sorted(here)) + "\n")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps",
                        "--no-index", str(wheel)],
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
    from ltr_toolkit.data.judgments import JUDGMENTS_MARK       # the toolkit's own file
    lines = out.read_text().splitlines()
    assert r.returncode == 0 and lines[0] == JUDGMENTS_MARK and lines[1].startswith("# qid:"), r.stderr
    r = subprocess.run([str(py), "-c", "from ltr_toolkit.datasets import cranfield; "
                        "from ltr_toolkit.data.featuresets import load_featureset; "
                        "print(len(load_featureset(cranfield.FEATURE_SET)['features']))"],
                       capture_output=True, text=True, cwd=elsewhere)
    from ltr_toolkit.data.featuresets import load_featureset
    from ltr_toolkit.datasets import cranfield
    assert r.returncode == 0 and int(r.stdout) == len(load_featureset(cranfield.FEATURE_SET)["features"]), r.stderr
