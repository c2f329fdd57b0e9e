"""The loop's steps, the verbs at the top of ``ltr`` (docs/cli.md, rule 1): ``demo`` (the
main job end to end), ``log`` (features for judged queries or the first stage's
candidates), ``train`` and ``predict`` (a model from logged features, scored offline) and
``monitor`` (a new snapshot against a reference)."""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Annotated, List, Optional

import typer
from rich.table import Table

from ..clicks import DEFAULT_CLIP
from ..errors import UserError
from .common import (Algo, BudgetOpt, CutoffOpt, FieldsOpt, FoldsOpt, IndexOpt, InputFormatOpt,
                     JobsOpt, JsonOpt, JudgedOutside, OldEngineOpt, Optimizer, QueriesFileOpt,
                     ReportOpt, SeedOpt, Statistics, StatsOpt, StoreOpt, TemplateOpt, Unjudged, Via,
                     WorkdirOpt, _conn, _failed_queries, _first_stage, _ltr_conn, _old_engine,
                     _partial, _print_json, _progress, _report_table, _writable, app, err, out)


@app.command("demo")
def demo(ctx: typer.Context,
         workdir: WorkdirOpt = Path("ltr-demo"),
         output: ReportOpt = None, as_json: JsonOpt = False,
         folds: FoldsOpt = 5,
         recreate: Annotated[bool, typer.Option("--recreate", help="Re-index the demo's index when an older version exists.")] = False,
         jobs: JobsOpt = None, budget: BudgetOpt = None, engine: OldEngineOpt = None):
    """The main job: node, Cranfield, feature set, candidates, 5-fold cross-validated
    linear / LambdaRank-NN / LambdaMART rerankers uploaded and evaluated live vs BM25
    (on the local node of `ltr --engine E` unless --url / LTR_URL names a cluster)."""
    from ..io.atomic import write_json
    from ..pipeline.demo import run_demo
    from ..localnode import process as localnode
    _writable(output)
    name = _old_engine(ctx, engine)
    show = err.print if as_json else out.print       # --json: stdout holds the JSON alone
    conn = _conn(ctx)
    t0 = time.monotonic()
    if not conn.url:
        info, started = localnode.start(log=lambda m: err.print(m), engine=name)
        conn.url = info.url
        show(f"local node {'started' if started else 'running'} at {info.url}")
    report = run_demo(conn, workdir, log=show, folds=folds, recreate=recreate, jobs=jobs,
                      budget=budget)
    if output:
        write_json(output, report)
    if as_json:
        _print_json(report)
    else:
        out.print(f"Cranfield: {report['queries']} queries, k={report['k']}, {report['evaluation']}")
        out.print(_report_table(report))
        out.print(f"recommendation: {report['recommendation']['reason']}")
        out.print(f"artefacts in {workdir} ({time.monotonic() - t0:.0f}s)")
    _failed_queries(report)


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


@app.command("train")
def train(data: Annotated[Path, typer.Argument(help="SVMlight/RankLib training file (with its sidecar when logged).")],
          output: Annotated[Path, typer.Option("-o", "--output", help="Model artifact (JSON).")],
          algo: Annotated[Algo, typer.Option("--algo", help="The model: a network (ranknet-nn, lambdarank-nn), linear, or trees (lambdamart, ranknet-tree).")] = Algo.lambdarank_nn,
          valid: Annotated[Optional[Path], typer.Option("--valid", help="Validation file (other queries than DATA's): early stopping on its NDCG@k, and the model's per-query gains over the first stage there recorded in the artifact, the held-out evidence `ltr monitor` tests decay against.")] = None,
          test: Annotated[Optional[Path], typer.Option("--test", help="Test file: its NDCG@K is reported with the model, never used to fit.")] = None,
          hidden: Annotated[str, typer.Option("--hidden", help="Hidden layer sizes, e.g. 64,16 (networks).")] = "64,16",
          epochs: Annotated[int, typer.Option("--epochs", min=1, help="Passes over the training queries (networks, linear).")] = 50,
          lr: Annotated[Optional[float], typer.Option("--lr", help="Learning rate (default 1e-3 networks, 0.1 trees).")] = None,
          trees: Annotated[int, typer.Option("--trees", min=1, help="Boosting rounds (trees).")] = 300,
          depth: Annotated[int, typer.Option("--depth", min=1, max=20, help="Tree depth (trees).")] = 6,
          optimizer: Annotated[Optimizer, typer.Option("--optimizer", help="The networks' and linear model's step rule.")] = Optimizer.adam,
          sigma: Annotated[float, typer.Option("--sigma", help="The pairwise logistic's steepness: P(i before j) = 1 / (1 + exp(-sigma (s_i - s_j))).")] = 1.0,
          k: CutoffOpt = 10,
          patience: Annotated[Optional[int], typer.Option("--patience", min=1, help="Early stopping (with --valid): epochs for networks (default 10), rounds for trees (default: none, all --trees are kept; the validation NDCG is still shown).")] = None,
          truncation: Annotated[str, typer.Option("--truncation", help="Pairs with a document in the current top T: default (k for networks, weighted by |dNDCG@k|; 32 for trees, as xgboost's rank:ndcg), k (the --cutoff K), an integer, or all.")] = "default",
          seed: SeedOpt = 42,
          max_bin: Annotated[Optional[int], typer.Option("--max-bin", min=2, help="Histogram bins per feature (trees; default 256).")] = None,
          dask: Annotated[Optional[str], typer.Option("--dask", help="Train the trees on Dask: a scheduler address (tcp://host:8786) or local:N (N local workers). DATA, --valid and --test may then be globs or comma-separated files (quote globs), read in parallel by the workers.")] = None,
          propensity: Annotated[Optional[str], typer.Option("--propensity", help="DATA is clicks (`ltr judgments click-features`): weight each clicked document's pairs by its inverse examination probability, estimated by pbm or ubm (EM on DATA's clicks) or given per 0-based position (1,0.5,0.33,...).")] = None,
          propensity_clip: Annotated[float, typer.Option("--propensity-clip", help="With --propensity: examination probabilities below this count as it (weights at most 1/CLIP).")] = DEFAULT_CLIP,
          propensity_power: Annotated[Optional[float], typer.Option("--propensity-power", help="With --propensity: weights are probability ** -POWER, in (0, 1]; 1 is plain inverse propensity weighting, 0.5 damps its variance (Unbiased LambdaMART's regularisation). Default: 1 for linear and networks, 0.5 for trees.")] = None):
    """Train a ranker with the factorised lambda objective and write a model artifact."""
    from ..pipeline.train import TREE_ALGOS
    algo = algo.value
    if propensity is not None and dask is not None:
        raise UserError("--propensity trains in this process: drop --dask")
    clicks = {} if propensity is None else {"propensity": propensity, "propensity_clip": propensity_clip,
                                                "propensity_power": propensity_power}
    fit = _fitter(dask)
    total = trees if algo in TREE_ALGOS else epochs
    hidden_sizes = _hidden(hidden)
    monitor = "valid" if valid else "train"
    unit = "round" if algo in TREE_ALGOS else "epoch"
    with _progress(f"training {algo}", total) as update:
        def on_epoch(epoch, metric):
            shown = "" if metric is None else f": {monitor} ndcg@{k}={metric:.4f}"
            update(epoch + 1, total, f"{unit} {epoch + 1}{shown}")
        artifact = fit(
            data, algo=algo, valid=valid, test=test, output=output, hidden=hidden_sizes,
            epochs=epochs, lr=lr, optimizer=optimizer.value, sigma=sigma, k=k, patience=patience,
            seed=seed, on_epoch=on_epoch, trees=trees, depth=depth,
            truncation=_truncation(truncation), **({} if max_bin is None else {"max_bin": max_bin}),
            **clicks)
    _show_trained(artifact, k, output, valid)


def _show_trained(artifact: dict, k: int, output, valid) -> None:
    """``ltr train``'s summary: warnings, each split's NDCG, where the model went, and
    the held-out evidence recorded."""
    for w in artifact.get("warnings", []):
        err.print(f"warning: {w}")
    table = Table("split", f"NDCG@{k}", "queries")
    for split, m in artifact["metrics"].items():
        table.add_row(split, f"{m[f'ndcg@{k}']:.4f}", str(m["queries"]))
    out.print(table)
    out.print(f"model written to {output}")
    out.print(_evidence_line(artifact.get("held_out"), valid))


def _evidence_line(held: dict | None, valid) -> str:
    """What ``ltr monitor --artifact`` will have to test decay against."""
    if held:
        chosen = "; it also chose the model's length (early stopping): slightly optimistic" \
            if held.get("selected_on") else ""
        return (f"held-out evidence for `ltr monitor`: {held['gain']:+.4f} NDCG@{held['k']} over "
                f"the first stage on {held['queries']} validation queries{chosen}")
    why = "no --valid" if valid is None else "the validation file records no first-stage order"
    return (f"no held-out evidence recorded ({why}): `ltr monitor --artifact` will check drift "
            "and served scores, not decay; pass --valid with logged candidates of other queries")


def _fitter(dask: Optional[str]):
    """``train_from_files``, or its Dask counterpart when ``--dask`` names a scheduler."""
    from ..pipeline.train import train_from_files
    if dask is None:
        return train_from_files
    from ..pipeline.dask_train import train_from_files_dask
    return functools.partial(train_from_files_dask, address=dask, log=lambda m: err.print(m))


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
def predict(model: Annotated[Path, typer.Argument(help="A model artifact (`ltr train -o`).")],
            data: Annotated[Path, typer.Argument(help="Feature rows (SVMlight/RankLib) logged with the model's feature set.")],
            output: Annotated[Path, typer.Option("-o", "--output", help="One score per input row.")]):
    """Score every row of DATA with MODEL."""
    from ..pipeline.artifact import predict_file
    n = predict_file(model, data, output)
    out.print(f"{n} scores written to {output}")


ArtifactOpt = Annotated[Optional[Path], typer.Option("--artifact", help="The deployed model's artifact (`ltr train -o`, `ltr evaluate cv --deploy`'s WORKDIR/NAME-vN.json): its gain over the first stage (NDCG@K) on the new snapshot tested against the gains it showed on held-out queries, recorded in the artifact (`ltr train --valid`, cross-validation's outer folds; without them decay is not tested); in a snapshot folder, the snapshot it was trained on is the reference.")]
MonitorCutoffOpt = Annotated[int, typer.Option("--cutoff", "-k", min=1, help="NDCG@K, the one metric the monitor computes (an artifact's held-out gains are compared at the K they were recorded at).")]
MonitorHtmlOpt = Annotated[Optional[Path], typer.Option("--html", help="Also write the verdict as a page to open in a browser: the summary, every feature's figures and the flagged features' picture (self-contained HTML).")]
LiveModelOpt = Annotated[Optional[str], typer.Option("--model", help="The stored model serving the artifact, checked live: its served scores against the artifact's on the same documents (with --artifact, --index and --judgments).")]
LiveIndexOpt = Annotated[Optional[str], typer.Option("--index", help="The index the live check searches (with --model).")]
LiveJudgmentsOpt = Annotated[Optional[Path], typer.Option("--judgments", help="Judged queries whose texts the live check serves (with --model; any judgment file the other commands read: RankLib, TREC qrels with --queries, CSV/TSV, JSONL; see --input-format).")]
LiveQueriesOpt = Annotated[int, typer.Option("--live-queries", min=1, help="Queries the live check serves (the first N judged).")]
DriftPlotOpt = Annotated[Optional[Path], typer.Option("--plot", help="Also draw each flagged feature's distribution across the snapshots here (PNG; needs matplotlib).")]


@app.command("monitor")
def monitor_cmd(ctx: typer.Context, paths: Annotated[List[Path], typer.Argument(help="REFERENCE NEW (two logged files), or a job's snapshot folder (the newest snapshot against the model's training snapshot, else the oldest kept).")],
                artifact: ArtifactOpt = None, cutoff: MonitorCutoffOpt = 10, json_out: JsonOpt = False,
                output: ReportOpt = None, plot: DriftPlotOpt = None, html: MonitorHtmlOpt = None,
                model: LiveModelOpt = None, index: LiveIndexOpt = None,
                judgments: LiveJudgmentsOpt = None, input_format: InputFormatOpt = None,
                queries: QueriesFileOpt = None, live_queries: LiveQueriesOpt = 20,
                store: StoreOpt = None):
    """Check a newer logged snapshot against a reference: per feature its missing and
    zero shares, PSI and KS (thresholds calibrated on this run's queries), the model's
    decay against its held-out gains, and with --model its served scores against the
    artifact's, live. Exit 0 ok, 4 drift, 5 degraded, 6 broken (2 user error)."""
    from ..io.atomic import write_json
    from ..pipeline.artifact import read_artifact
    from ..pipeline.monitor import monitor, resolve
    _writable(output, plot, html)
    art = read_artifact(artifact) if artifact is not None else None
    ref, new, series = resolve(paths, art)
    fmt = input_format.value if input_format else None
    live = _live(ctx, artifact, model, index, (judgments, fmt, queries), live_queries, store, cutoff)
    report = monitor(ref, new, artifact, cutoff, series, live)
    if plot is not None:
        _plot(report, series, plot)
    if html is not None:
        _html(report, series, html, plot)
    if output is not None:
        write_json(output, report)
    if json_out:
        _print_json(report)
    else:
        out.print("\n".join(report["summary"]))
    raise typer.Exit(report["exit_code"])


def _live(ctx, artifact, model, index, judged, n, store, size):
    """The live check's result, or None without --model (``judged``: the judgments file,
    its format and queries file, read as every command reads them)."""
    judgments, fmt, queries = judged
    if (fmt is not None or queries is not None) and judgments is None:
        raise UserError("--input-format and --queries go with --judgments (the live check's queries)",
                        "add --judgments FILE, or drop them")
    given = {"--index": index, "--judgments": judgments, "--artifact": artifact}
    if model is None:
        extra = [k for k, v in given.items() if v is not None and k != "--artifact"]
        if extra:
            raise UserError(f"{' and '.join(extra)} go with --model (the live check)",
                            "name the stored model that serves the artifact, or drop them")
        return None
    lacking = [k for k, v in given.items() if v is None]
    if lacking:
        raise UserError(f"the live check of --model {model} needs {', '.join(lacking)}",
                        "give the artifact it was uploaded from, the index it serves and judged queries")
    from ..data.judgments import load_judgments
    from ..pipeline.monitor import live_check_judged
    return live_check_judged(_ltr_conn(ctx), index, store, model, artifact,
                             load_judgments(judgments, fmt, queries), n, size)


def _html(report: dict, series: list[Path], path: Path, plot: Optional[Path]) -> None:
    """The page, with the picture inline (drawn for it when --plot did not)."""
    import tempfile
    from ..evaluation.html import write_monitor_html
    png = None
    if plot is not None:
        png = plot.read_bytes()
    else:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                _plot(dict(report), series, Path(tmp) / "drift.png")
                png = (Path(tmp) / "drift.png").read_bytes()
            except UserError:        # no matplotlib: the page without its picture
                png = None
    write_monitor_html(path, report, png)
    report["html"] = str(path)


def _plot(report: dict, series: list[Path], path: Path) -> None:
    from ..evaluation.plots import drift_plot
    from ..pipeline.monitor import column_series
    feats = report["drift"]["features"]
    flagged = [f["feature"] for f in feats if f["flag"] != "ok"] or [f["feature"] for f in feats]
    drift_plot(column_series(series, flagged), {f["feature"]: f["flag"] for f in feats}, path,
               title=f"{report['verdict']}: {Path(report['new']).parent.name or report['new']}")
    report["plot"] = str(path)
