"""Job files (TOML) for ``ltr job run``: read, validated with ``file:line``, and the
connection they describe. Credentials never appear in a job file: they come only from the
environment (``LTR_USER`` / ``LTR_PASSWORD``). The format is in :mod:`.jobs` and
``docs/scheduling.md``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..data.judgments import FORMATS as JUDGMENT_FORMATS
from ..errors import InputError
from ..io.text import read_text
from .candidates import JUDGED_OUTSIDE, UNJUDGED
from .client import Connection

#: A job's request timeout when neither its file nor ``ltr --timeout`` gives one, seconds.
DEFAULT_TIMEOUT = 60.0

KNOWN = {"cluster": {"url", "ca_certs", "insecure", "timeout"},
         "logging": {"featureset", "index", "judgments", "format", "queries", "store", "fields",
                     "first_stage", "candidates", "unjudged", "judged_outside", "batch",
                     "parallel"},
         "output": {"directory", "keep", "incremental"}}


@dataclass
class Job:
    path: Path
    url: str | None
    ca_certs: str | None
    insecure: bool
    timeout: float | None      # None: not in the file (``ltr --timeout``, else DEFAULT_TIMEOUT)
    featureset: str
    index: str
    judgments: Path
    fmt: str | None
    queries: Path | None
    store: str | None
    fields: list[str] | None
    first_stage: Path | None
    candidates: int | None
    unjudged: str
    judged_outside: str
    batch: int
    parallel: int
    directory: Path
    keep: int
    incremental: bool
    raw: dict = field(default_factory=dict, repr=False)


class _Checker:
    """Typed values of a parsed job file, each refused with ``file:line``."""

    def __init__(self, path: Path, text: str):
        self.path, self.lines = path, text.splitlines()
        self.base = path.resolve().parent

    def line_of(self, key: str) -> int | None:
        for i, ln in enumerate(self.lines, start=1):
            if ln.strip().startswith(key):
                return i
        return None

    def fail(self, key: str, message: str):
        raise InputError(self.path, self.line_of(key), message)

    def rel(self, v) -> Path | None:
        """A path of the file, relative to the file's folder."""
        return None if v in (None, "") else (self.base / str(v)).resolve()

    def positive(self, section, key, value, minimum=1) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            self.fail(key, f"[{section}] {key} = {value!r}: expected a whole number >= {minimum}")
        return value

    def flag(self, section, key, value) -> bool:
        # a quoted "false" would be truthy: TLS checks silently off
        if not isinstance(value, bool):
            self.fail(key, f"[{section}] {key} = {value!r}: expected true or false "
                      "(TOML booleans, without quotes)")
        return value

    def seconds(self, section, key, value) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            self.fail(key, f"[{section}] {key} = {value!r}: expected a number of seconds > 0 "
                      "(no unit, no quotes)")
        return float(value)

    def one_of(self, section, key, value, allowed):
        if value not in allowed:
            self.fail(key, f"[{section}] {key} = {value!r}: expected one of "
                      + ", ".join(repr(a) for a in allowed))
        return value


def _parse(path: Path) -> tuple[dict, str]:
    try:
        import tomllib
    except ModuleNotFoundError:          # Python 3.10
        import tomli as tomllib
    text = read_text(path)
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        line = getattr(exc, "lineno", None) or (int(m.group(1)) if m else None)
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise InputError(path, line, f"invalid TOML: {msg}") from None


def _check_layout(raw: dict, c: _Checker) -> None:
    """Known sections and keys, no credentials, the required keys."""
    for section, body in raw.items():
        if section not in KNOWN or not isinstance(body, dict):
            c.fail(f"[{section}", f"unknown section [{section}] "
                   f"(expected {', '.join(f'[{s}]' for s in KNOWN)})")
        for key in body:
            if key in ("password", "user"):
                c.fail(key, "credentials never go in a job file: set LTR_USER / LTR_PASSWORD "
                       "in the environment")
            if key not in KNOWN[section]:
                c.fail(key, f"unknown key {key!r} in [{section}]")
    cl, lg, out = raw.get("cluster", {}), raw.get("logging", {}), raw.get("output", {})
    if "url" in cl and ("@" in str(cl["url"]).split("//", 1)[-1].split("/", 1)[0]):
        c.fail("url", "the URL carries credentials: put them in LTR_USER / LTR_PASSWORD instead")
    for key in ("featureset", "index", "judgments"):
        if not lg.get(key):
            c.fail("[logging", f"[logging] needs {key} = ...")
    if "directory" not in out:
        c.fail("[output", "[output] needs directory = ...")
    fields = lg.get("fields")
    if fields is not None and (not isinstance(fields, list) or not all(isinstance(f, str) for f in fields)):
        c.fail("fields", "fields = [...] must be a list of field names")
    if fields and lg.get("first_stage"):
        c.fail("first_stage", "give fields or first_stage, not both")


def load_job(path) -> Job:
    """Read and validate a job file; every problem names ``file:line`` where it can."""
    path = Path(path)
    raw, text = _parse(path)
    c = _Checker(path, text)
    _check_layout(raw, c)
    cl, lg, out = raw.get("cluster", {}), raw.get("logging", {}), raw.get("output", {})
    return Job(
        path=path, url=cl.get("url"), ca_certs=str(c.rel(cl["ca_certs"])) if cl.get("ca_certs") else None,
        insecure=c.flag("cluster", "insecure", cl.get("insecure", False)),
        timeout=c.seconds("cluster", "timeout", cl["timeout"]) if "timeout" in cl else None,
        featureset=str(lg["featureset"]), index=str(lg["index"]), judgments=c.rel(lg["judgments"]),
        fmt=c.one_of("logging", "format", lg.get("format"), (None, *JUDGMENT_FORMATS)),
        queries=c.rel(lg.get("queries")), store=lg.get("store") or None,
        fields=lg.get("fields"), first_stage=c.rel(lg.get("first_stage")),
        candidates=c.positive("logging", "candidates", lg["candidates"]) if "candidates" in lg else None,
        unjudged=c.one_of("logging", "unjudged", lg.get("unjudged", "zero"), UNJUDGED),
        judged_outside=c.one_of("logging", "judged_outside", lg.get("judged_outside", "exclude"),
                                JUDGED_OUTSIDE),
        batch=c.positive("logging", "batch", lg.get("batch", 25)),
        parallel=c.positive("logging", "parallel", lg.get("parallel", 1)),
        directory=c.rel(out["directory"]), keep=c.positive("output", "keep", out.get("keep", 7)),
        incremental=c.flag("output", "incremental", out.get("incremental", False)), raw=raw)


def job_connection(job: Job, given: Connection, explicit_timeout: bool = False) -> Connection:
    """The job's connection: the file's settings over the command line's (``given``); the
    timeout from the file, else from ``ltr --timeout`` when given explicitly, else
    :data:`DEFAULT_TIMEOUT`. TLS verification is off only if either says so."""
    timeout = job.timeout
    if timeout is None:
        timeout = given.timeout if explicit_timeout else DEFAULT_TIMEOUT
    return Connection(url=job.url or given.url, ca_certs=job.ca_certs or given.ca_certs,
                      insecure=job.insecure or given.insecure, timeout=timeout)
