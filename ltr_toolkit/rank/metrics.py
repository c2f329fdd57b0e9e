"""Ranking metrics, vectorised over queries (padded [Q, n_max] arrays, built for chunks
of consecutive queries of at most ``CHUNK_CELLS`` cells: memory stays bounded when one
query is much longer than the others).

Definitions follow trec_eval / ir-measures: documents sorted by descending score, ties
broken by input position; a document is relevant when its label >= ``rel`` (default 1).

* NDCG@k: DCG with discount 1/log2(rank + 1); gain ``2^y - 1`` ("exp", the LTR usual) or
  ``y`` ("linear", trec_eval's ndcg_cut); a query with IDCG = 0 scores 0 (trec_eval).
* ERR@k (Chapelle et al. 2009): R = (2^y - 1) / 2^max_grade.
* MAP (AP over all relevant documents of the list), MRR (1 / rank of the first relevant),
  P@k (relevant in the top k, divided by k).
"""

from __future__ import annotations

import functools

import numpy as np

from .lambdas import exp_gain, ideal_dcg


#: Padded cells per chunk of queries (8 MB per float64 array).
CHUNK_CELLS = 1 << 20


def _query_chunks(sizes: np.ndarray):
    """[(first, end)] runs of consecutive queries with len(run) * max size <= CHUNK_CELLS
    (a single larger query is a run of its own)."""
    runs, start, n_max = [], 0, 0
    for q, n in enumerate(sizes.tolist()):
        if q > start and (q - start + 1) * max(n_max, n) > CHUNK_CELLS:
            runs.append((start, q))
            start, n_max = q, 0
        n_max = max(n_max, n)
    if len(sizes):
        runs.append((start, len(sizes)))
    return runs


def _per_query(fn):
    """Apply a per-query metric ``fn(scores, labels, offsets, ...)`` chunk by chunk."""
    @functools.wraps(fn)
    def chunked(scores, labels, offsets, *args, **kw):
        scores, labels = np.asarray(scores), np.asarray(labels)
        offsets = np.asarray(offsets, dtype=np.int64)
        runs = _query_chunks(np.diff(offsets))
        if len(runs) <= 1:
            return fn(scores, labels, offsets, *args, **kw)
        return np.concatenate([fn(scores[offsets[a]:offsets[b]], labels[offsets[a]:offsets[b]],
                                  offsets[a:b + 1] - offsets[a], *args, **kw) for a, b in runs])
    return chunked


def pad(values: np.ndarray, offsets: np.ndarray, fill: float = 0.0):
    """[n] values + query offsets -> ([Q, n_max] padded values, mask)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    sizes = np.diff(offsets)
    n_max = int(sizes.max()) if len(sizes) else 0
    col = np.arange(n_max)
    mask = col[None, :] < sizes[:, None]
    out = np.full((len(sizes), n_max), fill, dtype=np.float64)
    out[mask] = np.asarray(values, dtype=np.float64)
    return out, mask


def _sorted_labels(scores, labels, offsets):
    s, mask = pad(scores, offsets, fill=-np.inf)
    y, _ = pad(labels, offsets, fill=0.0)
    order = np.argsort(-s, axis=1, kind="stable")
    ys = np.take_along_axis(y, order, axis=1)
    ms = np.take_along_axis(mask, order, axis=1)
    return np.where(ms, ys, 0.0), ms, y, mask


@_per_query
def ndcg(scores, labels, offsets, k: int | None = 10, gain: str = "exp") -> np.ndarray:
    """NDCG@k per query."""
    gf = exp_gain if gain == "exp" else (lambda v: np.asarray(v, dtype=np.float64))
    ys, ms, y, mask = _sorted_labels(scores, labels, offsets)
    g = np.where(ms, gf(ys), 0.0)
    disc = 1.0 / np.log2(np.arange(g.shape[1]) + 2.0)
    if k is not None:
        disc[k:] = 0.0
    dcg = (g * disc).sum(axis=1)
    idcg = ideal_dcg(np.where(mask, gf(y), 0.0), k)
    return np.divide(dcg, idcg, out=np.zeros_like(dcg), where=idcg > 0)


def err(scores, labels, offsets, k: int | None = 10, max_grade: float | None = None) -> np.ndarray:
    """Expected reciprocal rank @k per query (``max_grade``: by default the largest label)."""
    if max_grade is None:
        max_grade = float(np.max(labels)) if len(labels) else 1.0
    return _err(scores, labels, offsets, k, max_grade)


@_per_query
def _err(scores, labels, offsets, k, max_grade) -> np.ndarray:
    ys, ms, _, _ = _sorted_labels(scores, labels, offsets)
    R = np.where(ms, (np.power(2.0, ys) - 1.0) / np.power(2.0, max_grade), 0.0)
    if k is not None:
        R = R[:, :k]
    not_stopped = np.cumprod(1.0 - R, axis=1)
    reach = np.concatenate([np.ones((R.shape[0], 1)), not_stopped[:, :-1]], axis=1)
    ranks = np.arange(1, R.shape[1] + 1)
    return (reach * R / ranks).sum(axis=1)


@_per_query
def average_precision(scores, labels, offsets, rel: float = 1.0, k: int | None = None) -> np.ndarray:
    """AP per query; with ``k``, over the top k only (trec_eval's map_cut), still divided
    by every relevant document of the query."""
    ys, ms, y, mask = _sorted_labels(scores, labels, offsets)
    relv = ((ys >= rel) & ms)[:, :k]
    hits = np.cumsum(relv, axis=1)
    ranks = np.arange(1, relv.shape[1] + 1)
    n_rel = ((y >= rel) & mask).sum(axis=1)
    s = (relv * hits / ranks).sum(axis=1)
    return np.divide(s, n_rel, out=np.zeros_like(s, dtype=np.float64), where=n_rel > 0)


@_per_query
def reciprocal_rank(scores, labels, offsets, rel: float = 1.0, k: int | None = None) -> np.ndarray:
    """1 / rank of the first relevant document (within the top k when given), else 0."""
    ys, ms, _, _ = _sorted_labels(scores, labels, offsets)
    relv = ((ys >= rel) & ms)[:, :k]
    first = np.argmax(relv, axis=1)
    return np.where(relv.any(axis=1), 1.0 / (first + 1.0), 0.0)


@_per_query
def precision(scores, labels, offsets, k: int = 10, rel: float = 1.0) -> np.ndarray:
    ys, ms, _, _ = _sorted_labels(scores, labels, offsets)
    relv = ((ys >= rel) & ms)[:, :k]
    return relv.sum(axis=1) / float(k)


def evaluate(scores, labels, offsets, k: int = 10) -> dict[str, float]:
    """Mean of the standard metrics over queries."""
    return {
        f"ndcg@{k}": float(np.mean(ndcg(scores, labels, offsets, k))),
        f"err@{k}": float(np.mean(err(scores, labels, offsets, k))),
        "map": float(np.mean(average_precision(scores, labels, offsets))),
        "mrr": float(np.mean(reciprocal_rank(scores, labels, offsets))),
        f"p@{k}": float(np.mean(precision(scores, labels, offsets, k))),
    }
