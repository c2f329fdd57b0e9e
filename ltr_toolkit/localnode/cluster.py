"""A local cluster of N nodes (OpenSearch or Elasticsearch) with the LTR plugin on one machine, for trying
the toolkit (and testing it) as production clusters run: several nodes, shards spread
over them, replicas, a node lost mid-job.

Every node runs from the one provisioned distribution of :mod:`.provision`, with its own
data, logs and pid file under ``$LTR_HOME/nodes/N``; they discover each other on
127.0.0.1 (``discovery.seed_hosts``) and all are cluster-manager eligible data nodes.
``cluster.json`` records every node (pid, HTTP URL); ``node.json`` names the first, so
commands without ``--url`` talk to it (both per engine: see ``Distribution.state_file``). :func:`stop_all` stops exactly those pids.
"""

from __future__ import annotations

import json
import os
import signal
import time

from ..errors import ClusterError, UserError
from ..io.atomic import write_json
from ..transport.client import Connection, check_ltr, probe_store
from .distributions import DISTRIBUTIONS, OPENSEARCH_DIST, Distribution, distribution
from .process import NodeInfo, free_port, launch, pid_is_our_node, running_node
from .provision import provision
from .state import chown_tree, state_dir, state_lock


def cluster_file(dist: Distribution = OPENSEARCH_DIST):
    return state_dir() / dist.state_file("cluster.json")


def nodes(dist: Distribution = OPENSEARCH_DIST) -> list[NodeInfo]:
    """The nodes :func:`start_cluster` started for ``dist``'s engine (alive or not)."""
    try:
        return [NodeInfo(**n) for n in json.loads(cluster_file(dist).read_text())["nodes"]]
    except (OSError, ValueError, TypeError, KeyError):
        return []


def start_cluster(n: int, require_plugin: bool = True, timeout: float = 300.0,
                  log=lambda msg: None, engine: str | None = None,
                  version: str | None = None) -> list[NodeInfo]:
    """Start ``n`` nodes of ``engine`` (None: OpenSearch) at ``version`` (None: the pinned
    one) as one cluster; returns when all have joined, the cluster is green and (with the
    plugin) the LTR plugin answers."""
    dist = distribution(engine, version)
    if n < 2:
        raise UserError(f"--nodes {n}: a cluster needs at least 2 nodes (`ltr cluster start` alone starts one)")
    with state_lock():
        alive = [x for x in nodes(dist) if pid_is_our_node(x.pid, x.home)]
        if running_node(dist.engine) or alive:
            raise UserError(f"a local {dist.label} node already runs",
                            "stop it first: `ltr cluster stop`")
        inst = provision(require_plugin=require_plugin, log=log, dist=dist)
        root = state_dir()
        ports = [(free_port(), free_port()) for _ in range(n)]
        names = [f"ltr-node-{i + 1}" for i in range(n)]
        common = {"cluster.name": "ltr-toolkit-cluster",
                  "discovery.seed_hosts": ",".join(f"127.0.0.1:{t}" for _, t in ports),
                  dist.manager_nodes: ",".join(names)}
        deadline = time.monotonic() + timeout
        started: list[NodeInfo] = []
        try:
            _launch_all(inst, root, ports, names, common, deadline, started)
            write_json(root / dist.state_file("node.json"), started[0].__dict__)
            log(f"{n} nodes started (pids {', '.join(str(s.pid) for s in started)}); waiting until they form a cluster")
            _wait_formed(started, deadline)
        except BaseException:
            stop_all(dist.engine)
            raise
        return started


def _launch_all(inst, root, ports, names, common, deadline, started) -> None:
    """Launch each node; ``started`` (and cluster.json) grows as they start, so that a
    failure part-way leaves every started pid on record for :func:`stop_all`."""
    for i, ((port, tport), name) in enumerate(zip(ports, names)):
        d = root / inst.dist.state_file("nodes") / str(i + 1)
        for sub in ("data", "logs"):
            (d / sub).mkdir(parents=True, exist_ok=True)
            chown_tree(d / sub)
        pid = launch(inst, d / "node.pid", d / "logs", deadline, dict(
            common, **{"node.name": name, "http.port": str(port), "transport.port": str(tport),
                       "path.data": str(d / "data"), "path.logs": str(d / "logs")}))
        started.append(NodeInfo(pid=pid, url=f"http://127.0.0.1:{port}", port=port,
                                   home=str(inst.home), version=inst.dist.version,
                                   plugin=inst.plugin, engine=inst.dist.engine))
        write_json(cluster_file(inst.dist), {"nodes": [s.__dict__ for s in started]})


def _wait_formed(started: list[NodeInfo], deadline: float) -> None:
    conn = Connection(url=started[0].url, timeout=10)
    last = None
    while time.monotonic() < deadline:
        dead = [s.pid for s in started if not pid_is_our_node(s.pid, s.home)]
        if dead:
            raise ClusterError(f"node(s) with pid {dead} exited during start-up",
                               f"see {state_dir()}")
        try:
            h = conn.client().transport.perform_request(
                "GET", f"/_cluster/health?wait_for_nodes={len(started)}&wait_for_status=green&timeout=5s")
            if h.get("number_of_nodes") == len(started) and h.get("status") == "green":
                if started[0].plugin:
                    check_ltr(conn)
                    probe_store(conn)
                return
            last = h
        except Exception as exc:  # noqa: BLE001 (still coming up: any answer but a good one)
            last = exc
        time.sleep(0.5)
    raise ClusterError(f"the {len(started)} nodes did not form a green cluster in time ({last})",
                       f"see {state_dir()}")


def stop_all(engine: str | None = None, timeout: float = 60.0) -> list[NodeInfo]:
    """Stop every node of :func:`start_cluster` of ``engine`` (None: of both engines) by
    its recorded pid (TERM, then KILL after ``timeout``); returns those that were running."""
    dists = [distribution(engine)] if engine else list(DISTRIBUTIONS)
    stopped = []
    for dist in dists:
        mine = [node for node in nodes(dist) if pid_is_our_node(node.pid, node.home)]
        for node in mine:
            os.kill(node.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for node in mine:
            while pid_is_our_node(node.pid, node.home):
                if time.monotonic() > deadline:
                    os.kill(node.pid, signal.SIGKILL)
                time.sleep(0.2)
        cluster_file(dist).unlink(missing_ok=True)
        if mine:
            (state_dir() / dist.state_file("node.json")).unlink(missing_ok=True)
        stopped += mine
    return stopped
