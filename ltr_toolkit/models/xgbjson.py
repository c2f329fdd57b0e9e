"""Score xgboost JSON tree dumps the way the LTR plugin does (``model/xgboost+json``).

The plugin's rule (``NaiveAdditiveDecisionTree`` on 3.x): a document goes to ``yes``
(left) when ``threshold > value`` with both float32, otherwise to ``no`` (right); a
missing feature is NaN, so it always goes ``no`` whatever the node's ``missing`` says;
the score is the float32 sum of float32 leaves, tree by tree (``base_score`` ignored).
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
    out = np.zeros(X.shape[0], dtype=np.float32)
    for tree in trees:
        out = (out + _score_tree(tree, X, feature_names)).astype(np.float32)
    return out.astype(np.float64)


def _score_tree(node: dict, X: np.ndarray, names) -> np.ndarray:
    """Vectorised descent: route all rows of X through the tree."""
    res = np.zeros(X.shape[0], dtype=np.float32)
    stack = [(node, np.arange(X.shape[0]))]
    while stack:
        n, rows = stack.pop()
        if rows.size == 0:
            continue
        if "leaf" in n:
            res[rows] = np.float32(n["leaf"])
            continue
        j = _feature_index(n["split"], names)
        thr = np.float32(n["split_condition"])
        with np.errstate(invalid="ignore"):
            go_yes = thr > X[rows, j]          # False for NaN: missing goes "no"
        children = {c["nodeid"]: c for c in n["children"]}
        stack.append((children[n["yes"]], rows[go_yes]))
        stack.append((children[n["no"]], rows[~go_yes]))
    return res
