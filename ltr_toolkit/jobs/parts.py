"""One logging job in N parts by query: ``ltr job run JOB.toml --part I/N``.

Each part can run on another machine, at the same time as the others, as long as all see
the same output directory (a shared file system) and the same judgments file. Part I of N
logs the I-th of N contiguous slices of the judgment list's queries (in the list's order)
and the first stage's candidates of those queries, with the query-term budget measured on
the whole list, exactly as a single run would log them. It runs under its own lock
(``DIR/.lock-part-I-of-N``) and work folder (``DIR/.work-part-I-of-N/``: checkpointed, a
killed part resumes there with the inputs it froze), and ends by renaming its finished
rows into ``DIR/.parts/part-I-of-N/`` in one step.

The part that finds all N parts there merges them, under the job's own lock (waiting while
another run holds it): the rows concatenated in part order (the single run's order, so
``features.txt`` is byte-identical to a single run's), the sidecar rebuilt from the parts'
(the judgments' hash over the merged list, counts summed, missing documents and failed
queries in the single run's order), then published as one snapshot with its manifest,
``latest`` and retention exactly as :func:`.runner.run_job` does (a merge killed after its
rename finishes when any part runs again; that run publishes nothing new). The other
parts exit 0 saying which parts the snapshot still waits for. Parts that are not one
run's are refused at the merge, in one line naming them: made from different judgments
(the file changed between two parts), logged differently (another feature-set version,
first stage, term budget or encoder), or more than 12 hours apart; a part already there
is not logged again unless it is that old. The merge works in ``DIR/.work-merge/``, never
in a killed whole run's ``DIR/.work/``. Click jobs
(judgments made from the events at each run's start) and incremental jobs run whole only.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from ..errors import UserError
from ..io.atomic import fsync_dir, write_json
from .jobfile import Job
from .runner import _manifest, _run_record, finish_published, index_health
from .snapshots import job_lock, prune, publish, remove_leftovers
from ..data.judgments import JudgmentList, load_judgments
from ..data.logged import is_header
from ..features.candidates import judged_candidates
from ..features.featurelog import log_features
from ..query.firststage import FirstStage

PARTS = ".parts"
#: the merge's own work folder (a killed whole run's ``.work`` is never touched by a merge)
MERGE_WORK = ".work-merge"
#: sidecar entries every part must share: what was logged, from where, and how
SAME_IN_EVERY_PART = ("featureset", "featureset_sha256", "store", "feature_names",
                      "featureset_params", "index", "first_stage", "max_query_terms",
                      "missing_features", "encoder", "vector_field", "first_stage_feature")
#: parts logged further apart than this are not one snapshot: an older part is logged
#: again when its part runs, and refused at the merge
PART_SPREAD_SECONDS = 12 * 3600
#: the candidates' counts (per part, summed at the merge), not their settings
CANDIDATE_COUNTS = ("judged", "unjudged", "judged_outside", "queries", "outside", "relevant_outside")


def parse_part(text: str) -> tuple[int, int]:
    """``I/N`` -> (I, N), 1 <= I <= N."""
    i, sep, n = text.partition("/")
    try:
        i, n = int(i), int(n)
    except ValueError:
        i = n = 0
    if not sep or not 1 <= i <= n:
        raise UserError(f"--part {text!r}: expected I/N with 1 <= I <= N, e.g. 1/4")
    return i, n


def _tag(i: int, n: int) -> str:
    return f"part-{i}-of-{n}"


def run_part(job: Job, conn, i: int, n: int, log=lambda msg: None) -> dict:
    """Log part ``i`` of ``n`` (unless it is already there), then merge and publish if
    every part is. Returns the snapshot's manifest, or a short status of this part."""
    if job.clicks or job.incremental:
        raise UserError(f"--part: a {'click' if job.clicks else 'incremental'} job runs whole",
                        "drop --part")
    directory, tag = job.directory, _tag(i, n)
    done = directory / PARTS / tag
    with job_lock(directory, f".lock-{tag}"):
        t0 = time.monotonic()
        if _stale(done):
            log(f"part {i}/{n} in {done} was logged more than {PART_SPREAD_SECONDS // 3600} h "
                "ago: logging it again")
            shutil.rmtree(done)
        if not (done / "part.json").is_file():
            _log_part(job, conn, i, n, directory / f".work-{tag}", done, log)
            log(f"part {i}/{n} logged in {time.monotonic() - t0:.1f} s")
    with job_lock(directory, wait=True):
        return _merge(job, conn, n, i, log)


def _stale(done: Path) -> bool:
    """A finished part logged more than :data:`PART_SPREAD_SECONDS` ago."""
    try:
        logged = json.loads((done / "part.json").read_text()).get("logged_at", 0)
    except (OSError, ValueError):
        return False
    return time.time() - logged > PART_SPREAD_SECONDS


def _part_inputs(job: Job, conn, work: Path, i: int, n: int, stage_fs):
    """(this part's judgments, candidates info, query-term budget, the whole list's
    hash), frozen in ``inputs.json`` when the part starts (a resumed part logs them)."""
    frozen = work / "inputs.json"
    if frozen.is_file():
        f = json.loads(frozen.read_text())
        return JudgmentList.from_dict(f["judgments"]), f["candidates"], f["max_terms"], f["whole"]
    whole = load_judgments(job.judgments, job.fmt, job.queries)
    qids = whole.qids()
    jl = whole.subset(qids[(i - 1) * len(qids) // n: i * len(qids) // n])
    jl, info, budget = judged_candidates(conn, job.index, jl, job.featureset, stage_fs, job.store,
                                         job.candidates, job.unjudged, job.judged_outside,
                                         budget_of=whole, via=job.via)
    write_json(frozen, {"judgments": jl.to_dict(), "candidates": info, "max_terms": budget,
                        "whole": whole.content_hash()}, indent=None)
    return jl, info, budget, whole.content_hash()


def _log_part(job: Job, conn, i: int, n: int, work: Path, done: Path, log) -> None:
    work.mkdir(parents=True, exist_ok=True)
    index_health(conn, job.index, log)
    stage_fs = FirstStage.resolve(job.first_stage, job.fields, job.statistics)
    jl, info, budget, whole = _part_inputs(job, conn, work, i, n, stage_fs)
    t0 = time.monotonic()
    log_features(conn, jl, job.featureset, job.index, work / "features.txt", job.store,
                 job.batch, None, stage_fs, info, parallel=job.parallel, max_terms=budget,
                 via=job.via)
    stage = work / "stage"
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir()
    for name in ("features.txt", "features.txt.json"):
        os.replace(work / name, stage / name)
    write_json(stage / "part.json", {"part": i, "of": n, "whole_judgments_sha256": whole,
                                     "judgments": jl.to_dict(), "logged_at": time.time(),
                                     "log_seconds": round(time.monotonic() - t0, 3)}, indent=None)
    fsync_dir(stage)
    done.parent.mkdir(parents=True, exist_ok=True)
    os.rename(stage, done)
    fsync_dir(done.parent)
    shutil.rmtree(work)


def _merge(job: Job, conn, n: int, i: int, log) -> dict:
    """(under the job's lock) Publish the N parts as one snapshot once all are there."""
    directory = job.directory
    remove_leftovers(directory)
    work = directory / MERGE_WORK
    if (work / "run.json").is_file():        # a merge (or a whole run) killed part-way
        finished = finish_published(job, work, _run_record(work, log))
        if finished is not None:
            shutil.rmtree(directory / PARTS, ignore_errors=True)    # they are published
            return finished
    parts = [directory / PARTS / _tag(k, n) for k in range(1, n + 1)]
    waiting = [f"{k}/{n}" for k, p in enumerate(parts, 1) if not (p / "part.json").is_file()]
    if waiting:
        if not (parts[i - 1] / "part.json").is_file():       # merged by another part
            return {"status": "merged", "part": f"{i}/{n}"}
        log(f"part {i}/{n} is in {directory / PARTS}; the snapshot waits for part(s) "
            f"{', '.join(waiting)}")
        return {"status": "part logged", "part": f"{i}/{n}", "waiting_for": waiting}
    metas = [json.loads((p / "part.json").read_text()) for p in parts]
    check_parts(parts, metas)
    work.mkdir(parents=True, exist_ok=True)
    run = _run_record(work, log)
    t0 = time.monotonic()
    stage = work / f"stage-{run['run_id']}"
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir()
    side = merge_parts(parts, metas, stage)
    log_seconds = max(m["log_seconds"] for m in metas)
    manifest = _manifest(job, conn, run, side, stage, log_seconds, time.monotonic() - t0)
    manifest["parts"] = {"count": n, "log_seconds": [m["log_seconds"] for m in metas]}
    write_json(stage / "manifest.json", manifest)
    final = publish(directory, stage, run["run_id"])
    manifest.update(snapshot=str(final), pruned=prune(directory, job.keep))
    shutil.rmtree(directory / PARTS)
    shutil.rmtree(work)
    log(f"published {final.name} from {n} parts: {side['rows']} rows")
    return manifest


def check_parts(parts: list[Path], metas: list[dict]) -> None:
    """Refuse, in one line naming the parts, to merge parts that are not one run's: made
    from different judgments, logged differently (feature set version, first stage,
    term budget, encoder...: :data:`SAME_IN_EVERY_PART`) or too far apart in time."""
    where = parts[0].parent
    if len({m["whole_judgments_sha256"] for m in metas}) > 1:
        raise UserError(f"the parts in {where} were logged from different judgments (the "
                        "file changed between them)", f"delete {where} and run every part again")
    sides = [json.loads((p / "features.txt.json").read_text()) for p in parts]
    for key in SAME_IN_EVERY_PART + ("candidates",):
        values = [_setting(s, key) for s in sides]
        if any(v != values[0] for v in values[1:]):
            odd = [p.name for p, v in zip(parts, values) if v != values[0]]
            raise UserError(f"the parts in {where} were logged with different {key} "
                            f"({', '.join(odd)} differ from {parts[0].name})",
                            f"delete {where} and run every part again")
    times = [m.get("logged_at") for m in metas]
    if None not in times and max(times) - min(times) > PART_SPREAD_SECONDS:
        old = parts[times.index(min(times))].name
        raise UserError(f"the parts in {where} were logged {(max(times) - min(times)) / 3600:.0f} h "
                        f"apart ({old} is the oldest): not one snapshot",
                        f"delete {where / old} and run that part again")


def _setting(side: dict, key: str):
    """A sidecar entry as logging set it (the candidates' settings, not their counts)."""
    value = side.get(key)
    if key == "candidates" and value:
        value = {k: v for k, v in value.items()
                 if k not in CANDIDATE_COUNTS + ("failed_queries",)}
    return value


def merge_parts(parts: list[Path], metas: list[dict], stage: Path) -> dict:
    """The parts' rows as one ``features.txt`` in ``stage`` and the sidecar a single run
    writes for them (returned)."""
    with open(stage / "features.txt", "wb") as out:
        headed = False
        for p in parts:
            with open(p / "features.txt", "rb") as fh:
                first = fh.readline()
                header = is_header(first.decode("utf-8", "replace"))
                if not (header and headed):
                    out.write(first)        # one header, the first one (data.logged): a
                headed = headed or header   # part without queries (empty) has none
                shutil.copyfileobj(fh, out, 1 << 20)
        out.flush()
        os.fsync(out.fileno())
    sides = [json.loads((p / "features.txt.json").read_text()) for p in parts]
    jl = JudgmentList(source=sides[0]["judgments"]["source"])
    for m in metas:
        one = JudgmentList.from_dict(m["judgments"])
        jl.queries.update(one.queries)
        jl.grades.update(one.grades)
        jl.params.update(one.params)
    side = dict(sides[0])
    cands = [s["candidates"] or {} for s in sides]
    first_failed = [f for c in cands for f in c.get("failed_queries", [])]
    side.update(
        judgments=dict(side["judgments"], sha256=jl.content_hash(),
                       queries=len(jl.judged_qids()), pairs=len(jl)),
        candidates=_merged_candidates(sides[0]["candidates"], cands),
        rows=sum(s["rows"] for s in sides),
        missing_docs=[d for s in sides for d in s["missing_docs"]],
        failed_queries=first_failed + [f for s, c in zip(sides, cands)
                                       for f in s["failed_queries"][len(c.get("failed_queries", [])):]],
        retried_items=sum(s.get("retried_items", 0) for s in sides),
        fitted_queries=sum(s.get("fitted_queries", 0) for s in sides))
    write_json(stage / "features.txt.json", side)
    return side


def _merged_candidates(first: dict | None, cands: list[dict]) -> dict | None:
    if first is None:
        return None
    merged = dict(first)
    for key in CANDIDATE_COUNTS:
        merged[key] = sum(c.get(key, 0) for c in cands)
    merged["failed_queries"] = [f for c in cands for f in c.get("failed_queries", [])]
    return merged
