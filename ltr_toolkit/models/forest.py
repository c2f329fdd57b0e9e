"""A tree model scored with NumPy from the booster xgboost saved (what a model artifact
stores), without importing xgboost: its scores are xgboost's own predictor's, bit for bit
(tests/test_forest.py), so ``ltr predict`` needs no xgboost, whose import takes about a
second where scikit-learn and SciPy are installed (it imports both).

The trees of the saved model's arrays are numbered again breadth first (a node's two
children side by side, deleted nodes dropped) into one set of flat arrays. A block of rows
descends every tree at once, one level per step, each step a few NumPy gathers: a row
goes left when ``value < split_condition`` in float32 (xgboost's test, and the plugin's
``threshold > value``), else right (the left child is ``right - 1``). A missing value (NaN) is
:data:`.trees.MISSING_AS` first, larger than any threshold, so it goes right, as the
toolkit trains it and the plugin serves it (``models.trees.fill_missing``: what
``LambdaMART.predict`` hands xgboost). A row at a leaf stays there: the leaf's test reads a
column of zeros added to the block, against +inf, and its "left child" is itself. Each
row's leaves are then added tree by tree in float32 from the intercept (``base_score``, 0
for the toolkit's models), as xgboost's CPU predictor accumulates a margin.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
import os

import numpy as np

from ..io import compiled
from .trees import MISSING_AS

#: threads of ``predict`` by default: two, as the SVMlight reader's
THREADS = max(1, min(2, os.cpu_count() or 1))
#: elements of the [trees, rows] arrays of one block: small enough to stay in cache
_BLOCK_ELEMENTS = 1 << 17
#: rows below which one thread scores them all
_ROWS_PER_THREAD = 4096
#: seconds the NumPy walk spends per row, tree and level over the compiled one (measured
#: on 200,000 rows x 100 trees of depth 6, two threads: 0.24 s against 0.13 s)
_NUMPY_STEP_SECONDS = 0.9e-9


class Forest:
    """The trees of a saved booster up to a round, as flat arrays (``from_state``)."""

    def __init__(self, right, feature, threshold, value, roots, depth: int, n_features: int,
                 base: float):
        self.right, self.feature, self.threshold, self.value = right, feature, threshold, value
        self.roots, self.depth = roots, int(depth)
        self.n_features_in_, self.base = int(n_features), np.float32(base)
        self._compiled = None     # (feature, threshold) of the compiled walk, made once

    @classmethod
    def from_state(cls, state: dict) -> "Forest":
        """From ``LambdaMART.state()`` (an artifact's ``model``): the trees up to its
        ``best_iteration``. KeyError, TypeError or ValueError on a broken state."""
        booster = state["booster"]
        learner = booster["learner"]
        gb = learner["gradient_booster"]
        if gb.get("name") != "gbtree":
            raise ValueError(f"booster {gb.get('name')}: not a gbtree booster")
        model = gb["model"]
        if any(int(t) != 0 for t in model.get("tree_info", [])):
            raise ValueError("the booster has several outputs: a ranking model has one")
        rounds = model.get("iteration_indptr") or list(range(len(model["trees"]) + 1))
        n_rounds = int(state["best_iteration"]) + 1
        if not 0 < n_rounds < len(rounds):
            raise ValueError(f"best_iteration {n_rounds - 1} of {len(rounds) - 1} rounds")
        n_features = int(learner["learner_model_param"]["num_feature"])
        trees = [_tree(t, n_features) for t in model["trees"][: rounds[n_rounds]]]
        sizes = np.array([len(t[0]) for t in trees], dtype=np.intp)
        roots = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
        right = np.concatenate([t[0] + r for t, r in zip(trees, roots)])
        return cls(right, np.concatenate([t[1] for t in trees]),
                   np.concatenate([t[2] for t in trees]), np.concatenate([t[3] for t in trees]),
                   roots, max(t[4] for t in trees), n_features, _base_score(learner))

    def predict(self, X: np.ndarray, threads: int = THREADS) -> np.ndarray:
        """The margin of every row of X [rows, n_features] (float64 holding float32),
        blocks of rows shared out among up to ``threads`` threads (NumPy and the compiled
        walk release the GIL; a few thousand rows take one)."""
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has shape {X.shape}, but the model expects "
                             f"{self.n_features_in_} features")
        out = np.empty(len(X), dtype=np.float64)
        threads = max(1, min(int(threads), -(-len(X) // _ROWS_PER_THREAD)))
        if compiled.pays(len(X) * len(self.roots) * self.depth * _NUMPY_STEP_SECONDS):
            from .forestkernel import leaf_thresholds, walk
            if self._compiled is None:
                self._compiled = leaf_thresholds(self.feature, self.threshold, self.n_features_in_)
            args = (self.right, *self._compiled, self.value, self.roots,
                    self.depth, self.base, MISSING_AS, out)
            cuts = np.linspace(0, len(X), threads + 1).astype(int).tolist()
            self._shared(walk, [(X, lo, hi, *args) for lo, hi in zip(cuts[:-1], cuts[1:])])
            return out
        rows = max(1, _BLOCK_ELEMENTS // len(self.roots))
        blocks = [(lo, min(lo + rows, len(X))) for lo in range(0, len(X), rows)]
        self._shared(self._blocks, [(X, blocks[i::threads], rows, out) for i in range(threads)])
        return out

    @staticmethod
    def _shared(work, calls: list) -> None:
        """``work(*args)`` for each args of ``calls``, on as many threads."""
        if len(calls) == 1:
            work(*calls[0])
            return
        with ThreadPoolExecutor(len(calls)) as pool:
            for done in [pool.submit(work, *args) for args in calls]:
                done.result()

    def _blocks(self, X, blocks, rows: int, out) -> None:
        work = _Work(rows, len(self.roots), self.n_features_in_)
        for lo, hi in blocks:
            out[lo:hi] = self._block(X[lo:hi], work)

    def _block(self, X, work: "_Work") -> np.ndarray:
        n, nf = len(X), self.n_features_in_
        part = work.block[:n, :nf]
        np.copyto(part, X, casting="unsafe")            # float32, as xgboost reads it
        np.copyto(part, MISSING_AS, where=np.isnan(part))
        flat = work.block[:n].reshape(-1)
        cells = work.offsets(n)
        node = np.repeat(self.roots, n)                 # [trees x n], tree by tree
        f, x = np.empty_like(node), np.empty(len(node), dtype=np.float32)
        t, lt = np.empty_like(x), np.empty(len(node), dtype=bool)
        for _ in range(self.depth):
            self.feature.take(node, out=f, mode="clip")
            f += cells
            flat.take(f, out=x, mode="clip")
            self.threshold.take(node, out=t, mode="clip")
            np.less(x, t, out=lt)
            self.right.take(node, out=node, mode="clip")
            node -= lt                  # x < threshold: the left child, beside the right
        acc = np.full(n, self.base, dtype=np.float32)
        for leaves in self.value.take(node).reshape(len(self.roots), n):
            acc += leaves               # tree by tree, in float32
        return acc


class _Work:
    """One ``predict``'s buffers: the block of rows with a column of zeros after the
    features (what a leaf's test reads), and each (tree, row) cell's row offset in it."""

    def __init__(self, rows: int, n_trees: int, n_features: int):
        self.block = np.zeros((rows, n_features + 1), dtype=np.float32)
        self.width, self.n_trees = n_features + 1, n_trees
        self._offsets: dict[int, np.ndarray] = {}

    def offsets(self, n: int) -> np.ndarray:
        if n not in self._offsets:
            self._offsets[n] = np.tile(np.arange(n, dtype=np.intp) * self.width, self.n_trees)
        return self._offsets[n]


def _tree(tree: dict, n_features: int):
    """One saved tree's arrays, breadth first from the root: (right child, feature,
    threshold, leaf value, depth); a leaf's right child is itself plus one, its feature the
    zero column (``n_features``), its threshold +inf: its test always goes "left", to
    itself."""
    left, right = tree["left_children"], tree["right_children"]
    cond, feat = tree["split_conditions"], tree["split_indices"]
    if any(int(t) != 0 for t in tree.get("split_type", [])):
        raise ValueError("the booster has categorical splits")
    order, index, level = [0], {0: 0}, {0: 0}
    queue = deque([0])
    while queue:
        i = queue.popleft()
        if left[i] == -1:
            continue
        for child in (left[i], right[i]):
            index[child], level[child] = len(order), level[i] + 1
            order.append(child)
            queue.append(child)
    n = len(order)
    lc = np.empty(n, dtype=np.intp)
    fi = np.full(n, n_features, dtype=np.intp)
    thr = np.full(n, np.inf, dtype=np.float32)
    val = np.zeros(n, dtype=np.float32)
    for k, i in enumerate(order):
        if left[i] == -1:
            lc[k], val[k] = k + 1, cond[i]
            continue
        if not 0 <= int(feat[i]) < n_features:
            raise ValueError(f"a split on feature {int(feat[i])} of {n_features}")
        lc[k], fi[k], thr[k] = index[right[i]], feat[i], cond[i]
    return lc, fi, thr, val, max(level.values())


def _base_score(learner: dict) -> float:
    raw = str(learner["learner_model_param"]["base_score"])
    values = [float(v) for v in raw.strip("[]").split(",") if v.strip()]
    if len(values) != 1:
        raise ValueError(f"the booster has {len(values)} intercepts: one output is expected")
    return values[0]
