"""Evaluation maths, pure (no cluster): per-query metrics of ranked lists, the paired
randomisation test, and the report comparing systems.

Metrics follow trec_eval: a run's top ``k`` retrieved documents are scored; unjudged
documents have gain 0; the ideal ranking uses every judged document of the query,
retrieved or not. Paired tests per reranker vs the baseline: a two-sided randomisation
(sign-flip) test on the per-query deltas, seeded, and wins / ties / losses.
"""

from __future__ import annotations

import numpy as np

from ..data.judgments import JudgmentList
from ..rank import metrics as M



def run_metrics(ranked: list[list[str]], qids: list[str], jl: JudgmentList, k: int = 10,
                max_grade: float | None = None) -> dict[str, np.ndarray]:
    """Per-query metrics of ranked doc-id lists against the judgments."""
    by_q = jl.by_query()
    if max_grade is None:
        max_grade = max(jl.grades.values()) if jl.grades else 1.0
    scores, labels, offsets = [], [], [0]
    for qid, docs in zip(qids, ranked):
        judged = dict(by_q.get(qid, []))
        top = list(docs[:k])
        gains = [judged.get(d, 0.0) for d in top]
        # pad to k with zero-gain placeholders so that unretrieved judged documents,
        # appended for the ideal ranking, can never enter the scored top k
        gains += [0.0] * (k - len(top))
        retrieved = set(top)
        rest = [g for d, g in judged.items() if d not in retrieved]
        gains += rest
        n = len(gains)
        scores.extend(np.arange(n, 0, -1, dtype=np.float64))
        labels.extend(gains)
        offsets.append(offsets[-1] + n)
    s, y, off = np.asarray(scores), np.asarray(labels), np.asarray(offsets)
    # AP / RR over the retrieved top k; relevance = gain >= 1
    return {
        f"ndcg@{k}": M.ndcg(s, y, off, k),
        f"err@{k}": M.err(s, y, off, k, max_grade=max_grade),
        f"ap@{k}": M.average_precision(s, y, off, k=k),
        f"rr@{k}": M.reciprocal_rank(s, y, off, k=k),
    }


def randomisation_test(a: np.ndarray, b: np.ndarray, n: int = 10000, seed: int = 0) -> float:
    """Two-sided paired randomisation test of mean(b - a) (sign flips), p-value."""
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    if len(d) == 0 or np.all(d == 0):
        return 1.0
    obs = abs(d.mean())
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(n, len(d)))
    perm = np.abs((signs * d).mean(axis=1))
    return float((np.sum(perm >= obs - 1e-15) + 1) / (n + 1))


def compare(per_query: dict[str, dict[str, np.ndarray]], baseline: str, k: int,
            metric: str = "ndcg") -> dict:
    """The report: means per system (metrics named with their cut-off: ``ndcg@10``,
    ``ap@10`` — MAP over the top k — ...), and per reranker the paired test vs the
    baseline on ``metric@k``."""
    systems = {name: {m: float(np.mean(v)) for m, v in res.items()}
               for name, res in per_query.items()}
    tests = {}
    key = f"{metric}@{k}"
    base = per_query[baseline][key]
    for name, res in per_query.items():
        if name == baseline:
            continue
        d = res[key] - base
        tests[name] = {"metric": key, "p_value": randomisation_test(base, res[key]),
                       "wins": int(np.sum(d > 1e-12)), "ties": int(np.sum(np.abs(d) <= 1e-12)),
                       "losses": int(np.sum(d < -1e-12)), "mean_delta": float(d.mean())}
    return {"k": k, "queries": len(base), "baseline": baseline, "systems": systems, "tests": tests}


def per_query_json(per_query: dict[str, dict[str, np.ndarray]], qids: list[str]) -> dict:
    """{system: {qid: {metric: value}}} for reports."""
    return {name: {q: {m: float(v[i]) for m, v in res.items()} for i, q in enumerate(qids)}
            for name, res in per_query.items()}


#: Significance level of :func:`recommend`.
ALPHA = 0.05


def recommend(report: dict, alpha: float = ALPHA) -> dict:
    """What to deploy, from a :func:`compare` report: among the rerankers better than the
    baseline on the tested metric with p < ``alpha``, the one with the highest mean; none
    ("keep the first stage") when no reranker is. A reranker significantly worse than the
    baseline is named as such."""
    tests = report["tests"]
    better = [n for n, t in tests.items() if t["mean_delta"] > 0 and t["p_value"] < alpha]
    worse = sorted(n for n, t in tests.items() if t["mean_delta"] < 0 and t["p_value"] < alpha)
    if not better:
        return {"deploy": None, "worse": worse, "alpha": alpha,
                "reason": f"no reranker beats {report['baseline']} with p < {alpha}: keep the first stage"}
    best = max(better, key=lambda n: tests[n]["mean_delta"])
    t = tests[best]
    return {"deploy": best, "worse": worse, "alpha": alpha,
            "reason": f"{best}: {t['metric']} {t['mean_delta']:+.4f} vs {report['baseline']} "
                      f"(p {t['p_value']:.4f}, W/T/L {t['wins']}/{t['ties']}/{t['losses']})"}
