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
4. keeps the newest ``keep`` snapshots.

Exit codes: 0 complete, 3 partial (queries failed; listed in the manifest), 2 user error,
1 unexpected.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..data.judgments import FORMATS as JUDGMENT_FORMATS
from ..errors import InputError, UserError
from ..io.atomic import write_json
from ..io.text import read_text
from .candidates import JUDGED_OUTSIDE, UNJUDGED
from .client import Connection

SNAPSHOT_PREFIX = "run-"


#: A job's request timeout when neither its file nor ``ltr --timeout`` gives one, seconds.
DEFAULT_TIMEOUT = 60.0


@dataclass
class Job:
    path: Path
    url: str | None
    ca_certs: str | None
    insecure: bool
    timeout: float | None      # None: not in the file (``ltr --timeout``, else DEFAULT_TIMEOUT)
    featureset: str
    index: str
    judgments: Path
    fmt: str | None
    queries: Path | None
    store: str | None
    fields: list[str] | None
    first_stage: Path | None
    candidates: int | None
    unjudged: str
    judged_outside: str
    batch: int
    parallel: int
    directory: Path
    keep: int
    incremental: bool
    raw: dict = field(default_factory=dict, repr=False)


def load_job(path) -> Job:
    """Read and validate a job file; every problem names ``file:line`` where it can."""
    try:
        import tomllib
    except ModuleNotFoundError:          # Python 3.10
        import tomli as tomllib
    path = Path(path)
    text = read_text(path)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        import re
        m = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        line = getattr(exc, "lineno", None) or (int(m.group(1)) if m else None)
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise InputError(path, line, f"invalid TOML: {msg}") from None
    known = {"cluster": {"url", "ca_certs", "insecure", "timeout"},
             "logging": {"featureset", "index", "judgments", "format", "queries", "store", "fields",
                         "first_stage", "candidates", "unjudged", "judged_outside", "batch",
                         "parallel"},
             "output": {"directory", "keep", "incremental"}}

    def line_of(key: str) -> int | None:
        for i, ln in enumerate(text.splitlines(), start=1):
            if ln.strip().startswith(key):
                return i
        return None
    for section, body in raw.items():
        if section not in known or not isinstance(body, dict):
            raise InputError(path, line_of(f"[{section}"), f"unknown section [{section}] "
                             f"(expected {', '.join(f'[{s}]' for s in known)})")
        for key in body:
            if key not in known[section]:
                raise InputError(path, line_of(key), f"unknown key {key!r} in [{section}]")
            if key in ("password", "user"):
                raise InputError(path, line_of(key), "credentials never go in a job file: "
                                 "set LTR_USER / LTR_PASSWORD in the environment")
    cl, lg, out = raw.get("cluster", {}), raw.get("logging", {}), raw.get("output", {})
    if "url" in cl and ("@" in str(cl["url"]).split("//", 1)[-1].split("/", 1)[0]):
        raise InputError(path, line_of("url"), "the URL carries credentials: put them in "
                         "LTR_USER / LTR_PASSWORD instead")
    for key in ("featureset", "index", "judgments"):
        if not lg.get(key):
            raise InputError(path, line_of("[logging"), f"[logging] needs {key} = ...")
    if "directory" not in out:
        raise InputError(path, line_of("[output"), "[output] needs directory = ...")
    base = path.resolve().parent

    def rel(v):
        return None if v in (None, "") else (base / str(v)).resolve()

    def positive(section, key, value, minimum=1):
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise InputError(path, line_of(key), f"[{section}] {key} = {value!r}: expected a whole number >= {minimum}")
        return value

    def flag(section, key, value):
        # a quoted "false" would be truthy: TLS checks silently off
        if not isinstance(value, bool):
            raise InputError(path, line_of(key), f"[{section}] {key} = {value!r}: expected true or "
                             "false (TOML booleans, without quotes)")
        return value

    def seconds(section, key, value):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise InputError(path, line_of(key), f"[{section}] {key} = {value!r}: expected a number "
                             "of seconds > 0 (no unit, no quotes)")
        return float(value)

    def one_of(section, key, value, allowed):
        if value not in allowed:
            raise InputError(path, line_of(key), f"[{section}] {key} = {value!r}: expected one of "
                             + ", ".join(repr(a) for a in allowed))
        return value
    fields = lg.get("fields")
    if fields is not None and (not isinstance(fields, list) or not all(isinstance(f, str) for f in fields)):
        raise InputError(path, line_of("fields"), "fields = [...] must be a list of field names")
    if fields and lg.get("first_stage"):
        raise InputError(path, line_of("first_stage"), "give fields or first_stage, not both")
    return Job(
        path=path, url=cl.get("url"), ca_certs=str(rel(cl["ca_certs"])) if cl.get("ca_certs") else None,
        insecure=flag("cluster", "insecure", cl.get("insecure", False)),
        timeout=seconds("cluster", "timeout", cl["timeout"]) if "timeout" in cl else None,
        featureset=str(lg["featureset"]), index=str(lg["index"]), judgments=rel(lg["judgments"]),
        fmt=one_of("logging", "format", lg.get("format"), (None, *JUDGMENT_FORMATS)),
        queries=rel(lg.get("queries")), store=lg.get("store") or None,
        fields=fields, first_stage=rel(lg.get("first_stage")),
        candidates=positive("logging", "candidates", lg["candidates"]) if "candidates" in lg else None,
        unjudged=one_of("logging", "unjudged", lg.get("unjudged", "zero"), UNJUDGED),
        judged_outside=one_of("logging", "judged_outside", lg.get("judged_outside", "exclude"),
                              JUDGED_OUTSIDE),
        batch=positive("logging", "batch", lg.get("batch", 25)),
        parallel=positive("logging", "parallel", lg.get("parallel", 1)),
        directory=rel(out["directory"]), keep=positive("output", "keep", out.get("keep", 7)),
        incremental=flag("output", "incremental", out.get("incremental", False)), raw=raw)


def job_connection(job: Job, given: Connection, explicit_timeout: bool = False) -> Connection:
    """The job's connection: the file's settings over the command line's (``given``); the
    timeout from the file, else from ``ltr --timeout`` when given explicitly, else
    :data:`DEFAULT_TIMEOUT`. TLS verification is off only if either says so."""
    timeout = job.timeout
    if timeout is None:
        timeout = given.timeout if explicit_timeout else DEFAULT_TIMEOUT
    return Connection(url=job.url or given.url, ca_certs=job.ca_certs or given.ca_certs,
                      insecure=job.insecure or given.insecure, timeout=timeout)


@contextlib.contextmanager
def job_lock(directory: Path):
    """An exclusive lock on ``directory/.lock`` for the whole run."""
    directory.mkdir(parents=True, exist_ok=True)
    lock = directory / ".lock"
    fh = open(lock, "a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip() or "?"
        fh.close()
        raise UserError(f"another run of this job holds {lock} (pid {holder})",
                        "wait for it to finish; two runs never overlap") from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"{os.getpid()}\n")
    fh.flush()
    try:
        yield
    finally:
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def snapshots(directory: Path) -> list[Path]:
    """Published snapshots, oldest first."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir()
                  if p.is_dir() and p.name.startswith(SNAPSHOT_PREFIX) and (p / "manifest.json").is_file())


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(directory: Path, stage: Path, run_id: str) -> Path:
    """Rename the complete ``stage`` to ``directory/run-ID`` and point ``latest`` at it:
    each step is one rename, so a reader (or a kill) never sees a half snapshot."""
    final = directory / f"{SNAPSHOT_PREFIX}{run_id}"
    _fsync_dir(stage)
    os.rename(stage, final)
    tmp = directory / f".latest.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    os.symlink(final.name, tmp)
    os.replace(tmp, directory / "latest")
    _fsync_dir(directory)
    return final


def prune(directory: Path, keep: int) -> list[str]:
    old = snapshots(directory)[:-keep] if keep > 0 else []
    for p in old:
        shutil.rmtree(p)
    return [p.name for p in old]


def run_job(job: Job, conn, log=lambda msg: None) -> dict:
    """Run the job once (see the module docstring). Returns the manifest."""
    from ..data.judgments import JudgmentList, load_judgments
    from .candidates import candidate_judgments
    from .featurelog import log_features, log_incremental
    from .firststage import FirstStage
    directory = job.directory
    with job_lock(directory):
        work = directory / ".work"
        work.mkdir(parents=True, exist_ok=True)
        run_file = work / "run.json"
        t0 = time.monotonic()
        if run_file.is_file():      # a killed run: resume it, same id
            run = json.loads(run_file.read_text())
            log(f"resuming run {run['run_id']}")
        else:
            now = _dt.datetime.now(_dt.timezone.utc)
            run = {"run_id": now.strftime("%Y%m%dT%H%M%S%fZ"), "started": now.isoformat(timespec="seconds")}
            write_json(run_file, run)
        run_id = run["run_id"]
        done = directory / f"{SNAPSHOT_PREFIX}{run_id}"
        if (done / "manifest.json").is_file():   # killed after publishing: only clean up
            prune(directory, job.keep)
            shutil.rmtree(work)
            manifest = json.loads((done / "manifest.json").read_text())
            return dict(manifest, snapshot=str(done), pruned=[])
        stage_fs = FirstStage.resolve(job.first_stage, job.fields)
        frozen = work / "inputs.json"
        if frozen.is_file():
            # a resumed run logs the judgments and candidates its first attempt saw, even
            # if the file or the index changed since: its checkpoint stays valid
            inputs = json.loads(frozen.read_text())
            jl, info = JudgmentList.from_dict(inputs["judgments"]), inputs["candidates"]
        else:
            jl = load_judgments(job.judgments, job.fmt, job.queries)
            info = None
            if job.candidates:
                jl, info = candidate_judgments(conn, job.index, jl, job.candidates, stage_fs,
                                               job.unjudged, job.judged_outside)
            write_json(frozen, {"judgments": jl.to_dict(), "candidates": info}, indent=None)
        features = work / "features.txt"
        t_log = time.monotonic()
        latest = snapshots(directory)[-1:] if job.incremental else []
        if latest and not features.exists() and not (work / "features.txt.ckpt.json").exists():
            shutil.copyfile(latest[0] / "features.txt", features)
            shutil.copyfile(latest[0] / "features.txt.json", work / "features.txt.json")
        run_log = log_incremental if job.incremental else log_features
        side = run_log(conn, jl, job.featureset, job.index, features, job.store, job.batch, None,
                       stage_fs, info, **({} if job.incremental else {"parallel": job.parallel}))
        log_seconds = time.monotonic() - t_log
        stage = work / f"stage-{run_id}"
        if stage.exists():
            shutil.rmtree(stage)
        stage.mkdir()
        os.replace(features, stage / "features.txt")
        os.replace(work / "features.txt.json", stage / "features.txt.json")
        manifest = {
            "run_id": run_id, "started": run["started"],
            "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "status": "partial" if side.get("failed_queries") else "complete",
            "job": str(job.path), "toolkit_version": __version__,
            "cluster": conn.display_url, "index": job.index, "store": job.store,
            "featureset": {"name": side["featureset"], "sha256": side["featureset_sha256"],
                           "features": len(side["feature_names"])},
            "judgments": side["judgments"], "first_stage": side["first_stage"],
            "candidates": side.get("candidates"), "incremental": job.incremental,
            "counts": {"rows": side["rows"], "missing_docs": len(side["missing_docs"]),
                       "failed_queries": len(side.get("failed_queries", [])),
                       "retried_items": side.get("retried_items", 0)},
            "failed_queries": side.get("failed_queries", []),
            "durations_seconds": {"logging": round(log_seconds, 3),
                                  "total": round(time.monotonic() - t0, 3)},
            "files": {"features.txt": _sha256(stage / "features.txt"),
                      "features.txt.json": _sha256(stage / "features.txt.json")},
        }
        write_json(stage / "manifest.json", manifest)
        final = publish(directory, stage, run_id)
        removed = prune(directory, job.keep)
        shutil.rmtree(work)
        manifest["snapshot"] = str(final)
        manifest["pruned"] = removed
        log(f"published {final.name}: {side['rows']} rows, {len(side['missing_docs'])} missing docs, "
            f"{len(side.get('failed_queries', []))} failed queries")
        return manifest

