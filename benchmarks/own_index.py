"""Library defaults vs settings chosen from the user's own data, live, on Cranfield and on
CACM (a collection the toolkit was never tuned on): ``python -m benchmarks.own_index``.

For each collection, ``ltr evaluate --cv 5`` runs twice over all judged queries with the
same folds: once with every algorithm's library defaults (``--settings defaults``), once
with the settings chosen by inner cross-validation inside each training fold (the
default). Per algorithm: NDCG@10 of the reranked lists, the first stage's, the paired
randomisation test's p vs the first stage, W/T/L; and the recommendation of each run.
Table + PNG in benchmarks/results/ (own_index.*). Needs a node with the LTR plugin
(``LTR_URL``, else the local node) and CACM in ../shared/data/cacm.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from ltr_toolkit.stores import store as st
from ltr_toolkit.query.firststage import FirstStage
from ltr_toolkit.indexing.documents import index_documents, read_jsonl_documents
from ltr_toolkit.data.featuresets import load_featureset
from ltr_toolkit.data.judgments import load_judgments
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.pipeline.crossval import cross_validate

from ._live import INDEX as CRAN_INDEX, connect, prepare, workdir
from ._report import SHARED, finish, pyplot, write_table

ALGOS = ("linear", "lambdarank-nn", "lambdamart")
ROOT = Path(__file__).resolve().parent.parent
CACM_INDEX = "bench-cacm"


def _cacm(conn):
    out = workdir() / "cacm-files"
    subprocess.run([sys.executable, str(ROOT / "docs" / "cacm" / "prepare.py"),
                    str(SHARED / "data" / "cacm"), str(out)], check=True)
    coll = read_jsonl_documents(out / "docs.jsonl")
    index_documents(conn, CACM_INDEX, coll.docs, recreate=True, fields=coll.text_fields,
                    meta="bench-cacm")
    fs, _ = st.upload_featureset_versioned(conn, load_featureset(ROOT / "docs" / "cacm" / "featureset.json"))
    jl = load_judgments(out / "qrels.txt", "trec", out / "queries.tsv")
    return CACM_INDEX, fs, jl


def _runs(conn, name, index, fs, jl):
    rows, recs = [], {}
    for mode, fixed in (("library defaults", {}), ("chosen in the training folds", None)):
        t0 = time.monotonic()
        rep = cross_validate(conn, index, jl, fs, {a: fixed for a in ALGOS},
                             workdir() / f"own-{name}-{'defaults' if fixed == {} else 'chosen'}",
                             folds=5, first_stage=FirstStage.from_fields(("title", "abstract")),
                             name_prefix=f"bench-own-{name}", log=print)
        seconds = time.monotonic() - t0
        base = rep["systems"][rep["baseline"]]["ndcg@10"]
        for a in ALGOS:
            t = rep["tests"][a]
            rows.append([name, mode, a, round(base, 4), round(rep["systems"][a]["ndcg@10"], 4),
                         round(t["mean_delta"], 4), round(t["p_value"], 4),
                         f"{t['wins']}/{t['ties']}/{t['losses']}", round(seconds)])
        recs[(name, mode)] = rep["recommendation"]["reason"]
    return rows, recs


def main() -> None:
    conn = connect()
    cran_fs = prepare(conn)
    rows, recs = _runs(conn, "cranfield", CRAN_INDEX, cran_fs, cranfield.judgments())
    more, recs2 = _runs(conn, "cacm", *_cacm(conn))
    rows += more
    recs.update(recs2)
    header = ["collection", "settings", "algorithm", "first stage NDCG@10", "reranked NDCG@10",
              "delta", "p vs first stage", "W/T/L", "run seconds (all algorithms)"]
    notes = [f"recommendation, {c}, {m}: {r}" for (c, m), r in recs.items()]
    notes.append("5-fold cross-validation over all judged queries, seed 42, window 100, first "
                 "stage multi_match over title and abstract; paired randomisation test, 10,000 "
                 "sign flips")
    write_table("own_index", header, rows, notes)
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=False)
    for ax, coll in zip(axes, ("cranfield", "cacm")):
        sub = [r for r in rows if r[0] == coll]
        for j, mode in enumerate(("library defaults", "chosen in the training folds")):
            vals = [r[4] for r in sub if r[1] == mode]
            ax.bar([i + 0.4 * j for i in range(len(ALGOS))], vals, width=0.4, label=mode)
        ax.axhline(sub[0][3], color="black", linestyle="--", label="first stage")
        ax.set_xticks([i + 0.2 for i in range(len(ALGOS))], ALGOS)
        ax.set_title(f"{coll}: NDCG@10, 5-fold CV, live")
        ax.set_ylim(min(r[4] for r in sub) - 0.05, max(r[4] for r in sub) + 0.03)
    axes[0].legend(fontsize=8)
    finish(fig, "own_index")


if __name__ == "__main__":
    main()
