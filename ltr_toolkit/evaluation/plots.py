"""Charts (matplotlib is imported only when a chart is asked for)."""

from __future__ import annotations

import io

import numpy as np

from ..io.atomic import atomic_write


def _pyplot():
    """matplotlib's pyplot on the Agg backend (one line when it is not installed)."""
    try:
        import matplotlib
    except ImportError:
        from ..errors import UserError
        raise UserError("--plot needs matplotlib", "pip install matplotlib") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    with atomic_write(path, "wb") as fh:
        fh.write(buf.getvalue())


def delta_plot(report: dict, qids: list[str], path) -> None:
    """Per-query NDCG@k deltas of every reranker vs the report's baseline, sorted."""
    plt = _pyplot()
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
    _save(fig, path)
    plt.close(fig)


def drift_plot(series: dict, flags: dict, path, title: str = "") -> None:
    """Each feature's distribution across snapshots (``series``: {feature: [(label,
    values with NaN for missing)]}): the empirical CDF of its present values per snapshot,
    the missing share in the legend; ``flags``: {feature: ok | drift | broken}."""
    plt = _pyplot()
    feats = list(series)
    cols = min(3, max(1, len(feats)))
    rows = -(-max(1, len(feats)) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, f in zip(axes.ravel(), feats):
        for label, v in series[f]:
            have = np.sort(v[~np.isnan(v)])
            miss = f"{1 - len(have) / max(1, len(v)):.0%} missing"
            if len(have):
                ax.step(have, np.arange(1, len(have) + 1) / len(have), where="post", lw=1,
                        label=f"{label} ({miss})")
            else:
                ax.plot([], [], label=f"{label} (all missing)")
        ax.set_title(f"{f}: {flags.get(f, '?')}", fontsize=9)
        ax.set_ylabel("share of rows <= value", fontsize=8)
        ax.legend(fontsize=6)
    for ax in axes.ravel()[len(feats):]:
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
