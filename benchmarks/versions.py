"""The version matrix (issue 50): ``python -m benchmarks.versions [ENGINE:VERSION ...]``.

For each supported version (``ltr_toolkit.versions.SUPPORTED``; all of them without
arguments) a local node is provisioned and started by ``ltr cluster start --version V``
in a state directory of its own (``/var/tmp/ltr-versions/ENGINE-V``: the default nodes
are left alone), with the plugin zip built for V from ``$LTR_HOME/plugins``; then, with
the suite's own live checks pointed at it (``LTR_TEST_URL`` / ``LTR_TEST_ES_URL``):

* parity: ``tests/test_parity.py`` (all five model types served against ``ltr predict``,
  with missing features; the shipped set with the semantic feature where the node has
  vectors, the lexical set everywhere; the plugin's missing-value and linear rules);
* logging: ``tests/test_named_logging.py`` (named-query logging = plugin logging);
* the demo: ``ltr demo``'s recommendation and its p, and its time.

Results: ``benchmarks/results/versions.md`` and ``versions.png``. The opt-in test
``pytest -m versions`` runs the same checks (``tests/test_versions_live.py``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from ltr_toolkit import versions
from ltr_toolkit.localnode.distributions import distribution
from ltr_toolkit.localnode.plugins import supplied_plugin_zip

from ._report import finish, pyplot, write_table

ROOT = Path(__file__).resolve().parent.parent
HOMES = Path("/var/tmp/ltr-versions")
CHECKS = {"parity": "tests/test_parity.py", "logging": "tests/test_named_logging.py"}


def _cli(*args, env, timeout=1800) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ltr_toolkit.cli", *args], capture_output=True,
                          text=True, env=env, timeout=timeout, cwd=str(ROOT))


def node_env(engine: str, version: str) -> dict:
    """The environment of the version's own node: its state directory and plugin zip."""
    dist = distribution(engine, version)
    zip_path = supplied_plugin_zip(dist)          # from the usual $LTR_HOME/plugins
    home = HOMES / dist.home_name
    home.mkdir(parents=True, exist_ok=True)
    os.chmod(HOMES, 0o755)
    os.chmod(home, 0o755)
    env = dict(os.environ, LTR_HOME=str(home))
    if zip_path is not None:
        env[dist.zip_env] = str(zip_path)
    return env


def start(engine: str, version: str, env: dict) -> str:
    """The node's URL (started, or running already), or raises with the CLI's line."""
    r = _cli("--engine", engine, "cluster", "start", "--version", version, env=env)
    found = re.findall(r"https?://127\.0\.0\.1:\d+", r.stdout)
    if r.returncode != 0 or not found:
        raise RuntimeError((r.stderr.strip().splitlines() or ["?"])[-1])
    return found[-1]


#: what tests/test_parity.py prints per model type
PARITY_LINE = re.compile(r"^([\w-]+): (\d+) served scores vs ltr predict, max relative difference (\S+)")


def run_checks(engine: str, url: str, vectors: bool = True, timeout: float = 1800) -> dict:
    """{check: {"passed", "failed", "skipped", "seconds", "failures", "max_rel"}} of the
    suite's own live checks on ``url`` (this engine's tests only; without ``vectors`` the
    shipped set's semantic feature is left out: the lexical set). ``max_rel``: per model
    type, the largest relative difference between served and ``ltr predict`` scores."""
    env = dict(os.environ, **{"LTR_TEST_URL" if engine == "opensearch" else "LTR_TEST_ES_URL": url})
    select = f"{engine} and not concurrent" + ("" if vectors else " and not shipped")
    out = {}
    for check, path in CHECKS.items():
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                            path, "-k", select, "-rfs"],
                           capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=timeout)
        tail = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
        counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|error)", tail)}
        worst: dict = {}
        for m in (PARITY_LINE.match(ln.lstrip(".EFsx ").strip()) for ln in r.stdout.splitlines()):
            if m:
                worst[m.group(1)] = max(worst.get(m.group(1), 0.0), float(m.group(3)))
        out[check] = {"passed": counts.get("passed", 0),
                      "failed": counts.get("failed", 0) + counts.get("error", 0),
                      "skipped": counts.get("skipped", 0),
                      "seconds": round(time.monotonic() - t0, 1), "max_rel": worst,
                      "failures": re.findall(r"(?:FAILED|ERROR) tests/\S+", r.stdout)}
    return out


def run_demo(engine: str, url: str, env: dict) -> dict:
    """The demo's recommendation on this node, its p-value and its time."""
    t0 = time.monotonic()
    work = HOMES / f"demo-{engine}-{url.rsplit(':', 1)[1]}"
    r = _cli("--url", url, "demo", "--json", "--workdir", str(work), env=env)
    seconds = round(time.monotonic() - t0, 1)
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1], "seconds": seconds}
    rep = json.loads(r.stdout)
    rec = rep.get("recommendation") or {}
    chosen = rec.get("deploy")
    test = (rep.get("tests") or {}).get(chosen) if chosen else None
    return {"recommended": chosen or "first stage", "p": None if test is None else test["p_value"],
            "ndcg": {s: v.get(f"ndcg@{rep['k']}") for s, v in rep["systems"].items()},
            "seconds": seconds}


def check_version(engine: str, version: str, demo: bool = True) -> dict:
    env = node_env(engine, version)
    row = {"engine": engine, "version": version}
    t0 = time.monotonic()
    try:
        url = start(engine, version, env)
    except RuntimeError as exc:
        return dict(row, error=str(exc))
    row["start_seconds"] = round(time.monotonic() - t0, 1)
    try:
        dist = distribution(engine, version)
        row["vectors"] = engine == "elasticsearch" or bool(dist.extra_plugins)
        row["checks"] = run_checks(engine, url, row["vectors"])
        if demo:
            row["demo"] = run_demo(engine, url, env)
    finally:
        _cli("--engine", engine, "cluster", "stop", env=env)
    return row


def main(argv: list[str]) -> None:
    todo = [tuple(a.split(":", 1)) for a in argv] or \
        [(e, v) for e, vs in versions.SUPPORTED.items() for v in vs]
    results = []
    for engine, version in todo:
        print(f"== {engine} {version}", flush=True)
        results.append(check_version(engine, version))
        print(json.dumps(results[-1])[:600], flush=True)
    write(results)


def _cell(c: dict | None) -> str:
    if not c:
        return "-"
    s = f"{c['passed']} passed"
    if c["failed"]:
        s += f", **{c['failed']} failed**"
    if c["skipped"]:
        s += f", {c['skipped']} skipped"
    return s


def write(results: list[dict]) -> None:
    rows, notes = [], []
    for r in results:
        d, ch = r.get("demo") or {}, r.get("checks") or {}
        worst = (ch.get("parity") or {}).get("max_rel") or {}
        rows.append([f"{r['engine']} {r['version']}", r.get("error", "ok")[:80],
                     _cell(ch.get("parity")),
                     ", ".join(f"{a} {v:.1g}" for a, v in sorted(worst.items())) or "-",
                     "shipped + lexical" if r.get("vectors") else "lexical (no vectors)",
                     _cell(ch.get("logging")),
                     d.get("recommended", d.get("error", "-")),
                     "-" if d.get("p") is None else f"{d['p']:.4f}", d.get("seconds", "-")])
        for c in ch.values():
            notes += [f"{r['engine']} {r['version']}: {f}" for f in c["failures"]]
    notes += ["parity: tests/test_parity.py on the version's node (five model types vs ltr predict, "
              "with missing features; shipped set with the semantic feature where the node has vectors, "
              "the lexical set; the plugin's missing-value rule); logging: tests/test_named_logging.py",
              "each version's node: `ltr cluster start --version V` in its own state directory, "
              "512 MiB heap, the plugin zip built for V; 2 cores shared with the client"]
    write_table("versions", ["version", "node", "parity", "max relative diff, served vs ltr predict",
                             "feature sets", "logging", "demo recommends", "p", "demo s"], rows, notes)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4))
    labels = [f"{r['engine'][:2].upper()} {r['version']}" for r in results]
    demo_s = [(r.get("demo") or {}).get("seconds") or 0 for r in results]
    ax.bar(labels, demo_s)
    for i, r in enumerate(results):
        bad = sum(c["failed"] for c in (r.get("checks") or {}).values())
        ax.text(i, demo_s[i], "ok" if not bad and "error" not in r else "FAIL", ha="center", va="bottom")
    ax.set_ylabel("ltr demo, seconds")
    ax.set_title("versions: demo time; ok = every live check passed")
    finish(fig, "versions")


if __name__ == "__main__":
    main(sys.argv[1:])
