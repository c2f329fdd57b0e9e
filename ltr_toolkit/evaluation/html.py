"""An evaluation report people can look at: one self-contained HTML file (no network
request: styles, script and data inline) with the metrics and their 95% confidence
intervals as the evaluation report holds them (``evaluation.report.compare``), the per-query
deltas sorted from the largest win to the largest loss, and for each query the first
stage's and a reranker's top 10 side by side, with grades and, for the reranker, each
document's per-feature contributions (``models.shapley``). A search box finds a query by
id or text. Lists are drawn only for the query opened, so a report
of thousands of queries opens at once.

Every text in the data (query ids and texts, document ids and titles, model and feature
names: from the user's files, index and logs) is shown as text: the page's program builds
its DOM with text nodes and attribute values, never HTML; the embedded JSON carries no
``<``, ``>``, ``&`` or line separator (escaped as ``\\u003c`` ...), so no text can end or
alter its script element; and the page's Content-Security-Policy runs its own program
only (by hash) and loads nothing.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

from ..data.judgments import JudgmentList
from ..io.atomic import atomic_write


def report_data(report: dict, jl: JudgmentList, titles: dict[str, str] | None = None) -> dict:
    """What the page shows, from an evaluation report (``ltr evaluate``, the demo) that
    carries ``per_query`` and ``top`` (and ``explanations`` when the rerankers were
    explained)."""
    base, k = report["baseline"], report["k"]
    metric = next(iter(report["tests"].values()))["metric"] if report["tests"] else f"ndcg@{k}"
    qids = list(report["per_query"][base])
    vals = {s: [report["per_query"][s][q][metric] for q in qids] for s in report["per_query"]}
    by_q = jl.by_query()
    top = report.get("top", {})
    ex = report.get("explanations", {})
    return {
        "metric": metric, "baseline": base, "systems": _systems(report, metric),
        "recommendation": (report.get("recommendation") or {}).get("reason", ""),
        "recommended": (report.get("recommendation") or {}).get("deploy"),
        "evaluation": report.get("evaluation", "live"),
        "queries": [{"qid": q, "text": jl.queries.get(q, ""),
                     "values": {s: round(float(vals[s][i]), 4) for s in vals}} for i, q in enumerate(qids)],
        "grades": {q: {d: g for d, g in by_q.get(q, [])} for q in qids},
        "top": top, "titles": titles or {},
        "features": ex.get("features", []), "baselines": ex.get("baselines", {}),
        "contributions": {s: {q: {d: [round(c, 5) for c in row] for d, row in docs.items()}
                              for q, docs in per_q.items()}
                          for s, per_q in ex.get("systems", {}).items()},
    }


def _systems(report: dict, metric: str) -> list[dict]:
    """The table's rows: each system's mean and interval, and each reranker's test against
    the baseline, as the report holds them (``evaluation.report.compare``: the page shows
    the report's numbers, it computes none)."""
    base, tests, cis = report["baseline"], report["tests"], report.get("mean_ci") or {}
    rows = []
    for s in report["per_query"]:
        row = {"name": s, "mean": report["systems"][s][metric], "ci": cis.get(s)}
        if s != base:
            t = tests[s]
            row.update(delta=t["mean_delta"], delta_ci=t.get("ci"), p=t["p_value"],
                       p_corrected=t.get("p_corrected"), wtl=[t["wins"], t["ties"], t["losses"]])
        rows.append(row)
    return rows


#: JSON escapes for what could end or alter a script element (``</script``, ``<!--``) or
#: be read as markup or a line break by anything that reads the page
_SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                              "\u2028": "\\u2028", "\u2029": "\\u2029"})


def script_json(data) -> str:
    """``data`` as JSON that is safe inside a ``<script>`` element, whatever its texts."""
    return json.dumps(data, separators=(",", ":")).translate(_SCRIPT_SAFE)


def render(data: dict) -> str:
    """The page (inline CSS, script and data)."""
    return _PAGE.replace("/*DATA*/", script_json(data), 1)


def write_html(path, report: dict, jl: JudgmentList, titles: dict[str, str] | None = None) -> Path:
    path = Path(path)
    with atomic_write(path, "w") as fh:
        fh.write(render(report_data(report, jl, titles)))
    return path


def _page() -> str:
    """The template with its Content-Security-Policy's hash of its program (the last
    script element: the only one that runs)."""
    page = (Path(__file__).parent / "report.html").read_text(encoding="utf-8")
    program = page.rsplit("<script>", 1)[1].split("</script>", 1)[0]
    digest = base64.b64encode(hashlib.sha256(program.encode("utf-8")).digest()).decode("ascii")
    return page.replace("/*PROGRAM*/", "sha256-" + digest, 1)


_PAGE = _page()


#: the monitor's page runs no program: its CSP allows inline styles and data: images only
_MONITOR_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_FLAG_COLOURS = {"ok": "#2e7d32", "drift": "#ef6c00", "degraded": "#c62828", "broken": "#6a1b9a"}


def monitor_page(report: dict, png: bytes | None = None) -> str:
    """``ltr monitor``'s verdict as a page a person opens: the verdict, the summary lines,
    a table of every feature's figures (flagged first) and the picture of the flagged
    features' distributions across snapshots (``png``, inline). Every text (feature
    names, paths: the user's) is escaped; the page has no script."""
    from html import escape
    feats = sorted(report["drift"]["features"], key=lambda f: f["flag"] == "ok")
    rows = "".join(
        f"<tr><td>{escape(f['feature'])}</td><td style=\"color:{_FLAG_COLOURS.get(f['flag'], '#000')}\">"
        f"{escape(f['flag'])}</td><td>{f['psi']:.3g}</td><td>{f['ks']:.3g}</td>"
        f"<td>{f['missing'][0]:.0%} &rarr; {f['missing'][1]:.0%}</td><td>{escape(f['why'] or '')}</td></tr>"
        for f in feats)
    verdict = report["verdict"]
    picture = ("" if not png else '<h2>Flagged features across snapshots</h2><img alt="distributions" '
               f'src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">')
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_MONITOR_CSP}">'
        f"<title>ltr monitor: {escape(verdict)}</title><style>body{{font:14px sans-serif;margin:2em}}"
        "td,th{padding:2px 10px;text-align:left}pre{background:#f5f5f5;padding:1em;white-space:pre-wrap}"
        "img{max-width:100%}</style></head><body>"
        f'<h1 style="color:{_FLAG_COLOURS.get(verdict, "#000")}">{escape(verdict)} '
        f"(exit {int(report['exit_code'])})</h1><pre>{escape(chr(10).join(report['summary']))}</pre>"
        "<h2>Features</h2><table><tr><th>feature</th><th>flag</th><th>PSI</th><th>KS</th>"
        f"<th>missing</th><th>why</th></tr>{rows}</table>{picture}</body></html>")


def write_monitor_html(path, report: dict, png: bytes | None = None) -> Path:
    path = Path(path)
    with atomic_write(path, "w") as fh:
        fh.write(monitor_page(report, png))
    return path
