"""``ltr evaluate interleaving``: the clicks on interleaved searches credited to their
teams (``ltr search --interleave A,B --ubi`` writes the teams; see
:mod:`ltr_toolkit.clicks.interleaving`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from ..clicks import DEFAULT_CLIP
from ..errors import UserError
from .common import (ClicksAsOpt, DaysOpt, EventsIndexOpt, QueriesIndexOpt, SinceOpt, UntilOpt,
                     _event_log, _writable, app, err, out)

#: ``ltr evaluate interleaving ...`` is this command (``cli.main`` maps the two words)
COMMAND = "evaluate-interleaving"


@app.command(COMMAND, hidden=True)
def evaluate_interleaving(ctx: typer.Context,
                          file: Annotated[Optional[Path], typer.Option("--events", help="UBI events and query records: NDJSON or bulk. Without it: the cluster's UBI indices.")] = None,
                          experiment: Annotated[Optional[str], typer.Option("--experiment", help="Only this experiment (default: every one found).")] = None,
                          alpha: Annotated[float, typer.Option("--alpha", min=0.0, max=1.0, help="A winner is named when the sign test's p-value is below it.")] = 0.05,
                          top: Annotated[int, typer.Option("--top", min=0, help="Queries shown per experiment (most impressions first; all in --json).")] = 10,
                          days: DaysOpt = None, since: SinceOpt = None, until: UntilOpt = None,
                          queries_index: QueriesIndexOpt = "ubi_queries", events_index: EventsIndexOpt = "ubi_events",
                          clicks_as: ClicksAsOpt = "click",
                          propensity: Annotated[str, typer.Option("--propensity", help="The debiased credit weighs each click by 1 / examination probability of its rank: pbm or ubm (EM on the interleaved searches), given per 0-based rank (1,0.5,0.33,...), or none.")] = "pbm",
                          propensity_clip: Annotated[float, typer.Option("--propensity-clip", help="Examination probabilities below this count as it (weights at most 1/CLIP).")] = DEFAULT_CLIP,
                          json_out: Annotated[Optional[Path], typer.Option("--json")] = None):
    """Team-draft interleaving experiments from UBI: per experiment and per query, the
    impressions won by A, tied, won by B, the preference and a sign test's p-value; and
    the debiased credit (clicks weighted by inverse examination probabilities) with its
    z-test, which position bias does not tilt towards the better first result."""
    from ..clicks.debias import check_clip, parse_propensity
    from ..clicks.interleaving import credit
    from ..io.atomic import write_json
    _writable(json_out)
    spec = None if propensity.strip().lower() == "none" else parse_propensity(propensity)   # checked early
    check_clip(propensity_clip)
    log, source = _event_log(ctx, file, clicks_as, since, until, days, queries_index, events_index)
    reports = credit(log, experiment, alpha, spec, propensity_clip)
    if not reports:
        which = f"experiment {experiment!r}" if experiment else "interleaved searches"
        raise UserError(f"no {which} in {source} ({len(log.record_interleaving)} interleaved records)",
                        "serve them with `ltr search --interleave A,B --ubi` (or write "
                        "query_attributes.interleaving), or check --experiment and the time range")
    for line in log.problems.lines():
        err.print(f"bad data: {line}")
    for rep in reports:
        _print(rep, top)
    if json_out:
        write_json(json_out, {"source": source, "alpha": alpha, "experiments": reports})


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
