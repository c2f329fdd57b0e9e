"""The local node's process (OpenSearch, or Elasticsearch): started from the provisioned
distribution (:mod:`.provision`) as the unprivileged user on 127.0.0.1, found again by
its recorded pid (``node.json`` in the state directory), stopped by it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from opensearchpy.exceptions import TransportError

from ..errors import ClusterError, ProvisionError, UserError
from ..io.atomic import write_json
from ..transport.client import Connection, check_ltr, probe_store
from .distributions import ELASTICSEARCH_DIST, OPENSEARCH_DIST, Distribution, distribution
from .provision import Install, provision
from .state import UNPRIVILEGED_USER, chown_tree, state_dir, state_lock

HEAP = "512m"


@dataclass
class NodeInfo:
    pid: int
    url: str
    port: int
    home: str
    version: str
    plugin: bool
    engine: str = OPENSEARCH_DIST.engine

    @classmethod
    def load(cls, dist: Distribution = OPENSEARCH_DIST) -> "NodeInfo | None":
        path = state_dir() / dist.state_file("node.json")
        try:
            data = json.loads(path.read_text())
            return cls(**data)
        except (OSError, ValueError, TypeError):
            return None


_MAIN_CLASSES = tuple(d.main_class for d in (OPENSEARCH_DIST, ELASTICSEARCH_DIST))


def pid_is_our_node(pid: int, home: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    text = b" ".join(cmdline).decode(errors="replace")
    return any(c in text for c in _MAIN_CLASSES) and home in text


def running_node(engine: str | None = None) -> NodeInfo | None:
    """The node this tool started for ``engine`` (None: OpenSearch's, else
    Elasticsearch's), if its process is still alive."""
    dists = [distribution(engine)] if engine else [OPENSEARCH_DIST, ELASTICSEARCH_DIST]
    for dist in dists:
        info = NodeInfo.load(dist)
        if info and pid_is_our_node(info.pid, info.home):
            return info
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int = 5) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(lines[-n:])


def start(require_plugin: bool = True, timeout: float = 180.0, log=lambda msg: None,
          settings: dict | None = None, knn: bool = True,
          engine: str | None = None, version: str | None = None) -> tuple[NodeInfo, bool]:
    """Start the local node of ``engine`` (None: OpenSearch) at ``version`` (None: the
    pinned one, or the one running); returns (info, started). A running node is reported,
    not restarted (one of another version than asked: one line). ``settings``: extra node
    settings (``-E key=value``), e.g. a small ``thread_pool.search.size`` to see how a
    client copes with rejections."""
    dist = distribution(engine, version)
    with state_lock():
        info = running_node(dist.engine)
        if info and version is not None and info.version != version:
            raise UserError(f"a local {dist.label} {info.version} node already runs at {info.url}",
                            f"stop it first with `ltr cluster stop` to start {dist.label} {version}")
        if info:
            return info, False
        inst = provision(require_plugin=require_plugin, log=log, knn=knn, dist=dist)
        root = state_dir()
        data, logs = root / dist.state_file("data"), root / dist.state_file("logs")
        for d in (data, logs):
            d.mkdir(parents=True, exist_ok=True)
            chown_tree(d)
        port, tport = free_port(), free_port()
        deadline = time.monotonic() + timeout
        pid = launch(inst, root / dist.state_file("run") / f"{dist.engine}.pid", logs, deadline, {
            "discovery.type": "single-node", "http.port": str(port),
            "transport.port": str(tport), "path.data": str(data), "path.logs": str(logs),
            "cluster.name": "ltr-toolkit", "node.name": "ltr-toolkit-local",
            **{k: str(v) for k, v in (settings or {}).items()},
        })
        info = NodeInfo(pid=pid, url=f"http://127.0.0.1:{port}", port=port, home=str(inst.home),
                        version=dist.version, plugin=inst.plugin, engine=dist.engine)
        write_json(root / dist.state_file("node.json"), info.__dict__)
        log(f"{dist.label} started (pid {pid}); waiting until it is healthy")
        try:
            _wait_ready(info, deadline, logs, log)
        except BaseException:
            stop(dist.engine)
            raise
        return info, True


def launch(inst: Install, pidfile: Path, logs: Path, deadline: float, settings: dict) -> int:
    """Start one node process of ``inst`` with ``settings`` (``-E``) on 127.0.0.1, as the
    unprivileged user, daemonised; returns its pid once it has written it."""
    dist = inst.dist
    pidfile.parent.mkdir(parents=True, exist_ok=True)
    pidfile.unlink(missing_ok=True)
    chown_tree(pidfile.parent)
    env = dict(os.environ, **{dist.java_env: str(inst.java.home),
                              dist.opts_env: f"-Xms{HEAP} -Xmx{HEAP}"})
    env.pop("JAVA_TOOL_OPTIONS", None)
    settings = {"network.host": "127.0.0.1",
                "cluster.routing.allocation.disk.threshold_enabled": "false",
                **dist.settings, **settings}
    cmd = _run_as() + [str(inst.home / "bin" / dist.launcher), "-d", "-p", str(pidfile)]
    for k, v in settings.items():
        cmd += ["-E", f"{k}={v}"]
    console = logs / "console.log"
    with open(console, "w") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                              cwd=str(inst.home), start_new_session=True)
    if proc.returncode != 0:
        raise ClusterError(f"{dist.label} failed to start: {_tail(console)}", f"see {logs}")
    pid = _read_pid(pidfile, str(inst.home), deadline)
    if pid is None:
        raise ClusterError(f"{dist.label} wrote no pid file in time", f"see {logs}")
    return pid


def _run_as() -> list[str]:
    """Command prefix that drops root privileges (OpenSearch refuses to run as root)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if not setpriv:
        raise ProvisionError("running as root and `setpriv` is missing: cannot start OpenSearch",
                             "run as an ordinary user")
    return [setpriv, f"--reuid={UNPRIVILEGED_USER}", "--regid=nogroup", "--clear-groups"]


def _read_pid(pidfile: Path, home: str, deadline: float) -> int | None:
    """The pid in ``pidfile`` once the node has written it whole. The file appears
    before its content does (seen: an empty read), so a read counts only when it names a
    live node process of ``home``; anything else waits."""
    while time.monotonic() < deadline:
        try:
            text = pidfile.read_text().strip()
        except OSError:
            text = ""
        if text.isdigit() and (pid_is_our_node(int(text), home)
                               or not Path(f"/proc/{text}").exists()):
            return int(text)   # alive and ours, or already gone (_wait_ready reports that)
        time.sleep(0.1)
    return None


def _wait_ready(info: NodeInfo, deadline: float, logs: Path, log=lambda msg: None) -> None:
    label = distribution(info.engine).label
    conn = Connection(url=info.url, timeout=10)
    last = None
    t0 = reported = time.monotonic()
    while time.monotonic() < deadline:
        if time.monotonic() - reported >= 5:
            reported = time.monotonic()
            log(f"  still starting ({reported - t0:.0f}s)")
        if not pid_is_our_node(info.pid, info.home):
            raise ClusterError(f"{label} exited during start-up: "
                               f"{_tail(logs / 'ltr-toolkit.log')}", f"see {logs}")
        try:
            # the query string carries `timeout`: opensearch-py takes a `timeout`
            # param as its own request timeout
            health = conn.client().transport.perform_request(
                "GET", "/_cluster/health?wait_for_status=yellow&timeout=5s")
            if health.get("status") in ("green", "yellow"):
                if info.plugin:
                    check_ltr(conn)
                    probe_store(conn)
                return
        except (TransportError, OSError, ClusterError) as exc:  # still coming up
            last = exc
        time.sleep(0.5)
    raise ClusterError(f"{label} at {info.url} was not healthy in time ({last})",
                       f"see {logs}")


def stop(engine: str | None = None, timeout: float = 60.0) -> NodeInfo | None:
    """Stop the node this tool started for ``engine`` (None: OpenSearch), by its recorded
    pid. Returns it, or None."""
    dist = distribution(engine)
    info = NodeInfo.load(dist)
    if not info:
        return None
    if pid_is_our_node(info.pid, info.home):
        os.kill(info.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while pid_is_our_node(info.pid, info.home) and time.monotonic() < deadline:
            time.sleep(0.2)
        if pid_is_our_node(info.pid, info.home):
            os.kill(info.pid, signal.SIGKILL)
            while pid_is_our_node(info.pid, info.home):
                time.sleep(0.1)
    else:
        info = None
    (state_dir() / dist.state_file("node.json")).unlink(missing_ok=True)
    return info
