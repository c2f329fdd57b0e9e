"""Per-feature contributions that add up to a model's score: Shapley values of the
score against one stated baseline document.

For rows X, a scoring function f and a baseline row b, feature j's contribution to row x
is its Shapley value in the game v(S) = f(x on S, b elsewhere): the weighted mean, over
the subsets S of the other features, of f(x on S + j) - f(x on S). They sum to
f(x) - f(b) exactly (efficiency), for any model -- trees, linear, networks -- since only
f is called (here: the plugin's own scoring, ``served.ServedModel``). For a linear model
they are w_j (z_j(x) - z_j(b)), the exact decomposition.

Up to :data:`EXACT_MAX` features every subset is scored (2^M x rows evaluations, one
vectorised call); above it, ``permutations`` random orders (each with its reverse) are
walked: each order's marginal contributions also sum to f(x) - f(b), so the sum stays
exact and only the split between features is estimated.

The default baseline is the document that matches no feature (every feature missing,
as the plugin sees it): a contribution says what a feature's value adds over not having
it. The features' mean over some rows is the other usual choice (``baseline=``).
"""

from __future__ import annotations

from math import factorial

import numpy as np

#: the most features whose every subset is scored
EXACT_MAX = 12
#: rows handed to the scoring function at once (about 100 MB of float64 at 12 features)
CELLS = 1 << 20


def contributions(f, X: np.ndarray, baseline: np.ndarray | None = None, *,
                  permutations: int = 32, seed: int = 0) -> tuple[np.ndarray, float]:
    """(contributions (n, M), the baseline's score f(b)): rows of contributions sum to
    f(X) - f(b). ``baseline``: a row of M values (NaN = missing; default all missing)."""
    X = np.asarray(X, dtype=np.float64)
    n, m = X.shape
    b = np.full(m, np.nan) if baseline is None else np.asarray(baseline, dtype=np.float64)
    base = float(f(b[None, :])[0])
    if n == 0 or m == 0:
        return np.zeros((n, m)), base
    per_row = (1 << m) if m <= EXACT_MAX else (m + 1) * 2 * max(1, permutations // 2)
    chunk = max(1, CELLS // per_row)                 # rows scored per call stay bounded
    parts = [_exact(f, X[i:i + chunk], b) if m <= EXACT_MAX
             else _sampled(f, X[i:i + chunk], b, permutations, seed) for i in range(0, n, chunk)]
    return np.concatenate(parts), base


def _exact(f, X, b) -> np.ndarray:
    n, m = X.shape
    masks = np.arange(1 << m)
    on = ((masks[:, None] >> np.arange(m)) & 1).astype(bool)            # (2^M, M)
    rows = np.where(on[:, None, :], X[None, :, :], b[None, None, :])       # (2^M, n, M)
    v = f(rows.reshape(-1, m)).reshape(len(masks), n)
    size = on.sum(axis=1)
    weight = np.array([factorial(s) * factorial(m - s - 1) / factorial(m) for s in range(m)])
    out = np.zeros((n, m))
    for j in range(m):
        without = masks[~on[:, j]]
        out[:, j] = weight[size[without]] @ (v[without | (1 << j)] - v[without])
    return out


def _sampled(f, X, b, permutations: int, seed: int) -> np.ndarray:
    n, m = X.shape
    rng = np.random.default_rng(seed)
    orders = [rng.permutation(m) for _ in range(max(1, permutations // 2))]
    orders += [o[::-1] for o in orders]                                   # antithetic pairs
    out = np.zeros((n, m))
    for order in orders:
        steps = np.repeat(b[None, :], m + 1, axis=0)                       # (M+1, M) masks
        on = np.zeros((m + 1, m), dtype=bool)
        for k, j in enumerate(order, start=1):
            on[k:, j] = True
        rows = np.where(on[:, None, :], X[None, :, :], steps[:, None, :])  # (M+1, n, M)
        v = f(rows.reshape(-1, m)).reshape(m + 1, n)
        out[:, order] += (v[1:] - v[:-1]).T
    return out / len(orders)


def summary(phi: np.ndarray, names: list[str]) -> list[dict]:
    """Per feature, most influential first: mean |contribution| (its weight in the
    model's decisions), the contributions' standard deviation (their spread) and mean."""
    phi = np.asarray(phi, dtype=np.float64).reshape(-1, len(names))
    mean_abs = np.abs(phi).mean(axis=0) if len(phi) else np.zeros(len(names))
    rows = [{"feature": n, "mean_abs": float(a), "sd": float(s), "mean": float(m)}
            for n, a, s, m in zip(names, mean_abs, phi.std(axis=0) if len(phi) else mean_abs,
                                  phi.mean(axis=0) if len(phi) else mean_abs)]
    return sorted(rows, key=lambda r: -r["mean_abs"])
