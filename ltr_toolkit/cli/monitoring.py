"""``ltr monitor``: a new snapshot against a reference: drifting and broken features, the
deployed model's decay, one verdict with its exit code (docs/scheduling.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import typer

from ..errors import UserError
from .common import (CutoffOpt, JsonOpt, ReportOpt, StoreOpt, _ltr_conn, _print_json, _writable,
                     app, out)

ArtifactOpt = Annotated[Optional[Path], typer.Option("--artifact", help="The deployed model's artifact (`ltr train -o`): its NDCG@K against the first stage's, now and at deployment; in a snapshot folder, the snapshot it was trained on is the reference.")]
MonitorHtmlOpt = Annotated[Optional[Path], typer.Option("--html", help="Also write the verdict as a page to open in a browser: the summary, every feature's figures and the flagged features' picture (self-contained HTML).")]
LiveModelOpt = Annotated[Optional[str], typer.Option("--model", help="The stored model serving the artifact, checked live: its served scores against the artifact's on the same documents (with --artifact, --index and --judgments).")]
LiveIndexOpt = Annotated[Optional[str], typer.Option("--index", help="The index the live check searches (with --model).")]
LiveJudgmentsOpt = Annotated[Optional[Path], typer.Option("--judgments", help="Judged queries whose texts the live check serves (with --model; RankLib, TREC qrels, CSV or JSONL).")]
LiveQueriesOpt = Annotated[int, typer.Option("--live-queries", min=1, help="Queries the live check serves (the first N judged).")]
DriftPlotOpt = Annotated[Optional[Path], typer.Option("--plot", help="Also draw each flagged feature's distribution across the snapshots here (PNG; needs matplotlib).")]


@app.command("monitor")
def monitor_cmd(ctx: typer.Context, paths: Annotated[List[Path], typer.Argument(help="REFERENCE NEW (two logged files), or a job's snapshot folder (the newest snapshot against the model's training snapshot, else the oldest kept).")],
                artifact: ArtifactOpt = None, cutoff: CutoffOpt = 10, json_out: JsonOpt = False,
                output: ReportOpt = None, plot: DriftPlotOpt = None, html: MonitorHtmlOpt = None,
                model: LiveModelOpt = None, index: LiveIndexOpt = None,
                judgments: LiveJudgmentsOpt = None, live_queries: LiveQueriesOpt = 20,
                store: StoreOpt = None):
    """Check a newer logged snapshot against a reference: per feature its missing and
    zero shares, PSI and KS (thresholds from measured null variation), the model's decay,
    and with --model its served scores against the artifact's, live.
    Exit 0 ok, 4 drift, 5 degraded, 6 broken (2 user error)."""
    from ..io.atomic import write_json
    from ..pipeline.artifact import read_artifact
    from ..pipeline.monitor import monitor, resolve
    _writable(output, plot, html)
    art = read_artifact(artifact) if artifact is not None else None
    ref, new, series = resolve(paths, art)
    live = _live(ctx, artifact, model, index, judgments, live_queries, store, cutoff)
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


def _live(ctx, artifact, model, index, judgments, n, store, size):
    """The live check's result, or None without --model."""
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
                             load_judgments(judgments), n, size)


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
