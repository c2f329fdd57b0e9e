"""The forest's walk compiled by numba (:class:`.forest.Forest` takes it where numba
pays for its start-up, ``io.compiled``): each row descends tree after tree to its leaf,
the leaves added in float32 from the intercept, in tree order, exactly as the NumPy walk
(and xgboost's predictor) add them, so the scores are the same bit for bit
(tests/test_forest.py). It reads the same flat arrays, but for the leaves' feature and
threshold (:func:`leaf_thresholds`: column 0 against NaN instead of the NumPy walk's
zero column against +inf)."""

from __future__ import annotations

import numpy as np
from numba import njit

#: rows that descend a tree together
_BLOCK = 64


@njit(cache=True, nogil=True, error_model="numpy")
def walk(X, lo, hi, right, feature, threshold, value, roots, depth, base, missing_as, out):
    """Rows lo..hi of X [rows, n_features]: their margins into out[lo:hi]. Blocks of rows
    descend each tree together, ``depth`` levels (independent rows: no waiting on one
    row's chain of loads, no branch on a row's path). A feature is read as float32 (NaN as
    ``missing_as``); a row goes right when it is at or above the node's threshold, else
    left (``right - 1``). A leaf's threshold is NaN (:func:`leaf_thresholds`): no value
    is at or above it, so a row at a leaf goes "left", to the leaf itself, whatever the
    column it reads holds (even +inf)."""
    node = np.empty(_BLOCK, np.intp)
    acc = np.empty(_BLOCK, np.float32)
    for start in range(lo, hi, _BLOCK):
        n = min(_BLOCK, hi - start)
        acc[:n] = base
        for root in roots:
            node[:n] = root
            for _ in range(depth):
                for j in range(n):
                    nd = node[j]
                    v = np.float32(X[start + j, feature[nd]])
                    v = missing_as if np.isnan(v) else v
                    node[j] = right[nd] - (not v >= threshold[nd])
            for j in range(n):
                acc[j] += value[node[j]]
        out[start:start + n] = acc[:n]


def leaf_thresholds(feature, threshold, n_features: int):
    """(feature, threshold) for :func:`walk`: a leaf (feature ``n_features``, the NumPy
    walk's zero column) reads column 0 against NaN."""
    leaf = feature == n_features
    return (np.where(leaf, 0, feature),
            np.where(leaf, np.float32(np.nan), threshold).astype(np.float32))
