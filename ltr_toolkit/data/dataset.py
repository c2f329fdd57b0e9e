"""The ranking dataset: rows grouped by query, in the order the queries first appear."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np


@dataclass
class RankingDataset:
    """Features ``X`` (float32, [n_docs, n_features]), labels ``y`` (float64, [n_docs]),
    ``offsets`` ([n_queries + 1]; query q owns rows offsets[q]:offsets[q+1]),
    ``qids`` (one string per query), ``doc_ids`` (one string per row, or None),
    ``weights`` (one per row, or None): the lambdas' document weights (``rank.lambdas``),
    e.g. inverse examination propensities of clicks."""

    X: np.ndarray
    y: np.ndarray
    offsets: np.ndarray
    qids: np.ndarray
    doc_ids: np.ndarray | None = None
    feature_names: list[str] | None = None
    source: str | None = None
    meta: dict = field(default_factory=dict)
    weights: np.ndarray | None = None

    def __post_init__(self):
        self.X = np.ascontiguousarray(self.X, dtype=np.float32)
        self.y = np.asarray(self.y, dtype=np.float64)
        self.offsets = np.asarray(self.offsets, dtype=np.int64)
        self.qids = np.asarray(self.qids, dtype=object)
        if self.X.ndim != 2 or self.X.shape[0] != self.y.shape[0]:
            raise ValueError(f"X has shape {self.X.shape} but y has {self.y.shape[0]} rows")
        if self.offsets[0] != 0 or self.offsets[-1] != len(self.y) or np.any(np.diff(self.offsets) < 0):
            raise ValueError("offsets must rise from 0 to the number of rows")
        if len(self.qids) != len(self.offsets) - 1:
            raise ValueError("one qid per query is required")
        if self.doc_ids is not None:
            self.doc_ids = np.asarray(self.doc_ids, dtype=object)
        if self.weights is not None:
            self.weights = np.asarray(self.weights, dtype=np.float64)
            if self.weights.shape != self.y.shape:
                raise ValueError(f"{len(self.weights)} weights for {len(self.y)} rows")

    # ------------------------------------------------------------------ shape
    @property
    def n_docs(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def n_queries(self) -> int:
        return int(len(self.offsets) - 1)

    @property
    def group_sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def row_query(self) -> np.ndarray:
        """Query index of every row."""
        return np.repeat(np.arange(self.n_queries), self.group_sizes)

    def query(self, q: int) -> slice:
        return slice(int(self.offsets[q]), int(self.offsets[q + 1]))

    # ------------------------------------------------------------------ subsets
    def subset(self, query_idx) -> "RankingDataset":
        """A dataset of the given queries (in the given order)."""
        query_idx = np.asarray(query_idx, dtype=np.int64)
        sizes = self.group_sizes[query_idx]
        rows = np.concatenate([np.arange(self.offsets[q], self.offsets[q + 1]) for q in query_idx]) \
            if len(query_idx) else np.zeros(0, dtype=np.int64)
        return RankingDataset(
            X=self.X[rows], y=self.y[rows],
            offsets=np.concatenate([[0], np.cumsum(sizes)]),
            qids=self.qids[query_idx],
            doc_ids=None if self.doc_ids is None else self.doc_ids[rows],
            feature_names=self.feature_names, source=self.source, meta=dict(self.meta),
            weights=None if self.weights is None else self.weights[rows])

    def content_hash(self) -> str:
        """SHA-256 over features, labels, grouping and ids: identifies training data."""
        h = hashlib.sha256()
        arrays = (self.X, self.y, self.offsets) + (() if self.weights is None else (self.weights,))
        for a in arrays:                               # the arrays' bytes, without a copy
            h.update(memoryview(np.ascontiguousarray(a)).cast("B"))
        h.update("\0".join(map(str, self.qids)).encode())
        if self.doc_ids is not None:
            h.update("\0".join(map(str, self.doc_ids)).encode())
        return h.hexdigest()


def graded(y: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per query (its rows at ``offsets``), whether they hold more than one grade: the
    queries a ranker can learn from, and whose NDCG a ranking can change."""
    sizes = np.diff(offsets)
    out = np.zeros(len(sizes), bool)
    starts = np.asarray(offsets[:-1])[sizes > 0]          # empty queries have no rows
    if len(starts):
        out[sizes > 0] = np.maximum.reduceat(y, starts) > np.minimum.reduceat(y, starts)
    return out
