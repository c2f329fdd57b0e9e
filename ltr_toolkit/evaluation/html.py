"""An evaluation report people can look at: one self-contained HTML file (no network
request: styles, script and data inline) with the metrics and their 95% confidence
intervals (``rank.stats.compare``, which computes the report's tests), the per-query
deltas sorted from the largest win to the largest loss, and for each query the first
stage's and a reranker's top 10 side by side, with grades and, for the reranker, each
document's per-feature contributions (``models.shapley``). A search box finds a query by
id or text. Lists are drawn only for the query opened, so a report
of thousands of queries opens at once.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..data.judgments import JudgmentList
from ..io.atomic import atomic_write
from ..rank.stats import compare


def report_data(report: dict, jl: JudgmentList, titles: dict[str, str] | None = None) -> dict:
    """What the page shows, from an evaluation report (``ltr evaluate``, the demo) that
    carries ``per_query`` and ``top`` (and ``explanations`` when the rerankers were
    explained)."""
    base, k = report["baseline"], report["k"]
    metric = next(iter(report["tests"].values()))["metric"] if report["tests"] else f"ndcg@{k}"
    qids = list(report["per_query"][base])
    vals = {s: np.array([report["per_query"][s][q][metric] for q in qids]) for s in report["per_query"]}
    found = compare(vals, base)              # the report's tests, with their intervals
    systems = []
    for s, v in vals.items():
        row = {"name": s, "mean": float(v.mean()), "ci": found.mean_ci[s]}
        if s != base:
            t = found.tests[s]
            row.update(delta=t.mean_delta, delta_ci=t.ci, p=t.p_value, p_corrected=t.p_corrected,
                       wtl=[t.wins, t.ties, t.losses])
        systems.append(row)
    by_q = jl.by_query()
    top = report.get("top", {})
    ex = report.get("explanations", {})
    return {
        "metric": metric, "baseline": base, "systems": systems,
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


def render(data: dict) -> str:
    """The page (inline CSS, script and data)."""
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return _PAGE.replace("/*DATA*/", payload)


def write_html(path, report: dict, jl: JudgmentList, titles: dict[str, str] | None = None) -> Path:
    path = Path(path)
    with atomic_write(path, "w") as fh:
        fh.write(render(report_data(report, jl, titles)))
    return path


_PAGE = (Path(__file__).parent / "report.html").read_text(encoding="utf-8")
