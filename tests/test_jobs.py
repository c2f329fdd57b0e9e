"""Scheduled logging jobs: job files, locking, atomic snapshots, kills, and load (real 429s
from a node with a tiny search thread pool), live against the real plugin."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ltr_toolkit.jobs import jobfile
from ltr_toolkit.jobs import runner as jobs
from ltr_toolkit.jobs import snapshots
from ltr_toolkit.errors import InputError, UserError

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "scheduling.md"


def _job(tmp_path, url, fs, index, judgments, **extra) -> Path:
    lines = ["[cluster]", f'url = "{url}"', "", "[logging]", f'featureset = "{fs}"',
             f'index = "{index}"', f'judgments = "{judgments}"']
    for k, v in extra.items():
        lines.append(f"{k} = {json.dumps(v)}")
    lines += ["", "[output]", 'directory = "out"', "keep = 3"]
    path = tmp_path / "job.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


# ----------------------------------------------------------------- job files (offline)

_MIN = '[logging]\nfeatureset = "x"\nindex = "i"\njudgments = "j"\n[output]\ndirectory = "o"\n'


@pytest.mark.parametrize("body,line,fragment", [
    ('[logging]\nfeatureset = "x"\nindex = "i"\njudgments = "j"\nbogus = 1\n[output]\ndirectory = "o"\n', 5, "unknown key 'bogus'"),
    ('[cluster]\npassword = "hunter2"\n', 2, "credentials never go"),
    ('[logging]\nfeatureset = "x"\nindex = "i"\n[output]\ndirectory = "o"\n', 1, "needs judgments"),
    ('[logging]\nfeatureset = "x"\nindex = "i"\njudgments = "j"\nbatch = 0\n[output]\ndirectory = "o"\n', 5, "batch = 0"),
    ('[cluster]\nurl = "https://u:p@h:9200"\n[logging]\nfeatureset = "x"\nindex = "i"\njudgments = "j"\n[output]\ndirectory = "o"\n', 2, "credentials"),
    ('[logging\n', 1, "invalid TOML"),
    ('[extra]\na = 1\n', 1, "unknown section"),
    # values of the wrong type: no silent coercion ("false" is not false)
    ('[cluster]\ninsecure = "false"\n' + _MIN, 2, "expected true or false"),
    ('[cluster]\ntimeout = "60s"\n' + _MIN, 2, "number of seconds"),
    ('[cluster]\ntimeout = 0\n' + _MIN, 2, "number of seconds"),
    (_MIN.replace('judgments = "j"', 'judgments = "j"\nformat = "qrels"'), 5, "'trec'"),
    (_MIN.replace('judgments = "j"', 'judgments = "j"\nunjudged = "skip"'), 5, "'drop'"),
    (_MIN.replace('judgments = "j"', 'judgments = "j"\njudged_outside = true'), 5, "'include'"),
    (_MIN.replace('judgments = "j"', 'judgments = "j"\nstatistics = "global"'), 5, "'dfs', 'shard'"),
    (_MIN.replace('directory = "o"', 'directory = "o"\nincremental = "false"'), 7, "expected true or false"),
    # a key also in an earlier section: the line of the one that is wrong (it named line 3)
    (_MIN.replace('directory = "o"', 'directory = "o"\nindex = "i2"'), 7, "unknown key 'index' in [output]"),
    ('[cluster]\ntimeout = 5\n[logging]\nfeatureset = "x"\nindex = "i"\njudgments = "j"\nparallel = 0\n'
     '[output]\ndirectory = "o"\n', 7, "parallel = 0"),
    # TOML's true is not the position 1 (it loaded, then failed at run time after the lock)
    ('[logging]\nfeatureset = "x"\nindex = "i"\n[output]\ndirectory = "o"\n[clicks]\ndays = 3\n'
     'positions = true\n', 8, "positions = True"),
    ('[logging]\nfeatureset = "x"\nindex = "i"\n[output]\ndirectory = "o"\n[clicks]\ndays = 3\n'
     'positions = false\n', 8, "positions = False"),
])
def test_bad_job_files_name_file_and_line(tmp_path, body, line, fragment):
    p = tmp_path / "job.toml"
    p.write_text(body)
    with pytest.raises(InputError) as info:
        jobfile.load_job(p)
    assert info.value.line == line and fragment in str(info.value), str(info.value)


def test_job_connection_timeout_and_tls(tmp_path):
    from ltr_toolkit.transport.client import Connection
    p = tmp_path / "job.toml"
    p.write_text(_MIN)
    given = Connection(url="http://cli:9200", timeout=120.0)
    job = jobfile.load_job(p)
    assert job.timeout is None
    assert jobfile.job_connection(job, given, explicit_timeout=True).timeout == 120.0
    assert jobfile.job_connection(job, given).timeout == jobfile.DEFAULT_TIMEOUT
    p.write_text('[cluster]\ntimeout = 5\ninsecure = false\n' + _MIN)
    conn = jobfile.job_connection(jobfile.load_job(p), given, explicit_timeout=True)
    assert (conn.timeout, conn.url, conn.insecure) == (5.0, "http://cli:9200", False)


def test_job_file_types_as_written_are_kept(tmp_path):
    p = tmp_path / "job.toml"
    p.write_text('[cluster]\ninsecure = false\ntimeout = 12.5\n' + _MIN.replace(
        'judgments = "j"', 'judgments = "j"\nformat = "csv"\nunjudged = "drop"')
        .replace('directory = "o"', 'directory = "o"\nincremental = true'))
    job = jobfile.load_job(p)
    assert (job.insecure, job.timeout, job.fmt, job.unjudged, job.incremental) == \
        (False, 12.5, "csv", "drop", True)


def test_bad_job_file_through_the_cli(tmp_path, cli):
    p = tmp_path / "job.toml"
    p.write_text('[logging]\nfeatureset = "x"\n')
    r = cli("job", "run", str(p))
    assert r.returncode == 2 and "job.toml:1:" in r.stderr and "Traceback" not in r.stderr


def test_lock_excludes_a_second_run_and_a_dead_runs_lock_is_taken_over(tmp_path):
    d = tmp_path / "out"
    with snapshots.job_lock(d):
        with pytest.raises(UserError, match=f"pid {os.getpid()}"):
            with snapshots.job_lock(d):
                pass
    # a run killed while holding the lock: the kernel drops the flock with the process
    p = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                          "from ltr_toolkit.jobs.runner import job_lock\n"
                          f"with job_lock(Path({str(d)!r})):\n print('held', flush=True); time.sleep(60)"],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    with pytest.raises(UserError, match=f"pid {p.pid}"):
        with snapshots.job_lock(d):
            pass
    p.kill()
    p.wait()
    with snapshots.job_lock(d):   # stale lock taken over
        assert (d / ".lock").read_text().strip() == str(os.getpid())


def test_publish_interrupted_leaves_the_previous_snapshot(tmp_path, monkeypatch):
    d = tmp_path / "out"
    d.mkdir()
    first = d / ".work" / "stage-1"
    first.mkdir(parents=True)
    (first / "features.txt").write_text("old\n")
    (first / "manifest.json").write_text("{}")
    snapshots.publish(d, first, "1")
    second = d / ".work" / "stage-2"
    second.mkdir()
    (second / "features.txt").write_text("new\n")
    (second / "manifest.json").write_text("{}")

    def killed(*a, **k):
        raise KeyboardInterrupt("killed during publish")
    monkeypatch.setattr(snapshots.os, "rename", killed)
    with pytest.raises(KeyboardInterrupt):
        snapshots.publish(d, second, "2")
    assert [p.name for p in snapshots.snapshots(d)] == ["run-1"]
    assert (d / "latest" / "features.txt").read_text() == "old\n"
    monkeypatch.undo()
    snapshots.publish(d, second, "2")
    assert (d / "latest" / "features.txt").read_text() == "new\n"


def _published(d: Path, run_id: str, rows: str) -> Path:
    snap = d / f"run-{run_id}"
    snap.mkdir(parents=True)
    (snap / "features.txt").write_text(rows)
    (snap / "features.txt.json").write_text('{"featureset": "fs"}\n')
    (snap / "manifest.json").write_text(json.dumps({"run_id": run_id, "status": "complete"}))
    return snap


def test_run_killed_between_rename_and_latest_finishes_publishing(tmp_path):
    """The snapshot was renamed into place, then the run died before `latest` was
    switched (its temporary link left behind). The resumed run switches `latest`,
    prunes to keep = 1 without deleting what `latest` names, removes the leftover link,
    and reports what it pruned: it needs no cluster for that."""
    job_file = _job(tmp_path, "http://127.0.0.1:9", "fs", "idx", "j.txt")
    job_file.write_text(job_file.read_text().replace("keep = 3", "keep = 1"))
    job = jobfile.load_job(job_file)
    d = job.directory
    _published(d, "1", "old\n")
    snapshots.point_latest(d, d / "run-1")
    _published(d, "2", "new\n")                        # renamed, latest not switched
    os.symlink("run-2", d / ".latest.4242")            # the dead run's temporary link
    (d / ".work").mkdir()
    (d / ".work" / "run.json").write_text(json.dumps({"run_id": "2", "started": "x"}))
    from ltr_toolkit.transport.client import Connection
    manifest = jobs.run_job(job, Connection(url="http://127.0.0.1:9"))
    assert os.readlink(d / "latest") == "run-2"
    assert (d / "latest" / "features.txt").read_text() == "new\n"
    assert manifest["pruned"] == ["run-1"] and manifest["snapshot"] == str(d / "run-2")
    assert [p.name for p in snapshots.snapshots(d)] == ["run-2"]
    assert not list(d.glob(".latest.*")) and not (d / ".work").exists()


def test_prune_never_deletes_what_latest_names(tmp_path):
    for run_id in ("1", "2", "3"):
        _published(tmp_path, run_id, f"{run_id}\n")
    snapshots.point_latest(tmp_path, tmp_path / "run-2")
    assert snapshots.prune(tmp_path, 1) == ["run-1"]
    assert os.path.isdir(tmp_path / "latest")


def test_incremental_seed_is_atomic_and_needs_the_sidecar(tmp_path, monkeypatch):
    job_file = _job(tmp_path, "http://127.0.0.1:9", "fs", "idx", "j.txt")
    job = jobfile.load_job(job_file)
    snap = _published(job.directory, "1", "".join(f"1 qid:1 1:{i} # d{i}\n" for i in range(5000)))
    work = job.directory / ".work"
    work.mkdir()
    import shutil

    def killed(fin, fout, length=0):
        fout.write(fin.read(1000))
        raise KeyboardInterrupt("killed mid-copy")
    monkeypatch.setattr(shutil, "copyfileobj", killed)
    with pytest.raises(KeyboardInterrupt):
        jobs._seed_incremental(job, work, log=lambda m: None)
    assert not (work / "features.txt").exists()       # no truncated base to resume from
    assert not [p.name for p in work.iterdir() if p.name.startswith(".features.txt")]
    monkeypatch.undo()
    jobs._seed_incremental(job, work, log=lambda m: None)
    assert (work / "features.txt").read_bytes() == (snap / "features.txt").read_bytes()
    # a latest snapshot without its sidecar is no base: the run logs everything
    for p in work.iterdir():
        p.unlink()
    (snap / "features.txt.json").unlink()
    said = []
    jobs._seed_incremental(job, work, log=said.append)
    assert not (work / "features.txt").exists() and "no sidecar" in said[0]


def test_scheduling_examples_parse():
    import configparser
    import yaml
    text = DOCS.read_text()
    blocks = {}
    for lang in ("cron", "ini", "yaml"):
        parts = text.split(f"```{lang}\n")[1:]
        assert parts, f"no {lang} example in {DOCS}"
        blocks[lang] = [p.split("```", 1)[0] for p in parts]
    for cron in blocks["cron"]:
        for ln in cron.splitlines():
            if ln.strip() and not ln.startswith("#"):
                fields = ln.split(None, 5)
                assert len(fields) == 6 and "ltr job run" in fields[5], ln
    units = [configparser.ConfigParser(strict=True, interpolation=None) for _ in blocks["ini"]]
    for cp, body in zip(units, blocks["ini"]):
        cp.read_string(body)
    sections = set().union(*(cp.sections() for cp in units))
    assert {"Unit", "Service", "Timer", "Install"} <= sections
    assert any("ltr job run" in cp.get("Service", "ExecStart", fallback="") for cp in units)
    docs = [d for b in blocks["yaml"] for d in yaml.safe_load_all(b)]
    cron_job = next(d for d in docs if d.get("kind") == "CronJob")
    spec = cron_job["spec"]
    assert len(spec["schedule"].split()) == 5 and spec["concurrencyPolicy"] == "Forbid"
    container = spec["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:3] == ["ltr", "job", "run"]
    assert not any("PASSWORD" in str(a) for a in container["command"])


# ----------------------------------------------------------------- live

@pytest.fixture(scope="module")
def cranfield_job(ltr_cluster, cranfield_index, shipped_featureset, tmp_path_factory):
    from ltr_toolkit.data.judgments import save_ranklib
    from ltr_toolkit.datasets import cranfield
    name = shipped_featureset
    d = tmp_path_factory.mktemp("jobs")
    judg = d / "judgments.txt"
    save_ranklib(cranfield.judgments(), judg)
    return ltr_cluster.url, name, cranfield_index["index"], judg


@pytest.mark.cluster
@pytest.mark.ltr
def test_job_twice_gives_two_snapshots_with_identical_rows(cranfield_job, tmp_path, cli):
    url, fs, index, judg = cranfield_job
    job = _job(tmp_path, url, fs, index, judg)
    manifests = []
    for timeout in ([], ["--timeout", "7"]):   # the file names none: 60 s, else ltr --timeout
        r = cli(*timeout, "job", "run", str(job), "--json")
        assert r.returncode == 0, r.stderr
        manifests.append(json.loads(r.stdout))
    a, b = manifests
    assert (a["timeout_seconds"], b["timeout_seconds"]) == (jobfile.DEFAULT_TIMEOUT, 7.0)
    assert a["run_id"] != b["run_id"] and a["status"] == b["status"] == "complete"
    assert a["files"]["features.txt"] == b["files"]["features.txt"]
    assert a["counts"]["rows"] == b["counts"]["rows"] > 1000
    assert a["featureset"]["name"] == fs and len(a["judgments"]["sha256"]) == 64
    out = tmp_path / "out"
    assert [p.name for p in snapshots.snapshots(out)] == [f"run-{a['run_id']}", f"run-{b['run_id']}"]
    assert os.readlink(out / "latest") == f"run-{b['run_id']}"
    assert not (out / ".work").exists()


@pytest.mark.cluster
@pytest.mark.ltr
def test_job_killed_at_random_moments_resumes_byte_identical(cranfield_job, tmp_path):
    url, fs, index, judg = cranfield_job
    ref_dir, run_dir = tmp_path / "ref", tmp_path / "run"
    ref_dir.mkdir()
    run_dir.mkdir()
    extra = dict(candidates=100, batch=3, parallel=2)
    cmd = [sys.executable, "-m", "ltr_toolkit.cli", "job", "run"]
    ref_job = _job(ref_dir, url, fs, index, judg, **extra)
    t0 = time.monotonic()
    subprocess.run(cmd + [str(ref_job)], check=True, capture_output=True)
    full = time.monotonic() - t0
    job = _job(run_dir, url, fs, index, judg, **extra)
    rng = random.Random(20261122)
    kills, with_progress = 0, 0
    ckpt = run_dir / "out" / ".work" / "features.txt.ckpt.json"
    while kills < 6:
        before = ckpt.stat().st_mtime_ns if ckpt.exists() else None
        p = subprocess.Popen(cmd + [str(job)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if kills % 2:    # a random moment after this run committed a round of its own
            while p.poll() is None and (ckpt.stat().st_mtime_ns if ckpt.exists() else None) == before:
                time.sleep(0.02)
            time.sleep(rng.uniform(0.0, 0.5))
        else:            # a random moment, start-up included
            time.sleep(rng.uniform(0.5, max(1.0, min(4.0, full * 0.25))))
        if p.poll() is not None:
            break        # finished before this kill: it had little left to do
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        kills += 1
        with_progress += ckpt.exists()
        # whatever the moment, nothing half-published: every snapshot is complete
        for snap in snapshots.snapshots(run_dir / "out"):
            m = json.loads((snap / "manifest.json").read_text())
            assert m["files"]["features.txt"] == snapshots.sha256(snap / "features.txt")
    r = subprocess.run(cmd + [str(job), "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    print(f"kills: {kills} ({with_progress} after logging had committed rounds); full run {full:.1f}s")
    assert kills >= 5 and with_progress >= 1
    ref = snapshots.snapshots(ref_dir / "out")[-1]
    got = snapshots.snapshots(run_dir / "out")[-1]
    assert (got / "features.txt").read_bytes() == (ref / "features.txt").read_bytes()
    side = {k: v for k, v in json.loads((got / "features.txt.json").read_text()).items() if k != "retried_items"}
    ref_side = {k: v for k, v in json.loads((ref / "features.txt.json").read_text()).items() if k != "retried_items"}
    assert side == ref_side


@pytest.mark.cluster
@pytest.mark.ltr
def test_killed_run_resumes_its_own_inputs_after_the_judgments_change(cranfield_job, tmp_path):
    """Killed after logging committed rounds; the judgments file is then replaced (a new
    judging round). The resumed run finishes with the inputs it started with (exit 0, not a
    checkpoint mismatch for ever), byte-identical to an uninterrupted run over them; the
    next run reads the new file."""
    from ltr_toolkit.data.judgments import load_judgments, save_ranklib
    url, fs, index, judg = cranfield_job
    mine = tmp_path / "judgments.txt"
    mine.write_bytes(judg.read_bytes())
    extra = dict(candidates=50, batch=3)
    ref_dir, run_dir = tmp_path / "ref", tmp_path / "run"
    for d in (ref_dir, run_dir):
        d.mkdir()
    cmd = [sys.executable, "-m", "ltr_toolkit.cli", "job", "run"]
    subprocess.run(cmd + [str(_job(ref_dir, url, fs, index, mine, **extra))], check=True,
                   capture_output=True)
    job = _job(run_dir, url, fs, index, mine, **extra)
    ckpt = run_dir / "out" / ".work" / "features.txt.ckpt.json"
    p = subprocess.Popen(cmd + [str(job)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not ckpt.exists() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert p.poll() is None, "finished before it could be killed"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    ref = snapshots.snapshots(ref_dir / "out")[-1]
    ref_rows = (ref / "features.txt").read_text().splitlines()
    new = load_judgments(mine)
    logged = [(r.split()[1][4:], r.split("#")[1].split()[0]) for r in ref_rows]
    q, d = next(k for k in logged if k in new.grades)      # a judged pair the job logs
    new.grades[(q, d)] += 1
    save_ranklib(new, mine)
    r = subprocess.run(cmd + [str(job), "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert (Path(m["snapshot"]) / "features.txt").read_text().splitlines() == ref_rows
    r = subprocess.run(cmd + [str(job), "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = (Path(json.loads(r.stdout)["snapshot"]) / "features.txt").read_text().splitlines()
    changed = [(a, b) for a, b in zip(ref_rows, rows) if a != b]
    assert len(rows) == len(ref_rows) and len(changed) == 1
    assert changed[0][1].startswith(f"{new.grades[(q, d)]:g} qid:{q} ")


@pytest.mark.cluster
@pytest.mark.ltr
def test_429s_are_retried_and_nothing_is_lost(cranfield_job, tmp_path, monkeypatch):
    """A second node whose search pool has 1 thread and a queue of 1: parallel _msearch
    requests get real 429s, per request and per item."""
    from ltr_toolkit.localnode import plugins, process
    from ltr_toolkit.stores import store as st
    from ltr_toolkit.transport.client import Connection
    from ltr_toolkit.indexing.documents import index_documents
    from ltr_toolkit.data.svmlight import load_logged
    from ltr_toolkit.datasets import cranfield
    from ltr_toolkit.data.featuresets import load_featureset
    url, fs, index, judg = cranfield_job
    supplied = plugins.supplied_plugin_zip()
    import tempfile
    home = Path(tempfile.mkdtemp(prefix="ltr-429-", dir="/var/tmp"))
    os.chmod(home, 0o755)
    monkeypatch.setenv("LTR_HOME", str(home))
    if supplied is not None:
        monkeypatch.setenv("LTR_PLUGIN_ZIP", str(supplied))
    info, _ = process.start(settings={"thread_pool.search.size": 1,
                                        "thread_pool.search.queue_size": 1})
    try:
        conn = Connection(url=info.url, timeout=120)
        index_documents(conn, "tiny-pool", cranfield.documents(), expansion=None)
        st.init_store(conn, None)
        st.upload_featureset(conn, load_featureset(cranfield.FEATURE_SET))
        from ltr_toolkit.features.featurelog import log_features
        from ltr_toolkit.features.candidates import candidate_judgments
        from ltr_toolkit.data.judgments import load_judgments
        jl = load_judgments(judg)
        jl = jl.subset(jl.judged_qids()[:60])
        cands, cinfo = candidate_judgments(conn, "tiny-pool", jl, 20)
        out = tmp_path / "loaded.txt"
        side = log_features(conn, cands, "cranfield", "tiny-pool", out, batch=10, parallel=4,
                            candidates=cinfo)
        ref = tmp_path / "calm.txt"
        log_features(conn, cands, "cranfield", "tiny-pool", ref, batch=10, parallel=1, candidates=cinfo)
    finally:
        process.stop()
        import shutil
        shutil.rmtree(home, ignore_errors=True)
    print(f"429-rejected items retried: {side['retried_items']}; rows: {side['rows']}")
    assert side["retried_items"] > 0
    a, b = load_logged(out), load_logged(ref)
    pairs = list(zip(a.qids[a.row_query], a.doc_ids))
    assert len(pairs) == len(set(pairs)) == len(cands) - len(side["missing_docs"])
    assert pairs == list(zip(b.qids[b.row_query], b.doc_ids))
    assert out.read_bytes() == ref.read_bytes()
