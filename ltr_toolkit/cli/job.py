"""``ltr job``: scheduled feature-logging jobs (docs/scheduling.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from .common import EXIT_PARTIAL, _conn, _partial, err, job_app, out


@job_app.command("run")
def job_run(ctx: typer.Context, job: Annotated[Path, typer.Argument(help="The job file (TOML).")],
            json_report: Annotated[bool, typer.Option("--json", help="Print the run's manifest as JSON on stdout.")] = False,
            part: Annotated[Optional[str], typer.Option("--part", help="I/N: log only the I-th of N slices of the queries (each part may run on another machine, same output directory); the part that completes the set publishes one snapshot, identical to a whole run's.")] = None):
    """Run a feature-logging job once: lock, log (resumable), publish a snapshot
    atomically with a manifest, keep the last N. Exit 0 complete, 3 partial, 2 user error."""
    from ..jobs.jobfile import job_connection, load_job
    from ..jobs.parts import parse_part, run_part
    from ..jobs.runner import run_job
    from ..pipeline.monitor import monitor_snapshot
    from ..transport import client as cl
    i_n = parse_part(part) if part is not None else None
    spec = load_job(job)
    conn = job_connection(spec, _conn(ctx), explicit_timeout=ctx.meta.get("timeout_given", False))
    if spec.via == "plugin":      # named queries log on a cluster without the plugin too
        cl.check_ltr(conn)
    if i_n is not None:
        manifest = run_part(spec, conn, *i_n, log=lambda m: err.print(m))
    else:
        manifest = run_job(spec, conn, log=lambda m: err.print(m), after=monitor_snapshot)
    if json_report:
        print(json.dumps(manifest, indent=2))
    if "snapshot" not in manifest:    # a part: the snapshot waits for others (or was merged)
        if not json_report:
            out.print(f"part {manifest['part']}: {manifest['status']}")
        return
    if not json_report:
        out.print(f"snapshot {manifest['snapshot']} ({manifest['status']}): "
                  f"{manifest['counts']['rows']} rows")
    if manifest.get("monitor"):
        err.print("monitor: " + "\n".join(manifest["monitor"].get("summary") or [manifest["monitor"]["note"]]))
    _partial("query", manifest.get("failed_queries", []),
             fix="the snapshot holds the others; fix the cause above and run the job again")
    if manifest["status"] != "complete":
        raise typer.Exit(EXIT_PARTIAL)
