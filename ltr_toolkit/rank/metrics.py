"""Ranking metrics, vectorised over queries (padded [Q, n_max] arrays, built for chunks
of consecutive queries of at most ``CHUNK_CELLS`` cells: memory stays bounded when one
query is much longer than the others).

Definitions follow trec_eval / ir-measures: documents sorted by descending score. Ties:
with ``docids`` (one string per row) as trec_eval breaks them, by descending docid
(string comparison); without, by input position (the earlier row first). A document is
relevant when its label >= ``rel`` (default 1). ``k`` is None (the whole list) or an
integer >= 1 (P@k: an integer).

* NDCG@k: DCG with discount 1/log2(rank + 1); gain ``2^y - 1`` ("exp", the LTR usual) or
  ``y`` ("linear", trec_eval's ndcg_cut); a query with IDCG = 0 scores 0 (trec_eval).
* ERR@k (Chapelle et al. 2009): R = (2^y - 1) / 2^max_grade, ``max_grade`` the grade
  scale's maximum (given by the caller: one scale for every set compared).
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
    """Apply a per-query metric ``fn(scores, labels, offsets, ..., docids=...)`` chunk by
    chunk (``docids``, one string per row, sliced with the rows)."""
    @functools.wraps(fn)
    def chunked(scores, labels, offsets, *args, docids=None, **kw):
        scores, labels = np.asarray(scores), np.asarray(labels)
        offsets = np.asarray(offsets, dtype=np.int64)
        if docids is not None:
            docids = np.asarray(docids, dtype=str)
            if docids.shape != scores.shape:
                raise ValueError(f"docids: one per row expected ({len(scores)}), got {docids.shape}")
        runs = _query_chunks(np.diff(offsets))
        if len(runs) <= 1:
            return fn(scores, labels, offsets, *args, docids=docids, **kw)
        return np.concatenate([
            fn(scores[offsets[a]:offsets[b]], labels[offsets[a]:offsets[b]],
               offsets[a:b + 1] - offsets[a], *args,
               docids=None if docids is None else docids[offsets[a]:offsets[b]], **kw)
            for a, b in runs])
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


def _order(s, offsets, docids):
    """Per padded row: descending score, ties by descending docid (trec_eval: docids
    compared as strings) when ``docids`` are given, else by input position."""
    if docids is None:
        return np.argsort(-s, axis=1, kind="stable")
    _, rank = np.unique(docids, return_inverse=True)
    r, _ = pad(rank, offsets, fill=-1.0)
    return np.lexsort((-r, -s), axis=1)


def _sorted_labels(scores, labels, offsets, docids=None):
    s, mask = pad(scores, offsets, fill=-np.inf)
    y, _ = pad(labels, offsets, fill=0.0)
    order = _order(s, offsets, docids)
    ys = np.take_along_axis(y, order, axis=1)
    ms = np.take_along_axis(mask, order, axis=1)
    return np.where(ms, ys, 0.0), ms, y, mask


def _check_k(k, none_ok: bool = True) -> None:
    if k is None and none_ok:
        return
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be {'None or ' if none_ok else ''}an integer >= 1, not {k!r}")


#: NDCG's gain functions by name.
GAINS = {"exp": exp_gain, "linear": lambda v: np.asarray(v, dtype=np.float64)}


@_per_query
def ndcg(scores, labels, offsets, k: int | None = 10, gain: str = "exp", *, docids=None) -> np.ndarray:
    """NDCG@k per query; ``gain`` "exp" (2^y - 1) or "linear" (y)."""
    _check_k(k)
    if not isinstance(gain, str) or gain not in GAINS:
        raise ValueError(f"gain must be 'exp' or 'linear', not {gain!r}")
    gf = GAINS[gain]
    ys, ms, y, mask = _sorted_labels(scores, labels, offsets, docids)
    g = np.where(ms, gf(ys), 0.0)
    disc = 1.0 / np.log2(np.arange(g.shape[1]) + 2.0)
    if k is not None:
        disc[k:] = 0.0
    dcg = (g * disc).sum(axis=1)
    idcg = ideal_dcg(np.where(mask, gf(y), 0.0), k)
    return np.divide(dcg, idcg, out=np.zeros_like(dcg), where=idcg > 0)


@_per_query
def err(scores, labels, offsets, k: int | None = 10, *, max_grade: float, docids=None) -> np.ndarray:
    """Expected reciprocal rank @k per query. ``max_grade`` (required) is the grade scale's
    maximum, not the largest label at hand: values compared with each other (train /
    valid / test, systems) must share it."""
    _check_k(k)
    if len(labels) and np.max(labels) > max_grade:
        raise ValueError(f"a label ({np.max(labels)}) is above max_grade {max_grade}")
    ys, ms, _, _ = _sorted_labels(scores, labels, offsets, docids)
    R = np.where(ms, (np.power(2.0, ys) - 1.0) / np.power(2.0, max_grade), 0.0)
    if k is not None:
        R = R[:, :k]
    not_stopped = np.cumprod(1.0 - R, axis=1)
    reach = np.concatenate([np.ones((R.shape[0], 1)), not_stopped[:, :-1]], axis=1)
    ranks = np.arange(1, R.shape[1] + 1)
    return (reach * R / ranks).sum(axis=1)


@_per_query
def average_precision(scores, labels, offsets, rel: float = 1.0, k: int | None = None, *,
                      docids=None) -> np.ndarray:
    """AP per query; with ``k``, over the top k only (trec_eval's map_cut), still divided
    by every relevant document of the query."""
    _check_k(k)
    ys, ms, y, mask = _sorted_labels(scores, labels, offsets, docids)
    relv = ((ys >= rel) & ms)[:, :k]
    hits = np.cumsum(relv, axis=1)
    ranks = np.arange(1, relv.shape[1] + 1)
    n_rel = ((y >= rel) & mask).sum(axis=1)
    s = (relv * hits / ranks).sum(axis=1)
    return np.divide(s, n_rel, out=np.zeros_like(s, dtype=np.float64), where=n_rel > 0)


@_per_query
def reciprocal_rank(scores, labels, offsets, rel: float = 1.0, k: int | None = None, *,
                    docids=None) -> np.ndarray:
    """1 / rank of the first relevant document (within the top k when given), else 0."""
    _check_k(k)
    ys, ms, _, _ = _sorted_labels(scores, labels, offsets, docids)
    relv = ((ys >= rel) & ms)[:, :k]
    first = np.argmax(relv, axis=1)
    return np.where(relv.any(axis=1), 1.0 / (first + 1.0), 0.0)


@_per_query
def precision(scores, labels, offsets, k: int = 10, rel: float = 1.0, *, docids=None) -> np.ndarray:
    """P@k per query (``k`` an integer >= 1)."""
    _check_k(k, none_ok=False)
    ys, ms, _, _ = _sorted_labels(scores, labels, offsets, docids)
    relv = ((ys >= rel) & ms)[:, :k]
    return relv.sum(axis=1) / float(k)


def evaluate(scores, labels, offsets, k: int = 10, *, max_grade: float,
             docids=None) -> dict[str, float]:
    """Mean of the standard metrics over queries (``max_grade``: the grade scale's maximum,
    for ERR; ``docids``: ties broken as trec_eval does)."""
    _check_k(k, none_ok=False)
    args = (scores, labels, offsets)
    return {
        f"ndcg@{k}": float(np.mean(ndcg(*args, k, docids=docids))),
        f"err@{k}": float(np.mean(err(*args, k, max_grade=max_grade, docids=docids))),
        "map": float(np.mean(average_precision(*args, docids=docids))),
        "mrr": float(np.mean(reciprocal_rank(*args, docids=docids))),
        f"p@{k}": float(np.mean(precision(*args, k, docids=docids))),
    }
