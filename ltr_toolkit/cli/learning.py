"""``ltr train``, ``ltr predict`` and ``ltr demo``: models trained from logged features,
scored offline, and the main job end to end; ``ltr judgments click-features``: training
data from clicks for ``ltr train --propensity``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, List, Optional

import typer
from rich.table import Table

from ..errors import UserError
from .common import (Algo, BudgetOpt, ClicksAsOpt, CutoffOpt, DaysOpt, EventsIndexOpt, FoldsOpt,
                     JobsOpt, JsonOpt, OldEngineOpt, Optimizer, Positions, QueriesIndexOpt,
                     ReportOpt, SeedOpt, SinceOpt, UntilOpt, WorkdirOpt, _conn,
                     _event_log, _failed_queries, _old_engine, _print_json, _progress, _report_table, _writable,
                     app, err, judgments_app, out)
from ..clicks import DEFAULT_CLIP
import functools


# --------------------------------------------------------------------------- train / predict

@app.command("train")
def train(data: Annotated[Path, typer.Argument(help="SVMlight/RankLib training file (with its sidecar when logged).")],
          output: Annotated[Path, typer.Option("-o", "--output", help="Model artifact (JSON).")],
          algo: Annotated[Algo, typer.Option("--algo", help="The model: a network (ranknet-nn, lambdarank-nn), linear, or trees (lambdamart, ranknet-tree).")] = Algo.lambdarank_nn,
          valid: Annotated[Optional[Path], typer.Option("--valid", help="Validation file: early stopping on its NDCG@k.")] = None,
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
    for w in artifact.get("warnings", []):
        err.print(f"warning: {w}")
    table = Table("split", f"NDCG@{k}", "queries")
    for split, m in artifact["metrics"].items():
        table.add_row(split, f"{m[f'ndcg@{k}']:.4f}", str(m["queries"]))
    out.print(table)
    out.print(f"model written to {output}")


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


@judgments_app.command("click-features")
def click_features(ctx: typer.Context,
                   features: Annotated[Path, typer.Argument(help="Logged feature rows of the queries and documents the events show (`ltr log`; qids as `ltr judgments clicks` names queries, or the query text).")],
                   output: Annotated[Path, typer.Option("-o", "--output", help="Click training data (SVMlight, one group per search, label 1 = clicked); OUT.json beside it.")],
                   file: Annotated[Optional[Path], typer.Argument(help="UBI events: NDJSON or the bulk format. Without it: the cluster's UBI indices.")] = None,
                   positions: Annotated[Positions, typer.Option("--positions", help="Positions counted from (auto: 1 when no impression has position 0).")] = Positions.auto,
                   days: DaysOpt = None, since: SinceOpt = None, until: UntilOpt = None,
                   queries_index: QueriesIndexOpt = "ubi_queries", events_index: EventsIndexOpt = "ubi_events",
                   clicks_as: ClicksAsOpt = "click"):
    """Each search's impressed documents joined with their logged feature rows, clicked
    (1) or not (0), with their positions: train on it with `ltr train --propensity`."""
    from ..clicks import debias
    from ..data.svmlight import load_logged
    _writable(output)
    logged = load_logged(features)
    log, source = _event_log(ctx, file, clicks_as, since, until, days, queries_index, events_index)
    cd = debias.join(log, logged, positions.value)
    debias.write(cd, dict(logged.meta.get("sidecar", {}), click_source=source), output)
    for line in log.problems.lines():
        err.print(f"bad data: {line}")
    c = cd.counts
    if c["impressed_without_features"]:
        err.print(f"warning: {c['impressed_without_features']} impressed documents ({c['clicks_without_features']} "
                  f"clicked) of {c['searches_missing_a_document']} searches have no row in {features}: left out")
    out.print(f"{c['searches']} searches, {c['impressions']} impressions, {c['clicks']} clicks: "
              f"{cd.data.n_docs} rows in {cd.data.n_queries} groups written to {output}")


@app.command("predict")
def predict(model: Annotated[Path, typer.Argument(help="A model artifact (`ltr train -o`).")],
            data: Annotated[Path, typer.Argument(help="Feature rows (SVMlight/RankLib) logged with the model's feature set.")],
            output: Annotated[Path, typer.Option("-o", "--output", help="One score per input row.")]):
    """Score every row of DATA with MODEL."""
    from ..pipeline.artifact import predict_file
    n = predict_file(model, data, output)
    out.print(f"{n} scores written to {output}")



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
