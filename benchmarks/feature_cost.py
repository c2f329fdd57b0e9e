"""Per-feature cost and contribution of the shipped Cranfield feature set plus query-time
feedback (``feature_sets/cranfield-feedback.json``: the two kinds of feedback side by
side): ``python -m benchmarks.feature_cost`` (what ``ltr featureset cost`` reports, as a
table and a chart in benchmarks/results/).

Cost: ms each feature adds to the serving request, live (one node, window 100, all 225
queries, interleaved with the plain request). Contribution: NDCG@10 without the feature,
drop-one ablation under 5-fold cross-validation on the logged candidates (LambdaMART,
one fixed setting for every row)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ltr_toolkit.stores import store as st
from ltr_toolkit.serving.serving import Serving
from ltr_toolkit.data.featuresets import load_featureset
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.evaluation.feature_timing import FEEDBACK
from ltr_toolkit.pipeline.featurecost import cost_report

from ._live import INDEX, STAGE, connect, prepare, workdir
from ._report import finish, pyplot, write_table


FEEDBACK_SET = Path(__file__).resolve().parent.parent / "feature_sets" / "cranfield-feedback.json"


def main():
    conn = connect()
    prepare(conn)
    fs, _ = st.upload_featureset_versioned(conn, load_featureset(FEEDBACK_SET))
    rep = cost_report(conn, Serving(INDEX, STAGE, 100), cranfield.judgments(), fs,
                      workdir() / "feature-cost", "lambdamart", folds=5, timing_queries=225,
                      passes=2, log=print)
    c = rep["contribution"]
    rows = []
    for row, cost in rep["cost"].items():
        ab = c["rows"].get(FEEDBACK if row.startswith("first request") else row)
        rows.append([row, round(cost["p50_ms"], 2), round(cost["mean_ms"], 2),
                     *((round(ab["ndcg"], 4), round(ab["delta"], 4), round(ab["p_value"], 4))
                       if ab else ("", "", ""))])
    notes = [f"feature set {fs}, index {INDEX}, window 100, {rep['timed_queries']} queries x "
             f"{rep['passes']} passes timed (after a warm-up pass); ms: added to the plain "
             "request (its own row: the whole request), median and mean over queries",
             f"ablation: {rep['algo']} {rep['settings']}, {rep['folds']}-fold CV over "
             f"{rep['queries']} queries: NDCG@10 with all features {c['all']:.4f}, the first "
             f"stage's order {c['first_stage']:.4f}; the first-request row's ablation is the "
             f"feedback group's ({', '.join(rep['feedback_features'])})",
             "node: one local OpenSearch, 512 MiB heap, 2 cores shared with the client"]
    write_table("feature_cost", ["feature", "ms added p50", "ms added mean", "ndcg@10 without",
                                 "delta", "p"], rows, notes)
    plt = pyplot()
    feats = [r for r in rows if r[3] != ""]
    fig, ax = plt.subplots(figsize=(8, 6))
    ax.scatter([r[1] for r in feats], [r[4] for r in feats])
    for r in feats:
        ax.annotate(r[0], (r[1], r[4]), fontsize=7)
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_xlabel("ms added at serving (p50)")
    ax.set_ylabel("NDCG@10 change without the feature")
    ax.set_title("Cranfield feature set: cost vs contribution")
    finish(fig, "feature_cost")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
