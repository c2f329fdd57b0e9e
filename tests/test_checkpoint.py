"""Kill-and-resume of the checkpointed output with a real SIGKILL (the mechanism the
feature logger runs on; the logger's own kill test needs the LTR plugin)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ltr_toolkit.io.checkpoint import CheckpointedOutput
from ltr_toolkit.errors import UserError

WRITER = r"""
import sys, time
from ltr_toolkit.io.checkpoint import CheckpointedOutput
out, units, delay = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
ck = CheckpointedOutput(out, "key-1")
done = ck.resume()
state = ck.state or {"rows": 0}
for u in range(done, units):
    text = "".join(f"{u} row {i} " + "x" * 50 + "\n" for i in range(200))
    time.sleep(delay)
    state["rows"] += 200
    ck.commit(text, state)
ck.finish()
"""


def _run(out, units, delay):
    return subprocess.Popen([sys.executable, "-c", WRITER, str(out), str(units), str(delay)])


def test_sigkill_and_resume_is_byte_identical(tmp_path):
    ref = tmp_path / "ref.txt"
    assert _run(ref, 30, 0.0).wait() == 0
    out = tmp_path / "out.txt"
    ckpt = tmp_path / "out.txt.ckpt.json"
    progress = []
    for extra in (0.0, 0.013, 0.027):
        p = _run(out, 30, 0.01)
        deadline = time.monotonic() + 10
        start_units = progress[-1] if progress else 0
        # kill mid-run: after this run committed at least one unit of its own
        while time.monotonic() < deadline:
            if ckpt.exists() and '"units": ' in ckpt.read_text():
                if json.loads(ckpt.read_text())["units"] > start_units:
                    break
            time.sleep(0.002)
        time.sleep(extra)
        assert p.poll() is None, "the writer finished before it could be killed"
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        assert not out.exists()  # never half-written
        progress.append(json.loads(ckpt.read_text())["units"])
    assert progress == sorted(progress) and 0 < progress[-1] < 30
    assert _run(out, 30, 0.0).wait() == 0
    assert out.read_bytes() == ref.read_bytes()
    assert not (tmp_path / "out.txt.partial").exists() and not (tmp_path / "out.txt.ckpt.json").exists()


def test_torn_append_is_truncated(tmp_path):
    out = tmp_path / "o.txt"
    ck = CheckpointedOutput(out, "k")
    ck.resume()
    ck.commit("a\n", {"n": 1})
    with open(ck.partial, "ab") as fh:  # a unit written but never committed
        fh.write(b"torn")
    ck2 = CheckpointedOutput(out, "k")
    assert ck2.resume() == 1 and ck2.state == {"n": 1}
    ck2.commit("b\n", {"n": 2})
    ck2.finish()
    assert out.read_text() == "a\nb\n"


def test_other_arguments_refused(tmp_path):
    out = tmp_path / "o.txt"
    ck = CheckpointedOutput(out, "k1")
    ck.resume()
    ck.commit("a\n", {})
    with pytest.raises(UserError, match="other arguments"):
        CheckpointedOutput(out, "k2").resume()


@pytest.mark.parametrize("how", ["killed between rename and checkpoint removal", "partial removed by hand"])
def test_missing_partial_starts_over_and_never_pads(tmp_path, how):
    """A checkpoint whose partial file is gone (or short) cannot be resumed: the run starts
    over, and a finished OUT is never replaced by zero padding."""
    out = tmp_path / "o.txt"
    ck = CheckpointedOutput(out, "k")
    ck.resume()
    ck.commit("a\n", {"n": 1})
    ck.commit("b\n", {"n": 2})
    if how.startswith("killed"):
        os.replace(ck.partial, out)          # finish() got as far as its rename
        assert out.read_text() == "a\nb\n" and ck.ckpt.exists()
    else:
        ck.partial.unlink()
    again = CheckpointedOutput(out, "k")
    assert again.resume() == 0 and again.state == {}
    if how.startswith("killed"):
        assert out.read_text() == "a\nb\n"   # untouched until the new run finishes
    again.commit("a\n", {"n": 1})
    again.commit("b\n", {"n": 2})
    again.finish()
    assert out.read_bytes() == b"a\nb\n"
    assert not again.ckpt.exists() and not again.partial.exists()
