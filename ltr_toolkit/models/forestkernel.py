"""The forest's walk compiled by numba (:class:`.forest.Forest` takes it where numba
pays for its start-up, ``io.compiled``): each row descends tree after tree to its leaf,
the leaves added in float32 from the intercept, in tree order, exactly as the NumPy walk
(and xgboost's predictor) add them, so the scores are the same bit for bit
(tests/test_forest.py). It reads the same flat arrays; a leaf is the node whose feature
is the zero column (``n_features``)."""

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
    ``missing_as``); a row goes left (``right - 1``) when below the node's threshold, else
    right; at a leaf (threshold +inf) it stays."""
    nf = X.shape[1]
    zero = np.float32(0.0)
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
                    f = feature[nd]
                    v = np.float32(X[start + j, min(f, nf - 1)])
                    v = missing_as if np.isnan(v) else v
                    v = v if f < nf else zero       # a leaf reads 0: below its +inf
                    node[j] = right[nd] - (v < threshold[nd])
            for j in range(n):
                acc[j] += value[node[j]]
        out[start:start + n] = acc[:n]
