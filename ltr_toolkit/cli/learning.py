"""``ltr evaluate``, ``ltr train``, ``ltr predict`` and ``ltr demo``: models trained,
cross-validated live, deployed; ``ltr judgments click-features``: training data from
clicks for ``ltr train --propensity``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, List, Optional

import typer
from rich.table import Table

from ..errors import UserError
from .common import (QueryWeightOpt, RescoreWeightOpt, ServedStatsOpt, WindowOpt,
                     _given_first_stage, _weights)
from .common import (Algo, BudgetOpt, EngineOpt, Via, _engine, _engine_conn, ClicksAsOpt, DaysOpt, EventsIndexOpt, FieldsOpt, Format,
                     JobsOpt, Optimizer, Positions, QueriesIndexOpt, Settings, SinceOpt,
                     StoreOpt, TemplateOpt, UntilOpt, _conn, _event_log,
                     _failed_queries, _first_stage, _ltr_conn, _progress, _report_table,
                     _writable, app, err, judgments_app, out)
from ..clicks import DEFAULT_CLIP
import functools


@app.command("evaluate")
def evaluate_cmd(ctx: typer.Context, judgments: Path,
                 index: Annotated[str, typer.Option("--index")] = "cranfield",
                 model: Annotated[Optional[List[str]], typer.Option("--model", help="Stored model(s) to rerank with.")] = None,
                 k: Annotated[int, typer.Option("--k", min=1)] = 10, window: WindowOpt = None,
                 store: StoreOpt = None,
                 fields: FieldsOpt = None, first_stage: TemplateOpt = None,
                 statistics: ServedStatsOpt = None,
                 folds: Annotated[Optional[int], typer.Option("--cv", min=2, help="Cross-validate: K folds over all judged queries; needs --featureset and --algo.")] = None,
                 featureset: Annotated[Optional[str], typer.Option("--featureset", help="With --cv: the feature set to log.")] = None,
                 algo: Annotated[Optional[List[Algo]], typer.Option("--algo", help="With --cv: algorithm(s) to train per fold.")] = None,
                 workdir: Annotated[Path, typer.Option("--workdir", help="With --cv: where candidates go.")] = Path("ltr-cv"),
                 seed: Annotated[int, typer.Option("--seed")] = 42,
                 json_out: Annotated[Optional[Path], typer.Option("--json")] = None,
                 plot: Annotated[Optional[Path], typer.Option("--plot", help="Per-query delta chart (PNG).")] = None,
                 html: Annotated[Optional[Path], typer.Option("--html", help="A report to open in a browser: metrics with confidence intervals, per-query deltas, both top 10s side by side with grades and each document's feature contributions (one self-contained file).")] = None,
                 fmt: Annotated[Optional[Format], typer.Option("--format", help="Judgment format; guessed from the name when omitted.")] = None,
                 queries: Annotated[Optional[Path], typer.Option("--queries", help="Queries file for TREC qrels.")] = None,
                 settings: Annotated[Optional[Settings], typer.Option("--settings", help="With --cv: choose each algorithm's settings by inner cross-validation on the training folds (choose), or use the library defaults.")] = None,
                 keep_fold_models: Annotated[bool, typer.Option("--keep-fold-models", help="With --cv: keep the fold models in the store (deleted when the run ends otherwise).")] = False,
                 deploy: Annotated[Optional[str], typer.Option("--deploy", help="With --cv: train the recommended reranker on all judged queries and upload it as NAME-vN, only if one is recommended.")] = None,
                 deploy_anyway: Annotated[Optional[Algo], typer.Option("--deploy-anyway", help="With --deploy: upload this algorithm even when it is not recommended.")] = None,
                 query_weight: QueryWeightOpt = None, rescore_weight: RescoreWeightOpt = None,
                 jobs: JobsOpt = None, budget: BudgetOpt = None,
                 via: Annotated[Via, typer.Option("--via", help="With --cv: how the candidates' features are logged: plugin (sltr + ltr_log) or named-queries (each feature's template as a named query: what Elasticsearch's native learning to rank computes). Fold models are served by the plugin either way.")] = Via.plugin):
    """Every judged query live: the first stage alone vs each reranker, paired tests.
    With --cv K: every query reranked by a fold model that never saw it, its settings
    chosen without it; the report ends with what to deploy (or: keep the first stage).
    Exit 3 when some queries failed (named; the others are evaluated)."""
    from ..data.judgments import load_judgments
    from ..evaluation.live import evaluate_live
    _writable(json_out, plot, html)
    jl = load_judgments(judgments, fmt.value if fmt else None, queries)
    conn = _conn(ctx)
    _check_evaluate_options(folds, featureset, algo, model, settings, deploy, deploy_anyway,
                            keep_fold_models, jobs, budget, _weights(query_weight, rescore_weight))
    if folds:
        report, qids = _cross_validated(ctx, index, jl, _first_stage(fields, first_stage, statistics),
                                        featureset, algo, settings, workdir, folds, k,
                                        window or 100, store, seed, keep_fold_models, jobs,
                                        budget, explain=html is not None, via=via.value)
    else:
        report, _, qids = evaluate_live(conn, index, jl, model or [], k, window, store,
                                        first_stage=_given_first_stage(fields, first_stage, statistics),
                                        weights=_weights(query_weight, rescore_weight),
                                        explain=html is not None)
    _show_report(report, k)
    _write_report(conn, index, report, qids, jl, fields, json_out, plot, html)
    if deploy:
        _deploy(ctx, report, workdir, featureset, deploy, store, k, seed, deploy_anyway)
    _failed_queries(report)


def _check_evaluate_options(folds, featureset, algo, model, settings, deploy, deploy_anyway,
                            keep_fold_models, jobs, budget, weights) -> None:
    """``ltr evaluate``'s options that go with --cv only, or with each other."""
    if weights is not None and not model:
        raise UserError("--query-weight and --rescore-weight go with --model (a cross-validation "
                        "serves each fold model as its selection chose)")
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


def _cross_validated(ctx, index, jl, stage, featureset, algo, settings, workdir, folds, k, window,
                     store, seed, keep_fold_models, jobs, budget, explain,
                     via: str = "plugin") -> tuple[dict, list]:
    """``ltr evaluate --cv K``: (the cross-validation's report, its queries), each
    algorithm's settings chosen per fold unless ``--settings defaults``."""
    from ..pipeline.crossval import cross_validate
    fixed = {} if settings is Settings.defaults else None
    report = cross_validate(_ltr_conn(ctx), index, jl, featureset, {a.value: fixed for a in algo},
                            workdir, folds, k, window, store, stage, seed,
                            log=lambda m: err.print(m), keep_models=keep_fold_models,
                            jobs=jobs, budget=budget, explain=explain, via=via)
    return report, list(next(iter(report["per_query"].values())))


def _show_report(report: dict, k: int) -> None:
    """The report's summary line, its table and its recommendation, if any."""
    out.print(f"{report['queries']} queries, k={k}" + (f", {report['evaluation']}" if "evaluation" in report else ""))
    out.print(_report_table(report))
    if "recommendation" in report:
        out.print(f"recommendation: {report['recommendation']['reason']}")


def _write_report(conn, index, report, qids, jl, fields, json_out, plot, html) -> None:
    """The report written where asked: JSON, the per-query delta chart, the HTML page
    (with the titles and fields of every document in its top lists)."""
    from ..evaluation.html import write_html
    from ..evaluation.plots import delta_plot
    from ..io.atomic import write_json
    from ..serving.explain import doc_titles
    if json_out:
        write_json(json_out, report)
    if plot:
        delta_plot(report, qids, plot)
    if html:
        ids = {d for lists in report["top"].values() for top in lists.values() for d in top}
        write_html(html, report, jl, doc_titles(conn, index, ids, ("title", *(fields or "abstract").split(","))))
        out.print(f"report: {html}")


def _deploy(ctx, report, workdir, featureset, name, store, k, seed, anyway) -> None:
    """``ltr evaluate --cv --deploy NAME``: the recommended reranker (or ``anyway``)
    trained on every judged query and uploaded; nothing uploaded when none is recommended."""
    from ..pipeline.crossval import deploy_recommended
    from ..stores.contract import Contract, describe
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
    out.print(f"uploaded {done['name']}: {done['algorithm']} trained on all judged queries, "
              f"{done['settings']}; served as its serving contract says: "
              f"{describe(Contract.from_dict(done['contract']))}")



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
                   features: Annotated[Path, typer.Option("--features", help="Logged feature rows of the queries and documents the events show (`ltr log`; qids as `ltr judgments clicks` names queries, or the query text).")],
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
def predict(model: Path, data: Path,
            output: Annotated[Path, typer.Option("-o", "--output", help="One score per input row.")]):
    """Score every row of DATA with MODEL."""
    from ..pipeline.artifact import predict_file
    n = predict_file(model, data, output)
    out.print(f"{n} scores written to {output}")



@app.command("demo")
def demo(ctx: typer.Context,
         workdir: Annotated[Path, typer.Option("--workdir", help="Where candidates, features and models go.")] = Path("ltr-demo"),
         json_out: Annotated[Optional[Path], typer.Option("--json")] = None,
         folds: Annotated[int, typer.Option("--folds", min=2, help="Cross-validation folds.")] = 5,
         recreate: Annotated[bool, typer.Option("--recreate", help="Re-index the demo's index when an older version exists.")] = False,
         jobs: JobsOpt = None, budget: BudgetOpt = None, engine: EngineOpt = None):
    """The main job: node, Cranfield, feature set, candidates, 5-fold cross-validated
    linear / LambdaRank-NN / LambdaMART rerankers uploaded and evaluated live vs BM25
    (on the local node of --engine unless --url / LTR_URL names a cluster)."""
    from ..io.atomic import write_json
    from ..pipeline.demo import run_demo
    from ..localnode import process as localnode
    _writable(json_out)
    conn = _engine_conn(ctx, engine)
    t0 = time.monotonic()
    if not conn.url:
        info, started = localnode.start(log=lambda m: err.print(m), engine=_engine(ctx, engine))
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
