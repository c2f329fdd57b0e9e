"""``ltr featureset``: feature sets in a store (upload, init from an index, list, show),
and what each feature costs and brings (``cost``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import typer
from rich.table import Table

from ..errors import UserError
from .common import (Algo, FieldsOpt, FoldsOpt, IndexOpt, InputFormatOpt, JsonOpt, QueriesFileOpt,
                     ReportOpt, Statistics, StatsOpt, StoreOpt, TemplateOpt, WorkdirOpt, _conn,
                     _failed_queries, _first_stage, _ltr_conn, _print_json, _progress, _writable,
                     err, featureset_app, out)


@featureset_app.command("upload")
def featureset_upload(ctx: typer.Context,
                      file: Annotated[Path, typer.Argument(help="A feature set file (JSON: name and features with their templates).")],
                      store: StoreOpt = None,
                      index: Annotated[Optional[str], typer.Option("--index", help="Check the templates against this index's mapping first: unknown fields, decays on fields that are no dates or numbers, parameters the toolkit will not send; refused, one line per problem.")] = None,
                      query_param: Annotated[Optional[List[str]], typer.Option("--query-param", help="A template parameter your judgments give per query (a column of theirs), besides the query text {{keywords}} (repeatable; with --index).")] = None):
    """Upload a feature set file (validated locally first; with --index, against the
    index's mapping too)."""
    from ..data.featuresets import load_featureset
    from ..stores import store as st
    fs = load_featureset(file)
    conn = _ltr_conn(ctx)
    if index:
        _check_templates(conn, fs, index, query_param or [])
    name, what = st.upload_featureset_versioned(conn, fs, store)
    out.print(f"feature set {name} ({len(fs['features'])} features): {what}"
              + ("" if index else " (not checked against an index's mapping: --index I checks "
                 "its fields and parameters first)"))


@featureset_app.command("init")
def featureset_init(ctx: typer.Context, index: IndexOpt,
                    output: Annotated[Path, typer.Option("-o", "--output", help="The feature set file written, for you to review before `ltr featureset upload`.")],
                    name: Annotated[Optional[str], typer.Option("--name", help="The feature set's name (default: the index's).")] = None,
                    sample: Annotated[int, typer.Option("--sample", min=1, max=10_000, help="Documents sampled to choose each field's features (coverage, distinct values, skew, ages).")] = 1000,
                    min_coverage: Annotated[float, typer.Option("--min-coverage", min=0.0, max=1.0, help="Leave out fields that fewer than this share of the sampled documents have.")] = 0.05,
                    max_features: Annotated[Optional[int], typer.Option("--max-features", min=0, show_default=False, help="Keep the N best-ranked features (0: the whole pool; default: the toolkit's lean cap, printed with the result). Each feature's query runs on every rescored hit of a served request (0.07-0.34 ms a feature on MSRD); the default kept a model within twice its first stage's latency there.")] = None,
                    whole: Annotated[bool, typer.Option("--all", help="Keep the whole pool (as --max-features 0).")] = False,
                    judgments: Annotated[Optional[Path], typer.Option("--judgments", help="Judged queries (RankLib, TREC qrels, CSV or JSONL): text fields none of whose words the queries use are left out, the others ranked by how many queries use them.")] = None,
                    input_format: InputFormatOpt = None, queries: QueriesFileOpt = None,
                    verbose: Annotated[bool, typer.Option("--verbose", help="Name every left-out field with its reason (else a count per reason, the first few named; the file lists them all).")] = False,
                    as_json: JsonOpt = False):
    """Write a lean feature set from INDEX's mapping and a sample of its documents: the
    main text fields (BM25 and phrase), one combined match, the semantic feature, exact
    matches on brands, categories and identifiers, the numbers and dates that carry
    signal; at most --max-features, best first (--all: the whole pool). Each feature
    says in the file why it is there, each left-out field why not."""
    from ..features.generate import DEFAULT_MAX_FEATURES, from_index
    from ..io.atomic import write_json
    _writable(output)
    texts = None
    if judgments is not None:
        from ..data.judgments import load_judgments
        jl = load_judgments(judgments, input_format.value if input_format else None, queries)
        texts = [jl.queries[q] for q in jl.judged_qids()]
    cap = DEFAULT_MAX_FEATURES if max_features is None else max_features
    doc = from_index(_conn(ctx), index, name, sample, min_coverage, texts, 0 if whole else cap)
    write_json(output, doc)
    if as_json:
        return _print_json(doc)
    gen = doc["generated"]
    table = Table("feature", "why")
    for f in doc["featureset"]["features"]:
        table.add_row(_shown(f["name"]), _shown(gen["why"][f["name"]]))
    out.print(table)
    _left_out_lines(gen["skipped"], gen["left_out"], verbose)
    cap = f"at most {gen['max_features']} of a pool of {gen['pool']}" if gen["max_features"] else \
        f"the whole pool of {gen['pool']}"
    out.print(f"{len(doc['featureset']['features'])} features ({cap}) from {gen['sample']} sampled "
              f"documents of {index}, recency at {gen['reference_date']}, written to {output}: "
              f"review it, then `ltr featureset upload {output} --index {index}`")


#: left-out fields named per reason unless --verbose
LEFT_OUT_NAMED = 3


def _left_out_lines(skipped: dict, by_reason: dict, verbose: bool) -> None:
    """Each left-out field with its reason (--verbose, or a few), else per reason: the
    count, the first few fields and the first one's reason."""
    if verbose or len(skipped) <= 2 * LEFT_OUT_NAMED:
        for field, why in skipped.items():
            err.print(f"left out: {_shown(field)}: {_shown(why)}")
        return
    for reason, fields in by_reason.items():
        named = ", ".join(_shown(f) for f in fields[:LEFT_OUT_NAMED])
        more = f" and {len(fields) - LEFT_OUT_NAMED} more" if len(fields) > LEFT_OUT_NAMED else ""
        err.print(f"left out ({reason}): {len(fields)} fields ({named}{more}); "
                  f"{_shown(fields[0])}: {_shown(skipped[fields[0]])}")
    err.print(f"left out: {len(skipped)} fields in all, each with its reason in the file "
              "(generated.skipped) or with --verbose")


def _shown(text: str) -> str:
    """A user's text on one line, its control characters written as escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def _check_templates(conn, fs: dict, index: str, query_params: list[str]) -> None:
    """Refuse a feature set whose templates do not fit ``index``'s mapping: one line a problem."""
    from ..features.check import all_paths, problems
    from ..transport.client import request
    body = request(conn, "GET", f"/{index}/_mapping")
    paths = all_paths(next(iter(body.values()))["mappings"].get("properties", {}))
    found = problems(fs, index, paths, query_params)
    if len(found) == 1:
        raise UserError(found[0])
    for line in found:
        err.print(f"error: {line}")
    if found:
        raise UserError(f"{len(found)} problems of feature set {fs['name']} on {index} (above): "
                        "nothing uploaded", "fix the feature set file, then upload it again")


@featureset_app.command("list")
def featureset_list(ctx: typer.Context, store: StoreOpt = None):
    """List feature sets in a store."""
    from ..stores import store as st
    conn = _ltr_conn(ctx)
    table = Table("name", "features")
    for fs in st.list_featuresets(conn, store):
        table.add_row(fs.get("name", "?"), str(len(fs.get("featureset", {}).get("features", []))))
    out.print(table)


@featureset_app.command("show")
def featureset_show(ctx: typer.Context,
                    name: Annotated[str, typer.Argument(help="The stored feature set's name.")],
                    store: StoreOpt = None):
    """Print a stored feature set as JSON."""
    from ..stores import store as st
    conn = _ltr_conn(ctx)
    fs = st.get_featureset(conn, name, store)
    if fs is None:
        raise UserError(f"feature set {name} not found in store {store or '(default)'}",
                        "upload it with `ltr featureset upload FILE`")
    _print_json(fs)


@featureset_app.command("cost")
def featureset_cost(ctx: typer.Context,
                    name: Annotated[str, typer.Argument(help="The stored feature set's name.")],
                    judgments: Annotated[Path, typer.Argument(help="The judged queries (RankLib, TREC qrels, CSV or JSONL).")],
                    index: IndexOpt,
                    store: StoreOpt = None, fields: FieldsOpt = None, first_stage: TemplateOpt = None,
                    statistics: StatsOpt = Statistics.dfs,
                    window: Annotated[int, typer.Option("--window", min=1, help="The depth reranked: the first stage's global top WINDOW.")] = 100,
                    algo: Annotated[Algo, typer.Option("--algo", help="The model family of the ablation.")] = Algo.lambdamart,
                    folds: FoldsOpt = 5,
                    timing_queries: Annotated[int, typer.Option("--timing-queries", min=1, help="Judged queries timed live.")] = 100,
                    passes: Annotated[int, typer.Option("--passes", min=1, help="Timed passes over them (after one warm-up pass).")] = 2,
                    workdir: WorkdirOpt = Path("ltr-cost"),
                    input_format: InputFormatOpt = None, queries: QueriesFileOpt = None,
                    output: ReportOpt = None, as_json: JsonOpt = False):
    """What each feature of a stored set costs at serving time (ms added to the request,
    measured live) next to what it brings to NDCG@k (drop-one ablation under
    cross-validation on the logged candidates: a negative delta means the feature helps).
    To choose a set under a serving budget, with an honest gain: `ltr evaluate cv
    --max-cost R` (or --max-ms X) chooses it inside the training folds. Exit 3 when some
    queries failed (named; the others are measured)."""
    from ..data.judgments import load_judgments
    from ..io.atomic import write_json
    from ..pipeline.featurecost import cost_report
    from ..serving.serving import Serving
    _writable(output)
    jl = load_judgments(judgments, input_format.value if input_format else None, queries)
    stage = _first_stage(fields, first_stage, statistics)
    conn = _ltr_conn(ctx)
    stage.check(conn, index)
    with _progress("model fits") as update:
        rep = cost_report(conn, Serving(index, stage, window, store), jl, name, workdir, algo.value,
                          folds, timing_queries, passes, log=lambda m: err.print(m),
                          progress=lambda done, total: update(done, total))
    if output:
        write_json(output, rep)
    if as_json:
        _print_json(rep)
    else:
        out.print(_cost_table(rep))
        out.print(f"to choose a set under a serving budget: `ltr evaluate cv ... --featureset {name} "
                  "--max-cost R` (or --max-ms X): the set is chosen inside each training fold, by "
                  "gain per measured ms, so the reported gain is measured on queries the choice "
                  "never saw")
    _failed_queries(rep)


def _cost_table(rep: dict) -> Table:
    from ..evaluation.feature_timing import FEEDBACK
    c = rep["contribution"]
    table = Table()      # a feature's name is never cut: the figures' columns fold instead
    table.add_column("feature", no_wrap=True, min_width=max(map(len, rep["cost"])))
    for header in ("ms added (p50)", f"ndcg@{rep['k']} without it", "delta", "p"):
        table.add_column(header, overflow="fold", justify="right")
    for row, cost in rep["cost"].items():   # the first request: what the feedback group needs
        ab = c["rows"].get(FEEDBACK if row.startswith("first request") else row)
        table.add_row(row, f"{cost['p50_ms']:.2f}",
                      *((f"{ab['ndcg']:.4f}", f"{ab['delta']:+.4f}", f"{ab['p_value']:.4f}") if ab
                        else ("", "", "")))
    table.add_row("(all features, model)", "", f"{c['all']:.4f}", "", "")
    table.add_row("(first stage order)", "", f"{c['first_stage']:.4f}", "", "")
    return table
