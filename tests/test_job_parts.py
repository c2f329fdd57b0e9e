"""`ltr job run JOB.toml --part I/N`: a logging job in N parts by query, run at the same
time against the real node, published as one snapshot identical to a whole run's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_jobs import ROOT, _job, cranfield_job  # noqa: F401  (the module's live fixture)

from ltr_toolkit.jobs.parts import parse_part
from ltr_toolkit.errors import UserError


def _run_parts(job, n: int) -> list[subprocess.CompletedProcess]:
    """The N parts of ``job`` started together, each its own process (as on N machines)."""
    procs = [subprocess.Popen([sys.executable, "-m", "ltr_toolkit.cli", "job", "run", str(job),
                               "--part", f"{i}/{n}", "--json"], cwd=str(ROOT), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for i in range(1, n + 1)]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=600)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


@pytest.mark.cluster
@pytest.mark.ltr
def test_two_parts_at_once_publish_the_whole_runs_snapshot(cranfield_job, tmp_path, cli):
    from ltr_toolkit.data.judgments import load_judgments, save_ranklib
    url, fs, index, judg = cranfield_job
    (tmp_path / "whole").mkdir()
    (tmp_path / "parts").mkdir()
    full = load_judgments(judg)
    judg = tmp_path / "judgments.txt"                  # 90 of the 225 queries: fast enough
    save_ranklib(full.subset(full.qids()[:90]), judg)
    whole = _job(tmp_path / "whole", url, fs, index, judg, candidates=20)
    parted = _job(tmp_path / "parts", url, fs, index, judg, candidates=20)
    r = cli("job", "run", str(whole), "--json")
    assert r.returncode == 0, r.stderr
    single = json.loads(r.stdout)
    runs = _run_parts(parted, 2)
    assert [p.returncode for p in runs] == [0, 0], [p.stderr for p in runs]
    reports = [json.loads(p.stdout) for p in runs]
    published = [m for m in reports if "snapshot" in m]
    assert len(published) == 1, reports                 # the part that completed the set
    other = next(m for m in reports if "snapshot" not in m)
    assert other["status"] in ("part logged", "merged")
    merged = published[0]
    out_w, out_p = tmp_path / "whole" / "out", tmp_path / "parts" / "out"
    a, b = out_w / "latest", out_p / "latest"
    assert (b / "features.txt").read_bytes() == (a / "features.txt").read_bytes()
    side_a, side_b = (json.loads((d / "features.txt.json").read_text()) for d in (a, b))
    side_a.pop("retried_items"), side_b.pop("retried_items")     # load-dependent counts
    assert side_b == side_a
    assert merged["counts"] == single["counts"] and merged["status"] == "complete"
    assert merged["files"]["features.txt"] == single["files"]["features.txt"]
    assert merged["parts"]["count"] == 2 and single["counts"]["rows"] > 1000
    # one snapshot, nothing of the parts left
    assert sorted(p.name for p in out_p.iterdir() if not p.name.startswith(".lock")) == \
        sorted([b.resolve().name, "latest"])


def test_part_option_is_checked_before_any_work(tmp_path, cli):
    for bad in ("3/2", "0/2", "1", "a/b"):
        with pytest.raises(UserError, match="expected I/N"):
            parse_part(bad)
    assert parse_part("2/4") == (2, 4)
    r = cli("job", "run", str(tmp_path / "missing.toml"), "--part", "3/2")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--part '3/2'" in r.stderr


@pytest.mark.parametrize("kind,body", [
    ("click", '[logging]\nfeatureset = "f"\nindex = "i"\n[clicks]\ndays = 7\n'
              '[output]\ndirectory = "o"\n'),
    ("incremental", '[logging]\nfeatureset = "f"\nindex = "i"\njudgments = "j.txt"\n'
                    '[output]\ndirectory = "o"\nincremental = true\n'),
])
def test_click_and_incremental_jobs_run_whole(tmp_path, kind, body):
    from ltr_toolkit.jobs.jobfile import load_job
    from ltr_toolkit.jobs.parts import run_part
    path = tmp_path / "job.toml"
    path.write_text(body)
    with pytest.raises(UserError, match=f"a {kind} job runs whole"):
        run_part(load_job(path), None, 1, 2)
    assert not (tmp_path / "o").exists()               # refused before any work


# ------------------------------------------------------------ merging parts (offline)

def _fake_part(directory, i, n, logged_at, **side):
    """A finished part folder as ``_log_part`` leaves it (a row, its sidecar, part.json)."""
    from ltr_toolkit.jobs.parts import PARTS, _tag
    from ltr_toolkit.data.judgments import JudgmentList
    d = directory / PARTS / _tag(i, n)
    d.mkdir(parents=True)
    jl = JudgmentList(source="j.txt")
    jl.queries[f"q{i}"] = f"query {i}"
    jl.grades[(f"q{i}", f"d{i}")] = 1
    (d / "features.txt").write_text(f"1 qid:q{i} 1:0.5 # d{i}\n")
    base = {"featureset": "fs", "featureset_sha256": "abc", "store": None, "feature_names": ["a"],
            "featureset_params": ["keywords"], "index": "idx", "first_stage": {"source": "fields"},
            "max_query_terms": 100, "missing_features": "absent", "encoder": None,
            "vector_field": None, "judgments": {"source": "j.txt"},
            "candidates": {"k": 20, "queries": 1, "judged": 1, "unjudged": 0,
                           "judged_outside": 0, "failed_queries": []},
            "rows": 1, "missing_docs": [], "failed_queries": [], "retried_items": 0}
    (d / "features.txt.json").write_text(json.dumps({**base, **side}))
    (d / "part.json").write_text(json.dumps({"part": i, "of": n, "whole_judgments_sha256": "w",
                                             "judgments": jl.to_dict(), "logged_at": logged_at,
                                             "log_seconds": 1.0}))
    return d


def _job_in(tmp_path):
    from ltr_toolkit.jobs.jobfile import load_job
    path = tmp_path / "job.toml"
    path.write_text(_MIN_JOB)
    return load_job(path)


_MIN_JOB = '[logging]\nfeatureset = "fs"\nindex = "idx"\njudgments = "j.txt"\n[output]\ndirectory = "out"\n'


@pytest.mark.parametrize("key,value", [("featureset_sha256", "def"), ("max_query_terms", 80),
                                       ("first_stage", {"source": "template"}),
                                       ("encoder", {"sha256": "x"}),
                                       ("candidates", {"k": 50})])
def test_parts_logged_differently_are_refused_at_the_merge(tmp_path, monkeypatch, key, value):
    """Parts with another feature-set version, first stage, term budget, encoder or
    candidate depth are not one run: refused in one line naming the odd part (they were
    published as one snapshot carrying part 1's sidecar)."""
    import time
    from ltr_toolkit.jobs import parts as jobparts
    job = _job_in(tmp_path)
    now = time.time()
    _fake_part(job.directory, 1, 2, now)
    _fake_part(job.directory, 2, 2, now, **{key: value})
    with pytest.raises(UserError, match=f"logged with different {key} .part-2-of-2 differ"):
        jobparts._merge(job, None, 2, 1, log=lambda m: None)
    assert not (job.directory / "latest").exists()


def test_a_part_from_long_ago_is_not_merged_with_todays(tmp_path, monkeypatch):
    """Parts logged more than PART_SPREAD apart are refused at the merge naming the old
    one; a part that finds its own finished folder that old logs it again."""
    import time
    from ltr_toolkit.jobs import parts as jobparts
    job = _job_in(tmp_path)
    now = time.time()
    old = _fake_part(job.directory, 1, 2, now - jobparts.PART_SPREAD_SECONDS - 60)
    _fake_part(job.directory, 2, 2, now)
    with pytest.raises(UserError, match="h apart .part-1-of-2 is the oldest"):
        jobparts._merge(job, None, 2, 2, log=lambda m: None)
    assert jobparts._stale(old) and not jobparts._stale(job.directory / jobparts.PARTS / "part-2-of-2")


def test_a_merge_leaves_a_killed_whole_runs_work_alone(tmp_path, monkeypatch):
    """A whole run killed part-way leaves ``.work/run.json`` and its checkpoint: a merge
    of parts publishes under its own run id and folder and deletes none of it (it used to
    take that run id and delete the folder)."""
    import time
    from ltr_toolkit.jobs import parts as jobparts
    job = _job_in(tmp_path)
    work = job.directory / ".work"
    work.mkdir(parents=True)
    (work / "run.json").write_text(json.dumps({"run_id": "20260101T000000000000Z",
                                               "started": "2026-01-01T00:00:00+00:00"}))
    (work / "features.txt").write_text("checkpointed rows\n")
    now = time.time()
    _fake_part(job.directory, 1, 2, now)
    _fake_part(job.directory, 2, 2, now)
    monkeypatch.setattr(jobparts, "_manifest", lambda *a, **k: {"status": "complete"})
    got = jobparts._merge(job, None, 2, 2, log=lambda m: None)
    assert "20260101T000000000000Z" not in got["snapshot"]
    assert (work / "features.txt").read_text() == "checkpointed rows\n"
    assert (work / "run.json").is_file()
    latest = job.directory / "latest"
    assert (latest / "features.txt").read_text().count("qid:") == 2
