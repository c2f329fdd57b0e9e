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
from urllib.parse import urlsplit

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

# markup off: paths, model and feature-set names are echoed as they are (a name with
# ``[/x]`` in it is text, not a Rich tag that would end a finished command with exit 1)
out = Console(markup=False, highlight=False, soft_wrap=True)
err = Console(stderr=True, soft_wrap=True, markup=False, highlight=False)


# --------------------------------------------------------------------------- choices

class Split(str, Enum):
    train = "train"
    valid = "valid"
    test = "test"
    all = "all"


class Settings(str, Enum):
    choose = "choose"
    defaults = "defaults"


class Format(str, Enum):
    ranklib = "ranklib"
    trec = "trec"
    csv = "csv"
    jsonl = "jsonl"


class Statistics(str, Enum):
    dfs = "dfs"
    shard = "shard"


class Unjudged(str, Enum):
    zero = "zero"
    drop = "drop"


class JudgedOutside(str, Enum):
    exclude = "exclude"
    include = "include"


class Algo(str, Enum):
    ranknet_nn = "ranknet-nn"
    lambdarank_nn = "lambdarank-nn"
    linear = "linear"
    lambdamart = "lambdamart"
    ranknet_tree = "ranknet-tree"


class Optimizer(str, Enum):
    adam = "adam"
    sgd = "sgd"



@app.callback()
def _global(ctx: typer.Context,
            url: Annotated[Optional[str], typer.Option("--url", envvar="LTR_URL", help="Cluster URL (default: the local node, else http://localhost:9200). Credentials come from LTR_USER / LTR_PASSWORD.")] = None,
            ca_certs: Annotated[Optional[Path], typer.Option("--ca-certs", help="CA bundle for TLS.")] = None,
            insecure: Annotated[bool, typer.Option("--insecure", help="Do not verify TLS certificates.")] = False,
            timeout: Annotated[Optional[float], typer.Option("--timeout", min=0.1, help="Request timeout, seconds (default 30; `ltr job run`: the job file's, else 60).")] = None,
            encoder: Annotated[Optional[str], typer.Option("--encoder", envvar="LTR_ENCODER", help="The sentence encoder of document and query vectors: a model folder (model.onnx + tokenizer.json) or module:function (default: the packaged all-MiniLM-L6-v2).")] = None):
    from .transport.client import Connection, InsecureTLSWarning
    from .transport.localnode import running_node
    from .serving.rerank import RescoreFallbackWarning
    _one_line_warnings(InsecureTLSWarning, RescoreFallbackWarning)
    if url and ctx.get_parameter_source("url").name == "COMMANDLINE" and "@" in urlsplit(url).netloc:
        raise UserError("--url carries credentials: every process on this machine can read argv",
                        "put them in LTR_USER / LTR_PASSWORD (or in LTR_URL) and pass --url without them")
    if not url:                 # no --url / LTR_URL: the local node, when one runs
        node = running_node()
        url = node.url if node else None
    ctx.meta["timeout_given"] = timeout is not None
    if encoder:                 # read by every step that encodes (ltr_toolkit.encoders.load_encoder)
        import os
        os.environ["LTR_ENCODER"] = encoder
    ctx.obj = Connection(url=url, ca_certs=str(ca_certs) if ca_certs else None, insecure=insecure,
                         **({} if timeout is None else {"timeout": timeout}))


def _one_line_warnings(*categories):
    """Show these warnings as one line ``warning: ...`` on stderr; others as Python does."""
    import warnings
    if getattr(warnings.showwarning, "ltr_one_line", False):
        return
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, categories):
            err.print(f"warning: {message}", soft_wrap=True)
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
            err.print(f"{label}: {done}{of} {note}".rstrip())
    yield update


def _conn(ctx: typer.Context):
    return ctx.obj


def _ltr_conn(ctx: typer.Context):
    """The connection, after checking that the cluster answers and has the LTR plugin."""
    from .transport import client as cl
    conn = ctx.obj
    cl.check_ltr(conn)
    return conn


# --------------------------------------------------------------------------- cluster

@cluster_app.command("start")
def cluster_start(no_ltr: Annotated[bool, typer.Option("--no-ltr", help="Start plain OpenSearch when the LTR plugin cannot be provisioned (diagnostics only).")] = False,
                  nodes: Annotated[int, typer.Option("--nodes", min=1, help="Start a cluster of N local nodes (each 512 MiB heap).")] = 1,
                  no_knn: Annotated[bool, typer.Option("--no-knn", help="Without the k-NN plugin (the lexical features only; removes it from the local node's install).")] = False):
    """Provision (cached) and start a local node, or a cluster of N nodes; return when it
    is healthy."""
    from .transport import localnode
    t0 = time.monotonic()
    if nodes > 1:
        from .transport.localcluster import start_cluster
        started = start_cluster(nodes, require_plugin=not no_ltr, log=lambda m: err.print(m))
        out.print(f"{nodes} nodes healthy at {', '.join(s.url for s in started)} (pids "
                  f"{', '.join(str(s.pid) for s in started)}) in {time.monotonic() - t0:.1f}s")
        return
    info, started = localnode.start(require_plugin=not no_ltr, knn=not no_knn,
                                    log=lambda m: err.print(m))
    if not started:
        out.print(f"a node already runs: {info.url} (pid {info.pid}); nothing started")
        return
    plugin = "with LTR plugin" if info.plugin else "WITHOUT the LTR plugin"
    out.print(f"OpenSearch {info.version} {plugin} healthy at {info.url} "
              f"(pid {info.pid}) in {time.monotonic() - t0:.1f}s")


@cluster_app.command("stop")
def cluster_stop():
    """Stop the node(s) `ltr cluster start` started (by their pids)."""
    from .transport import localnode
    from .transport.localcluster import stop_all
    many = stop_all()
    info = localnode.stop()
    if many:
        out.print(f"stopped pids {', '.join(str(n.pid) for n in many)}")
    elif info is None:
        out.print("no local node runs")
    else:
        out.print(f"stopped pid {info.pid} ({info.url})")


@cluster_app.command("status")
def cluster_status(ctx: typer.Context):
    """URL, OpenSearch version, LTR plugin version and health; exit 1 when no node answers."""
    from .transport import client as cl
    conn = _conn(ctx)
    try:
        info = cl.cluster_info(conn)
        health = cl.request(conn, "GET", "/_cluster/health")
        ltr = cl.ltr_plugin_version(conn)
        from .transport.lookups import has_knn
        knn = has_knn(conn)
    except ClusterError as exc:   # nothing (usable) answers: exit 1; bad settings stay exit 2
        err.print(f"error: {exc}")
        raise typer.Exit(1)
    table = Table(show_header=False)
    table.add_row("url", conn.display_url)
    table.add_row("opensearch", info.get("version", {}).get("number", "?"))
    table.add_row("ltr plugin", ltr or "not installed")
    table.add_row("k-NN plugin", "installed (semantic features)" if knn else
                  "not installed (lexical features only)")
    table.add_row("health", health.get("status", "?"))
    out.print(table)


# --------------------------------------------------------------------------- store

StoreOpt = Annotated[Optional[str], typer.Option("--store", help="Feature store name (default store when omitted).")]


@store_app.command("init")
def store_init(ctx: typer.Context, store: StoreOpt = None):
    """Create a feature store."""
    from .stores import store as st
    conn = _ltr_conn(ctx)
    created = st.init_store(conn, store)
    out.print(f"store {store or '(default)'} {'created' if created else 'already exists'}")


@store_app.command("drop")
def store_drop(ctx: typer.Context, store: StoreOpt = None,
               yes: Annotated[bool, typer.Option("--yes", help="Confirm: the store's feature sets and models are deleted.")] = False):
    """Delete a feature store with its feature sets and models (needs --yes)."""
    from .stores import store as st
    if not yes:
        raise UserError(f"dropping store {store or '(default)'} deletes its feature sets and models",
                        "pass --yes to confirm")
    conn = _ltr_conn(ctx)
    dropped = st.drop_store(conn, store)
    out.print(f"store {store or '(default)'} {'dropped' if dropped else 'did not exist'}")


@store_app.command("list")
def store_list(ctx: typer.Context):
    """List feature stores."""
    from .stores import store as st
    conn = _ltr_conn(ctx)
    table = Table("store", "index", "version")
    for name, meta in sorted(st.list_stores(conn).items()):
        table.add_row(name, str(meta.get("index", "")), str(meta.get("version", "")))
    out.print(table)


# --------------------------------------------------------------------------- featureset

@featureset_app.command("upload")
def featureset_upload(ctx: typer.Context, file: Path, store: StoreOpt = None):
    """Upload a feature set file (validated locally first)."""
    from .stores import store as st
    from .data.featuresets import load_featureset
    fs = load_featureset(file)
    conn = _ltr_conn(ctx)
    name, what = st.upload_featureset_versioned(conn, fs, store)
    out.print(f"feature set {name} ({len(fs['features'])} features): {what}")


@featureset_app.command("list")
def featureset_list(ctx: typer.Context, store: StoreOpt = None):
    """List feature sets in a store."""
    from .stores import store as st
    conn = _ltr_conn(ctx)
    table = Table("name", "features")
    for fs in st.list_featuresets(conn, store):
        table.add_row(fs.get("name", "?"), str(len(fs.get("featureset", {}).get("features", []))))
    out.print(table)


@featureset_app.command("show")
def featureset_show(ctx: typer.Context, name: str, store: StoreOpt = None):
    """Print a stored feature set as JSON."""
    from .stores import store as st
    conn = _ltr_conn(ctx)
    fs = st.get_featureset(conn, name, store)
    if fs is None:
        raise UserError(f"feature set {name} not found in store {store or '(default)'}",
                        "upload it with `ltr featureset upload FILE`")
    out.print_json(json.dumps(fs))


@featureset_app.command("cost")
def featureset_cost(ctx: typer.Context, name: str, judgments: Path,
                    index: Annotated[str, typer.Option("--index")] = "cranfield",
                    store: StoreOpt = None, fields: FieldsOpt = None, first_stage: TemplateOpt = None,
                    statistics: StatsOpt = Statistics.dfs,
                    window: Annotated[int, typer.Option("--window", min=1, help="The depth reranked: the first stage's global top WINDOW.")] = 100,
                    algo: Annotated[Algo, typer.Option("--algo", help="The model family of the ablation.")] = Algo.lambdamart,
                    folds: Annotated[int, typer.Option("--folds", min=2, help="Cross-validation folds of the ablation.")] = 5,
                    timing_queries: Annotated[int, typer.Option("--timing-queries", min=1, help="Judged queries timed live.")] = 100,
                    passes: Annotated[int, typer.Option("--passes", min=1, help="Timed passes over them (after one warm-up pass).")] = 2,
                    workdir: Annotated[Path, typer.Option("--workdir", help="Where the logged candidates go.")] = Path("ltr-cost"),
                    fmt: Annotated[Optional[Format], typer.Option("--format", help="Judgment format; guessed from the name when omitted.")] = None,
                    queries: Annotated[Optional[Path], typer.Option("--queries", help="Queries file for TREC qrels.")] = None,
                    json_out: Annotated[Optional[Path], typer.Option("--json")] = None):
    """What each feature of a stored set costs at serving time (ms added to the request,
    measured live) next to what it brings to NDCG@k (drop-one ablation under
    cross-validation on the logged candidates: a negative delta means the feature helps)."""
    from .serving.serving import Serving
    from .data.judgments import load_judgments
    from .io.atomic import write_json
    from .pipeline.featurecost import cost_report
    _writable(json_out)
    jl = load_judgments(judgments, fmt.value if fmt else None, queries)
    stage = _first_stage(fields, first_stage, statistics)
    conn = _ltr_conn(ctx)
    stage.check(conn, index)
    rep = cost_report(conn, Serving(index, stage, window, store), jl, name, workdir, algo.value,
                      folds, timing_queries, passes, log=lambda m: err.print(m))
    out.print(_cost_table(rep))
    if json_out:
        write_json(json_out, rep)


def _cost_table(rep: dict) -> Table:
    from .evaluation.featurecost import FEEDBACK
    c = rep["contribution"]
    table = Table("feature", "ms added (p50)", f"ndcg@{rep['k']} without it", "delta", "p")
    for row, cost in rep["cost"].items():   # the first request: what the feedback group needs
        ab = c["rows"].get(FEEDBACK if row.startswith("first request") else row)
        table.add_row(row, f"{cost['p50_ms']:.2f}",
                      *((f"{ab['ndcg']:.4f}", f"{ab['delta']:+.4f}", f"{ab['p_value']:.4f}") if ab
                        else ("", "", "")))
    table.add_row("(all features, model)", "", f"{c['all']:.4f}", "", "")
    table.add_row("(first stage order)", "", f"{c['first_stage']:.4f}", "", "")
    return table


# --------------------------------------------------------------------------- collections

ShardsOpt = Annotated[int, typer.Option("--shards", min=1, help="Primary shards of the new index.")]
ReplicasOpt = Annotated[int, typer.Option("--replicas", min=0, help="Replicas of each shard.")]
NeighboursOpt = Annotated[int, typer.Option(
    "--neighbours", min=0, help="Each document's K nearest neighbours (more_like_this over title "
    "and abstract, else all its fields) indexed in a 'neighbours' field: index-time feedback "
    "for the neighbours_bm25 feature. 0: none.")]


VectorsOpt = Annotated[str, typer.Option(
    "--vectors", help="Comma-separated fields whose text each document's vector encodes "
    "(those the collection has; all its fields when none), written to a knn_vector field "
    "'vector' for the semantic features (needs the k-NN plugin); 'none': no vectors.")]


def _vector_fields(spec: str):
    if spec.strip().lower() in ("", "none", "0"):
        return None
    return tuple(f.strip() for f in spec.split(",") if f.strip())


def _expansion(k: int):
    from .indexing.neighbours import Expansion
    return Expansion(k=k) if k else None


def _indexed(res: dict, what: str) -> None:
    note = "" if res["analyzer"] == "english" else " (the node has no english analyzer)"
    out.print(f"indexed {res['count']} documents into {what} with the {res['analyzer']} analyzer"
              f"{note}" + (f"; {res['errors']} failed" if res["errors"] else ""))
    if res.get("vectors"):
        v = res["vectors"]
        out.print(f"vectors of {', '.join(v['text_fields'])} by {v['encoder']['name']} in field "
                  f"{v['field']} ({v['encoder']['dim']} dimensions)")
    elif res.get("no_vectors"):
        err.print(f"note: no vectors: {res['no_vectors']}")
    if res["errors"]:
        raise UserError(f"{res['errors']} documents failed to index")


@index_app.command("cranfield")
def index_cranfield(ctx: typer.Context,
                    index: Annotated[str, typer.Option("--index", help="Index name.")] = "cranfield",
                    recreate: Annotated[bool, typer.Option("--recreate", help="Delete INDEX first when it exists.")] = False,
                    shards: ShardsOpt = 1, replicas: ReplicasOpt = 0, neighbours: NeighboursOpt = 3,
                    vectors: VectorsOpt = "title,abstract"):
    """Load the bundled Cranfield collection (1,400 documents) into INDEX."""
    from .indexing.documents import index_documents
    from .datasets import cranfield
    _indexed(index_documents(_conn(ctx), index, cranfield.documents(), recreate=recreate,
                             shards=shards, replicas=replicas, expansion=_expansion(neighbours),
                             vector_fields=_vector_fields(vectors)),
             index)


@index_app.command("jsonl")
def index_jsonl(ctx: typer.Context, path: Annotated[Path, typer.Argument(help="One JSON object per line: an id and text fields.")],
                index: Annotated[str, typer.Option("--index", help="Index name.")],
                recreate: Annotated[bool, typer.Option("--recreate", help="Delete INDEX first when it exists.")] = False,
                shards: ShardsOpt = 1, replicas: ReplicasOpt = 0, neighbours: NeighboursOpt = 3,
                vectors: VectorsOpt = "title,abstract"):
    """Load your own documents into INDEX: every text field analysed for BM25, with
    FIELD.lmd / FIELD.dfr multi-fields and FIELD_len counts, the neighbours field and the
    documents' vectors (the shipped feature set's shape)."""
    from .indexing.documents import index_documents, read_jsonl_documents
    docs, fields = read_jsonl_documents(path)
    res = index_documents(_conn(ctx), index, docs, recreate=recreate, fields=fields,
                          meta=f"jsonl:{path.name}", shards=shards, replicas=replicas,
                          expansion=_expansion(neighbours), vector_fields=_vector_fields(vectors))
    _indexed(res, f"{index} (fields {', '.join(fields)})")


@index_app.command("vectors")
def index_vectors_cmd(ctx: typer.Context,
                      index: Annotated[str, typer.Option("--index", help="Your index.")],
                      fields: Annotated[str, typer.Option("--fields", help="Comma-separated text fields each document's vector encodes.")] = "title,abstract",
                      field: Annotated[Optional[str], typer.Option("--field", help="With --existing: the knn_vector field your own pipeline writes.")] = None,
                      existing: Annotated[bool, typer.Option("--existing", help="The vectors are already there (your ingest pipeline wrote them with --encoder's model): record the field and its model, compute nothing.")] = False):
    """Write each document's vector (FIELDS encoded) into the knn_vector field 'vector' of
    an existing INDEX, in batches; restartable (a second run writes only the documents
    still without one). Exit 3 when some documents failed (named)."""
    from .indexing.vectors import add_vectors, register
    conn = _conn(ctx)
    names = tuple(f.strip() for f in fields.split(",") if f.strip())
    if existing:
        if not field:
            raise UserError("--existing needs --field: the knn_vector field your pipeline writes")
        res = register(conn, index, field, text_fields=names if ctx.get_parameter_source("fields").name != "DEFAULT" else None)
        note = (f"; checked on a sample: median cosine {res['checked_cosine']:.4f}"
                if res.get("checked_cosine") is not None else "")
        out.print(f"recorded field {field} of {index} as vectors of {res['encoder']['name']}{note}")
        return
    with _progress("vectors") as update:
        res = add_vectors(conn, index, names, progress=lambda n: update(n))
    out.print(f"wrote vectors of {', '.join(res['fields'])} by {res['encoder']['name']} for "
              f"{res['written']} documents of {index}"
              + (f"; {res['no_text']} without text in those fields (no vector)" if res["no_text"] else ""))
    if res["failed"]:
        shown = ", ".join(f"{i} ({why})" for i, why in res["failed"][:5])
        err.print(f"error: {len(res['failed'])} documents failed: {shown}; run the command again")
        raise typer.Exit(EXIT_PARTIAL)


@index_app.command("neighbours")
def index_neighbours(ctx: typer.Context,
                     index: Annotated[str, typer.Option("--index", help="Your index.")],
                     fields: Annotated[str, typer.Option("--fields", help="Comma-separated text fields compared by more_like_this (best with term vectors).")] = "title,abstract",
                     k: Annotated[int, typer.Option("--k", min=1, help="Neighbours per document.")] = 3):
    """Write each document's K nearest neighbours' text into the 'neighbours' field of an
    existing INDEX (index-time feedback for a neighbours_bm25 feature; run it again after
    changing documents)."""
    from .indexing.neighbours import Expansion, expand
    spec = Expansion(fields=tuple(f.strip() for f in fields.split(",") if f.strip()), k=k)
    res = expand(_conn(ctx), index, spec)
    out.print(f"wrote the text of {k} neighbours into {res['field']} for {res['written']} of "
              f"{res['documents']} documents of {index}"
              + (f"; {res['errors']} failed" if res["errors"] else ""))
    if res["in_source"]:
        out.print(f"note: {index}'s _source keeps {res['field']}, which slows every search's fetch "
                  f"phase; an index created with _source.excludes [{res['field']}] does not")
    if res["errors"]:
        err.print(f"error: {res['errors']} documents failed to update; run the command again")
        raise typer.Exit(EXIT_PARTIAL)


@judgments_app.command("cranfield")
def judgments_cranfield(output: Annotated[Path, typer.Option("-o", "--output")],
                        split: Annotated[Split, typer.Option("--split")] = Split.all):
    """Write the Cranfield judgments (fixed seeded 60/20/20 query split) in the toolkit's format."""
    from .data.judgments import save_ranklib
    from .datasets import cranfield
    split = split.value
    jl = cranfield.split_judgments(split)
    save_ranklib(jl, output)
    out.print(f"{len(jl)} judgments for {len(jl.queries)} queries ({split}) written to {output}")


@judgments_app.command("check")
def judgments_check(file: Path, fmt: Annotated[Optional[Format], typer.Option("--format", help="Guessed from the name when omitted.")] = None,
                    queries: Annotated[Optional[Path], typer.Option("--queries", help="Queries file for TREC qrels.")] = None):
    """Validate a judgment file: counts, duplicates; exit 2 with file:line on errors."""
    from .data.judgments import load_judgments
    jl = load_judgments(file, fmt.value if fmt else None, queries)
    for d in jl.duplicates:
        err.print(f"warning: {d}")
    out.print(f"{len(jl)} judgments, {len(jl.queries)} queries, {len(jl.duplicates)} duplicates")


class ClickModel(str, Enum):
    ctr = "ctr"
    coec = "coec"
    sdbn = "sdbn"
    pbm = "pbm"
    ubm = "ubm"


class Grading(str, Enum):
    levels = "levels"
    estimate = "estimate"


class Positions(str, Enum):
    auto = "auto"
    zero = "0"
    one = "1"


@judgments_app.command("clicks")
def judgments_clicks(ctx: typer.Context,
                     output: Annotated[Path, typer.Option("-o", "--output", help="The judgment list (.csv, .jsonl, .qrels or RankLib); OUT.counts.csv and OUT.json go beside it.")],
                     file: Annotated[Optional[Path], typer.Argument(help="UBI events: NDJSON or the bulk format (both indices in one file). Without it: the cluster's UBI indices.")] = None,
                     model: Annotated[ClickModel, typer.Option("--model")] = ClickModel.pbm,
                     fmt: Annotated[Optional[Format], typer.Option("--format", help="Guessed from the output's name when omitted.")] = None,
                     prior: Annotated[Optional[float], typer.Option("--prior", min=0, help="Pseudo-observations towards the average (default: 0 for coec, 1 otherwise).")] = None,
                     min_impressions: Annotated[int, typer.Option("--min-impressions", min=1)] = 5,
                     grades: Annotated[Grading, typer.Option("--grades", help="levels (whole grades 0..--levels) or estimate (the model's number).")] = Grading.levels,
                     levels: Annotated[int, typer.Option("--levels", min=1)] = 4,
                     positions: Annotated[Positions, typer.Option("--positions", help="Positions counted from (auto: 1 when no impression has position 0).")] = Positions.auto,
                     max_rank: Annotated[int, typer.Option("--max-rank", min=1, help="COEC: ranks with a rank CTR (the Workbench's maxRank).")] = 20,
                     days: Annotated[Optional[float], typer.Option("--days", help="Cluster: the last N days of events.")] = None,
                     since: Annotated[Optional[str], typer.Option("--since", help="Cluster: events at or after this time (ISO 8601).")] = None,
                     until: Annotated[Optional[str], typer.Option("--until", help="Cluster: events before this time (ISO 8601).")] = None,
                     queries_index: Annotated[str, typer.Option("--queries-index")] = "ubi_queries",
                     events_index: Annotated[str, typer.Option("--events-index")] = "ubi_events",
                     clicks_as: Annotated[str, typer.Option("--click-actions", help="Comma-separated action names read as clicks.")] = "click"):
    """Judgments from User Behavior Insights events through a click model (ctr, coec as the
    Search Relevance Workbench computes it, sdbn, pbm, ubm); bad event data is counted and
    reported."""
    from .clicks.judge import ClickSettings, judge
    from .clicks.output import write_counts, write_judgments, write_report
    settings = ClickSettings(model=model.value, prior=prior, min_impressions=min_impressions,
                             mapping=grades.value, levels=levels, positions=positions.value, max_rank=max_rank)
    _writable(output)
    click_actions = tuple(a.strip() for a in clicks_as.split(",") if a.strip())
    if file is not None:
        from .clicks.events import read_file
        log, source = read_file(file, click_actions=click_actions), str(file)
    else:
        from .clicks.ubi import read_event_log, time_range
        conn = _conn(ctx)
        rng = time_range(since, until, days)
        log = read_event_log(conn, rng, queries_index, events_index, click_actions=click_actions)
        source = f"{conn.display_url}/{events_index} {json.dumps(rng)}"
    jl, rows, report = judge(log, settings, source)
    files = write_judgments(jl, output, fmt.value if fmt else None)
    files += [write_counts(rows, output), write_report(report, output)]
    for line in log.problems.lines():
        err.print(f"bad data: {line}")
    c = report["counts"]
    out.print(f"{c['events']} events, {c['searches']} searches, {c['clicks']} clicks (positions counted "
              f"from {report['positions_counted_from']}); {model.value}: {c['judged_pairs']} judgments for "
              f"{c['queries']} queries ({c['pairs_below_min_impressions']} pairs under {min_impressions} "
              f"impressions left out) written to {', '.join(str(f) for f in files)}")


FieldsOpt = Annotated[Optional[str], typer.Option("--fields", help="First stage: BM25 best_fields over these comma-separated fields (default title,abstract).")]
TemplateOpt = Annotated[Optional[Path], typer.Option("--first-stage", help="First stage: a search template file {\"query\": {...}} with {{keywords}} and per-query params.")]
StatsOpt = Annotated[Statistics, typer.Option("--statistics", help="Term statistics of the first stage, the logged features and the rescore: dfs (the whole index's, whatever the number of shards) or shard (each shard's own: query_then_fetch). Serve a model with the statistics it was logged with.")]


def _first_stage(fields: Optional[str], template: Optional[Path], statistics: Statistics = Statistics.dfs):
    from .query.firststage import FirstStage
    return FirstStage.resolve(template, [f for f in fields.split(",")] if fields else None,
                              statistics.value)


def _writable(*paths: Optional[Path]) -> None:
    """Refuse an output path that cannot be written before any work (one line, exit 2)."""
    from .io.atomic import check_writable
    for p in paths:
        if p is not None:
            check_writable(p)


#: exit code of a run that completed with some queries failed (listed in the sidecar/report)
EXIT_PARTIAL = 3


@app.command("log")
def log_cmd(ctx: typer.Context, judgments: Path,
            featureset: Annotated[str, typer.Option("--featureset")],
            output: Annotated[Path, typer.Option("-o", "--output")],
            index: Annotated[str, typer.Option("--index")] = "cranfield",
            store: StoreOpt = None,
            fmt: Annotated[Optional[Format], typer.Option("--format")] = None,
            queries: Annotated[Optional[Path], typer.Option("--queries")] = None,
            batch: Annotated[int, typer.Option("--batch", min=1, help="Queries per _msearch round trip.")] = 25,
            candidates: Annotated[Optional[int], typer.Option("--candidates", min=1, help="Log the first stage's top K per query (labelled from the judgments), not only the judged pairs.")] = None,
            unjudged: Annotated[Unjudged, typer.Option("--unjudged", help="With --candidates: unjudged documents as grade 0, or dropped.")] = Unjudged.zero,
            judged_outside: Annotated[JudgedOutside, typer.Option("--judged-outside", help="With --candidates: judged documents outside the top K.")] = JudgedOutside.exclude,
            fields: FieldsOpt = None, first_stage: TemplateOpt = None,
            statistics: StatsOpt = Statistics.dfs,
            incremental: Annotated[bool, typer.Option("--incremental", help="Log only pairs OUTPUT does not hold yet and append them; rows it holds take the current grades, pairs no longer judged are dropped.")] = False):
    """Log feature values per (query, document) pair (resumable: rerun after a kill).
    Exit 3 when some queries failed (they are listed; the rest is logged)."""
    from .features.candidates import candidate_judgments
    from .features.featurelog import log_features, log_incremental, query_budget
    from .data.judgments import load_judgments
    _writable(output)
    jl = load_judgments(judgments, fmt.value if fmt else None, queries)
    fs_stage = _first_stage(fields, first_stage, statistics)
    conn = _ltr_conn(ctx)
    info = None
    if candidates:
        budget = query_budget(conn, index, jl, featureset, fs_stage, store)
        jl, info = candidate_judgments(conn, index, jl, candidates, fs_stage, unjudged.value,
                                       judged_outside.value, max_terms=budget)
        err.print(f"candidates: top {candidates} of {info['queries']} queries, {info['judged']} judged, "
                  f"{info['unjudged']} unjudged{' (grade 0)' if unjudged is Unjudged.zero else ' (dropped)'}, "
                  f"{info['judged_outside']} judged outside the top {candidates} added")
    with _progress("logging rounds") as update:
        run = log_incremental if incremental else log_features
        side = run(conn, jl, featureset, index, output, store, batch,
                   lambda d, t: update(d, t), fs_stage, info)
    out.print(f"{side['rows']} rows with {len(side['feature_names'])} features written to {output}; "
              f"{len(side['missing_docs'])} documents not in {index}")
    if side.get("fitted_queries"):
        err.print(f"{side['fitted_queries']} long queries sent as their first "
                  f"{side['max_query_terms']} distinct words (the cluster's clause limit)")
    for q, d in side["missing_docs"][:10]:
        err.print(f"missing: query {q}, doc {d}")
    for q, why in side.get("failed_queries", []):
        err.print(f"failed: query {q}: {why}")
    if side.get("failed_queries"):
        raise typer.Exit(EXIT_PARTIAL)


# --------------------------------------------------------------------------- models

@app.command("upload")
def upload_cmd(ctx: typer.Context, model: Path,
               name: Annotated[str, typer.Option("--name", help="Base name; the next -vN is used unless --exact.")],
               featureset: Annotated[Optional[str], typer.Option("--featureset", help="Feature set (default: the one the training data was logged with).")] = None,
               store: StoreOpt = None,
               index: Annotated[Optional[str], typer.Option("--index", help="Validate the model with a query on this index first, and measure what it takes in the plugin's cache.")] = None,
               exact: Annotated[bool, typer.Option("--exact", help="Use NAME as is; fail if it exists.")] = False):
    """Export MODEL.json to the plugin's format, check it, and create it in the store."""
    from .query.firststage import FirstStage
    from .stores.model_store import upload
    from .pipeline.train import load_model
    art, m = load_model(model)
    fs = featureset or art.get("featureset")
    if not fs:
        raise UserError("the model does not say which feature set it was trained on", "pass --featureset")
    conn = _ltr_conn(ctx)
    res = upload(conn, art, m, name, fs, store, index, versioned=not exact)
    out.print(f"uploaded {res['name']} ({res['type']}) for feature set {fs}")
    if art.get("rescore"):
        r = art["rescore"]
        out.print(f"serve it with query_weight {r['query_weight']:g}, rescore_query_weight "
                  f"{r['rescore_query_weight']:.6g} (ltr search --query-weight/--rescore-weight)")
    if art.get("first_stage"):
        stage = FirstStage.from_dict(art["first_stage"])
        out.print(f"term statistics: {stage.statistics} (ltr search/evaluate --statistics "
                  f"{stage.statistics}; search_type {stage.search_type})")
    if art.get("max_query_terms"):
        out.print(f"long queries: send at most {art['max_query_terms']} distinct words, as "
                  "logging did (ltr search --max-terms; ltr_toolkit.data.querytext.fit_keywords)")
    if art.get("encoder"):
        e = art["encoder"]
        out.print(f"query vectors: {e['name']} ({e['sha256'][:12]}, {e['dim']} dimensions), the "
                  f"encoder of the index's '{art.get('vector_field') or 'vector'}' field: serve "
                  "with that model (--encoder / LTR_ENCODER), or pass query_vector yourself")
    from .stores.modelcache import cache_warnings
    cache, warns = cache_warnings(conn, res["name"], store, index)
    if cache["model_bytes"] is not None:
        out.print(f"plugin cache: the model takes {cache['model_bytes'] / 1024:.1f} KB of "
                  f"ltr.caches.max_mem {cache['limit_bytes'] / 1024 ** 2:.1f} MB per node")
    for w in res["warnings"] + warns:
        err.print(f"warning: {w}")


@model_app.command("list")
def model_list(ctx: typer.Context, store: StoreOpt = None):
    """List stored models."""
    from .stores.model_store import list_models
    conn = _ltr_conn(ctx)
    table = Table("name", "type", "features")
    for m in list_models(conn, store):
        model = m.get("model", {})
        table.add_row(m.get("name", "?"), model.get("model", {}).get("type", "?"),
                      str(len(model.get("feature_set", {}).get("features", []))))
    out.print(table)


@model_app.command("show")
def model_show(ctx: typer.Context, name: str, store: StoreOpt = None):
    """Print a stored model as JSON."""
    from .stores.model_store import get_model
    conn = _ltr_conn(ctx)
    m = get_model(conn, name, store)
    if m is None:
        raise UserError(f"model {name} not found in store {store or '(default)'}")
    out.print_json(json.dumps(m))


@model_app.command("delete")
def model_delete(ctx: typer.Context, name: str, store: StoreOpt = None):
    """Delete a stored model."""
    from .stores.model_store import delete_model
    conn = _ltr_conn(ctx)
    if not delete_model(conn, name, store):
        raise UserError(f"model {name} not found in store {store or '(default)'}")
    out.print(f"deleted model {name}")


@model_app.command("prune")
def model_prune(ctx: typer.Context, base: Annotated[str, typer.Argument(help="The name ltr upload versioned: BASE-v1, BASE-v2, ...")],
                keep: Annotated[int, typer.Option("--keep", min=1, help="How many of the newest versions to keep.")] = 3,
                store: StoreOpt = None,
                yes: Annotated[bool, typer.Option("--yes", help="Confirm: the older versions are deleted.")] = False):
    """Delete all but the newest --keep versions BASE-vN of a model (lists them without --yes)."""
    from .stores.model_store import prune_versions
    conn = _ltr_conn(ctx)
    kept, doomed = prune_versions(conn, base, keep, store, dry_run=not yes)
    if not doomed:
        out.print(f"nothing to prune: {len(kept)} version(s) of {base}, keeping {keep}")
        return
    out.print(f"keep: {', '.join(kept)}")
    if not yes:
        out.print(f"would delete: {', '.join(doomed)}")
        raise UserError(f"pruning {base} deletes {len(doomed)} model(s); nothing deleted",
                        "pass --yes to confirm")
    out.print(f"deleted: {', '.join(doomed)}")


# --------------------------------------------------------------------------- search / evaluate

@app.command("search")
def search_cmd(ctx: typer.Context, text: str, index: Annotated[str, typer.Option("--index")] = "cranfield",
               model: Annotated[Optional[str], typer.Option("--model", help="Rerank with this stored model.")] = None,
               window: Annotated[int, typer.Option("--window", min=1, help="Rerank exactly the first stage's global top WINDOW, whatever the number of shards.")] = 100, size: Annotated[int, typer.Option("--size", min=1)] = 10,
               store: StoreOpt = None,
               param: Annotated[Optional[List[str]], typer.Option("--param", help="Extra template parameter NAME=VALUE (repeatable).")] = None,
               fields: FieldsOpt = None, first_stage: TemplateOpt = None,
               statistics: StatsOpt = Statistics.dfs,
               max_terms: Annotated[Optional[int], typer.Option("--max-terms", min=1, help="Send a long query as its first N distinct words: the model's max_query_terms (`ltr upload` prints it). Default: measured on the cluster.")] = None,
               query_weight: Annotated[float, typer.Option("--query-weight", min=0, help="The first stage's weight in the rescore (1 for a model blended with it; `ltr upload` prints the model's).")] = 0.0,
               rescore_weight: Annotated[float, typer.Option("--rescore-weight", min=0, help="The model's weight in the rescore.")] = 1.0):
    """The first stage, then (with --model) the sltr rescore of its top WINDOW; a table of
    the hits. When the rescore fails, the first stage's hits, with a warning."""
    from .serving.serving import Serving
    params = {"keywords": text}
    for p in param or []:
        name, eq, value = p.partition("=")
        if not eq or not name:
            raise UserError(f"--param {p!r}: expected NAME=VALUE")
        params[name] = value
    conn = _conn(ctx)
    stage = _first_stage(fields, first_stage, statistics)
    stage.check(conn, index)
    serving = Serving(index, stage, window, store, max_terms, model, (query_weight, rescore_weight))
    hits = serving.search(conn, params, size)
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


JobsOpt = Annotated[Optional[int], typer.Option("--jobs", min=1, help="With --cv: fold fits run at once, in worker processes (default: the cores, fewer when memory is short; also LTR_JOBS).")]
BudgetOpt = Annotated[Optional[float], typer.Option("--budget", min=0, help="Seconds for choosing settings in all folds: candidates not trained by then are left out, and named.")]


@app.command("evaluate")
def evaluate_cmd(ctx: typer.Context, judgments: Path,
                 index: Annotated[str, typer.Option("--index")] = "cranfield",
                 model: Annotated[Optional[List[str]], typer.Option("--model", help="Stored model(s) to rerank with.")] = None,
                 k: Annotated[int, typer.Option("--k", min=1)] = 10, window: Annotated[int, typer.Option("--window", min=1, help="Rerank exactly the first stage's global top WINDOW, whatever the number of shards.")] = 100,
                 store: StoreOpt = None,
                 fields: FieldsOpt = None, first_stage: TemplateOpt = None,
                 statistics: StatsOpt = Statistics.dfs,
                 folds: Annotated[Optional[int], typer.Option("--cv", min=2, help="Cross-validate: K folds over all judged queries; needs --featureset and --algo.")] = None,
                 featureset: Annotated[Optional[str], typer.Option("--featureset", help="With --cv: the feature set to log.")] = None,
                 algo: Annotated[Optional[List[Algo]], typer.Option("--algo", help="With --cv: algorithm(s) to train per fold.")] = None,
                 workdir: Annotated[Path, typer.Option("--workdir", help="With --cv: where candidates go.")] = Path("ltr-cv"),
                 seed: Annotated[int, typer.Option("--seed")] = 42,
                 json_out: Annotated[Optional[Path], typer.Option("--json")] = None,
                 plot: Annotated[Optional[Path], typer.Option("--plot", help="Per-query delta chart (PNG).")] = None,
                 fmt: Annotated[Optional[Format], typer.Option("--format", help="Judgment format; guessed from the name when omitted.")] = None,
                 queries: Annotated[Optional[Path], typer.Option("--queries", help="Queries file for TREC qrels.")] = None,
                 settings: Annotated[Optional[Settings], typer.Option("--settings", help="With --cv: choose each algorithm's settings by inner cross-validation on the training folds (choose), or use the library defaults.")] = None,
                 keep_fold_models: Annotated[bool, typer.Option("--keep-fold-models", help="With --cv: keep the fold models in the store (deleted when the run ends otherwise).")] = False,
                 deploy: Annotated[Optional[str], typer.Option("--deploy", help="With --cv: train the recommended reranker on all judged queries and upload it as NAME-vN, only if one is recommended.")] = None,
                 deploy_anyway: Annotated[Optional[Algo], typer.Option("--deploy-anyway", help="With --deploy: upload this algorithm even when it is not recommended.")] = None,
                 query_weight: Annotated[float, typer.Option("--query-weight", min=0, help="With --model: the first stage's weight in the rescore (1 for a model deployed blended with it; `ltr upload` prints it).")] = 0.0,
                 rescore_weight: Annotated[float, typer.Option("--rescore-weight", min=0, help="With --model: the model's weight in the rescore.")] = 1.0,
                 jobs: JobsOpt = None, budget: BudgetOpt = None):
    """Every judged query live: the first stage alone vs each reranker, paired tests.
    With --cv K: every query reranked by a fold model that never saw it, its settings
    chosen without it; the report ends with what to deploy (or: keep the first stage).
    Exit 3 when some queries failed (named; the others are evaluated)."""
    from .data.judgments import load_judgments
    from .evaluation.live import evaluate_live
    from .io.atomic import write_json
    _writable(json_out, plot)
    jl = load_judgments(judgments, fmt.value if fmt else None, queries)
    stage = _first_stage(fields, first_stage, statistics)
    conn = _conn(ctx)
    if (deploy or deploy_anyway or keep_fold_models or settings or jobs or budget is not None) and not folds:
        raise UserError("--settings, --deploy, --deploy-anyway, --keep-fold-models, --jobs and "
                        "--budget go with --cv")
    if deploy_anyway and not deploy:
        raise UserError("--deploy-anyway needs --deploy NAME")
    if folds:
        if not featureset or not algo:
            raise UserError("--cv needs --featureset and at least one --algo")
        if model:
            raise UserError("--cv trains its own fold models: drop --model")
        from .pipeline.crossval import cross_validate
        fixed = {} if settings is Settings.defaults else None
        report = cross_validate(_ltr_conn(ctx), index, jl, featureset, {a.value: fixed for a in algo},
                                workdir, folds, k, window, store, stage, seed,
                                log=lambda m: err.print(m), keep_models=keep_fold_models,
                                jobs=jobs, budget=budget)
        qids = list(next(iter(report["per_query"].values())))
    else:
        report, _, qids = evaluate_live(conn, index, jl, model or [], k, window, store, first_stage=stage,
                                        weights=(query_weight, rescore_weight))
    out.print(f"{report['queries']} queries, k={k}" + (f", {report['evaluation']}" if "evaluation" in report else ""))
    out.print(_report_table(report))
    if "recommendation" in report:
        out.print(f"recommendation: {report['recommendation']['reason']}")
    if json_out:
        write_json(json_out, report)
    if plot:
        from .evaluation.plots import delta_plot
        delta_plot(report, qids, plot)
    if deploy:
        _deploy(ctx, report, workdir, featureset, deploy, store, k, seed, deploy_anyway)
    _failed_queries(report)


def _deploy(ctx, report, workdir, featureset, name, store, k, seed, anyway) -> None:
    """``ltr evaluate --cv --deploy NAME``: the recommended reranker (or ``anyway``)
    trained on every judged query and uploaded; nothing uploaded when none is recommended."""
    from .pipeline.crossval import deploy_recommended
    rec = report["recommendation"]["deploy"]
    if rec is None and anyway is None:
        out.print("nothing uploaded: keep the first stage (--deploy-anyway ALGO overrides)")
        return
    done = deploy_recommended(_ltr_conn(ctx), report, workdir, featureset, name, store, k, seed,
                              algo=anyway.value if anyway else None)
    if done["name"] is None:
        out.print(f"nothing uploaded: on all judged queries, {done['algorithm']} does not beat "
                  "the first stage in inner cross-validation: keep the first stage")
        return
    r = done["rescore"]
    out.print(f"uploaded {done['name']}: {done['algorithm']} trained on all judged queries, "
              f"{done['settings']}; serve it with query_weight {r['query_weight']:g}, "
              f"rescore_query_weight {r['rescore_query_weight']:.6g}")


def _failed_queries(report: dict) -> None:
    """Name the queries the cluster rejected (the others were evaluated) and exit 3."""
    failed = report.get("failed_queries") or []
    for q, why in failed:
        err.print(f"failed: query {q}: {why}")
    if failed:
        raise typer.Exit(EXIT_PARTIAL)


# --------------------------------------------------------------------------- train / predict

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
          patience: Annotated[Optional[int], typer.Option("--patience", min=1, help="Early stopping (with --valid): epochs for networks (default 10), rounds for trees (default: none, all --trees are kept; the validation NDCG is still shown).")] = None,
          truncation: Annotated[str, typer.Option("--truncation", help="Pairs with a document in the current top T: default (k for networks, weighted by |dNDCG@k|; 32 for trees, as xgboost's rank:ndcg), k (same as --k), an integer, or all.")] = "default",
          seed: Annotated[int, typer.Option("--seed")] = 42,
          max_bin: Annotated[Optional[int], typer.Option("--max-bin", min=2, help="Histogram bins per feature (trees; default 256).")] = None,
          dask: Annotated[Optional[str], typer.Option("--dask", help="Train the trees on Dask: a scheduler address (tcp://host:8786) or local:N (N local workers). DATA, --valid and --test may then be globs or comma-separated files (quote globs), read in parallel by the workers.")] = None):
    """Train a ranker with the factorised lambda objective and write a model artifact."""
    from .pipeline.train import TREE_ALGOS, train_from_files
    algo = algo.value
    if dask is not None:
        import functools
        from .pipeline.dask_train import train_from_files_dask
        train_from_files = functools.partial(train_from_files_dask, address=dask,
                                             log=lambda m: err.print(m))
    total = trees if algo in TREE_ALGOS else epochs
    hidden_sizes = _hidden(hidden)
    monitor = "valid" if valid else "train"
    unit = "round" if algo in TREE_ALGOS else "epoch"
    with _progress(f"training {algo}", total) as update:
        def on_epoch(epoch, metric):
            shown = "" if metric is None else f": {monitor} ndcg@{k}={metric:.4f}"
            update(epoch + 1, total, f"{unit} {epoch + 1}{shown}")
        artifact = train_from_files(
            data, algo=algo, valid=valid, test=test, output=output, hidden=hidden_sizes,
            epochs=epochs, lr=lr, optimizer=optimizer.value, sigma=sigma, k=k, patience=patience,
            seed=seed, on_epoch=on_epoch, trees=trees, depth=depth,
            truncation=_truncation(truncation), **({} if max_bin is None else {"max_bin": max_bin}))
    for w in artifact.get("warnings", []):
        err.print(f"warning: {w}")
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
            output: Annotated[Path, typer.Option("-o", "--output", help="One score per input row.")]):
    """Score every row of DATA with MODEL."""
    from .pipeline.train import predict_file
    n = predict_file(model, data, output)
    out.print(f"{n} scores written to {output}")


@job_app.command("run")
def job_run(ctx: typer.Context, job: Annotated[Path, typer.Argument(help="The job file (TOML).")],
            json_report: Annotated[bool, typer.Option("--json", help="Print the run's manifest as JSON on stdout.")] = False,
            part: Annotated[Optional[str], typer.Option("--part", help="I/N: log only the I-th of N slices of the queries (each part may run on another machine, same output directory); the part that completes the set publishes one snapshot, identical to a whole run's.")] = None):
    """Run a feature-logging job once: lock, log (resumable), publish a snapshot
    atomically with a manifest, keep the last N. Exit 0 complete, 3 partial, 2 user error."""
    from .jobs.jobfile import job_connection, load_job
    from .jobs.parts import parse_part, run_part
    from .jobs.runner import run_job
    i_n = parse_part(part) if part is not None else None
    spec = load_job(job)
    conn = job_connection(spec, ctx.obj, explicit_timeout=ctx.meta.get("timeout_given", False))
    from .transport import client as cl
    cl.check_ltr(conn)
    if i_n is not None:
        manifest = run_part(spec, conn, *i_n, log=lambda m: err.print(m))
    else:
        manifest = run_job(spec, conn, log=lambda m: err.print(m))
    if json_report:
        print(json.dumps(manifest, indent=2))
    if "snapshot" not in manifest:    # a part: the snapshot waits for others (or was merged)
        if not json_report:
            out.print(f"part {manifest['part']}: {manifest['status']}")
        return
    if not json_report:
        out.print(f"snapshot {manifest['snapshot']} ({manifest['status']}): "
                  f"{manifest['counts']['rows']} rows")
    for q, why in manifest.get("failed_queries", []):
        err.print(f"failed: query {q}: {why}")
    if manifest["status"] != "complete":
        raise typer.Exit(EXIT_PARTIAL)


@app.command("demo")
def demo(ctx: typer.Context,
         workdir: Annotated[Path, typer.Option("--workdir", help="Where candidates, features and models go.")] = Path("ltr-demo"),
         json_out: Annotated[Optional[Path], typer.Option("--json")] = None,
         folds: Annotated[int, typer.Option("--folds", min=2, help="Cross-validation folds.")] = 5,
         recreate: Annotated[bool, typer.Option("--recreate", help="Re-index the demo's index when an older version exists.")] = False,
         jobs: JobsOpt = None, budget: BudgetOpt = None):
    """The main job: node, Cranfield, feature set, candidates, 5-fold cross-validated
    linear / LambdaRank-NN / LambdaMART rerankers uploaded and evaluated live vs BM25."""
    from .transport import localnode
    from .pipeline.demo import run_demo
    from .io.atomic import write_json
    _writable(json_out)
    conn = _conn(ctx)
    t0 = time.monotonic()
    if not conn.url:
        info, started = localnode.start(log=lambda m: err.print(m))
        conn.url = info.url
        out.print(f"local node {'started' if started else 'running'} at {info.url}")
    report = run_demo(conn, workdir, log=lambda m: out.print(m), folds=folds,
                      recreate=recreate, jobs=jobs, budget=budget)
    out.print(f"Cranfield: {report['queries']} queries, k={report['k']}, {report['evaluation']}")
    out.print(_report_table(report))
    out.print(f"recommendation: {report['recommendation']['reason']}")
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
        err.print(f"error: {exc}", soft_wrap=True)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        err.print("aborted")
        return 130
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
    except Exception as exc:
        # typer's own parsing errors (it vendors click: no import of click here)
        if type(exc).__name__ == "NoArgsIsHelpError":
            out.print(exc.format_message())
            return getattr(exc, "exit_code", 2)
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            ctx = getattr(exc, "ctx", None)
            where = ctx.command_path if ctx is not None else "ltr"
            msg = " ".join(str(exc.format_message()).split())
            err.print(f"error: {msg} (see `{where} --help`)")
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
              f"(full trace in {path}; please report it)")
    return 1


if __name__ == "__main__":
    sys.exit(main())
