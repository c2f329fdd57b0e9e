"""``ltr monitor``: a new snapshot against a reference: drifting and broken features, the
deployed model's decay, one verdict with its exit code (docs/scheduling.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import typer

from .common import CutoffOpt, JsonOpt, ReportOpt, _print_json, _writable, app, out

ArtifactOpt = Annotated[Optional[Path], typer.Option("--artifact", help="The deployed model's artifact (`ltr train -o`): its NDCG@K against the first stage's, now and at deployment; in a snapshot folder, the snapshot it was trained on is the reference.")]
DriftPlotOpt = Annotated[Optional[Path], typer.Option("--plot", help="Also draw each flagged feature's distribution across the snapshots here (PNG; needs matplotlib).")]


@app.command("monitor")
def monitor_cmd(paths: Annotated[List[Path], typer.Argument(help="REFERENCE NEW (two logged files), or a job's snapshot folder (the newest snapshot against the model's training snapshot, else the oldest kept).")],
                artifact: ArtifactOpt = None, cutoff: CutoffOpt = 10, json_out: JsonOpt = False,
                output: ReportOpt = None, plot: DriftPlotOpt = None):
    """Check a newer logged snapshot against a reference: per feature its missing and
    zero shares, PSI and KS (thresholds from measured null variation), the model's decay.
    Exit 0 ok, 4 drift, 5 degraded, 6 broken (2 user error)."""
    from ..io.atomic import write_json
    from ..pipeline.artifact import read_artifact
    from ..pipeline.monitor import monitor, resolve
    _writable(output, plot)
    art = read_artifact(artifact) if artifact is not None else None
    ref, new, series = resolve(paths, art)
    report = monitor(ref, new, artifact, cutoff, series)
    if plot is not None:
        _plot(report, series, plot)
    if output is not None:
        write_json(output, report)
    if json_out:
        _print_json(report)
    else:
        out.print("\n".join(report["summary"]))
    raise typer.Exit(report["exit_code"])


def _plot(report: dict, series: list[Path], path: Path) -> None:
    from ..evaluation.plots import drift_plot
    from ..pipeline.monitor import column_series
    feats = report["drift"]["features"]
    flagged = [f["feature"] for f in feats if f["flag"] != "ok"] or [f["feature"] for f in feats]
    drift_plot(column_series(series, flagged), {f["feature"]: f["flag"] for f in feats}, path,
               title=f"{report['verdict']}: {Path(report['new']).parent.name or report['new']}")
    report["plot"] = str(path)
