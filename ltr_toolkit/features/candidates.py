"""Training candidates: what the reranker will see, labelled from the judgments.

A reranker reorders the first stage's top ``k``. Trained on the judged pairs alone it never
meets the unjudged documents it must push down (most judgment lists judge mostly relevant
documents), so the rows to log are, per query, the first stage's top ``k``, each labelled
from the judgments: unjudged documents as grade 0 (``unjudged="zero"``) or left out
(``"drop"``); judged documents the first stage did not bring into the top ``k`` left out
(``judged_outside="exclude"``, the default: they are not what the model will rerank) or
added (``"include"``).
"""

from __future__ import annotations

from ..data.judgments import JudgmentList
from ..errors import UserError
from ..transport.client import Connection
from ..query.firststage import FirstStage
from ..query.requests import msearch_ids
from . import featurelog

UNJUDGED = ("zero", "drop")
JUDGED_OUTSIDE = ("exclude", "include")


def _check_rules(k: int, unjudged: str, judged_outside: str) -> None:
    if k < 1:
        raise UserError(f"candidates k={k}: expected a whole number >= 1")
    if unjudged not in UNJUDGED:
        raise UserError(f"unjudged={unjudged!r}: expected one of {', '.join(UNJUDGED)}")
    if judged_outside not in JUDGED_OUTSIDE:
        raise UserError(f"judged_outside={judged_outside!r}: expected one of {', '.join(JUDGED_OUTSIDE)}")


def candidate_judgments(conn: Connection, index: str, jl: JudgmentList, k: int,
                        first_stage: FirstStage | None = None, unjudged: str = "zero",
                        judged_outside: str = "exclude", batch: int = 50,
                        max_terms: int | None = None, first_ids: dict | None = None,
                        progress=None) -> tuple[JudgmentList, dict]:
    """(the candidates as a judgment list; counts for the sidecar). Long queries are
    fitted to ``max_terms`` distinct words (:mod:`ltr_toolkit.data.querytext`); a query
    whose first stage the cluster still rejects has no candidates and is named in
    ``failed_queries``. The counts name the rules they were made by (``unjudged_as``,
    ``judged_outside_as``): the logged file says how its rows were chosen. ``first_ids``:
    filled with each query's first-stage top ``k`` ids in order, whatever ``unjudged``
    keeps (a query that failed: none). ``progress(done, total)``: queries searched, after
    each round trip."""
    _check_rules(k, unjudged, judged_outside)
    first_stage = first_stage or FirstStage.from_fields()
    first_stage.check(conn, index)
    qids = jl.judged_qids()
    failures: dict[int, str] = {}
    ranked = msearch_ids(conn, index, [jl.query_params(q) for q in qids], first_stage, k,
                         batch=batch, max_terms=max_terms, failures=failures, progress=progress)
    by_q = jl.by_query()
    out = JudgmentList(source=jl.source, params=dict(jl.params))
    counts = {"judged": 0, "unjudged": 0, "judged_outside": 0, "queries": len(qids),
              "outside": 0, "relevant_outside": 0}
    for q, docs in zip(qids, ranked):
        if docs is None:
            continue
        if first_ids is not None:
            first_ids[q] = list(docs[:k])
        out.queries[q] = jl.queries[q]
        grades = dict(by_q[q])
        for d in docs[:k]:
            if d in grades:
                out.grades[(q, d)] = grades[d]
                counts["judged"] += 1
            elif unjudged == "zero":
                out.grades[(q, d)] = 0.0
                counts["unjudged"] += 1
        top = set(docs[:k])
        for d, g in by_q[q]:
            if d not in top:          # counted either way: what the window misses
                counts["outside"] += 1
                counts["relevant_outside"] += g > 0
                if judged_outside == "include":
                    out.grades[(q, d)] = g
                    counts["judged_outside"] += 1
    return out, {"k": int(k), "first_stage": first_stage.to_dict(), "unjudged_as": unjudged,
                 "judged_outside_as": judged_outside, **counts,
                 "failed_queries": [[qids[i], why] for i, why in sorted(failures.items())]}


def judged_candidates(conn: Connection, index: str, jl: JudgmentList, featureset: str,
                      first_stage: FirstStage, store: str | None = None, k: int | None = None,
                      unjudged: str = "zero", judged_outside: str = "exclude",
                      max_terms: int | None = None, budget_of: JudgmentList | None = None,
                      via: str = "plugin", recorded: bool = False, first_ids: dict | None = None,
                      first_progress=None) -> tuple[JudgmentList, dict | None, int | None]:
    """What a logging run logs, prepared the same way by ``ltr log``, jobs, job parts and
    ``Serving``: the query-term budget measured once (on ``budget_of``, the whole list a
    part belongs to, else ``jl``; or given as ``max_terms``, e.g. a model's), then, with
    ``k``, the first stage's top ``k`` of each query labelled from ``jl``
    (:func:`candidate_judgments`, its queries fitted to that budget). Returns (the pairs
    to log, the candidates' info or None, the budget): pass the budget on to
    ``log_features``, which records it. ``via``: how the features will be logged
    (``featurelog.VIAS``), which the budget is measured with. ``recorded``: ``max_terms``
    is the budget a logged file recorded (None there: no query was cut), used as it is so
    that an increment's candidates are retrieved for the query its features log.
    ``first_ids``, ``first_progress``: see :func:`candidate_judgments` (its ``progress``)."""
    if max_terms is None and not recorded:
        max_terms = featurelog.query_budget(conn, index, budget_of or jl, featureset,
                                            first_stage, store, via)
    info = None
    if k:
        jl, info = candidate_judgments(conn, index, jl, k, first_stage, unjudged, judged_outside,
                                       max_terms=max_terms, first_ids=first_ids,
                                       progress=first_progress)
    return jl, info, max_terms
