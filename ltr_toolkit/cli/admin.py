"""``ltr cluster``, ``ltr store``, ``ltr featureset`` and ``ltr job``: the node, the stores
and feature sets in it, scheduled logging jobs."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, List, Optional

import typer
from rich.table import Table

from .. import versions
from ..errors import ClusterError, UserError
from .common import (Algo, EXIT_PARTIAL, CutoffOpt, _failed_queries, FieldsOpt, FoldsOpt, IndexOpt,
                     InputFormatOpt, JsonOpt, OldEngineOpt, QueriesFileOpt, ReportOpt, Statistics,
                     StatsOpt, StoreOpt, TemplateOpt, WorkdirOpt, _conn, _first_stage, _ltr_conn,
                     _old_engine, _partial, _print_json, _progress, _writable, cluster_app, err, featureset_app,
                     job_app, out, store_app)


@cluster_app.command("start")
def cluster_start(ctx: typer.Context, engine: OldEngineOpt = None,
                  no_ltr: Annotated[bool, typer.Option("--no-ltr", help="Start the engine without the LTR plugin when it cannot be provisioned (diagnostics only).")] = False,
                  nodes: Annotated[int, typer.Option("--nodes", min=1, help="Start a cluster of N local nodes (each 512 MiB heap).")] = 1,
                  no_knn: Annotated[bool, typer.Option("--no-knn", help="OpenSearch: without the k-NN plugin (the lexical features only; removes it from the local node's install).")] = False,
                  version: Annotated[Optional[str], typer.Option("--version", help=f"The engine version: OpenSearch {', '.join(versions.SUPPORTED['opensearch'])} (default {versions.OPENSEARCH_VERSION}); Elasticsearch {', '.join(versions.SUPPORTED['elasticsearch'])} (default {versions.ELASTICSEARCH_VERSION}). Its LTR plugin zip: the one in $LTR_HOME/plugins whose descriptor names it.")] = None):
    """Provision (cached) and start a local node of `ltr --engine E` (OpenSearch 3.6.0 or
    Elasticsearch 8.17.0 unless --version says otherwise, from Maven Central), or a
    cluster of N nodes; return when it is healthy."""
    from ..localnode import process as localnode
    from ..localnode.distributions import distribution
    from ..localnode.cluster import start_cluster
    t0 = time.monotonic()
    dist = distribution(_old_engine(ctx, engine), version)
    if nodes > 1:
        started = start_cluster(nodes, require_plugin=not no_ltr, log=lambda m: err.print(m),
                                engine=dist.engine, version=version)
        out.print(f"{nodes} {dist.label} nodes healthy at {', '.join(s.url for s in started)} (pids "
                  f"{', '.join(str(s.pid) for s in started)}) in {time.monotonic() - t0:.1f}s")
        return
    info, started = localnode.start(require_plugin=not no_ltr, knn=not no_knn,
                                    log=lambda m: err.print(m), engine=dist.engine, version=version)
    if not started:
        out.print(f"a {dist.label} node already runs: {info.url} (pid {info.pid}); nothing started")
        return
    plugin = "with LTR plugin" if info.plugin else "WITHOUT the LTR plugin"
    out.print(f"{dist.label} {info.version} {plugin} healthy at {info.url} "
              f"(pid {info.pid}) in {time.monotonic() - t0:.1f}s")


@cluster_app.command("stop")
def cluster_stop(ctx: typer.Context, engine: OldEngineOpt = None):
    """Stop the node(s) `ltr cluster start` started (by their pids): of `ltr --engine E`,
    else all."""
    from ..localnode import process as localnode
    from ..localnode.distributions import DISTRIBUTIONS
    from ..localnode.cluster import stop_all
    name = _old_engine(ctx, engine)
    many = stop_all(name)
    single = [localnode.stop(d.engine) for d in DISTRIBUTIONS if not name or d.engine == name]
    if many:
        out.print(f"stopped pids {', '.join(str(n.pid) for n in many)}")
    for info in filter(None, single):
        out.print(f"stopped pid {info.pid} ({info.url})")
    if not many and not any(single):
        out.print("no local node runs")


@cluster_app.command("status")
def cluster_status(ctx: typer.Context, engine: OldEngineOpt = None, as_json: JsonOpt = False):
    """URL, engine and version, LTR plugin version, vectors and health; exit 1 when no
    node answers."""
    from ..transport import client as cl
    from ..transport.engine import detect
    _old_engine(ctx, engine)
    conn = _conn(ctx)
    try:
        found = detect(conn)
        health = cl.request(conn, "GET", "/_cluster/health")
        ltr = cl.ltr_plugin_version(conn)
    except ClusterError as exc:   # nothing (usable) answers: exit 1; bad settings stay exit 2
        err.print(f"error: {exc}")
        raise typer.Exit(1)
    vectors = found.vectors
    rows = {"url": conn.display_url, "engine": found.label, "ltr plugin": ltr or "not installed",
            "vectors": f"{vectors.field_type} (semantic features; score {vectors.score})"
            if vectors else "none: no k-NN plugin (lexical features only)",
            "health": health.get("status", "?")}
    if as_json:
        return _print_json(rows)
    table = Table(show_header=False)
    for key, value in rows.items():
        table.add_row(key, value)
    out.print(table)


# --------------------------------------------------------------------------- store



@store_app.command("init")
def store_init(ctx: typer.Context, store: StoreOpt = None):
    """Create a feature store."""
    from ..stores import store as st
    conn = _ltr_conn(ctx)
    created = st.init_store(conn, store)
    out.print(f"store {store or '(default)'} {'created' if created else 'already exists'}")


@store_app.command("drop")
def store_drop(ctx: typer.Context, store: StoreOpt = None,
               yes: Annotated[bool, typer.Option("--yes", help="Confirm: the store's feature sets and models are deleted.")] = False):
    """Delete a feature store with its feature sets and models (needs --yes)."""
    from ..stores import store as st
    from ..stores.contract_record import forget_store
    if not yes:
        raise UserError(f"dropping store {store or '(default)'} deletes its feature sets and models",
                        "pass --yes to confirm")
    conn = _ltr_conn(ctx)
    dropped = st.drop_store(conn, store)
    forget_store(conn, store)            # its models' serving contracts go with them
    out.print(f"store {store or '(default)'} {'dropped' if dropped else 'did not exist'}")


@store_app.command("list")
def store_list(ctx: typer.Context):
    """List feature stores."""
    from ..stores import store as st
    conn = _ltr_conn(ctx)
    table = Table("store", "index", "version")
    for name, meta in sorted(st.list_stores(conn).items()):
        table.add_row(name, str(meta.get("index", "")), str(meta.get("version", "")))
    out.print(table)


# --------------------------------------------------------------------------- featureset

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
                    sample: Annotated[int, typer.Option("--sample", min=1, max=10_000, help="Documents sampled to choose each field's features (coverage, skew, ages).")] = 1000,
                    min_coverage: Annotated[float, typer.Option("--min-coverage", min=0.0, max=1.0, help="Leave out fields that fewer than this share of the sampled documents have.")] = 0.05,
                    as_json: JsonOpt = False):
    """Write a feature set from INDEX's mapping and a sample of its documents: per text
    field BM25, all-terms and phrase matches; keyword fields matched against the whole
    query; numbers as values (log-scaled where skewed); dates as recency; vector fields
    as the cosine. Each feature says in the file why it is there."""
    from ..features.generate import from_index
    from ..io.atomic import write_json
    _writable(output)
    doc = from_index(_conn(ctx), index, name, sample, min_coverage)
    write_json(output, doc)
    if as_json:
        return _print_json(doc)
    gen = doc["generated"]
    table = Table("feature", "why")
    for f in doc["featureset"]["features"]:
        table.add_row(f["name"], gen["why"][f["name"]])
    out.print(table)
    for field, why in gen["skipped"].items():
        err.print(f"left out: {field}: {why}")
    out.print(f"{len(doc['featureset']['features'])} features from {gen['sample']} sampled documents "
              f"of {index} written to {output}: review it, then `ltr featureset upload {output} "
              f"--index {index}`")


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
                    output: ReportOpt = None, as_json: JsonOpt = False,
                    pruned: Annotated[Optional[Path], typer.Option("--pruned", help="Also write the recommended pruned feature set here: a feature set file for `ltr featureset upload` (named NAME-pruned).")] = None):
    """What each feature of a stored set costs at serving time (ms added to the request,
    measured live) next to what it brings to NDCG@k (drop-one ablation under
    cross-validation on the logged candidates: a negative delta means the feature helps),
    ending in a recommended, pruned set: the features the model does without are left
    out, least helpful and costliest first. Exit 3 when some queries failed (named; the
    others are measured)."""
    from ..data.judgments import load_judgments
    from ..io.atomic import write_json
    from ..pipeline.featurecost import cost_report
    from ..serving.serving import Serving
    _writable(output, pruned)
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
    if pruned:
        write_json(pruned, rep["selection"]["featureset"])
    if as_json:
        _print_json(rep)
    else:
        out.print(_cost_table(rep))
        out.print(_selection_line(rep, pruned))
    _failed_queries(rep)


def _selection_line(rep: dict, pruned: Optional[Path]) -> str:
    sel, k = rep["selection"], rep["k"]
    t = sel["test"]
    n, total = len(sel["kept"]), len(sel["kept"]) + len(sel["pruned"])
    where = f": written to {pruned}" if pruned else " (--pruned FILE writes it)"
    return (f"recommended set: {n} of {total} features, NDCG@{k} {sel['ndcg_pruned']:.4f} vs "
            f"{sel['ndcg_all']:.4f} with all (p {t['p_value']:.3f}, W/T/L {t['wins']}/{t['ties']}/"
            f"{t['losses']}: selected on these folds, so optimistic; `ltr evaluate cv` with it "
            f"gives the honest figure), {sel['ms_saved']:.2f} ms saved per request{where}")


def _cost_table(rep: dict) -> Table:
    from ..evaluation.feature_timing import FEEDBACK
    c = rep["contribution"]
    gone = {p["feature"]: "pruned" for p in rep["selection"]["pruned"]}
    kept = dict.fromkeys(rep["selection"]["kept"], "kept")
    table = Table()      # a feature's name is never cut: the figures' columns fold instead
    table.add_column("feature", no_wrap=True, min_width=max(map(len, rep["cost"])))
    for header in ("ms added (p50)", f"ndcg@{rep['k']} without it", "delta", "p", "set"):
        table.add_column(header, overflow="fold", justify="right")
    for row, cost in rep["cost"].items():   # the first request: what the feedback group needs
        ab = c["rows"].get(FEEDBACK if row.startswith("first request") else row)
        table.add_row(row, f"{cost['p50_ms']:.2f}",
                      *((f"{ab['ndcg']:.4f}", f"{ab['delta']:+.4f}", f"{ab['p_value']:.4f}") if ab
                        else ("", "", "")), gone.get(row) or kept.get(row, ""))
    table.add_row("(all features, model)", "", f"{c['all']:.4f}", "", "")
    table.add_row("(first stage order)", "", f"{c['first_stage']:.4f}", "", "")
    return table


# --------------------------------------------------------------------------- collections


@job_app.command("run")
def job_run(ctx: typer.Context, job: Annotated[Path, typer.Argument(help="The job file (TOML).")],
            json_report: Annotated[bool, typer.Option("--json", help="Print the run's manifest as JSON on stdout.")] = False,
            part: Annotated[Optional[str], typer.Option("--part", help="I/N: log only the I-th of N slices of the queries (each part may run on another machine, same output directory); the part that completes the set publishes one snapshot, identical to a whole run's.")] = None):
    """Run a feature-logging job once: lock, log (resumable), publish a snapshot
    atomically with a manifest, keep the last N. Exit 0 complete, 3 partial, 2 user error."""
    from ..jobs.jobfile import job_connection, load_job
    from ..jobs.parts import parse_part, run_part
    from ..jobs.runner import run_job
    from ..pipeline.monitor import monitor_snapshot
    from ..transport import client as cl
    i_n = parse_part(part) if part is not None else None
    spec = load_job(job)
    conn = job_connection(spec, _conn(ctx), explicit_timeout=ctx.meta.get("timeout_given", False))
    if spec.via == "plugin":      # named queries log on a cluster without the plugin too
        cl.check_ltr(conn)
    if i_n is not None:
        manifest = run_part(spec, conn, *i_n, log=lambda m: err.print(m))
    else:
        manifest = run_job(spec, conn, log=lambda m: err.print(m), after=monitor_snapshot)
    if json_report:
        print(json.dumps(manifest, indent=2))
    if "snapshot" not in manifest:    # a part: the snapshot waits for others (or was merged)
        if not json_report:
            out.print(f"part {manifest['part']}: {manifest['status']}")
        return
    if not json_report:
        out.print(f"snapshot {manifest['snapshot']} ({manifest['status']}): "
                  f"{manifest['counts']['rows']} rows")
    if manifest.get("monitor"):
        err.print("monitor: " + "\n".join(manifest["monitor"].get("summary") or [manifest["monitor"]["note"]]))
    _partial("query", manifest.get("failed_queries", []),
             fix="the snapshot holds the others; fix the cause above and run the job again")
    if manifest["status"] != "complete":
        raise typer.Exit(EXIT_PARTIAL)
