"""A local node with the LTR plugin (OpenSearch, or Elasticsearch), provisioned from
Maven Central; what differs between the two engines is data in :mod:`.distributions`.

The node lives in a per-user state directory outside any repository:

* ``$LTR_HOME`` when set;
* else ``/var/lib/ltr-toolkit`` when running as root (neither engine runs as root, so
  the node runs as the unprivileged user ``nobody`` and its files must be reachable by
  it);
* else ``$XDG_STATE_HOME/ltr-toolkit`` (default ``~/.local/state/ltr-toolkit``).

Artifacts come through ``mvn dependency:get`` into the Maven repository
(``$LTR_MAVEN_REPO`` or ``~/.m2/repository``), so a second provisioning reuses them.
The LTR plugin zip, first found of:

1. ``$LTR_PLUGIN_ZIP`` (OpenSearch) / ``$LTR_ES_PLUGIN_ZIP`` (Elasticsearch);
2. ``$LTR_HOME/plugins/*.zip``: drop the plugin zips there once and every ``ltr cluster
   start`` and the test suite use them (each zip's ``plugin-descriptor.properties`` says
   which engine and version it is built for);
3. OpenSearch only: Maven Central (``org.opensearch:ltr:<version>:zip``), when it has it.

OpenSearch's k-NN plugin (``org.opensearch.plugin:opensearch-knn``, the semantic
features' vector fields and scoring script) comes from Maven Central next to it. Its zip
carries no native libraries, so only the ``lucene`` engine works (``faiss`` fields kill
the node): the toolkit's mappings use it. Elasticsearch needs no plugin for vectors.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .. import versions
from ..errors import ClusterError, ProvisionError
from ..io.atomic import write_json
import threading
from opensearchpy.exceptions import TransportError
from .client import Connection, check_ltr, probe_store
from .distributions import (ELASTICSEARCH_DIST, OPENSEARCH_DIST, Distribution, distribution,
                            zip_engine, zip_version)

HEAP = "512m"
UNPRIVILEGED_USER = "nobody"


# --------------------------------------------------------------------------- paths

def state_dir() -> Path:
    env = os.environ.get("LTR_HOME")
    if env:
        return Path(env).expanduser()
    if os.geteuid() == 0:
        return Path("/var/lib/ltr-toolkit")
    xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(xdg) / "ltr-toolkit"


def maven_repo() -> Path:
    return Path(os.environ.get("LTR_MAVEN_REPO") or Path.home() / ".m2" / "repository")


def artifact_path(coords: tuple[str, str, str, str]) -> Path:
    group, artifact, version, ext = coords
    return maven_repo().joinpath(*group.split("."), artifact, version, f"{artifact}-{version}.{ext}")


def coords_str(coords) -> str:
    return ":".join(coords)


# --------------------------------------------------------------------------- maven

def resolve_artifact(coords: tuple[str, str, str, str], log=lambda msg: None) -> tuple[Path, bool]:
    """Return (path, downloaded): the artifact in the local Maven repo, fetched if absent
    (``log`` hears the bytes downloaded so far, every few seconds)."""
    path = artifact_path(coords)
    if path.is_file() and path.stat().st_size > 0:
        return path, False
    mvn = shutil.which("mvn")
    if not mvn:
        raise ProvisionError(
            f"cannot fetch {coords_str(coords)}: no `mvn` on PATH",
            "install Maven (apt-get install maven) or point --url at an existing cluster")
    group, artifact, version, ext = coords
    cmd = [mvn, "-q", "-B", "-U", f"-Dmaven.repo.local={maven_repo()}",
           "dependency:get", f"-Dartifact={group}:{artifact}:{version}:{ext}",
           "-Dtransitive=false"]
    log(f"downloading {coords_str(coords)} through Maven")
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        output = _wait_reporting(proc, path.parent, log)
    if proc.returncode != 0 or not path.is_file():
        msg = _mvn_reason(output)
        raise ProvisionError(
            f"Maven could not resolve {coords_str(coords)}: {msg}")
    return path, True


def _wait_reporting(proc: subprocess.Popen, folder: Path, log, every: float = 3.0) -> str:
    """Wait for ``proc``, reporting the bytes under ``folder`` (where Maven writes the
    download) every ``every`` seconds; returns its output."""
    chunks: list[str] = []
    reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read()), daemon=True)
    reader.start()
    t0 = time.monotonic()
    while proc.poll() is None:
        time.sleep(0.2)
        if time.monotonic() - t0 >= every:
            t0 = time.monotonic()
            size = sum(f.stat().st_size for f in folder.glob("*") if f.is_file()) if folder.is_dir() else 0
            log(f"  {size / 1e6:.0f} MB downloaded")
    reader.join(timeout=5)
    return "".join(chunks)


def _mvn_reason(output: str) -> str:
    for line in output.splitlines():
        line = re.sub(r"\x1b\[[0-9;]*m", "", line)
        m = re.search(r"(Could not (find|transfer|resolve) .*|\S+ was not found in \S+)", line)
        if m:
            return m.group(1).strip()
    tail = [re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in output.strip().splitlines()[-1:]]
    return tail[0] if tail else "mvn failed without a message"


# --------------------------------------------------------------------------- java

@dataclass
class Java:
    home: Path
    version: int
    source: str


def _java_version(home: Path) -> int | None:
    release = home / "release"
    if release.is_file():
        m = re.search(r'JAVA_VERSION="(\d+)', release.read_text(errors="replace"))
        if m:
            return int(m.group(1))
    java = home / "bin" / "java"
    if not java.is_file():
        return None
    try:
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "(\d+)', out.stderr + out.stdout)
    return int(m.group(1)) if m else None


def find_java(dist: Distribution = OPENSEARCH_DIST) -> Java:
    """A JDK ``dist`` runs on: its own variable (``OPENSEARCH_JAVA_HOME``,
    ``ES_JAVA_HOME``), ``$JAVA_HOME``, else the newest fitting one under /usr/lib/jvm."""
    lo, hi = dist.java
    fits = lambda v: v is not None and v >= lo and (hi is None or v <= hi)  # noqa: E731
    seen = []
    for var in (dist.java_env, "JAVA_HOME"):
        val = os.environ.get(var)
        if val:
            v = _java_version(Path(val))
            seen.append(f"{var}={val} (Java {v or '?'})")
            if fits(v):
                return Java(Path(val), v, var)
    candidates = []
    for base in (Path("/usr/lib/jvm"), Path("/usr/local/lib/jvm"), Path("/opt/java")):
        if base.is_dir():
            for home in sorted(base.iterdir()):
                if home.is_symlink() or not (home / "bin" / "java").is_file():
                    continue
                v = _java_version(home)
                seen.append(f"{home} (Java {v or '?'})")
                if fits(v):
                    candidates.append((v, home))
    if candidates:
        v, home = max(candidates)
        return Java(home, v, "scan")
    want = f"Java {dist.java_range()}" if hi else f"Java >= {lo}"
    raise ProvisionError(
        f"no {want} found for {dist.label} {dist.version}; found: {', '.join(seen) or 'nothing'}",
        f"install a JDK ({want}) and set {dist.java_env}")


# --------------------------------------------------------------------------- install

@dataclass
class Install:
    home: Path
    java: Java
    plugin: bool
    downloaded: bool
    dist: Distribution = OPENSEARCH_DIST


def _run_as() -> list[str]:
    """Command prefix that drops root privileges (OpenSearch refuses to run as root)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if not setpriv:
        raise ProvisionError("running as root and `setpriv` is missing: cannot start OpenSearch",
                             "run as an ordinary user")
    return [setpriv, f"--reuid={UNPRIVILEGED_USER}", "--regid=nogroup", "--clear-groups"]


def _chown_tree(path: Path) -> None:
    if os.geteuid() != 0:
        return
    import pwd
    pw = pwd.getpwnam(UNPRIVILEGED_USER)
    for root, dirs, files in os.walk(path):
        os.chown(root, pw.pw_uid, pw.pw_gid)
        for name in files:
            os.lchown(os.path.join(root, name), pw.pw_uid, pw.pw_gid)


def _check_reachable(root: Path) -> None:
    """As root the node runs as `nobody`: every parent of the state dir must be traversable."""
    for parent in [root, *root.parents]:
        if not os.stat(parent).st_mode & 0o001:
            raise ProvisionError(
                f"the node runs as `{UNPRIVILEGED_USER}` (OpenSearch refuses root) but cannot "
                f"enter {parent}", "set LTR_HOME to a directory under /var/lib or /var/tmp")


def plugin_installed(home: Path) -> bool:
    plugins = home / "plugins"
    return plugins.is_dir() and any("ltr" in p.name for p in plugins.iterdir())


def provision(require_plugin: bool = True, log=lambda msg: None, knn: bool = True,
              dist: Distribution = OPENSEARCH_DIST) -> Install:
    """Unpack the pinned distribution of ``dist``'s engine and install the LTR plugin and
    (``knn``) its extra plugins (OpenSearch's k-NN); reuse what is there. ``knn`` False
    removes an installed extra plugin (a node for the lexical features alone)."""
    java = find_java(dist)
    root = state_dir()
    root.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chmod(root, 0o755)
        _check_reachable(root)
    home = root / dist.home_name
    downloaded = False
    if not (home / ".ltr-toolkit-ready").is_file():
        downloaded = _unpack(dist, root, home, log)
    plugin = plugin_installed(home)
    if not plugin:
        try:
            zip_path = _plugin_zip(log, dist)
        except ProvisionError:
            if require_plugin:
                raise
            zip_path = None
        if zip_path is not None:
            log(f"installing LTR plugin from {zip_path}")
            _plugin_command(home, java, log, dist, "install", zip_path.resolve().as_uri(), "the LTR plugin")
            plugin = True
    for name, artifact in dist.extra_plugins:
        there = (home / "plugins" / name).is_dir()
        if plugin and knn and not there:
            zip_path, _ = resolve_artifact(artifact, log)
            log(f"installing {name} from {zip_path.name}")
            _plugin_command(home, java, log, dist, "install", zip_path.resolve().as_uri(), name)
        elif not knn and there:
            log(f"removing {name}")
            _plugin_command(home, java, log, dist, "remove", name, name)
    _chown_tree(home)
    return Install(home, java, plugin, downloaded, dist)


def _unpack(dist: Distribution, root: Path, home: Path, log) -> bool:
    """The distribution's zip (from Maven) unpacked as ``home``; whether it was downloaded."""
    zipped, downloaded = resolve_artifact(dist.artifact, log)
    log(f"unpacking {zipped.name}")
    tmp = root / f".unpack-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(zipped) as zf:
        zf.extractall(tmp)
    inner = next(tmp.iterdir())
    for script in (inner / "bin").iterdir():
        script.chmod(0o755)
    shutil.rmtree(home, ignore_errors=True)
    inner.rename(home)
    shutil.rmtree(tmp, ignore_errors=True)
    (home / ".ltr-toolkit-ready").write_text(dist.version + "\n")
    return downloaded


def knn_installed(home: Path) -> bool:
    return (home / "plugins" / "opensearch-knn").is_dir()


def _plugin_command(home: Path, java: "Java", log, dist: Distribution, action: str, what: str,
                    label: str) -> None:
    """``bin/<plugin cli> install|remove what`` of ``dist``, or a one-line error."""
    args = ["install", "--batch", what] if action == "install" else ["remove", what]
    env = dict(os.environ, **{dist.java_env: str(java.home)})
    proc = subprocess.run([str(home / "bin" / dist.plugin_cli), *args], capture_output=True,
                          text=True, env=env)
    if proc.returncode != 0:
        raise ProvisionError(f"{dist.plugin_cli} could not {action} {label}: "
                             + ((proc.stderr or proc.stdout).strip().splitlines() or ["?"])[-1])


def plugin_dir() -> Path:
    """The documented folder for a user-supplied plugin zip: ``$LTR_HOME/plugins``."""
    return state_dir() / "plugins"


def supplied_plugin_zip(dist: Distribution = OPENSEARCH_DIST) -> Path | None:
    """The user-supplied LTR plugin zip for ``dist``'s engine: its variable
    (``LTR_PLUGIN_ZIP``, ``LTR_ES_PLUGIN_ZIP``), else of the zips in :func:`plugin_dir`
    built for that engine (by their descriptor, else their name) the one built for the
    pinned version, else one naming the pinned plugin version, else any; or None."""
    override = os.environ.get(dist.zip_env)
    if override:
        p = Path(override).expanduser()
        if not p.is_file():
            raise ProvisionError(f"{dist.zip_env}={override}: no such file",
                                 "point it at the plugin zip, or unset it")
        return p
    folder = plugin_dir()
    if not folder.is_dir():
        return None
    zips = sorted(p for p in folder.glob("*.zip") if p.is_file() and zip_engine(p) == dist.engine)
    built = [p for p in zips if zip_version(p, dist) == dist.version]
    pinned = [p for p in zips if dist.plugin_version in p.name]
    chosen = built or pinned or zips
    return chosen[-1] if chosen else None


def _plugin_zip(log=lambda msg: None, dist: Distribution = OPENSEARCH_DIST) -> Path:
    supplied = supplied_plugin_zip(dist)
    if supplied is not None:
        return supplied
    fix = (f"put the plugin zip ({dist.zip_name}, built for {dist.label} {dist.version}) in "
           f"{plugin_dir()} or set {dist.zip_env}, or point --url/LTR_URL at a cluster "
           "that has the plugin")
    if dist.plugin_artifact is None:
        raise ProvisionError(f"no LTR plugin zip for {dist.label} {dist.version} "
                             "(the plugin is on no registry)", fix)
    try:
        return resolve_artifact(dist.plugin_artifact, log)[0]
    except ProvisionError as exc:
        raise ProvisionError(exc.message, fix) from None


# --------------------------------------------------------------------------- node

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


def _pid_is_our_node(pid: int, home: str) -> bool:
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
        if info and _pid_is_our_node(info.pid, info.home):
            return info
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _lock():
    root = state_dir()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _tail(path: Path, n: int = 5) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(lines[-n:])


def start(require_plugin: bool = True, timeout: float = 180.0, log=lambda msg: None,
          settings: dict | None = None, knn: bool = True,
          engine: str | None = None) -> tuple[NodeInfo, bool]:
    """Start the local node of ``engine`` (None: OpenSearch); returns (info, started). A
    running node is reported, not restarted. ``settings``: extra node settings (``-E
    key=value``), e.g. a small ``thread_pool.search.size`` to see how a client copes with
    rejections."""
    dist = distribution(engine)
    with _lock():
        info = running_node(dist.engine)
        if info:
            return info, False
        inst = provision(require_plugin=require_plugin, log=log, knn=knn, dist=dist)
        root = state_dir()
        data, logs = root / dist.state_file("data"), root / dist.state_file("logs")
        for d in (data, logs):
            d.mkdir(parents=True, exist_ok=True)
            _chown_tree(d)
        port, tport = _free_port(), _free_port()
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
    _chown_tree(pidfile.parent)
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


def _read_pid(pidfile: Path, home: str, deadline: float) -> int | None:
    """The pid in ``pidfile`` once the node has written it whole. The file appears
    before its content does (seen: an empty read), so a read counts only when it names a
    live node process of ``home``; anything else waits."""
    while time.monotonic() < deadline:
        try:
            text = pidfile.read_text().strip()
        except OSError:
            text = ""
        if text.isdigit() and (_pid_is_our_node(int(text), home)
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
        if not _pid_is_our_node(info.pid, info.home):
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
    if _pid_is_our_node(info.pid, info.home):
        os.kill(info.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _pid_is_our_node(info.pid, info.home) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _pid_is_our_node(info.pid, info.home):
            os.kill(info.pid, signal.SIGKILL)
            while _pid_is_our_node(info.pid, info.home):
                time.sleep(0.1)
    else:
        info = None
    (state_dir() / dist.state_file("node.json")).unlink(missing_ok=True)
    return info
