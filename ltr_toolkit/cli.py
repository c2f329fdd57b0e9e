"""The ``ltr`` command line: a thin layer over the library.

User errors (bad files, no node, no plugin, no store) end with one line on stderr and
exit code 2; no traceback.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from enum import Enum
from typing import Annotated, List, Optional

import typer
from rich.console import Console
from rich.table import Table

from .errors import ClusterError, UserError

app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, add_completion=False,
                  help="Learning to rank for OpenSearch/Elasticsearch with the LTR plugin.")
cluster_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="The local OpenSearch node with the LTR plugin.")
store_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="LTR feature stores.")
featureset_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Feature sets in a store.")
app.add_typer(cluster_app, name="cluster")
app.add_typer(store_app, name="store")
app.add_typer(featureset_app, name="featureset")
index_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Load document collections into an index.")
judgments_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Judgment lists.")
app.add_typer(index_app, name="index")
app.add_typer(judgments_app, name="judgments")
model_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Models in a feature store.")
app.add_typer(model_app, name="model")
job_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Scheduled feature-logging jobs.")
app.add_typer(job_app, name="job")

out = Console()
err = Console(stderr=True, soft_wrap=True)


@app.callback()
def _global(ctx: typer.Context,
            url: Optional[str] = typer.Option(None, "--url", envvar="LTR_URL",
                                              help="Cluster URL (default: the local node, else http://localhost:9200). Credentials come from LTR_USER / LTR_PASSWORD."),
            ca_certs: Optional[Path] = typer.Option(None, "--ca-certs", help="CA bundle for TLS."),
            insecure: bool = typer.Option(False, "--insecure", help="Do not verify TLS certificates."),
            timeout: float = typer.Option(30.0, "--timeout", min=0.1, help="Request timeout, seconds.")):
    from .cluster.client import Connection, InsecureTLSWarning
    from .cluster.localnode import running_node
    _one_line_warnings(InsecureTLSWarning)
    if not url:                 # no --url / LTR_URL: the local node, when one runs
        node = running_node()
        url = node.url if node else None
    ctx.obj = Connection(url=url, ca_certs=str(ca_certs) if ca_certs else None,
                         insecure=insecure, timeout=timeout)


def _one_line_warnings(*categories):
    """Show these warnings as one line ``warning: ...`` on stderr; others as Python does."""
    import warnings
    if getattr(warnings.showwarning, "ltr_one_line", False):
        return
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, categories):
            err.print(f"warning: {message}", markup=False, highlight=False, soft_wrap=True)
        else:
            shown(message, category, filename, lineno, file, line)
    show.ltr_one_line = True
    warnings.showwarning = show


@contextlib.contextmanager
def _progress(label: str, total: int | None = None):
    """Yields ``update(done, total=None, note="")``: a rich bar on a terminal; otherwise
    (cron, nohup, a pipe) a plain line on stderr at most every 2 s, and at the end."""
    if err.is_terminal:
        from rich.progress import Progress
        with Progress(transient=True, console=err) as bar:
            task = bar.add_task(label, total=total)

            def update(done, total=total, note=""):
                bar.update(task, completed=done, total=total, description=f"{label} {note}".strip())
            yield update
        return
    last = [time.monotonic()]

    def update(done, total=total, note=""):
        now = time.monotonic()
        if now - last[0] >= 2.0 or (total is not None and done >= total):
            last[0] = now
            of = f"/{total}" if total is not None else ""
            err.print(f"{label}: {done}{of} {note}".rstrip(), markup=False, highlight=False)
    yield update


def _conn(ctx: typer.Context):
    return ctx.obj


def _ltr_conn(ctx: typer.Context):
    """The connection, after checking that the cluster answers and has the LTR plugin."""
    from .cluster import client as cl
    conn = ctx.obj
    cl.check_ltr(conn)
    return conn


# --------------------------------------------------------------------------- cluster

@cluster_app.command("start")
def cluster_start(no_ltr: bool = typer.Option(
        False, "--no-ltr", help="Start plain OpenSearch when the LTR plugin cannot be provisioned (diagnostics only).")):
    """Provision (cached) and start a single local node; return when it is healthy."""
    from .cluster import localnode
    t0 = time.monotonic()
    info, started = localnode.start(require_plugin=not no_ltr,
                                    log=lambda m: err.print(m, markup=False, highlight=False))
    if not started:
        out.print(f"a node already runs: {info.url} (pid {info.pid}); nothing started")
        return
    plugin = "with LTR plugin" if info.plugin else "WITHOUT the LTR plugin"
    out.print(f"OpenSearch {info.version} {plugin} healthy at {info.url} "
              f"(pid {info.pid}) in {time.monotonic() - t0:.1f}s")


@cluster_app.command("stop")
def cluster_stop():
    """Stop the node `ltr cluster start` started (by its pid)."""
    from .cluster import localnode
    info = localnode.stop()
    if info is None:
        out.print("no local node runs")
    else:
        out.print(f"stopped pid {info.pid} ({info.url})")


@cluster_app.command("status")
def cluster_status(ctx: typer.Context):
    """URL, OpenSearch version, LTR plugin version and health; exit 1 when no node answers."""
    from .cluster import client as cl
    conn = _conn(ctx)
    try:
        info = cl.cluster_info(conn)
        health = cl.request(conn, "GET", "/_cluster/health")
        ltr = cl.ltr_plugin_version(conn)
    except ClusterError as exc:   # nothing (usable) answers: exit 1; bad settings stay exit 2
        err.print(f"error: {exc}", markup=False, highlight=False)
        raise typer.Exit(1)
    table = Table(show_header=False)
    table.add_row("url", conn.display_url)
    table.add_row("opensearch", info.get("version", {}).get("number", "?"))
    table.add_row("ltr plugin", ltr or "not installed")
    table.add_row("health", health.get("status", "?"))
    out.print(table)


# --------------------------------------------------------------------------- store

StoreOpt = typer.Option(None, "--store", help="Feature store name (default store when omitted).")


@store_app.command("init")
def store_init(ctx: typer.Context, store: Optional[str] = StoreOpt):
    """Create a feature store."""
    from .cluster import store as st
    conn = _ltr_conn(ctx)
    created = st.init_store(conn, store)
    out.print(f"store {store or '(default)'} {'created' if created else 'already exists'}")


@store_app.command("drop")
def store_drop(ctx: typer.Context, store: Optional[str] = StoreOpt,
               yes: bool = typer.Option(False, "--yes", help="Confirm: the store's feature sets and models are deleted.")):
    """Delete a feature store with its feature sets and models (needs --yes)."""
    from .cluster import store as st
    if not yes:
        raise UserError(f"dropping store {store or '(default)'} deletes its feature sets and models",
                        "pass --yes to confirm")
    conn = _ltr_conn(ctx)
    dropped = st.drop_store(conn, store)
    out.print(f"store {store or '(default)'} {'dropped' if dropped else 'did not exist'}")


@store_app.command("list")
def store_list(ctx: typer.Context):
    """List feature stores."""
    from .cluster import store as st
    conn = _ltr_conn(ctx)
    table = Table("store", "index", "version")
    for name, meta in sorted(st.list_stores(conn).items()):
        table.add_row(name, str(meta.get("index", "")), str(meta.get("version", "")))
    out.print(table)


# --------------------------------------------------------------------------- featureset

@featureset_app.command("upload")
def featureset_upload(ctx: typer.Context, file: Path, store: Optional[str] = StoreOpt):
    """Upload a feature set file (validated locally first)."""
    from .cluster import store as st
    from .data.featuresets import load_featureset
    fs = load_featureset(file)
    conn = _ltr_conn(ctx)
    name, what = st.upload_featureset_versioned(conn, fs, store)
    out.print(f"feature set {name} ({len(fs['features'])} features): {what}")


@featureset_app.command("list")
def featureset_list(ctx: typer.Context, store: Optional[str] = StoreOpt):
    """List feature sets in a store."""
    from .cluster import store as st
    conn = _ltr_conn(ctx)
    table = Table("name", "features")
    for fs in st.list_featuresets(conn, store):
        table.add_row(fs.get("name", "?"), str(len(fs.get("featureset", {}).get("features", []))))
    out.print(table)


@featureset_app.command("show")
def featureset_show(ctx: typer.Context, name: str, store: Optional[str] = StoreOpt):
    """Print a stored feature set as JSON."""
    from .cluster import store as st
    conn = _ltr_conn(ctx)
    fs = st.get_featureset(conn, name, store)
    if fs is None:
        raise UserError(f"feature set {name} not found in store {store or '(default)'}",
                        "upload it with `ltr featureset upload FILE`")
    out.print_json(json.dumps(fs))


# --------------------------------------------------------------------------- collections

@index_app.command("cranfield")
def index_cranfield(ctx: typer.Context,
                    index: str = typer.Option("cranfield", "--index", help="Index name."),
                    recreate: bool = typer.Option(False, "--recreate", help="Delete INDEX first when it exists.")):
    """Load the bundled Cranfield collection (1,400 documents) into INDEX."""
    from .cluster.indexing import index_documents
    from .datasets import cranfield
    conn = _conn(ctx)
    res = index_documents(conn, index, cranfield.documents(), recreate=recreate)
    note = "" if res["analyzer"] == "english" else " (the node has no english analyzer)"
    out.print(f"indexed {res['count']} documents into {index} with the {res['analyzer']} analyzer{note}"
              + (f"; {res['errors']} failed" if res["errors"] else ""))
    if res["errors"]:
        raise UserError(f"{res['errors']} documents failed to index")


@judgments_app.command("cranfield")
def judgments_cranfield(split: str = typer.Option("all", "--split", help="train | valid | test | all"),
                        output: Path = typer.Option(..., "-o", "--output")):
    """Write the Cranfield judgments (fixed seeded 60/20/20 query split) in the toolkit's format."""
    from .data.judgments import save_ranklib
    from .datasets import cranfield
    if split not in ("train", "valid", "test", "all"):
        raise UserError(f"--split {split!r}: expected train, valid, test or all")
    jl = cranfield.split_judgments(split)
    save_ranklib(jl, output)
    out.print(f"{len(jl)} judgments for {len(jl.queries)} queries ({split}) written to {output}")


@judgments_app.command("check")
def judgments_check(file: Path, fmt: Optional[str] = typer.Option(None, "--format",
                    help="ranklib | trec | csv | jsonl (guessed from the name)"),
                    queries: Optional[Path] = typer.Option(None, "--queries", help="Queries file for TREC qrels.")):
    """Validate a judgment file: counts, duplicates; exit 2 with file:line on errors."""
    from .data.judgments import load_judgments
    jl = load_judgments(file, fmt, queries)
    for d in jl.duplicates:
        err.print(f"warning: {d}")
    out.print(f"{len(jl)} judgments, {len(jl.queries)} queries, {len(jl.duplicates)} duplicates")


FieldsOpt = typer.Option(None, "--fields", help="First stage: BM25 best_fields over these comma-separated fields (default title,abstract).")
TemplateOpt = typer.Option(None, "--first-stage", help="First stage: a search template file {\"query\": {...}} with {{keywords}} and per-query params.")


def _first_stage(fields: Optional[str], template: Optional[Path]):
    from .cluster.firststage import FirstStage
    return FirstStage.resolve(template, [f for f in fields.split(",")] if fields else None)


#: exit code of a run that completed with some queries failed (listed in the sidecar/report)
EXIT_PARTIAL = 3


@app.command("log")
def log_cmd(ctx: typer.Context, judgments: Path,
            featureset: str = typer.Option(..., "--featureset"),
            index: str = typer.Option("cranfield", "--index"),
            output: Path = typer.Option(..., "-o", "--output"),
            store: Optional[str] = StoreOpt,
            fmt: Optional[str] = typer.Option(None, "--format", help="ranklib | trec | csv | jsonl"),
            queries: Optional[Path] = typer.Option(None, "--queries"),
            batch: int = typer.Option(25, "--batch", min=1, help="Queries per _msearch round trip."),
            candidates: Optional[int] = typer.Option(None, "--candidates", min=1,
                                                     help="Log the first stage's top K per query (labelled from the judgments), not only the judged pairs."),
            unjudged: str = typer.Option("zero", "--unjudged", help="With --candidates: zero (grade 0) | drop."),
            judged_outside: str = typer.Option("exclude", "--judged-outside",
                                               help="With --candidates: judged documents outside the top K: exclude | include."),
            fields: Optional[str] = FieldsOpt, first_stage: Optional[Path] = TemplateOpt,
            incremental: bool = typer.Option(False, "--incremental",
                                             help="Log only pairs OUTPUT does not hold yet, and append them.")):
    """Log feature values per (query, document) pair (resumable: rerun after a kill).
    Exit 3 when some queries failed (they are listed; the rest is logged)."""
    from .cluster.candidates import candidate_judgments
    from .cluster.featurelog import log_features, log_incremental
    from .data.judgments import load_judgments
    jl = load_judgments(judgments, fmt, queries)
    fs_stage = _first_stage(fields, first_stage)
    conn = _ltr_conn(ctx)
    info = None
    if candidates:
        jl, info = candidate_judgments(conn, index, jl, candidates, fs_stage, unjudged, judged_outside)
        err.print(f"candidates: top {candidates} of {info['queries']} queries, {info['judged']} judged, "
                  f"{info['unjudged']} unjudged{' (grade 0)' if unjudged == 'zero' else ' (dropped)'}, "
                  f"{info['judged_outside']} judged outside the top {candidates} added",
                  markup=False)
    with _progress("logging rounds") as update:
        run = log_incremental if incremental else log_features
        side = run(conn, jl, featureset, index, output, store, batch,
                   lambda d, t: update(d, t), fs_stage, info)
    out.print(f"{side['rows']} rows with {len(side['feature_names'])} features written to {output}; "
              f"{len(side['missing_docs'])} documents not in {index}", markup=False)
    for q, d in side["missing_docs"][:10]:
        err.print(f"missing: query {q}, doc {d}", markup=False)
    for q, why in side.get("failed_queries", []):
        err.print(f"failed: query {q}: {why}", markup=False)
    if side.get("failed_queries"):
        raise typer.Exit(EXIT_PARTIAL)


# --------------------------------------------------------------------------- models

@app.command("upload")
def upload_cmd(ctx: typer.Context, model: Path,
               name: str = typer.Option(..., "--name", help="Base name; the next -vN is used unless --exact."),
               featureset: Optional[str] = typer.Option(None, "--featureset",
                                                        help="Feature set (default: the one the training data was logged with)."),
               store: Optional[str] = StoreOpt,
               index: Optional[str] = typer.Option(None, "--index", help="Validate the model with a query on this index first."),
               exact: bool = typer.Option(False, "--exact", help="Use NAME as is; fail if it exists.")):
    """Export MODEL.json to the plugin's format, check it, and create it in the store."""
    from .cluster.model_store import upload
    from .pipeline.train import load_model
    art, m = load_model(model)
    fs = featureset or art.get("featureset")
    if not fs:
        raise UserError("the model does not say which feature set it was trained on", "pass --featureset")
    conn = _ltr_conn(ctx)
    res = upload(conn, art, m, name, fs, store, index, versioned=not exact)
    out.print(f"uploaded {res['name']} ({res['type']}) for feature set {fs}", markup=False)
    for w in res["warnings"]:
        err.print(f"warning: {w}", markup=False)


@model_app.command("list")
def model_list(ctx: typer.Context, store: Optional[str] = StoreOpt):
    """List stored models."""
    from .cluster.model_store import list_models
    conn = _ltr_conn(ctx)
    table = Table("name", "type", "features")
    for m in list_models(conn, store):
        model = m.get("model", {})
        table.add_row(m.get("name", "?"), model.get("model", {}).get("type", "?"),
                      str(len(model.get("feature_set", {}).get("features", []))))
    out.print(table)


@model_app.command("show")
def model_show(ctx: typer.Context, name: str, store: Optional[str] = StoreOpt):
    """Print a stored model as JSON."""
    from .cluster.model_store import get_model
    conn = _ltr_conn(ctx)
    m = get_model(conn, name, store)
    if m is None:
        raise UserError(f"model {name} not found in store {store or '(default)'}")
    out.print_json(json.dumps(m))


@model_app.command("delete")
def model_delete(ctx: typer.Context, name: str, store: Optional[str] = StoreOpt):
    """Delete a stored model."""
    from .cluster.model_store import delete_model
    conn = _ltr_conn(ctx)
    if not delete_model(conn, name, store):
        raise UserError(f"model {name} not found in store {store or '(default)'}")
    out.print(f"deleted model {name}")


# --------------------------------------------------------------------------- search / evaluate

@app.command("search")
def search_cmd(ctx: typer.Context, text: str, index: str = typer.Option("cranfield", "--index"),
               model: Optional[str] = typer.Option(None, "--model", help="Rerank with this stored model."),
               window: int = typer.Option(100, "--window", min=1), size: int = typer.Option(10, "--size", min=1),
               store: Optional[str] = StoreOpt,
               param: List[str] = typer.Option([], "--param", help="Extra template parameter NAME=VALUE (repeatable)."),
               fields: Optional[str] = FieldsOpt, first_stage: Optional[Path] = TemplateOpt):
    """The first stage, then (with --model) the sltr rescore of its top WINDOW; a table of the hits."""
    from .cluster.rerank import search
    params = {"keywords": text}
    for p in param:
        name, eq, value = p.partition("=")
        if not eq or not name:
            raise UserError(f"--param {p!r}: expected NAME=VALUE")
        params[name] = value
    conn = _conn(ctx)
    stage = _first_stage(fields, first_stage)
    stage.check(conn, index)
    hits = search(conn, index, params, stage, model, size, window, store)
    table = Table("rank", "doc id", "score", "title")
    for h in hits:
        table.add_row(str(h["rank"]), h["id"], f"{h['score']:.4f}", h["title"][:70])
    out.print(table)


def _report_table(report: dict) -> Table:
    """An evaluation report (see ``evaluation.compare``) as a table: a row per system."""
    metrics = list(next(iter(report["systems"].values())))
    table = Table("system", *metrics, f"p (vs {report['baseline']})", "W/T/L")
    for n, vals in report["systems"].items():
        t = report["tests"].get(n)
        table.add_row(n, *(f"{vals[m]:.4f}" for m in metrics),
                      f"{t['p_value']:.4f}" if t else "", f"{t['wins']}/{t['ties']}/{t['losses']}" if t else "")
    return table


@app.command("evaluate")
def evaluate_cmd(ctx: typer.Context, judgments: Path,
                 index: str = typer.Option("cranfield", "--index"),
                 model: List[str] = typer.Option([], "--model", help="Stored model(s) to rerank with."),
                 k: int = typer.Option(10, "--k", min=1), window: int = typer.Option(100, "--window", min=1),
                 store: Optional[str] = StoreOpt,
                 fields: Optional[str] = FieldsOpt, first_stage: Optional[Path] = TemplateOpt,
                 folds: Optional[int] = typer.Option(None, "--cv", min=2,
                                                     help="Cross-validate: K folds over all judged queries; needs --featureset and --algo."),
                 featureset: Optional[str] = typer.Option(None, "--featureset", help="With --cv: the feature set to log."),
                 algo: List[str] = typer.Option([], "--algo", help="With --cv: algorithm(s) to train per fold."),
                 workdir: Path = typer.Option(Path("ltr-cv"), "--workdir", help="With --cv: where candidates go."),
                 seed: int = typer.Option(42, "--seed"),
                 json_out: Optional[Path] = typer.Option(None, "--json"),
                 plot: Optional[Path] = typer.Option(None, "--plot", help="Per-query delta chart (PNG).")):
    """Every judged query live: the first stage alone vs each reranker, paired tests.
    With --cv K: every query reranked by a fold model that never saw it."""
    from .data.judgments import load_judgments
    from .evaluation.live import evaluate_live
    from .fsutil import write_json
    jl = load_judgments(judgments)
    stage = _first_stage(fields, first_stage)
    conn = _conn(ctx)
    if folds:
        if not featureset or not algo:
            raise UserError("--cv needs --featureset and at least one --algo")
        if model:
            raise UserError("--cv trains its own fold models: drop --model")
        from .pipeline.crossval import cross_validate
        report = cross_validate(_ltr_conn(ctx), index, jl, featureset, {a: {} for a in algo},
                                workdir, folds, k, window, store, stage, seed,
                                log=lambda m: err.print(m, markup=False))
        qids = list(next(iter(report["per_query"].values())))
    else:
        report, _, qids = evaluate_live(conn, index, jl, model, k, window, store, first_stage=stage)
    out.print(f"{report['queries']} queries, k={k}" + (f", {report['evaluation']}" if "evaluation" in report else ""))
    out.print(_report_table(report))
    if json_out:
        write_json(json_out, report)
    if plot:
        from .evaluation.plots import delta_plot
        delta_plot(report, qids, plot)


# --------------------------------------------------------------------------- train / predict

class Algo(str, Enum):
    ranknet_nn = "ranknet-nn"
    lambdarank_nn = "lambdarank-nn"
    linear = "linear"
    lambdamart = "lambdamart"
    ranknet_tree = "ranknet-tree"


class Optimizer(str, Enum):
    adam = "adam"
    sgd = "sgd"


@app.command("train")
def train(data: Annotated[Path, typer.Argument(help="SVMlight/RankLib training file (with its sidecar when logged).")],
          output: Annotated[Path, typer.Option("-o", "--output", help="Model artifact (JSON).")],
          algo: Annotated[Algo, typer.Option("--algo")] = Algo.lambdarank_nn,
          valid: Annotated[Optional[Path], typer.Option("--valid", help="Validation file: early stopping on its NDCG@k.")] = None,
          test: Annotated[Optional[Path], typer.Option("--test")] = None,
          hidden: Annotated[str, typer.Option("--hidden", help="Hidden layer sizes, e.g. 64,16 (networks).")] = "64,16",
          epochs: Annotated[int, typer.Option("--epochs", min=1)] = 50,
          lr: Annotated[Optional[float], typer.Option("--lr", help="Learning rate (default 1e-3 networks, 0.1 trees).")] = None,
          trees: Annotated[int, typer.Option("--trees", min=1, help="Boosting rounds (trees).")] = 300,
          depth: Annotated[int, typer.Option("--depth", min=1, max=20, help="Tree depth (trees).")] = 6,
          optimizer: Annotated[Optimizer, typer.Option("--optimizer")] = Optimizer.adam,
          sigma: Annotated[float, typer.Option("--sigma")] = 1.0,
          k: Annotated[int, typer.Option("--k", min=1, help="NDCG@k for LambdaRank weights and early stopping.")] = 10,
          patience: Annotated[int, typer.Option("--patience", min=1)] = 10,
          truncation: Annotated[str, typer.Option("--truncation", help="LambdaRank weights |dNDCG@T|: default (k for networks, 32 for trees), k (same as --k), an integer, or all.")] = "default",
          seed: Annotated[int, typer.Option("--seed")] = 42):
    """Train a ranker with the factorised lambda objective and write a model artifact."""
    from .pipeline.train import TREE_ALGOS, train_from_files
    algo = algo.value
    total = trees if algo in TREE_ALGOS else epochs
    hidden_sizes = _hidden(hidden)
    monitor = "valid" if valid else "train"
    unit = "round" if algo in TREE_ALGOS else "epoch"
    with _progress(f"training {algo}", total) as update:
        def on_epoch(epoch, metric):
            update(epoch + 1, total, f"{unit} {epoch + 1}: {monitor} ndcg@{k}={metric:.4f}")
        artifact = train_from_files(
            data, algo=algo, valid=valid, test=test, output=output, hidden=hidden_sizes,
            epochs=epochs, lr=lr, optimizer=optimizer.value, sigma=sigma, k=k, patience=patience,
            seed=seed, on_epoch=on_epoch, trees=trees, depth=depth,
            truncation=_truncation(truncation))
    for w in artifact.get("warnings", []):
        err.print(f"warning: {w}", markup=False)
    table = Table("split", f"NDCG@{k}", "queries")
    for split, m in artifact["metrics"].items():
        table.add_row(split, f"{m[f'ndcg@{k}']:.4f}", str(m["queries"]))
    out.print(table)
    out.print(f"model written to {output}")


def _hidden(value: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(h) for h in value.split(",") if h.strip())
    except ValueError:
        raise UserError(f"--hidden {value!r}: expected comma-separated layer sizes such as 64,16") from None
    if any(h < 1 for h in sizes):
        raise UserError(f"--hidden {value!r}: layer sizes must be >= 1")
    return sizes


def _truncation(value: str):
    if value in ("k", "all", "default"):
        return None if value == "all" else value
    try:
        t = int(value)
    except ValueError:
        raise UserError(f"--truncation {value!r}: expected k, all or an integer") from None
    if t < 1:
        raise UserError(f"--truncation {value!r}: expected an integer >= 1")
    return t


@app.command("predict")
def predict(model: Path, data: Path,
            output: Path = typer.Option(..., "-o", "--output", help="One score per input row.")):
    """Score every row of DATA with MODEL."""
    from .pipeline.train import predict_file
    n = predict_file(model, data, output)
    out.print(f"{n} scores written to {output}")


@job_app.command("run")
def job_run(ctx: typer.Context, job: Path = typer.Argument(..., help="The job file (TOML)."),
            json_report: bool = typer.Option(False, "--json", help="Print the run's manifest as JSON on stdout.")):
    """Run a feature-logging job once: lock, log (resumable), publish a snapshot
    atomically with a manifest, keep the last N. Exit 0 complete, 3 partial, 2 user error."""
    from .cluster.client import Connection
    from .cluster.jobs import load_job, run_job
    spec = load_job(job)
    given = ctx.obj
    conn = Connection(url=spec.url or given.url, ca_certs=spec.ca_certs or given.ca_certs,
                      insecure=spec.insecure or given.insecure, timeout=spec.timeout)
    from .cluster import client as cl
    cl.check_ltr(conn)
    manifest = run_job(spec, conn, log=lambda m: err.print(m, markup=False))
    if json_report:
        print(json.dumps(manifest, indent=2))
    else:
        out.print(f"snapshot {manifest['snapshot']} ({manifest['status']}): "
                  f"{manifest['counts']['rows']} rows", markup=False)
    for q, why in manifest.get("failed_queries", []):
        err.print(f"failed: query {q}: {why}", markup=False)
    if manifest["status"] != "complete":
        raise typer.Exit(EXIT_PARTIAL)


@app.command("demo")
def demo(ctx: typer.Context,
         workdir: Path = typer.Option(Path("ltr-demo"), "--workdir", help="Where candidates, features and models go."),
         json_out: Optional[Path] = typer.Option(None, "--json"),
         folds: int = typer.Option(5, "--folds", min=2, help="Cross-validation folds."),
         recreate: bool = typer.Option(False, "--recreate", help="Re-index the demo's index when an older version exists.")):
    """The main job: node, Cranfield, feature set, candidates, 5-fold cross-validated
    linear / LambdaRank-NN / LambdaMART rerankers uploaded and evaluated live vs BM25."""
    from .cluster import localnode
    from .pipeline.demo import run_demo
    from .fsutil import write_json
    conn = _conn(ctx)
    t0 = time.monotonic()
    if not conn.url:
        info, started = localnode.start(log=lambda m: err.print(m, markup=False))
        conn.url = info.url
        out.print(f"local node {'started' if started else 'running'} at {info.url}")
    report = run_demo(conn, workdir, log=lambda m: out.print(m, markup=False), folds=folds,
                      recreate=recreate)
    out.print(f"Cranfield: {report['queries']} queries, k={report['k']}, {report['evaluation']}")
    out.print(_report_table(report))
    if json_out:
        write_json(json_out, report)
    out.print(f"artefacts in {workdir} ({time.monotonic() - t0:.0f}s)")


def main(argv: Optional[List[str]] = None) -> int:
    """Run the CLI: user errors (ours and typer's usage errors) are one line on stderr and
    exit 2; anything unexpected is one line naming where the full trace went, exit 1."""
    try:
        rv = app(args=argv, standalone_mode=False, prog_name="ltr")
        if isinstance(rv, int):
            return rv
    except UserError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        err.print("aborted", markup=False)
        return 130
    except KeyboardInterrupt:
        err.print("interrupted", markup=False)
        return 130
    except Exception as exc:
        # typer's own parsing errors (it vendors click: no import of click here)
        if type(exc).__name__ == "NoArgsIsHelpError":
            out.print(exc.format_message(), markup=False, highlight=False)
            return getattr(exc, "exit_code", 2)
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            ctx = getattr(exc, "ctx", None)
            where = ctx.command_path if ctx is not None else "ltr"
            msg = " ".join(str(exc.format_message()).split())
            err.print(f"error: {msg} (see `{where} --help`)", markup=False, highlight=False,
                      soft_wrap=True)
            return int(exc.exit_code)
        return _unexpected(exc)
    return 0


def _unexpected(exc: BaseException) -> int:
    import tempfile
    import traceback
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    fd, path = tempfile.mkstemp(prefix="ltr-error-", suffix=".txt")
    with open(fd, "w") as fh:
        fh.write(text)
    err.print(f"unexpected error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]} "
              f"(full trace in {path}; please report it)", markup=False, highlight=False,
              soft_wrap=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
