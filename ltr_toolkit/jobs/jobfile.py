"""Job files (TOML) for ``ltr job run``: read, validated with ``file:line``, and the
connection they describe. Credentials never appear in a job file: they come only from the
environment (``LTR_USER`` / ``LTR_PASSWORD``). The format is in :mod:`.runner` and
``docs/scheduling.md``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..data.judgments import FORMATS as JUDGMENT_FORMATS
from ..errors import InputError
from ..io.text import read_text
from ..features.candidates import JUDGED_OUTSIDE, UNJUDGED
from ..features.featurelog import VIAS
from ..transport.client import Connection
from ..query.firststage import STATISTICS
from ..clicks.judging.grades import MAPPINGS
from ..clicks.judging.clickmodels import MODELS

#: A job's request timeout when neither its file nor ``ltr --timeout`` gives one, seconds.
DEFAULT_TIMEOUT = 60.0

KNOWN = {"cluster": {"url", "ca_certs", "insecure", "timeout"},
         "logging": {"featureset", "index", "judgments", "format", "queries", "store", "fields",
                     "first_stage", "statistics", "candidates", "unjudged", "judged_outside", "batch",
                     "parallel", "via"},
         "output": {"directory", "keep", "incremental"},
         # a click job: judgments from the last N days of UBI events (ltr_toolkit.clicks)
         "clicks": {"days", "model", "prior", "min_impressions", "grades", "levels", "positions",
                    "max_rank", "queries_index", "events_index", "click_actions"},
         # after each publish: `ltr monitor` of the newest snapshot, its verdict in the manifest
         # (model: the stored model serving the artifact, checked live on live_queries)
         "monitor": {"artifact", "cutoff", "model", "live_queries"}}


@dataclass
class Job:
    path: Path
    url: str | None
    ca_certs: str | None
    insecure: bool
    timeout: float | None      # None: not in the file (``ltr --timeout``, else DEFAULT_TIMEOUT)
    featureset: str
    index: str
    judgments: Path | None         # None in a click job ([clicks])
    fmt: str | None
    queries: Path | None
    store: str | None
    fields: list[str] | None
    first_stage: Path | None
    statistics: str
    candidates: int | None
    unjudged: str
    judged_outside: str
    batch: int
    parallel: int
    directory: Path
    keep: int
    incremental: bool
    raw: dict = field(default_factory=dict, repr=False)
    clicks: dict | None = None     # [clicks]: judgments from UBI events instead of a file
    via: str = "plugin"            # how features are logged (features.featurelog.VIAS)
    monitor: dict | None = None    # [monitor]: {"artifact", "cutoff", "model", "live_queries"}


class _Checker:
    """Typed values of a parsed job file, each refused with ``file:line``."""

    def __init__(self, path: Path, text: str):
        self.path, self.lines = path, text.splitlines()
        self.base = path.resolve().parent

    def line_of(self, key: str, section: str | None = None) -> int | None:
        """The line of ``key = ...`` (in ``[section]`` when given: a key may be in two
        sections), or of a ``[section`` header when ``key`` starts with "["."""
        current = None
        for i, ln in enumerate(self.lines, start=1):
            text = ln.strip()
            if text.startswith("["):
                current = text.strip("[] ").split("]")[0].strip()
                if key.startswith("[") and text.startswith(key):
                    return i
                continue
            name = text.split("=", 1)[0].strip()
            if "=" in text and name == key and (section is None or current == section):
                return i
        return None if section is None else self.line_of(key)

    def fail(self, key: str, message: str, section: str | None = None):
        raise InputError(self.path, self.line_of(key, section), message)

    def rel(self, v) -> Path | None:
        """A path of the file, relative to the file's folder."""
        return None if v in (None, "") else (self.base / str(v)).resolve()

    def positive(self, section, key, value, minimum=1) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            self.fail(key, f"[{section}] {key} = {value!r}: expected a whole number >= {minimum}", section)
        return value

    def flag(self, section, key, value) -> bool:
        # a quoted "false" would be truthy: TLS checks silently off
        if not isinstance(value, bool):
            self.fail(key, f"[{section}] {key} = {value!r}: expected true or false "
                      "(TOML booleans, without quotes)", section)
        return value

    def seconds(self, section, key, value) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            self.fail(key, f"[{section}] {key} = {value!r}: expected a number of seconds > 0 "
                      "(no unit, no quotes)", section)
        return float(value)

    def one_of(self, section, key, value, allowed):
        # by type too: TOML's true is not 1, nor false 0 (`positions = true` is a mistake)
        if not any(value == a and type(value) is type(a) for a in allowed):
            self.fail(key, f"[{section}] {key} = {value!r}: expected one of "
                      + ", ".join(repr(a) for a in allowed), section)
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
                c.fail(key, f"unknown key {key!r} in [{section}]", section)
    cl, lg, out = raw.get("cluster", {}), raw.get("logging", {}), raw.get("output", {})
    if "url" in cl and ("@" in str(cl["url"]).split("//", 1)[-1].split("/", 1)[0]):
        c.fail("url", "the URL carries credentials: put them in LTR_USER / LTR_PASSWORD instead")
    if "clicks" in raw and lg.get("judgments"):
        c.fail("judgments", "a click job makes its judgments from [clicks]: drop judgments = ...")
    for key in ("featureset", "index") + (() if "clicks" in raw else ("judgments",)):
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
        featureset=str(lg["featureset"]), index=str(lg["index"]), judgments=c.rel(lg.get("judgments")),
        fmt=c.one_of("logging", "format", lg.get("format"), (None, *JUDGMENT_FORMATS)),
        queries=c.rel(lg.get("queries")), store=lg.get("store") or None,
        fields=lg.get("fields"), first_stage=c.rel(lg.get("first_stage")),
        statistics=c.one_of("logging", "statistics", lg.get("statistics", "dfs"), tuple(STATISTICS)),
        candidates=c.positive("logging", "candidates", lg["candidates"]) if "candidates" in lg else None,
        unjudged=c.one_of("logging", "unjudged", lg.get("unjudged", "zero"), UNJUDGED),
        judged_outside=c.one_of("logging", "judged_outside", lg.get("judged_outside", "exclude"),
                                JUDGED_OUTSIDE),
        batch=c.positive("logging", "batch", lg.get("batch", 25)),
        parallel=c.positive("logging", "parallel", lg.get("parallel", 1)),
        directory=c.rel(out["directory"]), keep=c.positive("output", "keep", out.get("keep", 7)),
        incremental=c.flag("output", "incremental", out.get("incremental", False)), raw=raw,
        clicks=_clicks(raw["clicks"], c) if "clicks" in raw else None,
        via=c.one_of("logging", "via", lg.get("via", "plugin"), VIAS),
        monitor=_monitor(raw["monitor"], c) if "monitor" in raw else None)


def _monitor(mon: dict, c: _Checker) -> dict:
    """The [monitor] section: the deployed model's artifact (optional), the cutoff, and the
    stored model serving the artifact (optional: served vs local scores, live)."""
    model = mon.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        c.fail("model", f"[monitor] model = {model!r}: expected the stored model's name (a string)", "monitor")
    if model is not None and mon.get("artifact") in (None, ""):
        c.fail("model", "[monitor] model needs artifact = the file it was uploaded from", "monitor")
    return {"artifact": c.rel(mon.get("artifact")),
            "cutoff": c.positive("monitor", "cutoff", mon.get("cutoff", 10)), "model": model,
            "live_queries": c.positive("monitor", "live_queries", mon.get("live_queries", 20))}


def _clicks(cl: dict, c: _Checker) -> dict:
    """The [clicks] section, checked: ``days`` (required) and the click model's settings."""
    if "days" not in cl:
        c.fail("[clicks", "[clicks] needs days = N (the last N days of events)")
    days = cl["days"]
    if isinstance(days, bool) or not isinstance(days, (int, float)) or not days > 0:
        c.fail("days", f"[clicks] days = {days!r}: expected a number of days > 0 (no quotes)")
    out = {"days": float(days),
           "model": c.one_of("clicks", "model", cl.get("model", "pbm"), MODELS + ("auto",)),
           "grades": c.one_of("clicks", "grades", cl.get("grades", "levels"), MAPPINGS),
           "positions": str(c.one_of("clicks", "positions", cl.get("positions", "auto"), ("auto", 0, 1)))}
    for key in ("min_impressions", "levels", "max_rank"):
        if key in cl:
            out[key] = c.positive("clicks", key, cl[key])
    if "prior" in cl:
        if isinstance(cl["prior"], bool) or not isinstance(cl["prior"], (int, float)) or cl["prior"] < 0:
            c.fail("prior", f"[clicks] prior = {cl['prior']!r}: expected a number >= 0")
        out["prior"] = float(cl["prior"])
    for key in ("queries_index", "events_index", "click_actions"):
        if key in cl:
            out[key] = str(cl[key])
    return out


def job_connection(job: Job, given: Connection, explicit_timeout: bool = False) -> Connection:
    """The job's connection: the file's settings over the command line's (``given``); the
    timeout from the file, else from ``ltr --timeout`` when given explicitly, else
    :data:`DEFAULT_TIMEOUT`. TLS verification is off only if either says so."""
    timeout = job.timeout
    if timeout is None:
        timeout = given.timeout if explicit_timeout else DEFAULT_TIMEOUT
    return Connection(url=job.url or given.url, ca_certs=job.ca_certs or given.ca_certs,
                      insecure=job.insecure or given.insecure, timeout=timeout)
