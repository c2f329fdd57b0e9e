"""Incremental logging: only the pairs a logged file does not hold yet are logged
(:func:`.featurelog.log_features`) and appended to it atomically, its older rows regraded
by the current judgments (or dropped when their pair is no longer judged), and its
sidecar brought up to date, so the file always matches the judgments its sidecar names.
An increment is refused when its rows would not be logged as the file's were (another
feature set version, first stage, statistics, candidate depth, encoder)."""

from __future__ import annotations

import json
from pathlib import Path

from ..data.judgments import JudgmentList
from ..data.logged import (grade_text, header_line, is_header, is_own, own_row, read_sidecar,
                           row_key, sidecar_path)
from ..data.querytext import fit_keywords
from ..errors import UserError
from ..io.atomic import atomic_write, write_json
from ..query.firststage import FirstStage
from ..transport.client import Connection
from .featurelog import featureset_source, log_features, query_budget


def recorded_budget(out) -> tuple[bool, int | None]:
    """(whether ``out``'s sidecar records a query-term budget, that budget): what an
    increment of ``out`` must fit its queries to, candidates and features alike."""
    if not sidecar_path(out).is_file():
        return False, None
    side = read_sidecar(out)
    return "max_query_terms" in side, side.get("max_query_terms")


def _regraded_line(line: str, grades: dict, escaped: bool):
    """(the row with the current judgments' grade or None when its pair is no longer
    judged, whether its grade changed); other lines (comments) are kept as they are.
    ``escaped``: the row's file has the header (``data.logged.is_own``)."""
    grade, key = row_key(line, escaped)
    if key is None:
        return line, False
    if key not in grades:
        return None, False
    g = grade_text(grades[key])
    return (line, False) if g == grade else (line.replace(grade, g, 1), True)   # grade first


def _scan(path: Path, grades: dict) -> tuple[set, int, int]:
    """One streaming pass over OUT: (its logged pairs, rows regraded, rows dropped)."""
    done, regraded, dropped = set(), 0, 0
    escaped = is_own(path)
    with open(path, encoding="utf-8", newline="") as fh:
        for line in fh:
            key = row_key(line, escaped)[1]
            if key is None:
                continue
            done.add(key)
            new, changed = _regraded_line(line, grades, escaped)
            dropped += new is None
            regraded += changed
    return done, regraded, dropped


def _copy_regraded(path: Path, grades: dict, out) -> int:
    """OUT's rows, regraded and without the pairs no longer judged, streamed into the
    open file ``out``; returns the rows written. Rows of a file logged before the header
    get their ids escaped, as the header they go under means (``data.ids``)."""
    rows = 0
    escaped = is_own(path)
    with open(path, encoding="utf-8", newline="") as fh:
        for line in fh:
            new, _ = _regraded_line(line, grades, escaped)
            if new is not None and not is_header(new):
                out.write(new if escaped else own_row(new))
                rows += row_key(new, escaped)[1] is not None
    return rows


def _brief(stage: FirstStage) -> str:
    return json.dumps(stage.template, separators=(",", ":"))[:120]


def _same_logging(out: Path, old: dict, fsinfo: dict, stage: FirstStage, featureset: str,
                  candidates: dict | None) -> None:
    """Refuse an increment whose rows would not be logged as OUT's were (the sidecar,
    hence the model and serving, would name what OUT's older rows came from)."""
    if old.get("featureset_sha256") not in (None, fsinfo["sha256"]):
        raise UserError(f"{out} was logged with another version of feature set {featureset}",
                        "log to a new file, or re-log everything")
    was = FirstStage.from_dict(old["first_stage"]) if old.get("first_stage") else None
    if (was.statistics if was else "shard") != stage.statistics:
        raise UserError(f"{out} was logged with {was.statistics if was else 'shard'} term "
                        f"statistics, this run uses {stage.statistics}: its rows would not be "
                        "comparable", f"log with --statistics {was.statistics if was else 'shard'}, "
                        "or to a new file")
    if was is not None and was.to_dict() != stage.to_dict():
        raise UserError(f"{out} was logged with another first stage ({_brief(was)}; this run: "
                        f"{_brief(stage)}): new rows would come from another first stage "
                        "than the file's sidecar names", "log with the same --fields or "
                        "--first-stage, or to a new file")
    k_was = (old.get("candidates") or {}).get("k")
    k_now = (candidates or {}).get("k")
    if k_was is not None and k_now is not None and k_was != k_now:
        raise UserError(f"{out} holds the first stage's top {k_was}, this run asks for the top "
                        f"{k_now}", f"log with --candidates {k_was}, or to a new file")


def log_incremental(conn: Connection, jl: JudgmentList, featureset: str, index: str, out,
                    store: str | None = None, batch: int = 25, progress=None,
                    first_stage: FirstStage | None = None, candidates: dict | None = None,
                    parallel: int = 1, via: str = "plugin") -> dict:
    """Log only the pairs OUT does not hold yet (documents that were missing, and queries
    that failed, before are tried again), and append them to OUT atomically. Rows OUT
    already holds take the current judgments' grades, and rows of pairs the judgments no
    longer hold are dropped (counted in the sidecar: ``regraded``, ``dropped``), so OUT
    always matches the judgments its sidecar names. Without OUT, a full run."""
    out = Path(out)
    side_path = out.with_suffix(out.suffix + ".json")
    if not out.exists():
        return log_features(conn, jl, featureset, index, out, store, batch, progress,
                            first_stage, candidates, parallel=parallel, via=via)
    if not side_path.exists():
        raise UserError(f"{out} has no sidecar {side_path.name}: which feature set its rows "
                        "were logged with is unknown", "restore the sidecar, or log to a new file")
    old = read_sidecar(out)
    fsinfo = featureset_source(conn, featureset, store, via)
    stage = first_stage or FirstStage.from_fields()
    _same_logging(out, old, fsinfo, stage, featureset, candidates)
    done, regraded, dropped = _scan(out, jl.grades)
    new = _unlogged(jl, done)
    n_done = len(done)
    del done
    inc = out.with_name(out.name + ".increment")
    # the rows already there were fitted to the file's budget: the new ones too
    budget = old.get("max_query_terms") if "max_query_terms" in old else \
        query_budget(conn, index, jl, featureset, stage, store, via)
    missing, failed = [], []
    if new.grades:
        log_features(conn, new, featureset, index, inc, store, batch, progress, stage,
                     candidates, parallel=parallel, max_terms=budget, via=via)
        missing, failed = _increment_outcome(out, old, inc)
    rows = n_done - dropped
    if new.grades or regraded or dropped:
        rows = _rewrite_with_increment(out, jl.grades, inc, len(fsinfo["feature_names"]),
                                       old.get("missing_features"))
    sidecar = _incremental_sidecar(old, jl, new, fsinfo, featureset=featureset, store=store,
                                   index=index, stage=stage, rows=rows, missing=missing,
                                   failed=failed, regraded=regraded, dropped=dropped,
                                   budget=budget)
    write_json(side_path, sidecar)
    for p in (inc, inc.with_suffix(inc.suffix + ".json")):
        p.unlink(missing_ok=True)
    return sidecar


def _unlogged(jl: JudgmentList, done: set) -> JudgmentList:
    """The judgments of ``jl`` whose pairs are not in ``done`` (with their queries)."""
    new = JudgmentList(source=jl.source, params=dict(jl.params))
    for (q, d), g in jl.grades.items():
        if (q, d) not in done:
            new.queries.setdefault(q, jl.queries[q])
            new.grades[(q, d)] = g
    return new


def _increment_outcome(out: Path, old: dict, inc: Path) -> tuple[list, list]:
    """(missing documents, failed queries) of the increment logged into ``inc``; refused
    when its vectors came from another encoder or field than OUT's."""
    inc_side = json.loads(inc.with_suffix(inc.suffix + ".json").read_text())
    for key in ("encoder", "vector_field"):
        if key in old and old.get(key) != inc_side.get(key):
            raise UserError(f"{out} was logged with {key} {old.get(key)}, the index now "
                            f"has {inc_side.get(key)}", "log to a new file")
    return inc_side["missing_docs"], inc_side["failed_queries"]


def _rewrite_with_increment(out: Path, grades: dict, inc: Path, n_features: int,
                            missing: str | None) -> int:
    """OUT replaced atomically by the header (``data.logged``: a file logged before it
    had one gets it) naming ``missing``, the rule its sidecar records (None: unknown, left
    out), its rows regraded (those no longer judged dropped) and the increment's lines;
    returns the rows written."""
    with atomic_write(out, "w") as fh:
        fh.write(header_line(n_features, missing))
        rows = _copy_regraded(out, grades, fh)
        if inc.exists():
            with open(inc, encoding="utf-8", newline="") as src:
                for line in src:
                    if not is_header(line):
                        fh.write(line)
                    rows += row_key(line, True)[1] is not None
    return rows


def _incremental_sidecar(old: dict, jl: JudgmentList, new: JudgmentList, fsinfo: dict, *,
                         featureset, store, index, stage, rows, missing, failed, regraded,
                         dropped, budget) -> dict:
    """OUT's sidecar after an increment: the old one updated with this run's feature set,
    first stage, judgments and counts (``added``: the increment's pairs that became rows)."""
    return dict(old or {}, featureset=featureset, featureset_sha256=fsinfo["sha256"],
                store=store, feature_names=fsinfo["feature_names"], index=index,
                first_stage=stage.to_dict(),
                judgments={"source": jl.source, "sha256": jl.content_hash(),
                           "queries": len(jl.judged_qids()),
                           "pairs": len(jl)},
                rows=rows, missing_docs=missing, failed_queries=failed,
                regraded=regraded, dropped=dropped, max_query_terms=budget,
                fitted_queries=sum(fit_keywords(jl.queries[q], budget) != jl.queries[q]
                                   for q in jl.judged_qids()),
                added=len(new) - len(missing)
                - sum(len(new.docs_of(q)) for q, _ in failed))
