"""A local single-node OpenSearch with the LTR plugin, provisioned from Maven Central.

The node lives in a per-user state directory outside any repository:

* ``$LTR_HOME`` when set;
* else ``/var/lib/ltr-toolkit`` when running as root (OpenSearch refuses to run as
  root, so the node runs as the unprivileged user ``nobody`` and its files must be
  reachable by it);
* else ``$XDG_STATE_HOME/ltr-toolkit`` (default ``~/.local/state/ltr-toolkit``).

Artifacts come through ``mvn dependency:get`` into the Maven repository
(``$LTR_MAVEN_REPO`` or ``~/.m2/repository``), so a second provisioning reuses them.
The LTR plugin zip, first found of:

1. ``$LTR_PLUGIN_ZIP`` (a path to the zip);
2. ``$LTR_HOME/plugins/*.zip`` (the state directory's ``plugins`` folder): drop the
   plugin zip there once and every ``ltr cluster start`` and the test suite use it;
3. Maven Central (``org.opensearch:ltr:<version>:zip``), when it has it.

The k-NN plugin (``org.opensearch.plugin:opensearch-knn``, the semantic features' vector
fields and scoring script) comes from Maven Central next to it. Its zip carries no
native libraries, so only the ``lucene`` engine works (``faiss`` fields kill the node):
the toolkit's mappings use it.
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


def find_java() -> Java:
    """A JDK OpenSearch supports: $OPENSEARCH_JAVA_HOME, $JAVA_HOME, else /usr/lib/jvm/*."""
    seen = []
    for var in ("OPENSEARCH_JAVA_HOME", "JAVA_HOME"):
        val = os.environ.get(var)
        if val:
            v = _java_version(Path(val))
            seen.append(f"{var}={val} (Java {v or '?'})")
            if v and v >= versions.MIN_JAVA:
                return Java(Path(val), v, var)
    candidates = []
    for base in (Path("/usr/lib/jvm"), Path("/usr/local/lib/jvm"), Path("/opt/java")):
        if base.is_dir():
            for home in sorted(base.iterdir()):
                if home.is_symlink() or not (home / "bin" / "java").is_file():
                    continue
                v = _java_version(home)
                seen.append(f"{home} (Java {v or '?'})")
                if v and v >= versions.MIN_JAVA:
                    candidates.append((v, home))
    if candidates:
        v, home = max(candidates)
        return Java(home, v, "scan")
    raise ProvisionError(
        f"no Java >= {versions.MIN_JAVA} found for OpenSearch {versions.OPENSEARCH_VERSION}; "
        f"found: {', '.join(seen) or 'nothing'}",
        f"install a JDK >= {versions.MIN_JAVA} and set JAVA_HOME")


# --------------------------------------------------------------------------- install

@dataclass
class Install:
    home: Path
    java: Java
    plugin: bool
    downloaded: bool


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


def provision(require_plugin: bool = True, log=lambda msg: None, knn: bool = True) -> Install:
    """Unpack the pinned OpenSearch and install the LTR plugin and (``knn``) the k-NN
    plugin; reuse what is there. ``knn`` False removes an installed k-NN plugin (a node
    for the lexical features alone)."""
    java = find_java()
    root = state_dir()
    root.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chmod(root, 0o755)
        _check_reachable(root)
    home = root / f"opensearch-{versions.OPENSEARCH_VERSION}"
    downloaded = False
    if not (home / ".ltr-toolkit-ready").is_file():
        dist, downloaded = resolve_artifact(versions.OPENSEARCH_ARTIFACT, log)
        log(f"unpacking {dist.name}")
        tmp = root / f".unpack-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        with zipfile.ZipFile(dist) as zf:
            zf.extractall(tmp)
        inner = next(tmp.iterdir())
        for script in (inner / "bin").iterdir():
            script.chmod(0o755)
        shutil.rmtree(home, ignore_errors=True)
        inner.rename(home)
        shutil.rmtree(tmp, ignore_errors=True)
        (home / ".ltr-toolkit-ready").write_text(versions.OPENSEARCH_VERSION + "\n")
    plugin = plugin_installed(home)
    if not plugin:
        try:
            zip_path = _plugin_zip(log)
        except ProvisionError:
            if require_plugin:
                raise
            zip_path = None
        if zip_path is not None:
            log(f"installing LTR plugin from {zip_path}")
            env = dict(os.environ, OPENSEARCH_JAVA_HOME=str(java.home))
            proc = subprocess.run(
                [str(home / "bin" / "opensearch-plugin"), "install", "--batch",
                 zip_path.resolve().as_uri()], capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                raise ProvisionError("opensearch-plugin could not install the LTR plugin: "
                                     + (proc.stderr or proc.stdout).strip().splitlines()[-1])
            plugin = True
    if plugin and knn and not knn_installed(home):
        _plugin_command(home, java, log, "install", versions.KNN_PLUGIN_ARTIFACT)
    elif not knn and knn_installed(home):
        _plugin_command(home, java, log, "remove")
    _chown_tree(home)
    return Install(home, java, plugin, downloaded)


def knn_installed(home: Path) -> bool:
    return (home / "plugins" / "opensearch-knn").is_dir()


def _plugin_command(home: Path, java: "Java", log, action: str, artifact=None) -> None:
    """Install the k-NN plugin from Maven Central (cached in the Maven repository), or
    remove it."""
    if action == "install":
        zip_path, _ = resolve_artifact(artifact, log)
        log(f"installing the k-NN plugin from {zip_path.name}")
        args = ["install", "--batch", zip_path.resolve().as_uri()]
    else:
        log("removing the k-NN plugin")
        args = ["remove", "opensearch-knn"]
    env = dict(os.environ, OPENSEARCH_JAVA_HOME=str(java.home))
    proc = subprocess.run([str(home / "bin" / "opensearch-plugin"), *args], capture_output=True,
                          text=True, env=env)
    if proc.returncode != 0:
        raise ProvisionError(f"opensearch-plugin could not {action} the k-NN plugin: "
                             + (proc.stderr or proc.stdout).strip().splitlines()[-1])


def plugin_dir() -> Path:
    """The documented folder for a user-supplied plugin zip: ``$LTR_HOME/plugins``."""
    return state_dir() / "plugins"


def supplied_plugin_zip() -> Path | None:
    """The user-supplied plugin zip (``LTR_PLUGIN_ZIP``, else the one zip in
    :func:`plugin_dir` whose name mentions ltr and the pinned version, else any ltr zip
    there), or None."""
    override = os.environ.get("LTR_PLUGIN_ZIP")
    if override:
        p = Path(override).expanduser()
        if not p.is_file():
            raise ProvisionError(f"LTR_PLUGIN_ZIP={override}: no such file",
                                 "point it at the plugin zip, or unset it")
        return p
    folder = plugin_dir()
    if not folder.is_dir():
        return None
    zips = sorted(p for p in folder.glob("*.zip") if "ltr" in p.name.lower() and p.is_file())
    pinned = [p for p in zips if versions.LTR_PLUGIN_VERSION in p.name]
    chosen = pinned or zips
    return chosen[-1] if chosen else None


def _plugin_zip(log=lambda msg: None) -> Path:
    supplied = supplied_plugin_zip()
    if supplied is not None:
        return supplied
    try:
        return resolve_artifact(versions.LTR_PLUGIN_ARTIFACT, log)[0]
    except ProvisionError as exc:
        raise ProvisionError(
            exc.message,
            f"put the plugin zip (opensearch-ltr-{versions.LTR_PLUGIN_VERSION}.zip) in "
            f"{plugin_dir()} or set LTR_PLUGIN_ZIP, or point --url/LTR_URL at a cluster "
            "that has the plugin") from None


# --------------------------------------------------------------------------- node

@dataclass
class NodeInfo:
    pid: int
    url: str
    port: int
    home: str
    version: str
    plugin: bool

    @classmethod
    def load(cls) -> "NodeInfo | None":
        path = state_dir() / "node.json"
        try:
            data = json.loads(path.read_text())
            return cls(**data)
        except (OSError, ValueError, TypeError):
            return None


def _pid_is_our_node(pid: int, home: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    text = b" ".join(cmdline).decode(errors="replace")
    return "org.opensearch.bootstrap.OpenSearch" in text and home in text


def running_node() -> NodeInfo | None:
    """The node this tool started, if its process is still alive."""
    info = NodeInfo.load()
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
          settings: dict | None = None, knn: bool = True) -> tuple[NodeInfo, bool]:
    """Start the local node; returns (info, started). A running node is reported, not
    restarted. ``settings``: extra node settings (``-E key=value``), e.g. a small
    ``thread_pool.search.size`` to see how a client copes with rejections."""
    with _lock():
        info = running_node()
        if info:
            return info, False
        inst = provision(require_plugin=require_plugin, log=log, knn=knn)
        root = state_dir()
        data, logs = root / "data", root / "logs"
        for d in (data, logs):
            d.mkdir(parents=True, exist_ok=True)
            _chown_tree(d)
        port, tport = _free_port(), _free_port()
        deadline = time.monotonic() + timeout
        pid = launch(inst, root / "run" / "opensearch.pid", logs, deadline, {
            "discovery.type": "single-node",
            "http.port": str(port),
            "transport.port": str(tport),
            "path.data": str(data),
            "path.logs": str(logs),
            "cluster.name": "ltr-toolkit",
            "node.name": "ltr-toolkit-local",
            **{k: str(v) for k, v in (settings or {}).items()},
        })
        url = f"http://127.0.0.1:{port}"
        info = NodeInfo(pid=pid, url=url, port=port, home=str(inst.home),
                        version=versions.OPENSEARCH_VERSION, plugin=inst.plugin)
        write_json(root / "node.json", info.__dict__)
        log(f"OpenSearch started (pid {pid}); waiting until it is healthy")
        try:
            _wait_ready(info, deadline, logs, log)
        except BaseException:
            stop()
            raise
        return info, True


def launch(inst: Install, pidfile: Path, logs: Path, deadline: float, settings: dict) -> int:
    """Start one OpenSearch process of ``inst`` with ``settings`` (``-E``) on 127.0.0.1,
    as the unprivileged user, daemonised; returns its pid once it has written it."""
    pidfile.parent.mkdir(parents=True, exist_ok=True)
    pidfile.unlink(missing_ok=True)
    _chown_tree(pidfile.parent)
    env = dict(os.environ, OPENSEARCH_JAVA_HOME=str(inst.java.home),
               OPENSEARCH_JAVA_OPTS=f"-Xms{HEAP} -Xmx{HEAP}")
    env.pop("JAVA_TOOL_OPTIONS", None)
    settings = {"network.host": "127.0.0.1",
                "cluster.routing.allocation.disk.threshold_enabled": "false", **settings}
    cmd = _run_as() + [str(inst.home / "bin" / "opensearch"), "-d", "-p", str(pidfile)]
    for k, v in settings.items():
        cmd += ["-E", f"{k}={v}"]
    console = logs / "console.log"
    with open(console, "w") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                              cwd=str(inst.home), start_new_session=True)
    if proc.returncode != 0:
        raise ClusterError(f"OpenSearch failed to start: {_tail(console)}", f"see {logs}")
    pid = _read_pid(pidfile, str(inst.home), deadline)
    if pid is None:
        raise ClusterError("OpenSearch wrote no pid file in time", f"see {logs}")
    return pid


def _read_pid(pidfile: Path, home: str, deadline: float) -> int | None:
    """The pid in ``pidfile`` once OpenSearch has written it whole. The file appears
    before its content does (seen: an empty read), so a read counts only when it names a
    live OpenSearch process of ``home``; anything else waits."""
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
    conn = Connection(url=info.url, timeout=10)
    last = None
    t0 = reported = time.monotonic()
    while time.monotonic() < deadline:
        if time.monotonic() - reported >= 5:
            reported = time.monotonic()
            log(f"  still starting ({reported - t0:.0f}s)")
        if not _pid_is_our_node(info.pid, info.home):
            raise ClusterError(f"OpenSearch exited during start-up: "
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
    raise ClusterError(f"OpenSearch at {info.url} was not healthy in time ({last})",
                       f"see {logs}")


def stop(timeout: float = 60.0) -> NodeInfo | None:
    """Stop the node this tool started, by its recorded pid. Returns it, or None."""
    info = NodeInfo.load()
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
    (state_dir() / "node.json").unlink(missing_ok=True)
    return info
