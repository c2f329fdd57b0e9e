"""Is the gain gap between 1 and 3 shards systematic? ``python -m benchmarks.shards_seeds``.

``benchmarks.shards`` runs one cross-validation seed. Here the same comparison (Cranfield
on 1 and on 3 shards, the default dfs statistics, ``ltr evaluate --cv 5`` with lambdamart
and the toolkit's defaults) is repeated for several fold seeds: a gap that changes sign or
size from seed to seed is the cross-validation's noise, one that stays is the sharding's.
Table + PNG in benchmarks/results/ (shards_seeds.*). Needs a node with the LTR plugin
(``LTR_URL``, else the local node).
"""

from __future__ import annotations

import numpy as np

from ltr_toolkit.stores import store as st
from ltr_toolkit.query.firststage import FirstStage
from ltr_toolkit.indexing.documents import index_documents
from ltr_toolkit.data.featuresets import load_featureset
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.pipeline.crossval import cross_validate

from ._live import connect, workdir
from ._report import finish, pyplot, write_table

SEEDS = (42, 7, 2026)
SHARDS = (1, 3)


def _gain(conn, fs, index: str, seed: int) -> tuple[float, float, float]:
    """(first stage, reranked, p) NDCG@10 of lambdamart under 5-fold CV with ``seed``."""
    rep = cross_validate(conn, index, cranfield.judgments(), fs, {"lambdamart": None},
                         workdir() / f"shards-seeds-{index}-{seed}", folds=5, seed=seed,
                         first_stage=FirstStage.from_fields(("title", "abstract")),
                         name_prefix=f"bench-seeds-{seed}", log=print)
    return (rep["systems"][rep["baseline"]]["ndcg@10"], rep["systems"]["lambdamart"]["ndcg@10"],
            rep["tests"]["lambdamart"]["p_value"])


def main() -> None:
    conn = connect()
    st.init_store(conn, None)
    fs, _ = st.upload_featureset_versioned(conn, load_featureset(cranfield.FEATURE_SET))
    for s in SHARDS:
        index_documents(conn, f"bench-seeds-s{s}", cranfield.documents(), recreate=True, shards=s)
    rows, gaps = [], []
    for seed in SEEDS:
        got = {s: _gain(conn, fs, f"bench-seeds-s{s}", seed) for s in SHARDS}
        gap = (got[3][1] - got[3][0]) - (got[1][1] - got[1][0])
        gaps.append(gap)
        rows.append([seed, *(round(v, 4) for s in SHARDS for v in (got[s][1], got[s][1] - got[s][0],
                                                                     got[s][2])), round(gap, 4)])
    for s in SHARDS:
        conn.client().indices.delete(index=f"bench-seeds-s{s}", ignore_unavailable=True)
    notes = [f"gap (3-shard gain minus 1-shard gain) over {len(SEEDS)} seeds: mean "
             f"{np.mean(gaps):+.4f}, sd {np.std(gaps, ddof=1):.4f}",
             "Cranfield, 225 judged queries, window 100, lambdamart with settings chosen in the "
             "training folds, dfs statistics; the first stage is the same on 1 and 3 shards"]
    write_table("shards_seeds", ["seed", "1 shard NDCG@10", "1 shard gain", "1 shard p",
                                 "3 shards NDCG@10", "3 shards gain", "3 shards p", "gap"],
                rows, notes)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    x = np.arange(len(SEEDS))
    ax.bar(x - 0.2, [r[2] for r in rows], width=0.4, label="1 shard")
    ax.bar(x + 0.2, [r[5] for r in rows], width=0.4, label="3 shards (dfs)")
    ax.set_xticks(x, [str(s) for s in SEEDS])
    ax.set_xlabel("cross-validation seed")
    ax.set_ylabel("lambdamart NDCG@10 gain over the first stage")
    ax.legend()
    finish(fig, "shards_seeds")


if __name__ == "__main__":
    main()
