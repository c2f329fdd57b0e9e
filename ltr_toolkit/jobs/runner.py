"""Scheduled feature logging: ``ltr job run JOB.toml``.

A job file (TOML) names the cluster, the feature store and set, the index, the first
stage, the judgments and the output directory; credentials come only from the
environment (``LTR_USER`` / ``LTR_PASSWORD``)::

    [cluster]
    url = "https://search.internal:9200"     # or LTR_URL
    ca_certs = "/etc/ssl/search-ca.pem"      # optional; insecure = false; timeout = 60

    [logging]
    featureset = "cranfield"
    index = "cranfield"
    judgments = "judgments.txt"              # relative paths: from the job file's folder
    format = "ranklib"                       # optional: ranklib | trec | csv | jsonl
    store = ""                               # optional: a named store
    fields = ["title", "abstract"]           # or first_stage = "first_stage.json"
    candidates = 100                         # optional: log the first stage's top K
    batch = 25
    parallel = 2                             # _msearch requests in flight

    [output]
    directory = "snapshots"
    keep = 7                                 # snapshots kept
    incremental = false                      # log only pairs the latest snapshot lacks

A run:

1. takes ``DIR/.lock`` (``flock``; held by a live run -> exit 2 naming its pid; the kernel
   releases the lock of a killed run, so a stale lock is simply taken over);
2. logs into ``DIR/.work/`` (checkpointed: a run killed at any moment resumes there and
   produces byte-identical output). The judgments it read and the candidates it fetched
   are frozen in ``.work/inputs.json`` when it starts: a resumed run logs those, even if
   the judgments file or the index changed in between (the next run reads the new ones);
3. publishes: the snapshot is assembled in ``DIR/.work/stage-RUNID/`` (``features.txt``,
   its sidecar, ``manifest.json``), then renamed to ``DIR/RUNID/`` in one step and
   ``DIR/latest`` is switched atomically. A kill during publish leaves the previous
   snapshot and ``latest`` as they were;
4. keeps the newest ``keep`` snapshots (never the one ``latest`` names).

A run killed after its snapshot was renamed into place but before ``latest`` was switched
finishes the switch and the pruning when it resumes. An incremental run seeds its work file
from the latest snapshot with an atomic copy (a kill mid-copy leaves no truncated base);
a latest snapshot without its sidecar is not used as a base (the run logs everything).

The job file is read by :mod:`.jobfile`; the output directory (lock, snapshots,
``latest``, retention) is :mod:`.snapshots`.

Before any work the index's health is read: red (a shard has no copy) is a one-line
error, exit 2; yellow (replicas missing) a one-line warning, and the run goes on.

A click job has a ``[clicks]`` section instead of ``judgments``: its judgments are made
when the run starts from the last ``days`` of the cluster's UBI events through a click
model (``model = "pbm"``, ``min_impressions``, ``prior``, ``grades``, ``positions``,
``queries_index``, ``events_index``: as ``ltr judgments clicks``), frozen like any judgments,
and published in the snapshot beside the features (``judgments.txt``, its
``.counts.csv`` and ``.json`` report)::

    [clicks]
    days = 7
    model = "pbm"

Exit codes: 0 complete, 3 partial (queries failed; listed in the manifest), 2 user error
(a red index among them), 1 unexpected.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import time
from pathlib import Path

from .. import __version__
from ..io.atomic import atomic_copy, write_json
from .jobfile import Job
from .snapshots import (job_lock, point_latest, prune, publish, remove_leftovers, sha256,
                        snapshot_path, snapshots)
from ..errors import ClusterError
from ..transport.client import call, request
from ..data.judgments import JudgmentList, load_judgments
from ..features.candidates import judged_candidates
from ..query.firststage import FirstStage
from ..clicks.judging.judge import ClickSettings, judge
from ..clicks.judging.output import write_counts, write_judgments, write_report
from ..clicks.events.ubi import EVENTS, QUERIES, read_event_log, time_range
from ..features.featurelog import log_features
from ..features.incremental import log_incremental, recorded_budget


def run_job(job: Job, conn, log=lambda msg: None, after=None) -> dict:
    """Run the job once (see the module docstring). Returns the manifest. ``after(job,
    snapshot, conn)``: run once the snapshot is published when the job has a ``[monitor]``
    section (``ltr job run`` passes ``ltr monitor``'s check); what it returns goes into
    the snapshot's manifest as ``monitor``."""
    directory = job.directory
    with job_lock(directory):
        remove_leftovers(directory)
        work = directory / ".work"
        work.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        run = _run_record(work, log)
        finished = finish_published(job, work, run)
        if finished is not None:
            return finished
        index_health(conn, job.index, log)
        jl, info, stage_fs, budget = _inputs(job, conn, work)
        t_log = time.monotonic()
        side = _log(job, conn, work, jl, info, stage_fs, budget, log)
        log_seconds = time.monotonic() - t_log
        stage = _stage(work, run["run_id"])
        manifest = _manifest(job, conn, run, side, stage, log_seconds, time.monotonic() - t0)
        write_json(stage / "manifest.json", manifest)
        final = publish(directory, stage, run["run_id"])
        manifest.update(snapshot=str(final), pruned=prune(directory, job.keep))
        shutil.rmtree(work)
        if after is not None and job.monitor is not None:
            manifest["monitor"] = record_monitor(final, after(job, final, conn))
        log(f"published {final.name}: {side['rows']} rows, {len(side['missing_docs'])} missing docs, "
            f"{len(side.get('failed_queries', []))} failed queries")
        return manifest


def finish_published(job: Job, work: Path, run: dict) -> dict | None:
    """A run killed after its snapshot's rename: point ``latest`` at it, prune, and
    return its manifest (None: the run had not published)."""
    done = snapshot_path(job.directory, run["run_id"])
    if not (done / "manifest.json").is_file():
        return None
    point_latest(job.directory, done)
    manifest = json.loads((done / "manifest.json").read_text())
    manifest.update(snapshot=str(done), pruned=prune(job.directory, job.keep))
    shutil.rmtree(work)
    return manifest


def record_monitor(snapshot: Path, result: dict) -> dict:
    """``result`` written into the published snapshot's manifest (atomically) as ``monitor``."""
    path = snapshot / "manifest.json"
    written = json.loads(path.read_text())
    written["monitor"] = result
    write_json(path, written)
    return result


def index_health(conn, index: str, log) -> str:
    """The index's health: red (a shard has no copy: its documents cannot be logged) is
    a one-line error, exit 2, before any work; yellow (replicas missing) is a one-line
    warning and the run goes on with the copies there are."""
    if not call(conn, conn.client().indices.exists, index=index):
        raise ClusterError(f"index {index} does not exist on {conn.display_url}",
                           "check the job file's [logging] index")
    h = request(conn, "GET", f"/_cluster/health/{index}")
    status = h.get("status")
    if status == "red":
        raise ClusterError(f"index {index} is red on {conn.display_url}: a shard has no copy "
                           f"({h.get('unassigned_shards', '?')} shard copies unassigned)",
                           "wait until the cluster has recovered (GET _cluster/health), then run the job again")
    if status == "yellow":
        log(f"warning: index {index} is yellow on {conn.display_url} "
            f"({h.get('unassigned_shards', '?')} replica copies unassigned): logging goes on")
    return status


def _run_record(work: Path, log) -> dict:
    """This run's id and start time; a killed run's when one is there (it resumes)."""
    run_file = work / "run.json"
    if run_file.is_file():
        run = json.loads(run_file.read_text())
        log(f"resuming run {run['run_id']}")
        return run
    now = _dt.datetime.now(_dt.timezone.utc)
    run = {"run_id": now.strftime("%Y%m%dT%H%M%S%fZ"), "started": now.isoformat(timespec="seconds")}
    write_json(run_file, run)
    return run


def _inputs(job: Job, conn, work: Path):
    """(judgments, candidates info, first stage, query-term budget): frozen in ``inputs.json`` when a run
    starts, so a resumed run logs what its first attempt saw, even if the judgments file
    or the index changed since (its checkpoint stays valid)."""
    stage_fs = FirstStage.resolve(job.first_stage, job.fields, job.statistics)
    frozen = work / "inputs.json"
    if frozen.is_file():
        inputs = json.loads(frozen.read_text())
        return (JudgmentList.from_dict(inputs["judgments"]), inputs["candidates"], stage_fs,
                inputs.get("max_terms"))
    jl = click_judgments(job, conn, work) if job.clicks else load_judgments(job.judgments, job.fmt, job.queries)
    # an increment is logged under the latest snapshot's budget: its candidates too
    latest = snapshots(job.directory)[-1:] if job.incremental else []
    recorded, budget = recorded_budget(latest[0] / "features.txt") if latest else (False, None)
    jl, info, budget = judged_candidates(conn, job.index, jl, job.featureset, stage_fs, job.store,
                                         job.candidates, job.unjudged, job.judged_outside,
                                         max_terms=budget, via=job.via, recorded=recorded)
    write_json(frozen, {"judgments": jl.to_dict(), "candidates": info, "max_terms": budget},
               indent=None)
    return jl, info, stage_fs, budget


#: a click job's judgments and their counts, published in its snapshot
CLICK_FILES = ("judgments.txt", "judgments.txt.counts.csv", "judgments.txt.json")


def click_judgments(job: Job, conn, work: Path):
    """A click job's judgments: the last ``days`` of UBI events through its click model,
    written into ``work`` (published with the snapshot)."""
    cl = dict(job.clicks)
    days = cl.pop("days")
    names = (cl.pop("queries_index", QUERIES), cl.pop("events_index", EVENTS))
    actions = tuple(a.strip() for a in cl.pop("click_actions", "click").split(",") if a.strip())
    mapping = cl.pop("grades", "levels")
    rng = time_range(days=days)
    events = read_event_log(conn, rng, *names, click_actions=actions)
    jl, rows, report = judge(events, ClickSettings(mapping=mapping, **cl),
                             f"{conn.display_url}/{names[1]} last {days:g} days")
    write_judgments(jl, work / CLICK_FILES[0], "ranklib")
    write_counts(rows, work / CLICK_FILES[0])
    write_report(dict(report, time_range=rng), work / CLICK_FILES[0])
    return jl


def _seed_incremental(job: Job, work: Path, log) -> None:
    """An incremental run starts from the latest snapshot's rows (copied atomically), when
    it has its sidecar (which names the feature set they were logged with)."""
    features = work / "features.txt"
    if features.exists() or (work / "features.txt.ckpt.json").exists():
        return                                  # a resumed run: its work file is there
    latest = snapshots(job.directory)[-1:]
    if not latest:
        return
    base = latest[0]
    if not (base / "features.txt.json").is_file():
        log(f"{base.name} has no sidecar: logging everything instead of an increment")
        return
    atomic_copy(base / "features.txt.json", work / "features.txt.json")
    atomic_copy(base / "features.txt", features)


def _log(job: Job, conn, work: Path, jl, info, stage_fs, budget, log) -> dict:
    features = work / "features.txt"
    if job.incremental:
        _seed_incremental(job, work, log)
        return log_incremental(conn, jl, job.featureset, job.index, features, job.store,
                               job.batch, None, stage_fs, info, parallel=job.parallel, via=job.via)
    return log_features(conn, jl, job.featureset, job.index, features, job.store, job.batch,
                        None, stage_fs, info, parallel=job.parallel, max_terms=budget, via=job.via)


def _stage(work: Path, run_id: str) -> Path:
    """The snapshot's folder, assembled under ``.work`` (renamed into place later)."""
    stage = work / f"stage-{run_id}"
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir()
    os.replace(work / "features.txt", stage / "features.txt")
    os.replace(work / "features.txt.json", stage / "features.txt.json")
    for name in CLICK_FILES:
        if (work / name).exists():
            os.replace(work / name, stage / name)
    return stage


def _manifest(job: Job, conn, run: dict, side: dict, stage: Path, log_seconds: float,
              total_seconds: float) -> dict:
    failed = side.get("failed_queries", [])
    return {
        "run_id": run["run_id"], "started": run["started"],
        "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "status": "partial" if failed else "complete",
        "job": str(job.path), "toolkit_version": __version__,
        "cluster": conn.display_url, "timeout_seconds": conn.timeout,
        "index": job.index, "store": job.store,
        "featureset": {"name": side["featureset"], "sha256": side["featureset_sha256"],
                       "features": len(side["feature_names"])},
        "judgments": side["judgments"], "first_stage": side["first_stage"],
        "candidates": side.get("candidates"), "incremental": job.incremental,
        "counts": {"rows": side["rows"], "missing_docs": len(side["missing_docs"]),
                   "failed_queries": len(failed), "retried_items": side.get("retried_items", 0)},
        "failed_queries": failed,
        "durations_seconds": {"logging": round(log_seconds, 3), "total": round(total_seconds, 3)},
        "files": {name: sha256(stage / name) for name in ("features.txt", "features.txt.json", *CLICK_FILES)
                  if (stage / name).exists()},
        "clicks": json.loads((stage / CLICK_FILES[2]).read_text())["counts"] if job.clicks else None,
    }
