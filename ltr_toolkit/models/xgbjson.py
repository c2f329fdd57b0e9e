"""Score xgboost JSON tree dumps the way the LTR plugin does (``model/xgboost+json``).

A document goes to ``yes`` (left) when ``value < threshold``; thresholds and leaves are
float32; a missing value follows the node's ``missing`` branch; the score is the plain
sum of leaves (the plugin ignores base_score). Used to check an export before upload.
"""

from __future__ import annotations

import numpy as np


def _feature_index(split: str, names: list[str] | None) -> int:
    if names is not None and split in names:
        return names.index(split)
    if split.startswith("f") and split[1:].isdigit():
        return int(split[1:])
    raise ValueError(f"split feature {split!r} is not a known feature")


def score_trees(trees: list[dict], X: np.ndarray, feature_names: list[str] | None = None) -> np.ndarray:
    X = np.asarray(X, dtype=np.float32)
    out = np.zeros(X.shape[0], dtype=np.float64)
    for tree in trees:
        out += _score_tree(tree, X, feature_names)
    return out


def _score_tree(node: dict, X: np.ndarray, names) -> np.ndarray:
    """Vectorised descent: route all rows of X through the tree."""
    res = np.zeros(X.shape[0], dtype=np.float64)
    stack = [(node, np.arange(X.shape[0]))]
    while stack:
        n, rows = stack.pop()
        if rows.size == 0:
            continue
        if "leaf" in n:
            res[rows] = float(np.float32(n["leaf"]))
            continue
        j = _feature_index(n["split"], names)
        thr = np.float32(n["split_condition"])
        v = X[rows, j]
        children = {c["nodeid"]: c for c in n["children"]}
        missing = np.isnan(v)
        go_yes = (v < thr) & ~missing
        if n.get("missing") == n["yes"]:
            go_yes |= missing
        stack.append((children[n["yes"]], rows[go_yes]))
        stack.append((children[n["no"]], rows[~go_yes]))
    return res
