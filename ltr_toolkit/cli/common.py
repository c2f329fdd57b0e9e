"""What every ``ltr`` command shares: the Typer apps, the consoles, the global options
(``--url``, TLS, ``--timeout``, ``--encoder``), choices, option types and small helpers."""

from __future__ import annotations

import contextlib
import functools
from dataclasses import replace
import json
import threading
import time
from pathlib import Path
from enum import Enum
from typing import TYPE_CHECKING, Annotated, List, Optional
from urllib.parse import urlsplit

import typer
from rich.console import Console
from rich import box
from rich.table import Table

from ..errors import UserError
if TYPE_CHECKING:
    from ..transport.client import Connection
    from ..query.firststage import FirstStage
import warnings
import os

app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, add_completion=False,
                  help="Learning to rank for OpenSearch/Elasticsearch with the LTR plugin.")
evaluate_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="The first stage against rerankers on judged queries (live), or interleaved rankers on users' clicks.")
query_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Live queries: the first stage and the reranked results, and why.")
model_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Model artifacts and the models stored in the cluster: upload, export, list, show, delete, prune, explain.")
featureset_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Feature sets in a store, and what each feature costs and brings.")
index_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Load document collections into an index.")
judgments_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Judgment lists: check, from Cranfield, from clicks.")
store_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="LTR feature stores.")
cluster_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="The local node (OpenSearch or Elasticsearch) with the LTR plugin.")
job_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Scheduled feature-logging jobs.")
for _name, _group in (("evaluate", evaluate_app), ("query", query_app), ("model", model_app),
                      ("featureset", featureset_app), ("index", index_app),
                      ("judgments", judgments_app), ("store", store_app),
                      ("cluster", cluster_app), ("job", job_app)):
    app.add_typer(_group, name=_name)

# markup off: paths, model and feature-set names are echoed as they are (a name with
# ``[/x]`` in it is text, not a Rich tag that would end a finished command with exit 1)
out = Console(markup=False, highlight=False, soft_wrap=True)
err = Console(stderr=True, soft_wrap=True, markup=False, highlight=False)


# --------------------------------------------------------------------------- choices

def choices(name: str, *values: str, **named: str) -> type[Enum]:
    """A str Enum of an option's accepted values (Typer lists them in ``--help``); member
    names are the values with ``-`` as ``_``, or given (``zero="0"``)."""
    members = {v.replace("-", "_"): v for v in values}
    members.update(named)
    return Enum(name, members, type=str)


Split = choices("Split", "train", "valid", "test", "all")
Settings = choices("Settings", "choose", "defaults")
Format = choices("Format", "ranklib", "trec", "csv", "jsonl")
Statistics = choices("Statistics", "dfs", "shard")
Unjudged = choices("Unjudged", "zero", "drop")
JudgedOutside = choices("JudgedOutside", "exclude", "include")
Algo = choices("Algo", "ranknet-nn", "lambdarank-nn", "linear", "lambdamart", "ranknet-tree")
Optimizer = choices("Optimizer", "adam", "sgd")
ClickModel = choices("ClickModel", "ctr", "coec", "sdbn", "pbm", "ubm", "auto")
Grading = choices("Grading", "levels", "estimate")
Positions = choices("Positions", "auto", zero="0", one="1")
Via = choices("Via", "plugin", "named-queries")
EngineName = choices("EngineName", "opensearch", "elasticsearch")
#: where a model is served: the LTR plugin's store, or Elasticsearch's native trained models
Target = choices("Target", "plugin", "elasticsearch")
#: the local node's engine: a command's own --engine, else the global one (LTR_ENGINE)
EngineOpt = Annotated[Optional[EngineName], typer.Option("--engine", help="The local node's engine (default: the global --engine / LTR_ENGINE, else opensearch).")]


def _engine(ctx: typer.Context, given) -> str | None:
    """The engine a command names, else the global ``--engine`` / ``LTR_ENGINE``."""
    return given.value if given is not None else ctx.find_root().meta.get("engine")


@app.callback()
def _global(ctx: typer.Context,
            url: Annotated[Optional[str], typer.Option("--url", envvar="LTR_URL", help="Cluster URL (default: the local node, else http://localhost:9200). Credentials come from LTR_USER / LTR_PASSWORD.")] = None,
            ca_certs: Annotated[Optional[Path], typer.Option("--ca-certs", help="CA bundle for TLS.")] = None,
            insecure: Annotated[bool, typer.Option("--insecure", help="Do not verify TLS certificates.")] = False,
            timeout: Annotated[Optional[float], typer.Option("--timeout", min=0.1, help="Request timeout, seconds (default 30; `ltr job run`: the job file's, else 60).")] = None,
            encoder: Annotated[Optional[str], typer.Option("--encoder", envvar="LTR_ENCODER", help="The sentence encoder of document and query vectors: a model folder (model.onnx + tokenizer.json) or module:function (default: the packaged all-MiniLM-L6-v2).")] = None,
            engine: Annotated[Optional[EngineName], typer.Option("--engine", envvar="LTR_ENGINE", help="Without --url: the local node of this engine (default: the OpenSearch node when one runs, else the Elasticsearch one).")] = None):
    _one_line_warnings("InsecureTLSWarning", "RescoreFallbackWarning", "ContractOverrideWarning")
    if url and ctx.get_parameter_source("url").name == "COMMANDLINE" and "@" in urlsplit(url).netloc:
        raise UserError("--url carries credentials: every process on this machine can read argv",
                        "put them in LTR_USER / LTR_PASSWORD (or in LTR_URL) and pass --url without them")
    ctx.meta["engine"] = engine.value if engine else None
    ctx.meta["url_given"] = bool(url)
    ctx.meta["timeout_given"] = timeout is not None
    if encoder:                 # read by every step that encodes (ltr_toolkit.encoders.load_encoder)
        os.environ["LTR_ENCODER"] = encoder
    # the connection is made by the first command that asks for it (``_conn``): a command
    # without a cluster never imports the client
    ctx.obj = {"url": url, "ca_certs": str(ca_certs) if ca_certs else None, "insecure": insecure,
               **({} if timeout is None else {"timeout": timeout})}


def _one_line_warnings(*categories: str):
    """Show the warnings of these classes (by name, and their subclasses) as one line
    ``warning: ...`` on stderr; others as Python does."""
    if getattr(warnings.showwarning, "ltr_one_line", False):
        return
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if any(c.__name__ in categories for c in category.__mro__):
            err.print(f"warning: {message}", soft_wrap=True)
        else:
            shown(message, category, filename, lineno, file, line)
    show.ltr_one_line = True
    warnings.showwarning = show


@contextlib.contextmanager
def _progress(label: str, total: int | None = None, ends: dict | None = None):
    """Yields ``update(done, total=None, note="", after=None)``: a rich bar on a terminal
    (its rate and time left); otherwise (cron, nohup, a pipe) a plain line on stderr at
    most every 2 s, and at the end: ``LABEL: DONE/TOTAL (RATE/s, ETA 3m05s) NOTE``, the
    rate and ETA by :class:`ltr_toolkit.io.pace.Pace`. ``ends``: each step's predicted
    end (``time.monotonic()``), shared by steps that run at the same time; ``after``: a
    step this one cannot end before (a load streaming behind the vectors, fast while it
    catches up with those already encoded): its ETA is at least that one's."""
    if err.is_terminal:
        yield from _bar(label, total)
        return
    from ..io.pace import Pace
    last, pace, ends = [0.0], Pace(), {} if ends is None else ends

    def update(done, total=total, note="", after=None):
        now = time.monotonic()
        pace.update(now, done)
        if now - last[0] >= 2.0 or (total is not None and done >= total):
            last[0] = now
            of = f"/{total}" if total is not None else ""
            left = pace.left(total, ends[after] - now if after in ends else None)
            ends[label] = now + (left or 0.0)
            err.print(f"{label}: {done}{of}{_pace(pace.rate(), left)} {note}".rstrip())
    yield update


@contextlib.contextmanager
def _steps():
    """Yields ``progress(step, done, total=None, after=None)`` for a run of long steps
    (the library's indexing functions call it), from any thread: each step has its own
    line (plain, as :func:`_progress`: its rate and ETA from its own start; ``after``: a
    step it cannot end before) or its own task of one rich bar on a terminal; steps may
    run at the same time (the vectors encode while the node finds the neighbours)."""
    lock, lines, ends = threading.Lock(), {}, {}
    with contextlib.ExitStack() as stack:
        bar = stack.enter_context(_bars()) if err.is_terminal else None

        def progress(step: str, done: int, total: int | None = None, after: str | None = None):
            with lock:
                if step not in lines:
                    lines[step] = _bar_task(bar, step, total) if bar else \
                        stack.enter_context(_progress(step, total, ends))
                update = lines[step]
            update(done, total, after=after)
        yield progress


def _bars():
    """A transient rich progress display for bars with their rate and ETA."""
    from rich.progress import Progress, ProgressColumn
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task):
            return Text(f"{task.speed:.3g}/s" if task.speed else "")
    return Progress(*Progress.get_default_columns(), Rate(), transient=True, console=err)


def _bar(label: str, total: int | None):
    """:func:`_progress` on a terminal: a transient rich bar with its rate and ETA."""
    with _bars() as bar:
        yield _bar_task(bar, label, total)


def _bar_task(bar, label: str, total: int | None):
    """``update(done, total, note)`` of a new task of ``bar`` (a rich ``Progress``)."""
    task = bar.add_task(label, total=total)
    seen = [0]

    def update(done, total=total, note="", after=None):
        if done < seen[0]:              # a new phase: its own rate
            bar.reset(task, total=total)
        seen[0] = done
        bar.update(task, completed=done, total=total, description=f"{label} {note}".strip())
    return update


def _pace(rate: float | None, left: float | None) -> str:
    """`` (RATE/s, ETA T)``; empty before there is a rate."""
    from ..io.pace import duration
    if rate is None:
        return ""
    eta = "" if left is None else f", ETA {duration(left)}"
    shown = f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}"        # 3,700/s, not 3.7e+03/s
    return f" ({shown}/s{eta})"


def _conn(ctx: typer.Context):
    """The command's connection (made on the first call: ``--url`` / ``LTR_URL``, else
    the local node when one runs)."""
    settings = ctx.obj
    if settings.get("connection") is None:
        from ..transport.client import Connection
        from ..localnode.process import running_node
        kwargs = {k: v for k, v in settings.items() if k != "connection"}
        if not kwargs["url"]:       # no --url / LTR_URL: the local node, when one runs
            node = running_node(ctx.find_root().meta.get("engine"))
            kwargs["url"] = node.url if node else None
        settings["connection"] = Connection(**kwargs)
    return settings["connection"]


def _engine_conn(ctx: typer.Context, engine) -> Connection:
    """The connection; without --url / LTR_URL, to the local node of the engine this
    command names (``--engine``), when it names one."""
    from ..localnode.process import running_node
    root = ctx.find_root()
    if engine is None or root.meta.get("url_given"):
        return _conn(ctx)
    node = running_node(engine.value)
    return replace(_conn(ctx), url=node.url if node else None, _client=None)


def _ltr_conn(ctx: typer.Context):
    """The connection, after checking that the cluster answers and has the LTR plugin."""
    from ..transport import client as cl
    conn = _conn(ctx)
    cl.check_ltr(conn)
    return conn


# --------------------------------------------------------------------------- cluster


StoreOpt = Annotated[Optional[str], typer.Option("--store", help="Feature store name (default store when omitted).")]


FieldsOpt = Annotated[Optional[str], typer.Option("--fields", help="First stage: BM25 best_fields over these comma-separated fields of the index (this or --first-stage, unless a stored model's serving contract names its first stage).")]
TemplateOpt = Annotated[Optional[Path], typer.Option("--first-stage", help="First stage: a search template file {\"query\": {...}} with {{keywords}} and per-query params.")]
StatsOpt = Annotated[Statistics, typer.Option("--statistics", help="Term statistics of the first stage, the logged features and the rescore: dfs (the whole index's, whatever the number of shards) or shard (each shard's own: query_then_fetch). Serve a model with the statistics it was logged with.")]


def _first_stage(fields: Optional[str], template: Optional[Path], statistics: Statistics = Statistics.dfs):
    """The first stage the options name; one line when they name none (the toolkit does
    not guess a user's fields)."""
    from ..query.firststage import FirstStage
    if not fields and template is None:
        raise UserError("no first stage: the command searches the index first",
                        "name it with --fields F1,F2 (BM25 over those fields) or --first-stage FILE")
    return FirstStage.resolve(template, [f for f in fields.split(",")] if fields else None,
                              (statistics or Statistics.dfs).value)


#: --statistics of the commands that serve a stored model: its serving contract's when not given
ServedStatsOpt = Annotated[Optional[Statistics], typer.Option("--statistics", help="Term statistics of the first stage and the rescore: dfs or shard. Default: the model's serving contract's (the statistics it was logged with), else dfs.")]


def _given_first_stage(fields: Optional[str], template: Optional[Path],
                       statistics: Optional[Statistics], model=None) -> FirstStage | None:
    """The first stage the options give; None when none of --fields, --first-stage and
    --statistics is given and a stored ``model`` is served (with its contract's); without
    a model, one line asking for it (the toolkit does not guess a user's fields)."""
    if fields is None and template is None:
        if not model:
            return _first_stage(fields, template)
        if statistics is not None:
            raise UserError("--statistics goes with --fields or --first-stage",
                            "name the first stage too, or drop --statistics to serve the model's contract")
        return None
    return _first_stage(fields, template, statistics)


def _weights(query_weight: Optional[float], rescore_weight: Optional[float]):
    """The rescore weights the options give (None: the model's contract's; one of the
    two: the other is the contract's)."""
    if query_weight is None and rescore_weight is None:
        return None
    return (query_weight, rescore_weight)


#: the rescore weights' options: the model's serving contract's when not given
QueryWeightOpt = Annotated[Optional[float], typer.Option("--query-weight", min=0, help="The first stage's weight in the rescore. Default: the model's serving contract's (1 for a model chosen blended with the first stage), else 0.")]
RescoreWeightOpt = Annotated[Optional[float], typer.Option("--rescore-weight", min=0, help="The model's weight in the rescore. Default: the model's serving contract's, else 1.")]
WindowOpt = Annotated[Optional[int], typer.Option("--window", min=1, help="Rerank exactly the first stage's global top WINDOW, whatever the number of shards. Default: the model's serving contract's (the candidates it was trained on), else 100.")]
MaxTermsOpt = Annotated[Optional[int], typer.Option("--max-terms", min=1, help="Send a long query as its first N distinct words. Default: the model's serving contract's, else measured on the cluster.")]


def _event_log(ctx, file: Optional[Path], clicks_as: str, since: Optional[str], until: Optional[str],
               days: Optional[float], queries_index: str, events_index: str):
    """UBI events from ``file`` (NDJSON or bulk) or the cluster's indices over a time
    range: (the EventLog, a description of where they came from)."""
    from ..clicks.events.files import read_file
    from ..clicks.events.ubi import read_event_log, time_range
    actions = tuple(a.strip() for a in clicks_as.split(",") if a.strip())
    if file is not None:
        return read_file(file, click_actions=actions), str(file)
    conn = _conn(ctx)
    rng = time_range(since, until, days)
    log = read_event_log(conn, rng, queries_index, events_index, click_actions=actions)
    return log, f"{conn.display_url}/{queries_index},{events_index} {json.dumps(rng)}"


def _writable(*paths: Optional[Path]) -> None:
    """Refuse an output path that cannot be written before any work (one line, exit 2)."""
    from ..io.atomic import check_writable
    for p in paths:
        if p is not None:
            check_writable(p)


#: exit code of a run that completed for some items and not others (docs/cli.md, rule 6)
EXIT_PARTIAL = 3


def _partial(kind: str, failed: list, count: int | None = None, fix: str = "run the command again",
             shown: int | None = None) -> None:
    """The one end of every run that completed for some items and not for others: each
    failure on a line ``failed: KIND ID: WHY`` (the first ``shown`` of them; all when
    None), then ``error: COUNT KINDs failed ...; FIX``, on stderr, and exit 3. Nothing
    when none failed. ``failed``: (id, why) pairs; ``count``: how many failed, when more
    than ``failed`` holds."""
    n = len(failed) if count is None else count
    if not n:
        return
    named = failed[:shown]
    for item, why in named:
        err.print(f"failed: {kind} {item}: {why}")
    kinds = kind[:-1] + "ies" if kind.endswith("y") else kind + "s"
    more = "" if len(named) >= n else f" ({len(named)} named above)" if named else ""
    err.print(f"error: {n} {kind if n == 1 else kinds} failed{more}, the others are done; {fix}")
    raise typer.Exit(EXIT_PARTIAL)


def _report_table(report: dict) -> Table:
    """An evaluation report (see ``evaluation.compare``) as a table: a row per system."""
    metrics = list(next(iter(report["systems"].values())))
    many = len(report["tests"]) > 1 and all("p_corrected" in t for t in report["tests"].values())
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True,
                  caption_justify="left", caption=_legend(report, many))
    # a system's name is never cut: the other columns wrap their headers and values instead
    table.add_column("system", no_wrap=True, min_width=max(map(len, report["systems"])))
    for header in (*metrics, "p", *(["max-T"] if many else []), "W/T/L"):
        table.add_column(header, overflow="fold", justify="right")
    for n, vals in report["systems"].items():
        t = report["tests"].get(n)
        table.add_row(n, *(f"{vals[m]:.4f}" for m in metrics), f"{t['p_value']:.4f}" if t else "",
                      *([f"{t['p_corrected']:.4f}" if t else ""] if many else []),
                      f"{t['wins']}/{t['ties']}/{t['losses']}" if t else "")
    return table


def _legend(report: dict, many: bool) -> str:
    """What the table's p-values test: each side, and what they are corrected for; with a
    cross-validation's pipeline, that the recommendation is decided by its own test."""
    sides = {"two-sided": "two-sided", "greater": "one-sided", "less": "one-sided"}
    side = sides.get((report.get("statistics") or {}).get("alternative"), "two-sided")
    text = f"p: paired randomisation test vs {report['baseline']}, {side}, uncorrected"
    if many:
        text += f"; max-T: the same, corrected for the {len(report['tests'])} systems compared"
    if report.get("pipeline"):
        text += (f"; the recommendation is decided by {report['pipeline']['name']}'s own test, "
                 "one-sided and uncorrected (below)")
    return text + "; W/T/L: queries won, tied, lost"


JobsOpt = Annotated[Optional[int], typer.Option("--jobs", min=1, help="Fold fits run at once, in worker processes (default: the cores, fewer when memory is short; also LTR_JOBS).")]
# where UBI events come from, when not a file: the cluster's indices over a time range
DaysOpt = Annotated[Optional[float], typer.Option("--days", help="Cluster: the last N days of events.")]
SinceOpt = Annotated[Optional[str], typer.Option("--since", help="Cluster: events at or after this time (ISO 8601).")]
UntilOpt = Annotated[Optional[str], typer.Option("--until", help="Cluster: events before this time (ISO 8601).")]
QueriesIndexOpt = Annotated[str, typer.Option("--queries-index", help="Cluster: the UBI queries index.")]
EventsIndexOpt = Annotated[str, typer.Option("--events-index", help="Cluster: the UBI events index.")]
ClicksAsOpt = Annotated[str, typer.Option("--click-actions", help="Comma-separated action names read as clicks.")]
BudgetOpt = Annotated[Optional[float], typer.Option("--budget", min=0, help="Seconds for choosing settings in all folds: candidates not trained by then are left out, and named.")]


def _failed_queries(report: dict) -> None:
    """Name the queries the cluster rejected (the others were evaluated) and exit 3."""
    _partial("query", report.get("failed_queries") or [],
             fix="the report leaves them out: fix the cause above and evaluate again")


# --------------------------------------------------------------------------- one name, one meaning
# (docs/cli.md: the grammar; tests/test_cli_grammar.py walks every command against it)

IndexOpt = Annotated[str, typer.Option("--index", help="The index searched (required: the toolkit never guesses it).")]
InputFormatOpt = Annotated[Optional[Format], typer.Option("--input-format", help="The judgments file's format; guessed from its name when omitted.")]
QueriesFileOpt = Annotated[Optional[Path], typer.Option("--queries", help="The queries file that goes with TREC qrels (id and text per line; default: the file beside the qrels named with .queries added, as `ltr judgments clicks` writes it).")]
CutoffOpt = Annotated[int, typer.Option("--cutoff", "-k", min=1, help="The metrics' depth: NDCG@K, ERR@K, AP@K, RR@K.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed (folds, sampling, initial weights): the same seed, the same result.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout instead of the table (progress stays on stderr).")]
ReportOpt = Annotated[Optional[Path], typer.Option("-o", "--output", help="Also write the full report here, as JSON (atomically).")]
FoldsOpt = Annotated[int, typer.Option("--folds", min=2, help="Cross-validation folds.")]
WorkdirOpt = Annotated[Path, typer.Option("--workdir", help="Where logged candidates, features and fold models go.")]
SizeOpt = Annotated[int, typer.Option("--size", min=1, help="Hits shown.")]
ParamOpt = Annotated[Optional[List[str]], typer.Option("--param", help="Extra template parameter NAME=VALUE (repeatable).")]
#: a command's old per-command --engine: kept hidden for one release (the global option is the one)
OldEngineOpt = Annotated[Optional[EngineName], typer.Option("--engine", hidden=True, help="Deprecated here: use the global option, `ltr --engine E COMMAND`.")]


def _old_engine(ctx: typer.Context, given) -> str | None:
    """The engine of a command that still takes the old per-command ``--engine``: it says
    once where the option now goes, and wins over the global one as it did."""
    if given is not None:
        err.print(f"note: `{ctx.command_path} --engine` is now `ltr --engine {given.value} "
                  f"{ctx.command_path.partition(' ')[2]}` (the per-command spelling goes in the next release)")
        ctx.find_root().meta["engine"] = given.value
    return ctx.find_root().meta.get("engine")


def alias(group: typer.Typer, old: str, new: str, command) -> None:
    """Register ``command`` again, hidden, under its old spelling ``ltr OLD``: it runs the
    same code after one line naming the new spelling (kept for one release)."""
    @functools.wraps(command)
    def renamed(*args, **kwargs):
        err.print(f"note: `ltr {old}` is now `ltr {new}` (the old spelling goes in the next release)")
        return command(*args, **kwargs)
    group.command(old, hidden=True, help=f"Renamed: `ltr {new}`.")(renamed)


def _print_json(value) -> None:
    """A result as JSON on stdout (``--json``)."""
    print(json.dumps(value, indent=2, default=str))
