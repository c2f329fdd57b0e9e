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


#: sign-flip cells drawn at once: memory is bounded whatever the number of queries
BLOCK_CELLS = 1 << 19


def _flip_blocks(n: int, m: int, seed: int):
    """``n`` rows of ``m`` random signs, in blocks of at most :data:`BLOCK_CELLS` cells
    (the same stream as one ``(n, m)`` draw)."""
    rng = np.random.default_rng(seed)
    rows = max(1, BLOCK_CELLS // max(m, 1))
    for start in range(0, n, rows):
        yield rng.choice(np.array([-1.0, 1.0]), size=(min(rows, n - start), m))


def randomisation_test(a: np.ndarray, b: np.ndarray, n: int = 10000, seed: int = 0) -> float:
    """Two-sided paired randomisation test of mean(b - a) (sign flips), p-value. The flips
    are drawn in blocks (:data:`BLOCK_CELLS`): memory does not grow with n x queries.
    Kept over ``scipy.stats.permutation_test`` for its seeded stream, which every earlier
    report's p-values were computed with."""
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    if len(d) == 0 or np.all(d == 0):
        return 1.0
    obs = abs(d.mean())
    hits = sum(int(np.sum(np.abs((signs * d).mean(axis=1)) >= obs - 1e-15))
               for signs in _flip_blocks(n, len(d), seed))
    return float((hits + 1) / (n + 1))


def best_of_test(base: np.ndarray, candidates: np.ndarray, n: int = 10000, seed: int = 0
                 ) -> tuple[int, float]:
    """(the best candidate's row, its p-value corrected for having been picked as the best
    of all rows): a max-statistic sign-flip test (Westfall and Young). ``candidates``:
    (C, queries) per-query values of C systems on the queries of ``base``. Each draw flips
    the same queries' signs in every candidate's deltas (they are paired on the queries)
    and takes the largest mean over candidates; p is the share of draws at least as large
    as the best's observed mean delta (one-sided: better than the base)."""
    deltas = np.asarray(candidates, dtype=np.float64) - np.asarray(base, dtype=np.float64)
    means = deltas.mean(axis=1)
    best = int(np.argmax(means))
    if deltas.shape[1] == 0 or means[best] <= 0:
        return best, 1.0
    q = deltas.shape[1]
    hits = sum(int(np.sum((signs @ deltas.T / q).max(axis=1) >= means[best] - 1e-15))
               for signs in _flip_blocks(n, q, seed))
    return best, float((hits + 1) / (n + 1))


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
