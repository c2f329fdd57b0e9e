"""``ltr judgments``: judgment lists checked, from Cranfield or from clicks, and click
training data for ``ltr train --propensity``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from .common import (ClickModel, ClicksAsOpt, DaysOpt, EventsIndexOpt, Format, Grading,
                     InputFormatOpt, Positions, QueriesFileOpt, QueriesIndexOpt, SinceOpt, Split,
                     UntilOpt, _event_log, _writable, err, judgments_app, out)


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


@judgments_app.command("cranfield")
def judgments_cranfield(output: Annotated[Path, typer.Option("-o", "--output", help="The judgment list (RankLib format).")],
                        split: Annotated[Split, typer.Option("--split", help="The queries of the fixed seeded 60/20/20 split, or all.")] = Split.all):
    """Write the Cranfield judgments (fixed seeded 60/20/20 query split) in the toolkit's format."""
    from ..data.judgments import save_ranklib
    from ..datasets import cranfield
    split = split.value
    jl = cranfield.split_judgments(split)
    save_ranklib(jl, output)
    out.print(f"{len(jl)} judgments for {len(jl.queries)} queries ({split}) written to {output}")


@judgments_app.command("check")
def judgments_check(file: Annotated[Path, typer.Argument(help="The judgment list (RankLib, TREC qrels, CSV or JSONL).")],
                    input_format: InputFormatOpt = None, queries: QueriesFileOpt = None):
    """Validate a judgment file: counts, duplicates; exit 2 with file:line on errors."""
    from ..data.judgments import load_judgments
    jl = load_judgments(file, input_format.value if input_format else None, queries)
    for d in jl.duplicates:
        err.print(f"warning: {d}")
    out.print(f"{len(jl)} judgments, {len(jl.queries)} queries, {len(jl.duplicates)} duplicates")


@judgments_app.command("clicks")
def judgments_clicks(ctx: typer.Context,
                     output: Annotated[Path, typer.Option("-o", "--output", help="The judgment list, its format by its name: .qrels (TREC, queries in OUT.queries), .tsv, .csv, .jsonl or .ndjson, each gzip'd as .gz, else RankLib; OUT.counts.csv and OUT.json go beside it.")],
                     file: Annotated[Optional[Path], typer.Argument(help="UBI events: NDJSON or the bulk format (both indices in one file). Without it: the cluster's UBI indices.")] = None,
                     model: Annotated[ClickModel, typer.Option("--click-model", help="How clicks become grades: click-through rate, COEC, a cascade (sdbn), position-based (pbm) or user browsing (ubm) model, or auto (the least held-out perplexity).")] = ClickModel.pbm,
                     fmt: Annotated[Optional[Format], typer.Option("--output-format", help="The judgment list's format; guessed from the output's name when omitted.")] = None,
                     prior: Annotated[Optional[float], typer.Option("--prior", min=0, help="Pseudo-observations towards the average (default: 0 for coec, 1 otherwise).")] = None,
                     min_impressions: Annotated[int, typer.Option("--min-impressions", min=1, help="Pairs seen fewer times are left out.")] = 5,
                     grades: Annotated[Grading, typer.Option("--grades", help="levels (whole grades 0..--levels) or estimate (the model's number).")] = Grading.levels,
                     levels: Annotated[int, typer.Option("--levels", min=1, help="With --grades levels: the highest grade (grades 0..LEVELS).")] = 4,
                     positions: Annotated[Positions, typer.Option("--positions", help="Positions counted from (auto: 1 when no impression has position 0).")] = Positions.auto,
                     max_rank: Annotated[int, typer.Option("--max-rank", min=1, help="COEC: ranks with a rank CTR (the Workbench's maxRank).")] = 20,
                     days: DaysOpt = None, since: SinceOpt = None, until: UntilOpt = None,
                     queries_index: QueriesIndexOpt = "ubi_queries", events_index: EventsIndexOpt = "ubi_events",
                     clicks_as: ClicksAsOpt = "click"):
    """Judgments from User Behavior Insights events through a click model (ctr, coec as the
    Search Relevance Workbench computes it, sdbn, pbm, ubm); bad event data is counted and
    reported."""
    from ..clicks.judging.judge import ClickSettings, judge
    from ..clicks.judging.output import write_counts, write_judgments, write_report
    settings = ClickSettings(model=model.value, prior=prior, min_impressions=min_impressions,
                             mapping=grades.value, levels=levels, positions=positions.value, max_rank=max_rank)
    _writable(output)
    log, source = _event_log(ctx, file, clicks_as, since, until, days, queries_index, events_index)
    jl, rows, report = judge(log, settings, source)
    files = write_judgments(jl, output, fmt.value if fmt else None)
    files += [write_counts(rows, output), write_report(report, output)]
    for line in log.problems.lines():
        err.print(f"bad data: {line}")
    c = report["counts"]
    _model_choice(report["model_choice"])
    used = report["settings"]["model"]
    out.print(f"{c['events']} events, {c['searches']} searches, {c['clicks']} clicks (positions counted "
              f"from {report['positions_counted_from']}); {used}: {c['judged_pairs']} judgments for "
              f"{c['queries']} queries ({c['pairs_below_min_impressions']} pairs under {min_impressions} "
              f"impressions left out) written to {', '.join(str(f) for f in files)}")


def _model_choice(choice: dict) -> None:
    """The held-out scores of every click model (and what --model auto chose)."""
    if not choice.get("models"):
        err.print(f"note: no held-out model choice ({choice.get('why')})")
        return
    table = Table("click model", "held-out perplexity", "log-likelihood / row")
    for m, v in sorted(choice["models"].items(), key=lambda kv: kv[1]["perplexity"]):
        table.add_row(m + (" (chosen)" if m == choice.get("auto") else ""), f"{v['perplexity']:.4f}",
                      f"{v['log_likelihood']:.4f}")
    out.print(table)
    out.print(f"held out: {choice['held_out']} ({choice['held_out_searches']} searches, "
              f"{choice['held_out_rows']} rows); least perplexity: {choice['chosen']}")
