"""Charts (matplotlib is imported only when a chart is asked for)."""

from __future__ import annotations

import io

import numpy as np

from ..io.atomic import atomic_write


def delta_plot(report: dict, qids: list[str], path) -> None:
    """Per-query NDCG@k deltas of every reranker vs the report's baseline, sorted."""
    try:
        import matplotlib
    except ImportError:
        from ..errors import UserError
        raise UserError("--plot needs matplotlib", "pip install matplotlib") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    baseline, k, pq = report["baseline"], report["k"], report["per_query"]
    metric = f"ndcg@{k}"
    base = np.array([pq[baseline][q][metric] for q in qids])
    others = [n for n in pq if n != baseline]
    fig, ax = plt.subplots(figsize=(8, 4))
    for n in others:
        d = np.sort(np.array([pq[n][q][metric] for q in qids]) - base)[::-1]
        ax.plot(np.arange(len(d)), d, marker=".", lw=1, label=n)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("queries (sorted by delta)")
    ax.set_ylabel(f"NDCG@{k} delta vs {baseline}")
    if others:
        ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    with atomic_write(path, "wb") as fh:
        fh.write(buf.getvalue())
