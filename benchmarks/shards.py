"""Cranfield on 1 vs 3 shards, live: ``python -m benchmarks.shards``.

The same documents, mapping, feature set and seed, indexed into 1 and into 3 primary
shards; ``ltr evaluate --cv 5`` with the toolkit's defaults (settings chosen in the
training folds) for lambdamart and linear. Shard-local term statistics change the first
stage itself; what the toolkit controls is that the rerankers rerank exactly the global
top window they were trained on (``cluster.rerank``). Per shard count and algorithm:
first stage and reranked NDCG@10, the gain, p vs the first stage, W/T/L. Table + PNG in
benchmarks/results/ (shards.*). Needs a node with the LTR plugin (``LTR_URL``, else the
local node).
"""

from __future__ import annotations

import time

from ltr_toolkit.cluster import store as st
from ltr_toolkit.cluster.firststage import FirstStage
from ltr_toolkit.cluster.indexing import index_documents
from ltr_toolkit.data.featuresets import load_featureset
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.pipeline.crossval import cross_validate

from ._live import connect, workdir
from ._report import finish, pyplot, write_table

ALGOS = ("lambdamart", "linear")


def main() -> None:
    conn = connect()
    st.init_store(conn, None)
    fs, _ = st.upload_featureset_versioned(conn, load_featureset(cranfield.FEATURE_SET))
    rows = []
    for shards in (1, 3):
        index = f"bench-cranfield-s{shards}"
        index_documents(conn, index, cranfield.documents(), recreate=True, shards=shards)
        t0 = time.monotonic()
        rep = cross_validate(conn, index, cranfield.judgments(), fs, {a: None for a in ALGOS},
                             workdir() / f"shards-{shards}", folds=5,
                             first_stage=FirstStage.from_fields(("title", "abstract")),
                             name_prefix=f"bench-shards{shards}", log=print)
        seconds = round(time.monotonic() - t0)
        base = rep["systems"][rep["baseline"]]["ndcg@10"]
        for a in ALGOS:
            t = rep["tests"][a]
            rows.append([shards, a, round(base, 4), round(rep["systems"][a]["ndcg@10"], 4),
                         round(t["mean_delta"], 4), round(t["p_value"], 4),
                         f"{t['wins']}/{t['ties']}/{t['losses']}", seconds])
        conn.client().indices.delete(index=index, ignore_unavailable=True)
    gains = {(r[0], r[1]): r[4] for r in rows}
    notes = [f"{a}: gain on 3 shards minus gain on 1 shard = {gains[(3, a)] - gains[(1, a)]:+.4f}"
             for a in ALGOS]
    notes.append("5-fold CV over the 225 judged queries, seed 42, window 100 (exactly the "
                 "first stage's global top 100 reranked), first stage multi_match over title "
                 "and abstract, shard-local statistics (query_then_fetch) at logging and serving")
    write_table("shards", ["shards", "algorithm", "first stage NDCG@10", "reranked NDCG@10",
                           "gain", "p vs first stage", "W/T/L", "run seconds"], rows, notes)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for j, shards in enumerate((1, 3)):
        sub = [r for r in rows if r[0] == shards]
        ax.bar([i + 0.4 * j for i in range(len(ALGOS))], [r[4] for r in sub], width=0.4,
               label=f"{shards} shard{'s' if shards > 1 else ''}")
    ax.set_xticks([i + 0.2 for i in range(len(ALGOS))], ALGOS)
    ax.set_ylabel("NDCG@10 gain over the first stage")
    ax.set_title("Cranfield, 5-fold CV, live")
    ax.legend()
    finish(fig, "shards")


if __name__ == "__main__":
    main()
