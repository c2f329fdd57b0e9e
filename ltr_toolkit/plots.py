"""Charts (matplotlib is imported only when a chart is asked for)."""

from __future__ import annotations

import io

import numpy as np

from .fsutil import atomic_write


def delta_plot(per_query: dict, baseline: str, qids: list[str], k: int, path) -> None:
    try:
        import matplotlib
    except ImportError:
        from .errors import UserError
        raise UserError("--plot needs matplotlib", "pip install matplotlib") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    base = per_query[baseline]["ndcg"]
    others = [n for n in per_query if n != baseline]
    fig, ax = plt.subplots(figsize=(8, 4))
    for n in others:
        d = np.sort(per_query[n]["ndcg"] - base)[::-1]
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
