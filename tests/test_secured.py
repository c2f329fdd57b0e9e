"""Secured clusters, live: nginx as a TLS-terminating reverse proxy with basic auth in
front of the session's local node (issue 14, deliverable 4).

The proxy uses a self-signed CA made here (``cryptography``, else the ``openssl`` CLI)
and an htpasswd file with a ``{PLAIN}`` password. nginx comes from Debian's package:
installed with apt-get when absent and we are root, else every test skips naming why.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from conftest import ROOT

pytestmark = [pytest.mark.cluster, pytest.mark.ltr]

USER = "ltr-tester"


# --------------------------------------------------------------------------- set-up helpers

def _nginx_binary() -> tuple[str | None, str]:
    """The nginx binary, installing Debian's package when absent (as root); or the reason."""
    found = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None)
    if found:
        return found, ""
    if os.geteuid() != 0:
        return None, "nginx is not installed and the tests do not run as root to apt-get it"
    if not shutil.which("apt-get"):
        return None, "nginx is not installed and there is no apt-get to install it"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    tried = []
    for update in (False, True):
        if update:
            subprocess.run(["apt-get", "update"], capture_output=True, text=True, env=env,
                           timeout=600)
        for pkg in ("nginx-light", "nginx"):
            r = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", pkg],
                               capture_output=True, text=True, env=env, timeout=900)
            if r.returncode == 0 and (shutil.which("nginx") or os.access("/usr/sbin/nginx", os.X_OK)):
                return shutil.which("nginx") or "/usr/sbin/nginx", ""
            tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["?"]
            tried.append(f"{pkg}: {tail[0]}")
    return None, "nginx could not be installed with apt-get (" + "; ".join(tried) + ")"


def _have_cryptography() -> bool:
    try:
        import cryptography.x509  # noqa: F401
        return True
    except ImportError:
        return False


def _make_ca_and_cert(d: Path, cn: str, server: bool) -> tuple[Path, Path | None, Path | None]:
    """A self-signed CA in ``d/ca.pem``; with ``server`` also a cert for 127.0.0.1
    (SubjectAltName IP:127.0.0.1) signed by it: ``d/server.pem``, ``d/server.key``."""
    d.mkdir(parents=True, exist_ok=True)
    if _have_cryptography():
        return _make_with_cryptography(d, cn, server)
    return _make_with_openssl(d, cn, server)


def _make_with_cryptography(d: Path, cn: str, server: bool):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5))
               .not_valid_after(now + dt.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                            key_encipherment=False, data_encipherment=False,
                                            key_agreement=False, key_cert_sign=True, crl_sign=True,
                                            encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                              critical=False)
               .sign(ca_key, hashes.SHA256()))
    ca_pem = d / "ca.pem"
    ca_pem.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    if not server:
        return ca_pem, None, None
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    crt, keyf = d / "server.pem", d / "server.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyf.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.TraditionalOpenSSL,
                                       serialization.NoEncryption()))
    return ca_pem, crt, keyf


def _make_with_openssl(d: Path, cn: str, server: bool):
    if not shutil.which("openssl"):
        pytest.skip("neither the cryptography package nor the openssl CLI is available to make a CA")

    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=d)
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", f"/CN={cn}",
        "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    if not server:
        return d / "ca.pem", None, None
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                               "extendedKeyUsage=serverAuth\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "1", "-extfile", "ext.cnf")
    return d / "ca.pem", d / "server.pem", d / "server.key"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


NGINX_CONF = """\
{user}
daemon off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log {prefix}/access.log;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        auth_basic "ltr-toolkit test";
        auth_basic_user_file {htpasswd};
        client_max_body_size 100m;
        location / {{
            proxy_pass http://{backend};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Authorization "";
            proxy_read_timeout 120s;
        }}
    }}
}}
"""


@dataclass
class Proxy:
    url: str            # https://127.0.0.1:PORT
    plain_url: str      # http://127.0.0.1:PORT (plain HTTP against the TLS port)
    backend: str        # the node's own URL (plain HTTP)
    ca: Path
    wrong_ca: Path
    user: str
    password: str
    prefix: Path

    def env(self, password: str | None = None) -> dict:
        return {"LTR_USER": self.user, "LTR_PASSWORD": password or self.password}


@pytest.fixture(scope="module")
def proxy(ltr_cluster, tmp_path_factory):
    nginx, why = _nginx_binary()
    if nginx is None:
        pytest.skip(why)
    prefix = tmp_path_factory.mktemp("nginx")
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (prefix / "tmp" / sub).mkdir(parents=True)
    ca, cert, key = _make_ca_and_cert(prefix / "pki", "ltr-toolkit test CA", server=True)
    wrong_ca, _, _ = _make_ca_and_cert(prefix / "other-pki", "ltr-toolkit test CA", server=False)
    password = "pw-" + secrets.token_urlsafe(18)
    htpasswd = prefix / "htpasswd"
    htpasswd.write_text(f"{USER}:{{PLAIN}}{password}\n")
    backend = urlsplit(ltr_cluster.url).netloc
    port = _free_port()
    conf = prefix / "nginx.conf"
    # as root the worker would switch to nobody and could not read the 0700 temp dir
    user = "user root root;" if os.geteuid() == 0 else ""
    conf.write_text(NGINX_CONF.format(user=user, prefix=prefix, port=port, cert=cert, key=key,
                                      htpasswd=htpasswd, backend=backend))
    test = subprocess.run([nginx, "-t", "-c", str(conf), "-p", str(prefix), "-e", str(prefix / "error.log")],
                          capture_output=True, text=True)
    if test.returncode != 0:
        pytest.fail(f"nginx rejects the test config: {test.stderr.strip()}")
    log = open(prefix / "nginx.out", "w")
    proc = subprocess.Popen([nginx, "-c", str(conf), "-p", str(prefix), "-e", str(prefix / "error.log")],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 20
    while True:
        if proc.poll() is not None:
            log.close()
            pytest.fail(f"nginx exited with {proc.returncode}: "
                        f"{(prefix / 'nginx.out').read_text()} {(prefix / 'error.log').read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                pytest.fail("nginx did not listen within 20s")
            time.sleep(0.1)
    try:
        yield Proxy(url=f"https://127.0.0.1:{port}", plain_url=f"http://127.0.0.1:{port}",
                    backend=ltr_cluster.url, ca=ca, wrong_ca=wrong_ca, user=USER,
                    password=password, prefix=prefix)
    finally:
        proc.terminate()            # SIGTERM: nginx's fast shutdown, master and worker
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log.close()


# --------------------------------------------------------------------------- running the CLI

@dataclass
class Watched:
    args: list
    returncode: int
    stdout: str
    stderr: str
    leaks: list          # (pid, cmdline) of processes whose argv held the password
    pids_seen: set       # the ltr process and every descendant seen while it ran


def _children(pid: int) -> set[int]:
    out = set()
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                kids = Path(f"/proc/{pid}/task/{tid}/children").read_text().split()
            except OSError:
                continue
            out.update(int(k) for k in kids)
    except OSError:
        pass
    return out


def run_watched(args, env, secrets_=(), timeout=600) -> Watched:
    """Run ``ltr ARGS`` as a user would, and while it runs scan /proc/*/cmdline every few
    ms for any secret: the ltr process, its descendants, and every other visible process."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("LTR_URL", "LTR_USER", "LTR_PASSWORD")}
    full_env.update(env)
    cmd = [sys.executable, "-m", "ltr_toolkit.cli", *args]
    needles = [s.encode() for s in secrets_ if s]
    assert not any(n in " ".join(cmd).encode() for n in needles)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=full_env, cwd=str(ROOT))
    leaks, seen, stop = [], {proc.pid}, threading.Event()

    def scan():
        while not stop.is_set():
            frontier = [proc.pid]
            while frontier:
                p = frontier.pop()
                for c in _children(p) - seen:
                    seen.add(c)
                    frontier.append(c)
            for p in os.listdir("/proc"):
                if not p.isdigit():
                    continue
                try:
                    argv = Path(f"/proc/{p}/cmdline").read_bytes()
                except OSError:
                    continue
                if any(n in argv for n in needles):
                    leaks.append((int(p), argv.replace(b"\0", b" ").decode(errors="replace")))
            stop.wait(0.005)

    t = threading.Thread(target=scan, daemon=True)
    t.start()
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        stop.set()
        t.join()
    return Watched(cmd, proc.returncode, stdout, stderr, leaks, seen)


def _ok(r: Watched) -> Watched:
    assert r.returncode == 0, f"{r.args[3:]} exited {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    return r


def _one_line_error(r: Watched, code: int = 2) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == code, f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    assert len(lines) == 1, f"expected one line on stderr, got:\n{r.stderr}"
    assert "Traceback" not in r.stderr + r.stdout
    assert lines[0].startswith("error: "), lines[0]
    return lines[0]


def _files_holding(roots, needle: bytes, skip=()) -> list[str]:
    hits = []
    for root in roots:
        root = Path(root)
        if not root.exists():
            continue
        for p in [root] if root.is_file() else root.rglob("*"):
            if p.is_file() and p not in skip:
                try:
                    if needle in p.read_bytes():
                        hits.append(str(p))
                except OSError:
                    pass
    return hits


# --------------------------------------------------------------------------- tiny collection

DOCS = [
    ("d1", "boundary layer flow", "the boundary layer over a flat plate in supersonic flow"),
    ("d2", "heat transfer in hypersonic flow", "heat transfer measurements at hypersonic speeds"),
    ("d3", "wing flutter", "flutter of swept wings at transonic speeds"),
    ("d4", "shock waves", "interaction of shock waves with a laminar boundary layer"),
    ("d5", "buckling of cylinders", "buckling of thin cylindrical shells under axial compression"),
    ("d6", "panel flutter", "panel flutter in supersonic flow over flat panels"),
    ("d7", "laminar flow", "transition of laminar flow to turbulence in a boundary layer"),
    ("d8", "thin shells", "stress in thin shells of revolution"),
]

QUERIES = {
    "1": ("boundary layer flow", {"d1": 2, "d4": 1, "d7": 1, "d6": 0, "d3": 0}),
    "2": ("flutter of wings", {"d3": 2, "d6": 1, "d1": 0, "d5": 0}),
    "3": ("heat transfer hypersonic", {"d2": 2, "d1": 0, "d4": 0}),
    "4": ("buckling of shells", {"d5": 2, "d8": 1, "d3": 0}),
    "5": ("supersonic flow", {"d1": 2, "d6": 1, "d2": 0, "d7": 0}),
}


def _featureset(name: str) -> dict:
    def match(field, op=None):
        q = {"query": "{{keywords}}", "operator": op} if op else "{{keywords}}"
        return {"name": f"{field}_{op or 'bm25'}", "params": ["keywords"],
                "template_language": "mustache", "template": {"match": {field: q}}}
    return {"featureset": {"name": name, "features": [match("title"), match("abstract"),
                                                      match("abstract", "and")]}}


def _judgments(path: Path) -> Path:
    lines = [f"# qid:{q}: {text}" for q, (text, _) in QUERIES.items()]
    for q, (_, grades) in QUERIES.items():
        lines += [f"{g} qid:{q} # {d}" for d, g in grades.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def tiny_index(proxy):
    """A tiny index (fields ``title`` and ``abstract``), created through the proxy."""
    from ltr_toolkit.transport.client import Connection
    from ltr_toolkit.indexing.documents import index_documents
    name = f"ltr-secured-{uuid.uuid4().hex[:10]}"
    old = {k: os.environ.get(k) for k in ("LTR_USER", "LTR_PASSWORD")}
    os.environ.update(proxy.env())
    conn = Connection(url=proxy.url, ca_certs=str(proxy.ca))
    try:
        res = index_documents(conn, name, [{"id": d, "title": t, "abstract": a} for d, t, a in DOCS])
        assert res["count"] == len(DOCS) and res["errors"] == 0, res
        yield name
        conn.client().indices.delete(index=name, ignore_unavailable=True)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# --------------------------------------------------------------------------- tests

def test_ca_certs_end_to_end(proxy, tiny_index, tmp_path):
    """status, store init, feature set upload, log, train, upload, evaluate: all through
    TLS (--ca-certs) and basic auth; the password is nowhere a process or a file shows."""
    from ltr_toolkit.localnode.state import state_dir
    tag = uuid.uuid4().hex[:10]
    store, fs_name, model = f"secured-{tag}", f"secured_fs_{tag}", f"secured_model_{tag}"
    conn_opts = ["--url", proxy.url, "--ca-certs", str(proxy.ca)]
    env, pw = proxy.env(), proxy.password
    errors_before = set(Path(tempfile.gettempdir()).glob("ltr-error-*.txt"))
    fs_file = tmp_path / "fs.json"
    fs_file.write_text(json.dumps(_featureset(fs_name), indent=2))
    judg = _judgments(tmp_path / "judgments.txt")
    logged, model_file, report = tmp_path / "train.txt", tmp_path / "model.json", tmp_path / "report.json"
    runs = []

    def ltr(*args):
        r = _ok(run_watched([*conn_opts, *args], env, secrets_=[pw]))
        runs.append(r)
        return r

    try:
        r = ltr("cluster", "status")
        assert proxy.url in r.stdout and "3.6.0" in r.stdout
        assert "not installed" not in r.stdout
        ltr("store", "init", "--store", store)
        r = ltr("featureset", "upload", str(fs_file), "--store", store)
        assert f"feature set {fs_name} (3 features): created" in r.stdout
        r = ltr("log", str(judg), "--featureset", fs_name, "--fields", "title,abstract", "--index", tiny_index,
                "-o", str(logged), "--store", store)
        rows = sum(len(g) for _, g in QUERIES.values())
        assert f"{rows} rows with 3 features" in r.stdout
        assert len([ln for ln in logged.read_text().splitlines() if ln and not ln.startswith("#")]) == rows
        r = ltr("train", str(logged), "--algo", "linear", "--epochs", "20", "-o", str(model_file))
        assert model_file.is_file()
        r = ltr("model", "upload", str(model_file), "--name", model, "--store", store, "--index", tiny_index)
        assert f"uploaded {model}-v1" in r.stdout
        r = ltr("evaluate", "models", str(judg), "--index", tiny_index, "--model", f"{model}-v1",
                "--store", store, "-o", str(report), "--cutoff", "5")
        rep = json.loads(report.read_text())
        assert rep["queries"] == len(QUERIES)
        assert list(rep["systems"]) == ["bm25", f"{model}-v1"], rep["systems"]
        for r in runs:
            assert "warning" not in r.stderr.lower(), r.stderr
    finally:
        run_watched([*conn_opts, "store", "drop", "--store", store, "--yes"], env)

    # the password: not in any process's argv while the toolkit ran ...
    for r in runs:
        assert not r.leaks, f"password on argv: {r.leaks}"
        assert pw not in r.stdout and pw not in r.stderr
    # ... nor in any file the runs wrote (sidecars, model, report, logs), nor in the node's
    # logs, nor in the proxy's logs (a password in a URL or a body would show there)
    new_errors = set(Path(tempfile.gettempdir()).glob("ltr-error-*.txt")) - errors_before
    assert not new_errors, f"unexpected-error traces written: {new_errors}"
    written = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    assert any(n.endswith(".json") and n != "fs.json" for n in written), written
    roots = [tmp_path, state_dir() / "logs", proxy.prefix / "access.log", proxy.prefix / "error.log"]
    assert _files_holding(roots, pw.encode()) == []
    # the check above is real: the htpasswd file does hold it
    assert _files_holding([proxy.prefix], pw.encode()) == [str(proxy.prefix / "htpasswd")]
    print(f"\nsecured end to end: {len(runs)} commands; {sum(len(r.pids_seen) for r in runs)} "
          f"toolkit processes watched; files searched: {written}")


@pytest.mark.parametrize("command", [["store", "list"], ["query", "search", "flow", "--fields", "title,abstract", "--index", "none-such"],
                                     ["cluster", "status"]],
                         ids=["store-list", "search", "cluster-status"])
@pytest.mark.parametrize("case", ["wrong-ca", "no-ca", "wrong-password", "no-credentials",
                                  "http-to-tls-port"])
def test_connection_failures_are_one_line(proxy, case, command):
    """One line naming the cause, exit 2 (`cluster status`: exit 1, its documented code
    when the cluster cannot be used), no traceback, no secret in the output."""
    wrong_pw = "wrong-" + secrets.token_urlsafe(12)
    opts, env = ["--url", proxy.url, "--ca-certs", str(proxy.ca)], proxy.env()
    if case == "wrong-ca":
        opts[-1] = str(proxy.wrong_ca)
        expect = ["TLS certificate", "not trusted", f"--ca-certs {proxy.wrong_ca} does not hold"]
    elif case == "no-ca":
        opts = opts[:2]
        expect = ["TLS certificate", "not trusted", "pass --ca-certs FILE"]
    elif case == "wrong-password":
        env = proxy.env(wrong_pw)
        expect = ["refused the credentials", "401", "LTR_USER", "LTR_PASSWORD"]
    elif case == "no-credentials":
        env = {}
        expect = ["asks for credentials", "401", "LTR_USER", "LTR_PASSWORD"]
    else:
        opts[1] = proxy.plain_url
        expect = ["is a TLS port", f"use {proxy.url}"]
    r = run_watched([*opts, *command], env, secrets_=[proxy.password, wrong_pw])
    line = _one_line_error(r, 1 if command[0] == "cluster" else 2)
    for word in expect:
        assert word in line, line
    for s in (proxy.password, wrong_pw):
        assert s not in r.stdout + r.stderr
    assert not r.leaks
    print(f"\n{case} / {command[0]}: {line}")


def test_https_against_plain_http_node_is_one_line(proxy):
    """The converse mistake: https:// to a node that speaks plain HTTP."""
    node = urlsplit(proxy.backend)
    r = run_watched(["--url", f"https://{node.netloc}", "store", "list"], {})
    line = _one_line_error(r)
    assert "does not speak TLS" in line and f"use {proxy.backend}" in line, line


@pytest.mark.parametrize("what", ["missing", "not-pem", "directory"])
def test_unusable_ca_file_is_one_line(proxy, tmp_path, what):
    ca = {"missing": tmp_path / "nope.pem", "not-pem": tmp_path / "junk.pem", "directory": tmp_path}[what]
    if what == "not-pem":
        ca.write_text("not a certificate\n")
    r = run_watched(["--url", proxy.url, "--ca-certs", str(ca), "store", "list"], proxy.env())
    line = _one_line_error(r)
    assert f"cannot load the CA bundle {ca}" in line, line


def test_insecure_warns_once_and_works(proxy, tiny_index, tmp_path):
    judg = _judgments(tmp_path / "judgments.txt")
    report = tmp_path / "report.json"
    # many requests: plugin check, several searches, _msearch rounds
    r = _ok(run_watched(["--url", proxy.url, "--insecure", "evaluate", "models", str(judg), "--index",
                         tiny_index, "--fields", "title,abstract", "-o", str(report)], proxy.env(), secrets_=[proxy.password]))
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("warning: ") and "--insecure" in lines[0] and "not verified" in lines[0], lines[0]
    assert json.loads(report.read_text())["queries"] == len(QUERIES)
    r = _ok(run_watched(["--url", proxy.url, "--insecure", "store", "list"], proxy.env(),
                        secrets_=[proxy.password]))
    assert len([ln for ln in r.stderr.splitlines() if ln.strip()]) == 1, r.stderr
    assert proxy.password not in r.stdout + r.stderr and not r.leaks
    print(f"\n--insecure: {lines[0]}")
