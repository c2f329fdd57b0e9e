"""`ltr index jsonl` says how far each long step is (issue 60): encoding the vectors, the
neighbours' first load and search, the bulk load, each on stderr with done/total, its
rate and the time left; the library only calls a ``progress`` callback."""

from __future__ import annotations

import json
import re
import textwrap
import uuid

import pytest

pytestmark = pytest.mark.cluster

WORDS = ("drill saw hammer lamp cable battery charger screwdriver sander grinder cordless "
         "compact brushless kit case blade torque speed garden light").split()


def _products(n: int) -> list[dict]:
    return [{"id": f"p{i}", "title": f"{WORDS[i % 20]} {WORDS[(i * 7) % 20]} {i % 13}",
             "description": " ".join(WORDS[(i * k) % 20] for k in range(3, 15))}
            for i in range(n)]


@pytest.fixture
def slow_encoder(tmp_path):
    """A callable encoder of 8 dimensions at about 200 texts/s, its cache in ``tmp_path``."""
    (tmp_path / "slow_enc.py").write_text(textwrap.dedent("""
        import time, zlib
        import numpy as np
        def encode(texts):
            time.sleep(0.005 * len(texts))
            return np.array([[zlib.crc32(f"{t}{k}".encode()) % 97 + 1 for k in range(8)]
                             for t in texts], dtype=np.float32)
    """))
    return {"PYTHONPATH": str(tmp_path), "LTR_ENCODER": "slow_enc:encode",
            "LTR_CACHE": str(tmp_path / "cache")}


def test_every_long_step_reports_done_total_rate_and_eta(cluster, cli, tmp_path, slow_encoder):
    src, index = tmp_path / "p.jsonl", f"progress-{uuid.uuid4().hex[:6]}"
    src.write_text("".join(json.dumps(d) + "\n" for d in _products(700)))
    r = cli("--url", cluster.url, "index", "jsonl", str(src), "--index", index, env=slow_encoder)
    try:
        assert r.returncode == 0, r.stderr
        lines = r.stderr.splitlines()
        for step in ("vectors", "neighbours (first load)", "neighbours", "loading"):
            assert any(re.fullmatch(rf"{re.escape(step)}: 700/700 \([\d.,]+/s\)", ln) for ln in lines), \
                (step, r.stderr)
        # the encoding (about 3.5 s) reports its rate, and no ETA before 10 s (the unit
        # test of cli.common._progress reads the ETA)
        assert any(re.fullmatch(r"vectors: \d+/700 \([\d.,]+/s\)", ln) for ln in lines), r.stderr
        assert "indexed 700 documents" in r.stdout
    finally:
        cluster.conn().client().indices.delete(index=index, ignore_unavailable=True)


@pytest.fixture
def printed(monkeypatch):
    """The plain progress lines printed, with a clock of 11 s a call (an ETA from the 2nd)."""
    from ltr_toolkit.cli import common
    lines, clock = [], iter(range(100, 2000, 11))
    monkeypatch.setattr(common.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(common.err, "print", lambda text, **k: lines.append(text))
    monkeypatch.setattr(type(common.err), "is_terminal", property(lambda self: False))
    return lines


def test_the_steps_helper_gives_each_step_its_own_line(printed):
    from ltr_toolkit.cli import common
    with common._steps() as progress:
        progress("vectors", 0, 10)
        progress("vectors", 5, 10)
        progress("vectors", 10, 10)
        progress("loading", 4, 8)
        progress("loading", 8, 8)
    assert printed[0] == "vectors: 0/10"
    assert printed[1].startswith("vectors: 5/10 (") and "ETA" in printed[1]
    assert printed[2].startswith("vectors: 10/10 (") and "ETA" not in printed[2]
    assert printed[3] == "loading: 4/8" and printed[4].startswith("loading: 8/8 (")


def test_steps_at_the_same_time_each_keep_their_own_line_and_rate(printed):
    from ltr_toolkit.cli import common
    with common._steps() as progress:
        progress("vectors", 0, 10)
        progress("neighbours", 0, 8)
        progress("vectors", 5, 10)
        progress("neighbours", 8, 8)
        progress("vectors", 10, 10)
    assert printed[0] == "vectors: 0/10" and printed[1] == "neighbours: 0/8"
    assert printed[2].startswith("vectors: 5/10 (") and "ETA" in printed[2]
    assert printed[3].startswith("neighbours: 8/8 (") and printed[4].startswith("vectors: 10/10 (")


def test_a_step_behind_another_never_promises_to_end_before_it(printed):
    from ltr_toolkit.cli import common
    from ltr_toolkit.io.pace import duration
    with common._steps() as progress:
        progress("vectors", 0, 100)
        progress("vectors", 10, 100)            # 10 in 11 s: 90 more take about 99 s
        progress("loading", 0, 100, after="vectors")
        progress("loading", 50, 100, after="vectors")   # alone, 50 more would take 11 s
    eta = printed[-1].split("ETA ")[1].rstrip(")")
    assert printed[-1].startswith("loading: 50/100 (") and duration(99 - 11 - 11) == eta
