"""Cranfield on 1 vs 3 shards, live: ``python -m benchmarks.shards``.

The same documents, mapping, feature set and seed, indexed into 1 and into 3 primary
shards; ``ltr evaluate --cv 5`` with the toolkit's defaults (settings chosen in the
training folds) for lambdamart and linear: on 1 shard, on 3 shards with the default term
statistics (``dfs``: the whole index's, at logging and serving) and on 3 shards with each
shard's own (``shard``: ``query_then_fetch``). The rerankers always rerank exactly the
global top window they were trained on (``serving.rerank``). Per configuration and
algorithm: first stage and reranked NDCG@10, the gain, p vs the first stage, W/T/L.
Table + PNG in benchmarks/results/ (shards.*). Needs a node with the LTR plugin
(``LTR_URL``, else the local node).
"""

from __future__ import annotations

import time

from ltr_toolkit.stores import store as st
from ltr_toolkit.query.firststage import FirstStage
from ltr_toolkit.indexing.documents import index_documents
from ltr_toolkit.data.featuresets import load_featureset
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.pipeline.crossval import cross_validate

from ._live import connect, workdir
from ._report import finish, pyplot, write_table

ALGOS = ("lambdamart", "linear")
CONFIGS = ((1, "dfs"), (3, "dfs"), (3, "shard"))


def _run(conn, fs, shards: int, statistics: str) -> list[list]:
    index = f"bench-cranfield-s{shards}"
    if not conn.client().indices.exists(index=index):
        index_documents(conn, index, cranfield.documents(), recreate=True, shards=shards)
    t0 = time.monotonic()
    rep = cross_validate(conn, index, cranfield.judgments(), fs, {a: None for a in ALGOS},
                         workdir() / f"shards-{shards}-{statistics}", folds=5,
                         first_stage=FirstStage.from_fields(("title", "abstract"), statistics),
                         name_prefix=f"bench-shards{shards}{statistics}", log=print)
    seconds = round(time.monotonic() - t0)
    base = rep["systems"][rep["baseline"]]["ndcg@10"]
    rows = []
    for a in ALGOS:
        t = rep["tests"][a]
        rows.append([shards, statistics, a, round(base, 4), round(rep["systems"][a]["ndcg@10"], 4),
                     round(t["mean_delta"], 4), round(t["p_value"], 4),
                     f"{t['wins']}/{t['ties']}/{t['losses']}", seconds])
    return rows


def main() -> None:
    conn = connect()
    st.init_store(conn, None)
    fs, _ = st.upload_featureset_versioned(conn, load_featureset(cranfield.FEATURE_SET))
    for shards in {s for s, _ in CONFIGS}:
        conn.client().indices.delete(index=f"bench-cranfield-s{shards}", ignore_unavailable=True)
    rows = [r for shards, stats in CONFIGS for r in _run(conn, fs, shards, stats)]
    for shards in {s for s, _ in CONFIGS}:
        conn.client().indices.delete(index=f"bench-cranfield-s{shards}", ignore_unavailable=True)
    gains = {(r[0], r[1], r[2]): r[5] for r in rows}
    notes = [f"{a}: gain on 3 shards ({stats}) minus gain on 1 shard = "
             f"{gains[(3, stats, a)] - gains[(1, 'dfs', a)]:+.4f}"
             for stats in ("dfs", "shard") for a in ALGOS]
    notes.append("5-fold CV over the 225 judged queries, seed 42, window 100 (exactly the "
                 "first stage's global top 100 reranked), first stage multi_match over title "
                 "and abstract; statistics: dfs = dfs_query_then_fetch at logging (cached "
                 "query-phase values) and serving, shard = query_then_fetch at both; on 1 shard "
                 "the two are the same")
    write_table("shards", ["shards", "statistics", "algorithm", "first stage NDCG@10",
                           "reranked NDCG@10", "gain", "p vs first stage", "W/T/L",
                           "run seconds"], rows, notes)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for j, (shards, stats) in enumerate(CONFIGS):
        sub = [r for r in rows if r[0] == shards and r[1] == stats]
        ax.bar([i + 0.27 * j for i in range(len(ALGOS))], [r[5] for r in sub], width=0.27,
               label=f"{shards} shard{'s' if shards > 1 else ''}, {stats}")
    ax.set_xticks([i + 0.27 for i in range(len(ALGOS))], ALGOS)
    ax.set_ylabel("NDCG@10 gain over the first stage")
    ax.set_title("Cranfield, 5-fold CV, live")
    ax.legend()
    finish(fig, "shards")


if __name__ == "__main__":
    main()
