"""Feature logging against the real node with the LTR plugin (skipped, with the reason,
when the node has no plugin)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ltr_toolkit.stores import store as st
from ltr_toolkit.features.featurelog import log_body, log_features
from ltr_toolkit.query.firststage import FirstStage
from ltr_toolkit.stores.params import derived_depth, featureset_params, with_first_stage_ids
from ltr_toolkit.query.requests import msearch_ids
from ltr_toolkit.data.svmlight import load_logged
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.errors import UserError
from ltr_toolkit.data.featuresets import load_featureset

pytestmark = [pytest.mark.cluster, pytest.mark.ltr]
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def logged_setup(ltr_cluster, cranfield_index):
    conn = ltr_cluster.conn()
    st.init_store(conn, None)
    fs = load_featureset(ROOT / "feature_sets" / "cranfield-feedback.json")  # + query-time feedback
    fs["name"], _ = st.upload_featureset_versioned(conn, fs)
    return conn, cranfield_index["index"], fs


def test_logging_accounts_for_every_pair_with_node_values(logged_setup, tmp_path):
    conn, index, fs = logged_setup
    jl = cranfield.judgments()
    out = tmp_path / "all.txt"
    side = log_features(conn, jl, fs["name"], index, out, batch=40)
    ds = load_logged(out)
    pairs = list(zip(ds.qids[ds.row_query], ds.doc_ids))
    assert len(pairs) == len(set(pairs)) == side["rows"]
    assert side["rows"] + len(side["missing_docs"]) == len(jl)
    assert ds.n_features == len(fs["features"])
    # the same sltr query asked independently, for a few queries
    c = conn.client()
    for q in list(jl.queries)[:5]:
        docs = [d for d, _ in jl.docs_of(q)]
        params = jl.query_params(q)
        top = msearch_ids(conn, index, [params], FirstStage.from_fields(), size=10)[0]
        params = with_first_stage_ids(params, top, derived_depth(featureset_params(fs)))
        resp = c.search(index=index, body=log_body(params, docs, fs["name"], None))
        for h in resp["hits"]["hits"]:   # a feature without a value did not match: NaN
            vals = [f.get("value", np.nan) for f in h["fields"]["_ltrlog"][0]["ltr_toolkit"]]
            row = pairs.index((q, h["_id"]))
            np.testing.assert_array_equal(ds.X[row], np.asarray(vals, dtype=np.float32))


def test_ltr_log_killed_and_resumed_is_identical(logged_setup, tmp_path, ltr_cluster):
    conn, index, fs = logged_setup
    j = tmp_path / "train.txt"
    subprocess.run([sys.executable, "-m", "ltr_toolkit.cli", "judgments", "cranfield", "--split",
                    "train", "-o", str(j)], check=True)
    args = [sys.executable, "-m", "ltr_toolkit.cli", "--url", ltr_cluster.url, "log", str(j),
            "--featureset", fs["name"], "--fields", "title,abstract", "--index", index, "--batch", "5"]
    ref = tmp_path / "ref.txt"
    subprocess.run(args + ["-o", str(ref)], check=True, capture_output=True)
    out = tmp_path / "out.txt"
    ckpt = tmp_path / "out.txt.ckpt.json"
    p = subprocess.Popen(args + ["-o", str(out)])
    deadline = time.monotonic() + 60
    while not ckpt.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert not out.exists()
    subprocess.run(args + ["-o", str(out)], check=True, capture_output=True)
    assert out.read_bytes() == ref.read_bytes()
    side = json.loads((tmp_path / "out.txt.json").read_text())
    assert side["featureset"] == fs["name"]


def test_incremental_takes_new_grades_and_drops_unjudged_pairs(logged_setup, tmp_path):
    """A judging round changed a grade and withdrew a pair: the incremental run's OUT is
    what a full re-log of the new judgments gives (features of kept rows reused)."""
    import copy
    conn, index, fs = logged_setup
    from ltr_toolkit.features.incremental import log_incremental
    old = cranfield.split_judgments("valid")
    out = tmp_path / "inc.txt"
    log_incremental(conn, old, fs["name"], index, out)
    new = copy.deepcopy(old)
    (q1, d1), (q2, d2) = list(new.grades)[:2]
    new.grades[(q1, d1)] = new.grades[(q1, d1)] + 1          # regraded
    del new.grades[(q2, d2)]                                 # withdrawn
    side = log_incremental(conn, new, fs["name"], index, out)
    ref = tmp_path / "ref.txt"
    log_features(conn, new, fs["name"], index, ref)
    assert sorted(out.read_text().splitlines()) == sorted(ref.read_text().splitlines())
    assert (side["regraded"], side["dropped"]) == (1, 1)
    assert side["rows"] + len(side["missing_docs"]) == len(new)
    assert side["judgments"]["sha256"] == new.content_hash()


def test_incremental_logs_only_new_pairs(logged_setup, tmp_path):
    conn, index, fs = logged_setup
    from ltr_toolkit.features.incremental import log_incremental
    full = cranfield.split_judgments("valid")
    qids = list(full.queries)
    first = full.subset(qids[: len(qids) // 2])
    out = tmp_path / "inc.txt"
    log_incremental(conn, first, fs["name"], index, out)
    side = log_incremental(conn, full, fs["name"], index, out)
    ref = tmp_path / "ref.txt"
    log_features(conn, full, fs["name"], index, ref)
    assert sorted(out.read_text().splitlines()) == sorted(ref.read_text().splitlines())
    assert side["rows"] + len(side["missing_docs"]) == len(full)


def test_incremental_refuses_another_first_stage_and_leaves_out_as_it_was(logged_setup, tmp_path):
    """New rows from another first stage than OUT's sidecar names would be served as if
    logged like the old ones: refused in one line, OUT untouched (only the term
    statistics were compared before)."""
    from ltr_toolkit.features.incremental import log_incremental
    from ltr_toolkit.query.firststage import FirstStage
    conn, index, fs = logged_setup
    full = cranfield.split_judgments("valid")
    qids = list(full.queries)
    out = tmp_path / "inc.txt"
    log_incremental(conn, full.subset(qids[: len(qids) // 2]), fs["name"], index, out,
                    first_stage=FirstStage.from_fields(["title", "abstract"]))
    before = out.read_bytes(), (tmp_path / "inc.txt.json").read_bytes()
    with pytest.raises(UserError, match="logged with another first stage"):
        log_incremental(conn, full, fs["name"], index, out,
                        first_stage=FirstStage.from_fields(["title"]))
    assert (out.read_bytes(), (tmp_path / "inc.txt.json").read_bytes()) == before


def test_incremental_streams_out_instead_of_reading_it_whole(tmp_path):
    """The passes over OUT (its pairs, the regraded copy) stream it: peak memory is the
    pairs, not the file (a 3.3 GB file needed about 10 GB)."""
    import tracemalloc
    from ltr_toolkit.features.incremental import _copy_regraded, _scan
    out = tmp_path / "big.txt"
    feats = " ".join(f"{i}:0.{i:06d}" for i in range(1, 400))
    with open(out, "w") as fh:
        for r in range(6000):
            fh.write(f"{r % 3} qid:q{r // 100} {feats} # d{r}\n")
    size = out.stat().st_size
    grades = {(f"q{r // 100}", f"d{r}"): 1 for r in range(0, 6000, 2)}
    tracemalloc.start()
    done, regraded, dropped = _scan(out, grades)
    with open(tmp_path / "copy.txt", "w") as fh:
        rows = _copy_regraded(out, grades, fh)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(done) == 6000 and dropped == 3000 and rows == 3000
    assert regraded == sum(1 for r in range(0, 6000, 2) if r % 3 != 1)
    assert peak < size / 5, (peak, size)


def test_incremental_logging_keeps_the_parallelism_asked_for(monkeypatch, tmp_path):
    """`parallel` reaches the rounds of an incremental run (#30: incremental jobs ran one
    round at a time whatever the job file said). Without OUT the run is a full one."""
    from ltr_toolkit.features import incremental
    from ltr_toolkit.data.judgments import JudgmentList
    seen = {}

    def full_run(*args, **kw):
        seen.update(kw)
        return {}
    monkeypatch.setattr(incremental, "log_features", full_run)
    incremental.log_incremental(None, JudgmentList(source="j"), "fs", "i", tmp_path / "out.txt",
                                parallel=3)
    assert seen["parallel"] == 3


def test_the_term_budget_is_measured_once_and_used_for_candidates_and_rows(logged_setup, tmp_path,
                                                                            monkeypatch, ltr_cluster):
    """One candidates-and-logging path (``features.candidates.judged_candidates``, used by
    ``ltr log``, jobs, parts and ``Serving``): the budget is measured once, the candidates
    and the logged rows are fitted to it, and the sidecar records it (``ltr log
    --candidates`` and jobs measured it twice; ``Serving`` fetched candidates unfitted)."""
    from ltr_toolkit.cli import main
    from ltr_toolkit.data.judgments import save_ranklib
    from ltr_toolkit.features import featurelog
    from ltr_toolkit.serving.serving import Serving
    conn, index, fs = logged_setup
    calls = []
    real = featurelog.query_budget

    def counted(*args, **kw):
        calls.append(1)
        return real(*args, **kw)
    monkeypatch.setattr(featurelog, "query_budget", counted)
    jl = cranfield.split_judgments("valid")
    jl = jl.subset(list(jl.queries)[:10])
    side, info = Serving(index, FirstStage.from_fields(), 20).log_candidates(
        conn, jl, fs["name"], tmp_path / "cands.txt")
    assert len(calls) == 1
    assert side["max_query_terms"] is not None and info["queries"] == 10
    save_ranklib(jl, tmp_path / "j.txt")
    calls.clear()
    assert main(["--url", ltr_cluster.url, "log", str(tmp_path / "j.txt"), "--featureset", fs["name"],
                 "--fields", "title,abstract", "--index", index, "--window", "20", "-o", str(tmp_path / "cli.txt")]) == 0
    assert len(calls) == 1
    assert json.loads((tmp_path / "cli.txt.json").read_text())["max_query_terms"] == side["max_query_terms"]
