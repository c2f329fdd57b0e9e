"""Connection settings shared by every command, and error translation.

URL: ``--url`` / ``LTR_URL``, else ``http://localhost:9200`` (the CLI fills in the local
node's URL when it runs: ``localnode.process.running_node()``). Basic auth comes only from the environment
(``LTR_USER``, ``LTR_PASSWORD``) so that no secret is ever on argv or in a log.
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
import threading
import time
import warnings
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit, urlunsplit

from ..errors import (ClusterError, MissingResourceError, PluginMissingError, StoreMissingError,
                      UserError)
from opensearchpy import exceptions as E
import ssl
from opensearchpy import OpenSearch

DEFAULT_URL = "http://localhost:9200"


class InsecureTLSWarning(UserWarning):
    """TLS certificates are not verified (``--insecure``); shown once per URL."""


_warned_insecure: set[str] = set()


def redact(url: str) -> str:
    """The URL without any user:password part, safe for messages and logs."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        parts = parts._replace(netloc=host)
    return urlunsplit(parts)


def check_url(url: str, what: str = "--url") -> str:
    """An http(s) URL with a host and a valid port, or a one-line user error."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UserError(f"{what} {redact(url)!r} is not a usable URL: {exc}",
                           "use http(s)://host:port") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"{what} {redact(url)!r} is not an http(s) URL",
                           "use http://host:9200 or https://host:9200")
    if port is not None and not 0 < port < 65536:
        raise UserError(f"{what} {redact(url)!r}: port {port} is out of range")
    return url


@dataclass
class Connection:
    url: str | None = None
    ca_certs: str | None = None
    insecure: bool = False
    timeout: float = 30.0
    _client: object = field(default=None, repr=False, compare=False)

    def resolved_url(self) -> str:
        if self.url:
            return check_url(self.url, "--url")
        if os.environ.get("LTR_URL"):
            return check_url(os.environ["LTR_URL"], "LTR_URL")
        return DEFAULT_URL

    @property
    def display_url(self) -> str:
        return redact(self.resolved_url())

    def client(self):
        if self._client is None:
            url = self.resolved_url()
            parts = urlsplit(url)
            kwargs = dict(hosts=[redact(url)], timeout=self.timeout, max_retries=0,
                          retry_on_timeout=False)
            # the URL's user and password are percent-encoded (RFC 3986: p%40ss is p@ss);
            # LTR_USER and LTR_PASSWORD are literal. Sent as UTF-8 (RFC 7617, what OpenSearch
            # decodes; the client's own http_auth encodes Latin-1 and fails beyond it)
            user = os.environ.get("LTR_USER") or unquote(parts.username or "")
            password = os.environ.get("LTR_PASSWORD") or unquote(parts.password or "")
            if user:
                token = base64.b64encode(f"{user}:{password}".encode("utf-8")).decode("ascii")
                kwargs["headers"] = {"authorization": f"Basic {token}"}
            if parts.scheme == "https":
                kwargs["use_ssl"] = True
                kwargs["verify_certs"] = not self.insecure
                if self.insecure:
                    # one warning per process and URL, not urllib3's one per request
                    kwargs["ssl_show_warn"] = False
                    warnings.filterwarnings("ignore", message="Unverified HTTPS request")
                    if redact(url) not in _warned_insecure:
                        _warned_insecure.add(redact(url))
                        warnings.warn(f"TLS certificates of {redact(url)} are not verified "
                                      "(--insecure): the connection and its credentials "
                                      "can be intercepted", InsecureTLSWarning)
                if self.ca_certs:
                    kwargs["ca_certs"] = self.ca_certs
            self._client = OpenSearch(**kwargs)
        return self._client


def translate(exc: Exception, conn: Connection, store: str | None = None) -> Exception:
    """Map an opensearch-py exception to a one-line user error naming the cause."""
    url = conn.display_url
    if isinstance(exc, E.ConnectionTimeout):
        return ClusterError(f"the cluster at {url} did not answer in {conn.timeout:.0f}s",
                            "is it overloaded? try again or raise the timeout")
    if isinstance(exc, E.SSLError):
        return _tls_error(exc, conn)
    if isinstance(exc, E.ConnectionError):
        return ClusterError(f"no cluster answers at {url}",
                            "start one with `ltr cluster start`, or set --url / LTR_URL")
    if isinstance(exc, E.AuthenticationException):
        user = os.environ.get("LTR_USER") or urlsplit(conn.resolved_url()).username
        if not user:
            return ClusterError(f"the cluster at {url} asks for credentials (HTTP 401)",
                                "set LTR_USER and LTR_PASSWORD in the environment")
        return ClusterError(f"the cluster at {url} refused the credentials of user {user} (HTTP 401)",
                            "check LTR_USER and LTR_PASSWORD in the environment")
    if (isinstance(exc, E.TransportError) and exc.status_code == 400
            and "plain HTTP request was sent to HTTPS port" in str(exc.info or exc.error)):
        https = urlunsplit(urlsplit(url)._replace(scheme="https"))
        return ClusterError(f"{url} is a TLS port: it refused the plain HTTP request (HTTP 400)",
                            f"use {https}, with --ca-certs FILE if its CA is private")
    if isinstance(exc, E.AuthorizationException):
        return ClusterError(f"the cluster at {url} denied the request (HTTP 403)",
                            "the user needs cluster:admin/ltr/* and index permissions")
    if isinstance(exc, E.TransportError):
        info = exc.info if isinstance(exc.info, dict) else {}
        return _classify(str(exc.info) if exc.info else str(exc.error), exc.status_code,
                         _reason(info.get("error", exc.error)), conn, store)
    return exc


def _tls_error(exc: Exception, conn: Connection) -> Exception:
    """The user error for a failed TLS connection: untrusted certificate, a server that does
    not speak TLS, or a CA bundle that cannot be loaded; the ssl module's reason on one line."""
    url, ca = conn.display_url, conn.ca_certs
    cause, todo, seen = None, [exc], set()
    while todo:                            # the ssl/OS error inside the client's wrappers
        e = todo.pop(0)
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, (ssl.SSLError, FileNotFoundError, PermissionError, IsADirectoryError)):
            cause = e
            break
        todo += [a for a in getattr(e, "args", ()) if isinstance(a, BaseException)]
        todo += [x for x in (getattr(e, "info", None), getattr(e, "reason", None),
                             e.__cause__, e.__context__) if isinstance(x, BaseException)]
    text = " ".join(str(getattr(cause, "verify_message", None) or
                        getattr(cause, "strerror", None) or cause or exc).split())
    text = re.sub(r"^\[[A-Z0-9_]+: [A-Z0-9_]+\] |\s*\(_ssl\.c:\d+\)", "", text)
    reason = getattr(cause, "reason", None) or ""
    if isinstance(cause, ssl.SSLCertVerificationError) or reason == "CERTIFICATE_VERIFY_FAILED":
        hint = (f"--ca-certs {ca} does not hold the CA that signed it" if ca else
                "pass --ca-certs FILE with the CA that signed it")
        return ClusterError(f"the TLS certificate of {url} is not trusted: {text}",
                            hint + ", or --insecure for a test cluster")
    bad_file = isinstance(cause, OSError) and not isinstance(cause, ssl.SSLError)
    if ca and (bad_file or reason in ("NO_CERTIFICATE_OR_CRL_FOUND", "PEM_LIB")
               or not os.path.isfile(ca)):
        return ClusterError(f"cannot load the CA bundle {ca}: {text}",
                            "--ca-certs needs a readable PEM file of CA certificates")
    if reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "RECORD_LAYER_FAILURE",
                  "PACKET_LENGTH_TOO_LONG", "UNKNOWN_PROTOCOL"):
        http = urlunsplit(urlsplit(url)._replace(scheme="http"))
        return ClusterError(f"{url} does not speak TLS ({text})", f"use {http}")
    return ClusterError(f"TLS failed talking to {url}: {text}",
                        "pass --ca-certs FILE, or --insecure for a self-signed test cluster")


def item_error(item: dict, conn: Connection, store: str | None = None) -> Exception:
    """The user error for one failed item of an ``_msearch`` response."""
    err = item.get("error")
    return _classify(str(err), item.get("status"), _reason(err), conn, store)


def _classify(text: str, status, reason: str, conn: Connection, store: str | None) -> Exception:
    url = conn.display_url
    if "no handler found for uri" in text and "_ltr" in text:
        return PluginMissingError(f"the LTR plugin is not installed on the cluster at {url}",
                                  "install opensearch-ltr, or use `ltr cluster start`")
    if "unknown query" in text and "sltr" in text:
        return PluginMissingError(f"the cluster at {url} does not know the sltr query: "
                                  "the LTR plugin is not installed",
                                  "install opensearch-ltr, or use `ltr cluster start`")
    m = re.search(r"no such index \[\.ltrstore_?([^\]]*)\]", text)
    if m or (status == 404 and ".ltrstore" in text):
        name = (m.group(1) if m else None) or store or "(default)"
        flag = f" --store {name}" if name != "(default)" else ""
        return StoreMissingError(f"feature store {name} does not exist on {url}",
                                 f"create it with `ltr store init{flag}`")
    where = f"store {store or '(default)'}"
    m = re.search(r"Unknown model \[([^\]]*)\]", text)
    if m:
        return MissingResourceError(f"model {m.group(1)} not found in {where} on {url}",
                            "`ltr model list` shows the stored models; `ltr model upload` adds one")
    m = re.search(r"(?:Unknown featureset|Stored feature set) \[([^\]]*)\]", text)
    if m:
        return MissingResourceError(f"feature set {m.group(1)} not found in {where} on {url}",
                            "upload it with `ltr featureset upload FILE`")
    if BREAKER in text:
        return ClusterError(f"the LTR plugin on {url} refuses to change {where} while a node's heap is "
                            f"over 85% used (its memory circuit breaker), still after {BREAKER_BUDGET:.0f}s "
                            "of retries", "give the node more heap or free some (unused indices, models), "
                            "or set the cluster setting ltr.breaker.enabled to false")
    if "not updatable" in text:
        return ClusterError(f"that model name already exists in {where}: models are "
                            "immutable in the plugin", "upload under a new name (or a new -vN)")
    return ClusterError(f"the cluster at {url} answered HTTP {status}: {reason}")


def _reason(err) -> str:
    """The root cause's reason, plus the innermost ``caused_by`` reason when it says more
    (``_createmodel`` puts "Feature [f] is unknown." there), on one line."""
    if isinstance(err, dict):
        root = (err.get("root_cause") or [{}])[0]
        reason = root.get("reason") or err.get("reason") or err.get("type") or str(err)
        inner, cause = err, None
        while isinstance(inner.get("caused_by"), dict):
            inner = inner["caused_by"]
            cause = inner.get("reason")
        if cause and cause not in reason:
            reason = f"{reason}: {cause}"
    else:
        reason = str(err)
    return " ".join(str(reason).split())


def call(conn: Connection, fn, *args, store: str | None = None, **kwargs):
    """Run ``fn(*args, **kwargs)`` and raise a user error instead of a client exception."""
    try:
        return fn(*args, **kwargs)
    except (E.TransportError, E.ConnectionError) as exc:
        raise translate(exc, conn, store) from None


#: what the LTR plugin answers (HTTP 500) to a store change while a node's heap is over
#: 85% used: usually garbage a collection frees within seconds, so it is asked again
BREAKER = "memory circuit is broken"
#: seconds of waiting between those retries, in all
BREAKER_BUDGET = 30.0


def _breaker_open(exc: Exception) -> bool:
    return isinstance(exc, E.TransportError) and BREAKER in str(exc.info or exc.error)


def request(conn: Connection, method: str, path: str, body=None, params=None,
            store: str | None = None):
    """One request, a user error instead of a client exception; asked again (backoff,
    :data:`BREAKER_BUDGET` seconds of waiting) while the LTR plugin's memory breaker is open."""
    c = conn.client()
    return _with_retries(conn, lambda: c.transport.perform_request(method, path, body=body, params=params),
                         base=0.5, budget=BREAKER_BUDGET, again=_breaker_open, store=store)


def cluster_info(conn: Connection) -> dict:
    return request(conn, "GET", "/")


def plugins(conn: Connection) -> list[dict]:
    return request(conn, "GET", "/_cat/plugins", params={"format": "json"})


def ltr_plugin_version(conn: Connection) -> str | None:
    for p in plugins(conn):
        comp = p.get("component", "")
        if "ltr" in comp or "learning-to-rank" in comp:
            return p.get("version")
    return None


def check_ltr(conn: Connection) -> str:
    """The LTR plugin's version, or a PluginMissingError."""
    v = ltr_plugin_version(conn)
    if v is None:
        raise PluginMissingError(
            f"the LTR plugin is not installed on the cluster at {conn.display_url}",
            "_cat/plugins does not list it; install opensearch-ltr or use `ltr cluster start`")
    return v


def probe_store(conn: Connection, name: str = "ltr_toolkit_probe") -> None:
    """Create and delete a throw-away feature store: proves the plugin really answers. A
    probe store left by a node stopped mid-probe is deleted first."""
    if request(conn, "GET", "/_ltr").get("stores", {}).get(name) is not None:
        request(conn, "DELETE", f"/_ltr/{name}")
    request(conn, "PUT", f"/_ltr/{name}")
    request(conn, "DELETE", f"/_ltr/{name}")


# --------------------------------------------------------------------------- load

#: Statuses worth asking again: the node is overloaded (429, its queue full) or a proxy /
#: the cluster is briefly unavailable (502, 503, 504). A 500 is the same answer next time
#: (a query the node cannot run): it is reported at once, never retried.
TRANSIENT = frozenset({429, 502, 503, 504})

#: Seconds one call may spend waiting between its retries, in all (the requests' own time
#: aside).
RETRY_BUDGET = 30.0


def _transient(status) -> bool:
    return status in TRANSIENT


def _backoff(attempt: int, base: float, waited: list) -> bool:
    """Sleep before retry ``attempt`` (exponential, with jitter); False, without
    sleeping, when the waiting so far (``waited[0]``, seconds) plus this pause would pass
    the budget ``waited[1]``."""
    pause = base * 2 ** attempt * (0.5 + random.random())
    if waited[0] + pause > waited[1]:
        return False
    time.sleep(pause)
    waited[0] += pause
    return True


def _overloaded(exc: Exception) -> bool:
    """A timeout or a :data:`TRANSIENT` status."""
    return isinstance(exc, E.ConnectionTimeout) or _transient(getattr(exc, "status_code", None))


def _with_retries(conn: Connection, fn, retries: int = 6, base: float = 0.25,
                  budget: float = RETRY_BUDGET, waited: list | None = None, again=_overloaded,
                  store: str | None = None):
    """``fn()`` retried while ``again(exception)`` (by default on timeouts and
    :data:`TRANSIENT` statuses) with exponential backoff and jitter, at most ``retries``
    times and ``budget`` seconds of waiting; then a user error (``store`` named in it).
    ``waited``: a caller's ``[seconds waited, budget]`` that these pauses are charged to
    (its budget then applies, shared with the caller's own pauses)."""
    waited = waited if waited is not None else [0.0, budget]
    for attempt in range(retries + 1):
        try:
            return fn()
        except (E.ConnectionTimeout, E.TransportError) as exc:
            if not (again(exc) and attempt < retries and _backoff(attempt, base, waited)):
                raise translate(exc, conn, store) from None


_STATS_LOCK = threading.Lock()


_LOST_NODE = re.compile(r"node not connected|node_disconnected|node_not_connected|"
                        r"nodedisconnected|nodenotconnected", re.I)


def _partial_as_error(item: dict) -> dict:
    """An answer some shards failed to give (e.g. a node died under it) is not a result:
    it becomes a 503 item, retried like an overloaded node's answer."""
    if "error" in item:          # a node lost mid-search: as transient as a partial answer
        lost = _LOST_NODE.search(json.dumps(item["error"]))
        return {"status": 503, "error": item["error"]} if lost else item
    shards = item.get("_shards") or {}
    if not shards.get("failed"):
        return item
    reasons = [_reason(f.get("reason")) for f in shards.get("failures", [])]
    return {"status": 503, "error": {"type": "partial_results", "reason":
            f"{shards['failed']} of {shards.get('total', '?')} shards failed ({', '.join(reasons[:3])})"}}


def msearch_items(conn: Connection, index: str, bodies: list[dict], retries: int = 8,
                  base: float = 0.25, stats: dict | None = None,
                  concurrency: int | None = None, budget: float = RETRY_BUDGET,
                  search_type: str | None = None) -> list[dict]:
    """``bodies`` through ``_msearch`` (one request), the items the node rejected with a
    :data:`TRANSIENT` status (its search queue full) sent again with exponential backoff
    and jitter, and with half the concurrency each time (``max_concurrent_searches``), for
    at most ``budget`` seconds of waiting: every item ends as a response or an error.
    ``stats["retried"]`` counts the retried items. ``concurrency``: the items the node
    runs at once (None: its default)."""
    c = conn.client()
    waited = [0.0, budget]
    out: list[dict | None] = [None] * len(bodies)
    pending = list(range(len(bodies)))
    head = {"index": index, **({"search_type": search_type} if search_type else {})}
    for attempt in range(retries + 1):
        lines = []
        for i in pending:
            lines += [head, bodies[i]]
        params = {"max_concurrent_searches": concurrency} if concurrency else None
        resp = _with_retries(conn, lambda: c.msearch(body=lines, params=params),
                             waited=waited)["responses"]
        resp = [_partial_as_error(item) for item in resp]
        again = [i for i, item in zip(pending, resp)
                 if "error" in item and _transient(item.get("status"))]
        for i, item in zip(pending, resp):
            out[i] = item                       # final unless sent again below
        if not again or attempt == retries or not _backoff(attempt, base, waited):
            break
        if stats is not None:
            with _STATS_LOCK:
                stats["retried"] = stats.get("retried", 0) + len(again)
        concurrency = max(1, (concurrency or len(pending)) // 2)
        pending = again
    return out  # type: ignore[return-value]
