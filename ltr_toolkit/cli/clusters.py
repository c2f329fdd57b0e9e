"""``ltr cluster``: the local node(s) this tool provisions and starts, and what answers at
a cluster's URL."""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer
from rich.table import Table

from .. import versions
from ..errors import ClusterError
from .common import JsonOpt, OldEngineOpt, _conn, _old_engine, _print_json, cluster_app, err, out


@cluster_app.command("start")
def cluster_start(ctx: typer.Context, engine: OldEngineOpt = None,
                  no_ltr: Annotated[bool, typer.Option("--no-ltr", help="Start the engine without the LTR plugin when it cannot be provisioned (diagnostics only).")] = False,
                  nodes: Annotated[int, typer.Option("--nodes", min=1, help="Start a cluster of N local nodes (each 512 MiB heap).")] = 1,
                  no_knn: Annotated[bool, typer.Option("--no-knn", help="OpenSearch: without the k-NN plugin (the lexical features only; removes it from the local node's install).")] = False,
                  version: Annotated[Optional[str], typer.Option("--version", help=f"The engine version: OpenSearch {', '.join(versions.SUPPORTED['opensearch'])} (default {versions.OPENSEARCH_VERSION}); Elasticsearch {', '.join(versions.SUPPORTED['elasticsearch'])} (default {versions.ELASTICSEARCH_VERSION}). Its LTR plugin zip: the one in $LTR_HOME/plugins whose descriptor names it.")] = None):
    """Provision (cached) and start a local node of `ltr --engine E` (OpenSearch 3.6.0 or
    Elasticsearch 8.17.0 unless --version says otherwise, from Maven Central), or a
    cluster of N nodes; return when it is healthy."""
    from ..localnode import process as localnode
    from ..localnode.distributions import distribution
    from ..localnode.cluster import start_cluster
    t0 = time.monotonic()
    dist = distribution(_old_engine(ctx, engine), version)
    if nodes > 1:
        started = start_cluster(nodes, require_plugin=not no_ltr, log=lambda m: err.print(m),
                                engine=dist.engine, version=version)
        out.print(f"{nodes} {dist.label} nodes healthy at {', '.join(s.url for s in started)} (pids "
                  f"{', '.join(str(s.pid) for s in started)}) in {time.monotonic() - t0:.1f}s")
        return
    info, started = localnode.start(require_plugin=not no_ltr, knn=not no_knn,
                                    log=lambda m: err.print(m), engine=dist.engine, version=version)
    if not started:
        out.print(f"a {dist.label} node already runs: {info.url} (pid {info.pid}); nothing started")
        return
    plugin = "with LTR plugin" if info.plugin else "WITHOUT the LTR plugin"
    out.print(f"{dist.label} {info.version} {plugin} healthy at {info.url} "
              f"(pid {info.pid}) in {time.monotonic() - t0:.1f}s")


@cluster_app.command("stop")
def cluster_stop(ctx: typer.Context, engine: OldEngineOpt = None):
    """Stop the node(s) `ltr cluster start` started (by their pids): of `ltr --engine E`,
    else all."""
    from ..localnode import process as localnode
    from ..localnode.distributions import DISTRIBUTIONS
    from ..localnode.cluster import stop_all
    name = _old_engine(ctx, engine)
    many = stop_all(name)
    single = [localnode.stop(d.engine) for d in DISTRIBUTIONS if not name or d.engine == name]
    if many:
        out.print(f"stopped pids {', '.join(str(n.pid) for n in many)}")
    for info in filter(None, single):
        out.print(f"stopped pid {info.pid} ({info.url})")
    if not many and not any(single):
        out.print("no local node runs")


@cluster_app.command("status")
def cluster_status(ctx: typer.Context, engine: OldEngineOpt = None, as_json: JsonOpt = False):
    """URL, engine and version, LTR plugin version, vectors and health; exit 1 when no
    node answers."""
    from ..transport import client as cl
    from ..transport.engine import detect
    _old_engine(ctx, engine)
    conn = _conn(ctx)
    try:
        found = detect(conn)
        health = cl.request(conn, "GET", "/_cluster/health")
        ltr = cl.ltr_plugin_version(conn)
    except ClusterError as exc:   # nothing (usable) answers: exit 1; bad settings stay exit 2
        err.print(f"error: {exc}")
        raise typer.Exit(1)
    vectors = found.vectors
    rows = {"url": conn.display_url, "engine": found.label, "ltr plugin": ltr or "not installed",
            "vectors": f"{vectors.field_type} (semantic features; score {vectors.score})"
            if vectors else "none: no k-NN plugin (lexical features only)",
            "health": health.get("status", "?")}
    if as_json:
        return _print_json(rows)
    table = Table(show_header=False)
    for key, value in rows.items():
        table.add_row(key, value)
    out.print(table)
