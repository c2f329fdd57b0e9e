"""Evaluation maths, pure (no cluster): per-query metrics of ranked lists, the report
comparing systems, and the recommendation.

Metrics follow trec_eval: a run's top ``k`` retrieved documents are scored; unjudged
documents have gain 0; the ideal ranking uses every judged document of the query,
retrieved or not. The statistics (paired randomisation tests corrected for the number of
rerankers, intervals, wins / ties / losses) are :func:`ltr_toolkit.rank.stats.compare`'s.
"""

from __future__ import annotations

import numpy as np

from ..data.judgments import JudgmentList
from ..rank import metrics as M
from ..rank import stats



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


def compare(per_query: dict[str, dict[str, np.ndarray]], baseline: str, k: int,
            metric: str = "ndcg", **options) -> dict:
    """The report: means per system (metrics named with their cut-off: ``ndcg@10``,
    ``ap@10`` — MAP over the top k — ...), and on ``metric@k`` per reranker the paired
    test vs the baseline (``p_value``; ``p_corrected``: corrected for the other rerankers,
    max-T; ``ci``: of the mean delta) and per pair of rerankers the same (``pairs``), all
    by :func:`ltr_toolkit.rank.stats.compare` with its defaults (``options`` to it)."""
    systems = {name: {m: float(np.mean(v)) for m, v in res.items()}
               for name, res in per_query.items()}
    key = f"{metric}@{k}"
    found = stats.compare({name: res[key] for name, res in per_query.items()}, baseline,
                          pairwise=True, **options)
    tests = {name: {"metric": key, **t.to_dict()} for name, t in found.tests.items()}
    pairs = [{"metric": key, **row} for row in found.to_dict()["pairs"]]
    return {"k": k, "queries": found.units, "baseline": baseline, "systems": systems,
            "tests": tests, "pairs": pairs, "mean_ci": found.to_dict()["mean_ci"],
            "statistics": _statistics(found)}


def _statistics(found: stats.Comparison) -> dict:
    """How the report's p-values and intervals were computed."""
    return {"test": "paired randomisation (sign flips)", "alternative": found.alternative,
            "draws": found.draws, "seed": found.seed,
            "correction": f"{found.correction} over the {len(found.tests)} rerankers vs the baseline, "
                          f"and over the {len(found.pairs)} pairs of rerankers"
            if len(found.tests) > 1 else "none (one reranker)",
            "intervals": None if found.confidence_level is None else
            f"percentile bootstrap of the queries, {found.confidence_level:.0%}"}


def per_query_json(per_query: dict[str, dict[str, np.ndarray]], qids: list[str]) -> dict:
    """{system: {qid: {metric: value}}} for reports."""
    return {name: {q: {m: float(v[i]) for m, v in res.items()} for i, q in enumerate(qids)}
            for name, res in per_query.items()}


#: Significance level of :func:`recommend` (the toolkit's one level)
ALPHA = stats.ALPHA


def pipeline_test(baseline: np.ndarray, pipeline: np.ndarray, n_resamples: int = stats.N_RESAMPLES,
                  seed: int = 0) -> dict:
    """The one test of a cross-validation's pipeline (:data:`~ltr_toolkit.pipeline.
    tuning.PIPELINE`: in each outer fold the algorithm, settings and blend, or the
    first stage, chosen on the training folds) against the first stage, on the pooled
    outer per-query values: a one-sided paired randomisation test (is it better? the
    only answer that deploys anything), uncorrected (the choice among algorithms is part
    of the procedure tested, made without the queries it is tested on)."""
    found = stats.compare({0: baseline, 1: pipeline}, 0, alternative="greater",
                          n_resamples=n_resamples, confidence_level=None, seed=seed)
    t = found.tests[1]
    return {"mean_delta": t.mean_delta, "p_value": t.p_value, "alternative": "greater",
            "wins": t.wins, "ties": t.ties, "losses": t.losses, "draws": found.draws}


def recommend(report: dict, alpha: float = ALPHA) -> dict:
    """What to deploy, from a :func:`compare` report. With a ``pipeline`` entry (a
    cross-validation's: :func:`pipeline_test` under ``"test"``, the system's name under
    ``"name"``): the pipeline, when its one-sided p < ``alpha`` and its pooled gain is
    positive (:func:`_recommend_pipeline`). Otherwise: among the rerankers better than the
    baseline on the tested metric with a corrected p < ``alpha`` (max-T over all the
    rerankers compared: the best of several is not deployed because one of them was
    lucky), the one with the highest mean; none ("keep the first stage") when no reranker
    is. A reranker significantly worse than the baseline is named as such. A report
    written before the correction (no ``p_corrected``) is read by its plain p-values."""
    tests = report["tests"]
    if report.get("pipeline"):
        return _recommend_pipeline(report, alpha)
    p = {n: t.get("p_corrected", t["p_value"]) for n, t in tests.items()}
    better = [n for n, t in tests.items() if t["mean_delta"] > 0 and p[n] < alpha]
    worse = sorted(n for n, t in tests.items() if t["mean_delta"] < 0 and p[n] < alpha)
    side = "one-sided" if report.get("statistics", {}).get("alternative") in ("greater", "less") \
        else "two-sided"
    many = f", corrected for {len(tests)} rerankers (max-T)" if len(tests) > 1 else ", uncorrected"
    if not better:
        return {"deploy": None, "worse": worse, "alpha": alpha,
                "reason": f"no reranker beats {report['baseline']} with {side} p < {alpha}{many}: "
                          "keep the first stage"}
    best = max(better, key=lambda n: tests[n]["mean_delta"])
    t = tests[best]
    return {"deploy": best, "worse": worse, "alpha": alpha,
            "reason": f"{best}: {t['metric']} {t['mean_delta']:+.4f} vs {report['baseline']} "
                      f"({side} p {p[best]:.4f}{many}, W/T/L {t['wins']}/{t['ties']}/{t['losses']})"}


def _recommend_pipeline(report: dict, alpha: float) -> dict:
    """The pipeline deployed (trained on all queries as in each fold) or the first stage
    kept, by its one test; rerankers significantly worse (two-sided, corrected: the
    table's tests) named as such."""
    pipe, tests = report["pipeline"], report["tests"]
    name, t = pipe["name"], pipe["test"]
    worse = sorted(n for n, r in tests.items() if n != name and r["mean_delta"] < 0
                   and r.get("p_corrected", r["p_value"]) < alpha)
    how = (f"{t.get('metric', 'the metric')} {t['mean_delta']:+.4f} vs {report['baseline']}, one-sided p "
           f"{t['p_value']:.4f} uncorrected (the test that decides; the table's p are two-sided), "
           f"W/T/L {t['wins']}/{t['ties']}/{t['losses']}; the choice of algorithm, settings and "
           "first stage made in each fold's training queries")
    if t["mean_delta"] > 0 and t["p_value"] < alpha:
        return {"deploy": name, "worse": worse, "alpha": alpha, "reason": f"{name}: {how}"}
    return {"deploy": None, "worse": worse, "alpha": alpha,
            "reason": f"{name} does not beat {report['baseline']} with p < {alpha} ({how}): "
                      "keep the first stage"}
