"""``ltr log``: features logged for judged queries or the first stage's candidates."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .common import (FieldsOpt, IndexOpt, InputFormatOpt, JudgedOutside,
                     QueriesFileOpt, Statistics, StatsOpt, StoreOpt, TemplateOpt, Unjudged, Via,
                     _conn, _first_stage, _ltr_conn, _partial, _progress, _writable, app, err, out)


@app.command("log")
def log_cmd(ctx: typer.Context,
            judgments: Annotated[Path, typer.Argument(help="The judged queries (RankLib, TREC qrels, CSV or JSONL).")],
            featureset: Annotated[str, typer.Option("--featureset", help="The feature set logged: a stored set's name (with --via named-queries also a feature set file).")],
            output: Annotated[Path, typer.Option("-o", "--output", help="The logged rows (SVMlight/RankLib, what each column means in OUT.json beside it).")],
            index: IndexOpt,
            store: StoreOpt = None,
            input_format: InputFormatOpt = None,
            queries: QueriesFileOpt = None,
            batch: Annotated[int, typer.Option("--batch", min=1, help="Queries per _msearch round trip.")] = 25,
            candidates: Annotated[Optional[int], typer.Option("--window", min=1, help="Log the first stage's top WINDOW per query (labelled from the judgments), not only the judged pairs: the candidates a model reranks (formerly --candidates).")] = None,
            unjudged: Annotated[Unjudged, typer.Option("--unjudged", help="With --window: unjudged documents as grade 0, or dropped.")] = Unjudged.zero,
            judged_outside: Annotated[JudgedOutside, typer.Option("--judged-outside", help="With --window: judged documents outside the top WINDOW.")] = JudgedOutside.exclude,
            fields: FieldsOpt = None, first_stage: TemplateOpt = None,
            statistics: StatsOpt = Statistics.dfs,
            incremental: Annotated[bool, typer.Option("--incremental", help="Log only pairs OUTPUT does not hold yet and append them; rows it holds take the current grades, pairs no longer judged are dropped.")] = False,
            via: Annotated[Via, typer.Option("--via", help="plugin: sltr + ltr_log (the LTR plugin); named-queries: each feature's template as a named query, its score from matched_queries (no plugin needed: what Elasticsearch's native learning to rank computes).")] = Via.plugin):
    """Log feature values per (query, document) pair (resumable: rerun after a kill).
    Exit 3 when some queries failed (they are listed; the rest is logged)."""
    from ..data.judgments import load_judgments
    from ..features.candidates import judged_candidates
    from ..features.featurelog import log_features
    from ..features.incremental import log_incremental, recorded_budget
    _writable(output)
    jl = load_judgments(judgments, input_format.value if input_format else None, queries)
    fs_stage = _first_stage(fields, first_stage, statistics)
    conn = _ltr_conn(ctx) if via is Via.plugin else _conn(ctx)
    info = budget = None
    # an increment keeps its file's budget: its new candidates are retrieved with it too
    recorded, budget = recorded_budget(output) if incremental else (False, None)
    if candidates or not incremental:
        jl, info, budget = judged_candidates(conn, index, jl, featureset, fs_stage, store,
                                             candidates, unjudged.value, judged_outside.value,
                                             max_terms=budget, via=via.value, recorded=recorded)
    if candidates:
        _show_candidates(info, candidates, unjudged)
    with _progress("logging rounds") as update:
        if incremental:
            side = log_incremental(conn, jl, featureset, index, output, store, batch,
                                   lambda d, t: update(d, t), fs_stage, info, via=via.value)
        else:
            side = log_features(conn, jl, featureset, index, output, store, batch,
                                lambda d, t: update(d, t), fs_stage, info, max_terms=budget,
                                via=via.value)
    _show_logged(side, output, index)


def _show_logged(side: dict, output: Path, index: str) -> None:
    """What a logging run wrote, what it could not: exit 3 when queries failed."""
    out.print(f"{side['rows']} rows with {len(side['feature_names'])} features written to {output}; "
              f"{len(side['missing_docs'])} documents not in {index}")
    if side.get("fitted_queries"):
        err.print(f"{side['fitted_queries']} long queries sent as their first "
                  f"{side['max_query_terms']} distinct words (the cluster's clause limit)")
    for q, d in side["missing_docs"][:10]:
        err.print(f"missing: query {q}, doc {d}")
    _dead_features(output)
    _partial("query", side.get("failed_queries", []),
             fix="the same command again logs them (resumable) once the cause above is fixed")


def _dead_features(output: Path) -> None:
    """Name each feature no logged row can use (missing, or one value, on every row)."""
    from ..data.svmlight import load_logged
    from ..features.check import dead_features
    ds = load_logged(output)
    for line in dead_features(ds.X, ds.meta.get("sidecar", {}).get("feature_names") or []):
        err.print(f"warning: {line}")


def _show_candidates(info: dict, candidates: int, unjudged) -> None:
    err.print(f"candidates: top {candidates} of {info['queries']} queries, {info['judged']} judged, "
              f"{info['unjudged']} unjudged{' (grade 0)' if unjudged is Unjudged.zero else ' (dropped)'}, "
              f"{info['judged_outside']} judged outside the top {candidates} added")
    if info.get("outside") and not info["judged_outside"]:
        err.print(f"note: {info['outside']} judged documents ({info['relevant_outside']} relevant) lie "
                  f"outside the first stage's top {candidates}: no reranker of the window can reach "
                  "them (--judged-outside include trains on them too; --unjudged drop trains on the "
                  "judged documents alone)")


# --------------------------------------------------------------------------- models
