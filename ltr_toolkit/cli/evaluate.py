"""``ltr evaluate``: the first stage against rerankers on judged queries, live:

* ``ltr evaluate models JUDGMENTS``: stored models (or none: the first stage alone);
* ``ltr evaluate cv JUDGMENTS``: K-fold cross-validation, every query reranked by a fold
  model that never saw it, ending with what to deploy;
* ``ltr evaluate interleaving [EVENTS]``: the clicks on interleaved searches credited to
  their teams (``ltr query search --interleave A,B --ubi`` writes the teams; see
  :mod:`ltr_toolkit.clicks.interleaving`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import typer
from rich.table import Table

from ..clicks import DEFAULT_CLIP
from ..errors import UserError
from .common import (Algo, BudgetOpt, ClicksAsOpt, CutoffOpt, DaysOpt, EventsIndexOpt, FieldsOpt, JudgedOutside,
                     FoldsOpt, IndexOpt, InputFormatOpt, JobsOpt, JsonOpt, QueriesFileOpt,
                     QueriesIndexOpt, QueryWeightOpt, ReportOpt, RescoreWeightOpt, SeedOpt,
                     ServedStatsOpt, Settings, SinceOpt, Statistics, StatsOpt, StoreOpt,
                     TemplateOpt, Unjudged, UntilOpt, Via, WindowOpt, WorkdirOpt, _conn, _event_log,
                     _failed_queries, _first_stage, _given_first_stage, _ltr_conn, _print_json, _progress,
                     _report_table, _weights, _writable, err, evaluate_app, out)

PlotOpt = Annotated[Optional[Path], typer.Option("--plot", help="Also draw the per-query NDCG deltas here (PNG; needs matplotlib).")]
HtmlOpt = Annotated[Optional[Path], typer.Option("--html", help="Also write a report to open in a browser: metrics with confidence intervals, per-query deltas, both top 10s side by side with grades and each document's feature contributions (one self-contained file).")]


@evaluate_app.command("models")
def evaluate_models(ctx: typer.Context,
                    judgments: Annotated[Path, typer.Argument(help="The judged queries (RankLib, TREC qrels, CSV or JSONL).")],
                    index: IndexOpt,
                    model: Annotated[Optional[List[str]], typer.Option("--model", help="A stored model to rerank with (repeatable), served as its serving contract says unless the options below say otherwise. None: the first stage alone.")] = None,
                    cutoff: CutoffOpt = 10, window: WindowOpt = None, store: StoreOpt = None,
                    fields: FieldsOpt = None, first_stage: TemplateOpt = None,
                    statistics: ServedStatsOpt = None,
                    query_weight: QueryWeightOpt = None, rescore_weight: RescoreWeightOpt = None,
                    input_format: InputFormatOpt = None, queries: QueriesFileOpt = None,
                    output: ReportOpt = None, as_json: JsonOpt = False,
                    plot: PlotOpt = None, html: HtmlOpt = None):
    """Every judged query live: the first stage alone vs each stored model, with paired
    tests (corrected for the number of models). Exit 3 when some queries failed (named;
    the others are evaluated)."""
    from ..data.judgments import load_judgments
    from ..evaluation.live import evaluate_live
    _writable(output, plot, html)
    jl = load_judgments(judgments, input_format.value if input_format else None, queries)
    weights = _weights(query_weight, rescore_weight)
    if weights is not None and not model:
        raise UserError("--query-weight and --rescore-weight go with --model")
    stage = _given_first_stage(fields, first_stage, statistics, model)
    conn = _conn(ctx)
    report, _, qids = evaluate_live(conn, index, jl, model or [], cutoff, window, store,
                                    first_stage=stage, weights=weights, explain=html is not None)
    _finish(conn, index, report, qids, jl, fields, output, as_json, plot, html, cutoff)
    _failed_queries(report)


@evaluate_app.command("cv")
def evaluate_cv(ctx: typer.Context,
                judgments: Annotated[Path, typer.Argument(help="The judged queries (RankLib, TREC qrels, CSV or JSONL).")],
                index: IndexOpt,
                featureset: Annotated[str, typer.Option("--featureset", help="The feature set logged for the candidates: a stored set's name (with --via named-queries also a feature set file).")],
                algo: Annotated[List[Algo], typer.Option("--algo", help="An algorithm trained per fold (repeatable).")],
                folds: FoldsOpt = 5, cutoff: CutoffOpt = 10,
                window: Annotated[int, typer.Option("--window", min=1, help="Rerank the first stage's global top WINDOW; the candidates logged per query.")] = 100,
                store: StoreOpt = None, fields: FieldsOpt = None, first_stage: TemplateOpt = None,
                statistics: StatsOpt = Statistics.dfs,
                workdir: WorkdirOpt = Path("ltr-cv"), seed: SeedOpt = 42,
                settings: Annotated[Settings, typer.Option("--settings", help="choose: each algorithm's settings by inner cross-validation on the training folds; defaults: the library's defaults.")] = Settings.choose,
                keep_fold_models: Annotated[bool, typer.Option("--keep-fold-models", help="Keep the fold models in the store (deleted when the run ends otherwise).")] = False,
                deploy: Annotated[Optional[str], typer.Option("--deploy", help="Train the recommended reranker on all judged queries and upload it as NAME-vN, only if one is recommended.")] = None,
                deploy_anyway: Annotated[Optional[Algo], typer.Option("--deploy-anyway", help="With --deploy: upload this algorithm even when it is not recommended.")] = None,
                jobs: JobsOpt = None, budget: BudgetOpt = None,
                via: Annotated[Via, typer.Option("--via", help="How the candidates' features are logged: plugin (sltr + ltr_log) or named-queries (each feature's template as a named query: what Elasticsearch's native learning to rank computes). Fold models are served by the plugin either way.")] = Via.plugin,
                unjudged: Annotated[Unjudged, typer.Option("--unjudged", help="Unjudged candidates: trained on as grade 0, or dropped (judges who graded only some documents per query); every query is still reranked and evaluated live over its whole window.")] = Unjudged.zero,
                judged_outside: Annotated[JudgedOutside, typer.Option("--judged-outside", help="Judged documents outside the top WINDOW: left out of training, or included.")] = JudgedOutside.exclude,
                max_ms: Annotated[Optional[float], typer.Option("--max-ms", min=0, help="Serving budget: choose each fold's feature set on its training queries so that the model's served p50 stays under X ms (each feature's cost measured live on this cluster first); the deployed model uses the set chosen on all judged queries, uploaded as a feature set of its own.")] = None,
                max_cost: Annotated[Optional[float], typer.Option("--max-cost", min=1, help="Serving budget as a multiple of the first stage's measured p50 (e.g. 2.0), as --max-ms.")] = None,
                input_format: InputFormatOpt = None, queries: QueriesFileOpt = None,
                output: ReportOpt = None, as_json: JsonOpt = False,
                plot: PlotOpt = None, html: HtmlOpt = None):
    """Cross-validation, live: every judged query reranked by a fold model that never saw
    it, its settings (and with --max-ms/--max-cost its feature set) chosen without it;
    the report ends with what to deploy (or: keep the first stage). Exit 3 when some
    queries failed (named; the others are evaluated)."""
    from ..data.judgments import load_judgments
    from ..pipeline.crossval import cross_validate
    _writable(output, plot, html)
    if deploy_anyway and not deploy:
        raise UserError("--deploy-anyway needs --deploy NAME")
    budgeted = _budget(max_ms, max_cost)
    jl = load_judgments(judgments, input_format.value if input_format else None, queries)
    stage = _first_stage(fields, first_stage, statistics)
    conn = _ltr_conn(ctx)
    fixed = {} if settings is Settings.defaults else None
    report = cross_validate(conn, index, jl, featureset, {a.value: fixed for a in algo},
                            workdir, folds, cutoff, window, store, stage, seed,
                            log=lambda m: err.print(m), keep_models=keep_fold_models,
                            jobs=jobs, budget=budget, explain=html is not None, via=via.value,
                            candidates={"unjudged": unjudged.value, "judged_outside": judged_outside.value},
                            features=budgeted)
    qids = list(next(iter(report["per_query"].values())))
    _finish(conn, index, report, qids, jl, fields, output, as_json, plot, html, cutoff)
    if deploy:
        from ..serving.serving import Serving
        _deploy(conn, report, workdir, featureset, deploy, store, cutoff, seed, deploy_anyway,
                (Serving(index, stage, window, store), jl))
    _failed_queries(report)


def _budget(max_ms: float | None, max_cost: float | None) -> dict | None:
    """``cross_validate``'s ``features`` of --max-ms / --max-cost (None: no budget)."""
    if max_ms is not None and max_cost is not None:
        raise UserError("--max-ms and --max-cost both given", "state the budget once")
    return {"max_ms": max_ms} if max_ms is not None else \
        {"max_cost": max_cost} if max_cost is not None else None


def _finish(conn, index, report, qids, jl, fields, output, as_json, plot, html, cutoff) -> None:
    """The report shown (table or JSON) and written where asked."""
    if as_json:
        _print_json(report)
    else:
        _show_report(report, cutoff)
    _write_report(conn, index, report, qids, jl, fields, output, plot, html)


def _show_report(report: dict, k: int) -> None:
    """The report's summary line, its table and its recommendation, if any."""
    out.print(f"{report['queries']} queries, k={k}" + (f", {report['evaluation']}" if "evaluation" in report else ""))
    out.print(_report_table(report))
    if report.get("feature_selection"):
        from ..pipeline.featurechoice import describe
        sel = report["feature_selection"]
        out.print(f"feature sets chosen per fold (budget {sel['limit_ms']:.2f} ms, est. as the first "
                  "stage + the rescore + each feature's measured ms + the requests its ties cost): " + "; ".join(
                      f"{f + 1}) {describe(c, sel)}" for f, c in enumerate(sel["folds"])))
    if "recommendation" in report:
        out.print(f"recommendation: {report['recommendation']['reason']}")


def _write_report(conn, index, report, qids, jl, fields, output, plot, html) -> None:
    """The report written where asked: JSON, the per-query delta chart, the HTML page
    (with the titles and fields of every document in its top lists)."""
    from ..evaluation.html import write_html
    from ..evaluation.plots import delta_plot
    from ..io.atomic import write_json
    from ..serving.explain import doc_titles
    if output:
        write_json(output, report)
    if plot:
        delta_plot(report, qids, plot)
    if html:
        ids = {d for lists in report["top"].values() for top in lists.values() for d in top}
        shown = tuple(dict.fromkeys(("title", *(fields.split(",") if fields else ("abstract",)))))
        write_html(html, report, jl, doc_titles(conn, index, ids, shown))
        err.print(f"report: {html}")


def _deploy(conn, report, workdir, featureset, name, store, k, seed, anyway, timed) -> None:
    """``ltr evaluate cv --deploy NAME``: the recommended reranker (or ``anyway``)
    trained on every judged query and uploaded; nothing uploaded when none is recommended.
    With a serving budget, the recommendation again with the uploaded model's served p50
    measured live (``timed``: the serving and the judged queries to time it on)."""
    from ..pipeline.crossval import describe_choice
    from ..pipeline.deploy import deploy_recommended
    from ..stores.contract import Contract, describe
    rec = report["recommendation"]["deploy"]
    if rec is None and anyway is None:
        out.print("nothing uploaded: keep the first stage (--deploy-anyway ALGO overrides)")
        return
    with _progress("training the deployed model (% of the work)", 100) as update:
        done = deploy_recommended(conn, report, workdir, featureset, name, store, k, seed,
                                  algo=anyway.value if anyway else None,
                                  progress=lambda d, t: update(int(100 * d / t)))
    if done["name"] is None:
        sel = done.get("feature_selection")
        why = (f"within the budget ({sel['limit_ms']:.2f} ms) no feature raises the inner utility "
               "beyond its noise on all judged queries: keep the first stage, or allow more "
               "(--max-ms/--max-cost)") if sel is not None and not sel["features"] else \
            (f"on all judged queries, {done['algorithm']} does not beat the first stage in inner "
             "cross-validation: keep the first stage")
        out.print(f"nothing uploaded: {why}")
        return
    out.print(f"uploaded {done['name']}: {done['algorithm']} trained on all judged queries, "
              f"{describe_choice(done['settings'])}; served as its serving contract says: "
              f"{describe(Contract.from_dict(done['contract']))}; its artifact, with the outer "
              f"folds' held-out gains for `ltr monitor --artifact`: {done['artifact']}")
    if done.get("feature_selection"):
        _served_line(conn, report, done, seed, *timed)


def _served_line(conn, report, done, seed, serving, jl) -> None:
    """The recommendation with the deployed model's served p50 beside its gain."""
    from ..pipeline.featurechoice import served_cost
    chosen = done["feature_selection"]
    t = served_cost(conn, serving, done["name"], jl, seed)
    out.print(f"recommendation: {report['recommendation']['reason']}; deployed as {done['name']} "
              f"on {len(chosen['features'])} features (feature set {done['featureset']}): served "
              f"p50 {t['p50_ms']:.2f} ms, {t['ratio']:.2f}x the first stage's {t['first_p50_ms']:.2f} "
              f"ms (measured live, {t['queries']} queries x {t['passes']} passes interleaved; "
              f"estimated {chosen['estimated_ms']:.2f} ms, budget {chosen['limit_ms']:.2f} ms)"
              + ("; OVER THE BUDGET as measured: allow more (--max-ms/--max-cost), or review the "
                 "set" if t["p50_ms"] > chosen["limit_ms"] else ""))


@evaluate_app.command("interleaving")
def evaluate_interleaving(ctx: typer.Context,
                          file: Annotated[Optional[Path], typer.Argument(help="UBI events and query records: NDJSON or bulk. Without it: the cluster's UBI indices.")] = None,
                          experiment: Annotated[Optional[str], typer.Option("--experiment", help="Only this experiment (default: every one found).")] = None,
                          alpha: Annotated[float, typer.Option("--alpha", min=0.0, max=1.0, help="A winner is named when the sign test's p-value is below it.")] = 0.05,
                          top: Annotated[int, typer.Option("--top", min=0, help="Queries shown per experiment (most impressions first; all in --json).")] = 10,
                          days: DaysOpt = None, since: SinceOpt = None, until: UntilOpt = None,
                          queries_index: QueriesIndexOpt = "ubi_queries", events_index: EventsIndexOpt = "ubi_events",
                          clicks_as: ClicksAsOpt = "click",
                          propensity: Annotated[str, typer.Option("--propensity", help="The debiased credit weighs each click by 1 / examination probability of its rank: pbm or ubm (EM on the interleaved searches), given per 0-based rank (1,0.5,0.33,...), or none.")] = "pbm",
                          propensity_clip: Annotated[float, typer.Option("--propensity-clip", help="Examination probabilities below this count as it (weights at most 1/CLIP).")] = DEFAULT_CLIP,
                          output: ReportOpt = None, as_json: JsonOpt = False):
    """Team-draft interleaving experiments from UBI: per experiment and per query, the
    impressions won by A, tied, won by B, the preference and a sign test's p-value; and
    the debiased credit (clicks weighted by inverse examination probabilities) with its
    z-test, which position bias does not tilt towards the better first result."""
    from ..clicks.debias import check_clip, parse_propensity
    from ..clicks.interleaving import credit
    from ..io.atomic import write_json
    _writable(output)
    spec = None if propensity.strip().lower() == "none" else parse_propensity(propensity)   # checked early
    check_clip(propensity_clip)
    log, source = _event_log(ctx, file, clicks_as, since, until, days, queries_index, events_index)
    reports = credit(log, experiment, alpha, spec, propensity_clip)
    if not reports:
        which = f"experiment {experiment!r}" if experiment else "interleaved searches"
        raise UserError(f"no {which} in {source} ({len(log.record_interleaving)} interleaved records)",
                        "serve them with `ltr query search --interleave A,B --ubi` (or write "
                        "query_attributes.interleaving), or check --experiment and the time range")
    for line in log.problems.lines():
        err.print(f"bad data: {line}")
    result = {"source": source, "alpha": alpha, "experiments": reports}
    if output:
        write_json(output, result)
    if as_json:
        return _print_json(result)
    for rep in reports:
        _print(rep, top)


def _print(rep: dict, top: int) -> None:
    a, b = rep["a"], rep["b"]
    table = Table("query", "impressions", f"{a} wins", "ties", f"{b} wins", "preference", "p")
    for row in rep["per_query"][:top]:
        table.add_row(row["query"][:50], str(row["impressions"]), str(row["wins_a"]), str(row["ties"]),
                      str(row["wins_b"]), f"{row['preference']:+.3f}", f"{row['p_value']:.3g}")
    out.print(f"experiment {rep['experiment']}: {a} (a) vs {b} (b), {rep['impressions']} impressions "
              f"over {rep['queries']} queries; clicks credited: {rep['clicks_a']} to {a}, "
              f"{rep['clicks_b']} to {b}")
    if top:
        out.print(table)
    name = {"a": a, "b": b}.get(rep["winner"])
    verdict = f"{name} wins" if name else "no winner yet"
    q = rep["per_query_test"]
    out.print(f"overall: {rep['wins_a']} won by {a}, {rep['ties']} tied, {rep['wins_b']} won by {b}; "
              f"preference {rep['preference']:+.4f} (> 0 favours {a}), sign test p = {rep['p_value']:.3g} "
              f"over impressions; per query {q['preference']:+.4f}, p = {q['p_value']:.3g} over "
              f"{q['queries']} queries ({q['wins_a']}/{q['ties']}/{q['wins_b']}): {verdict} "
              f"(by the {rep['verdict']} test"
              + ("; queries repeat, so impressions are not independent)" if rep["verdict"] == "per query" else ")"))
    if "debiased" in rep:
        _print_debiased(rep["debiased"], a, b)
        if rep["winner"] and rep["debiased"]["winner"] not in (None, rep["winner"]):
            out.print("the two disagree: counted wins follow the first few results, which position bias "
                      "has users click most; the debiased credit counts clicks over the whole list as if "
                      "every rank were seen (benchmarks/results/interleaving.md)")


def _print_debiased(d: dict, a: str, b: str) -> None:
    name = {"a": a, "b": b}.get(d["winner"])
    p = "too few impressions to test" if d["p_value"] is None else f"z-test p = {d['p_value']:.3g}"
    if d["verdict"] == "per query":
        p += f"; per query p = {d['p_value_per_query']:.3g} over {d['queries']} queries, the verdict's"
    theta = ", ".join(f"{x:.3g}" for x in d["examination"][:10])
    out.print(f"debiased ({d['propensity']} examination by rank {theta}; clip {d['clip']:g}): credit per "
              f"impression {d['credit_a']:.4f} to {a}, {d['credit_b']:.4f} to {b}; {p}: "
              f"{name + ' wins' if name else 'no winner yet'}")
