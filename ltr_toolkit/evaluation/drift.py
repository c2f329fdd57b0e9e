"""Feature drift between two logged matrices, pure (NumPy, no cluster): a reference (the
data a deployed model was trained on, or the snapshot at deployment) and a newer one,
columns in the feature set's order, NaN where a feature did not match.

Per feature:

* ``missing``: the share of rows where it did not match, in each;
* ``zero``: the share of its present values that are 0, in each; ``dead``: missing on
  every row, or one value on every row (``features.check.dead_columns``);
* ``psi``: the population stability index over the reference's quantile bins
  (:data:`BINS` deciles of its present values, ties merged, and one bin for "missing"),
  each bin's share smoothed by half a row: sum((q - p) ln(q / p));
* ``ks``: the two-sample Kolmogorov-Smirnov statistic of the present values (1 when one
  side has none and the other has some).

Flags (:func:`flag`): ``broken`` when the feature is dead in the new data and was not in
the reference (a renamed field, a dropped vector, a constant where there was a signal);
``drift`` when its PSI or its KS exceeds the threshold; ``ok`` otherwise.

Thresholds come from measured null variation, not from a rule of thumb:
``benchmarks/monitor_null.py`` logs Cranfield with the shipped feature set (an unchanged
index re-logged gives identical rows), draws pairs of independent bootstrap resamples of
its queries, and records the pooled distribution of each statistic in units that do not
depend on the number of queries (PSI x (1/Q_ref + 1/Q_new)^-1, KS x (1/Q_ref +
1/Q_new)^-1/2: the queries, not the rows, are the independent units). A feature set of F
features is ``ok`` as a whole with probability >= 1 - :data:`ALPHA` under the null when
each of its 2F statistics is held to the null's 1 - ALPHA / (2F) quantile (Bonferroni):
:func:`thresholds` reads that level off :data:`NULL_QUANTILES` (log-linear between the
levels measured; beyond the most extreme one, the most extreme one).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..features.check import dead_columns

#: reference quantile bins of a feature's present values (missing is one more bin)
BINS = 10
#: the whole feature set is ``ok`` in at least 1 - ALPHA of null draws
ALPHA = 0.05
#: the null's pooled quantiles of the scaled statistics, measured by
#: ``python -m benchmarks.monitor_null`` (benchmarks/results/monitor_null.md): Cranfield,
#: the shipped feature set (6 features), 225 queries x the first stage's top 100, 200
#: pairs of independent bootstrap resamples of the queries (pooled: 1,200 values each).
#: At 225 queries a side and 6 features (level 0.9958): PSI 0.040, KS 0.075; on 200 other
#: null pairs the whole feature set was ``ok`` in 99.0% of them.
NULL_QUANTILES = {
    "levels": (0.9, 0.95, 0.99, 0.995, 0.999),
    "psi": (1.891, 2.502, 4.086, 4.307, 5.644),
    "ks": (0.5285, 0.6053, 0.7618, 0.7887, 0.8969),
}
FLAGS = ("ok", "drift", "broken")


@dataclass(frozen=True)
class Thresholds:
    """What a feature's PSI and KS may reach before it is ``drift``, and the level of the
    null they stand at."""

    psi: float
    ks: float
    level: float

    def to_dict(self) -> dict:
        return {"psi": self.psi, "ks": self.ks, "null_quantile": self.level}


def thresholds(n_features: int, q_ref: int, q_new: int, alpha: float = ALPHA,
               null: dict | None = None) -> Thresholds:
    """Per-feature thresholds for a feature set of ``n_features`` compared on ``q_ref``
    and ``q_new`` queries: the null's 1 - alpha / (2 n_features) quantile, unscaled."""
    null = NULL_QUANTILES if null is None else null
    level = 1.0 - alpha / (2 * max(1, n_features))
    x = -np.log1p(-np.asarray(null["levels"], np.float64))       # the tail, log-linear
    at = -np.log1p(-level)
    scale = 1.0 / max(1, q_ref) + 1.0 / max(1, q_new)
    psi = float(np.interp(at, x, null["psi"])) * scale
    ks = float(np.interp(at, x, null["ks"])) * np.sqrt(scale)
    return Thresholds(psi=psi, ks=float(ks), level=level)


def scaled(psi, ks, q_ref: int, q_new: int) -> tuple[np.ndarray, np.ndarray]:
    """PSI and KS in the units of :data:`NULL_QUANTILES` (free of the number of queries)."""
    scale = 1.0 / max(1, q_ref) + 1.0 / max(1, q_new)
    return np.asarray(psi) / scale, np.asarray(ks) / np.sqrt(scale)


def _bins(ref: np.ndarray) -> np.ndarray:
    """The inner edges of the reference's quantile bins (ties merged)."""
    if not len(ref):
        return np.empty(0)
    return np.unique(np.quantile(ref, np.linspace(0, 1, BINS + 1)[1:-1]))


def psi(ref: np.ndarray, new: np.ndarray) -> float:
    """PSI of one feature (NaN: missing, its own bin) over ``ref``'s quantile bins."""
    edges = _bins(ref[~np.isnan(ref)])
    nb = len(edges) + 2

    def shares(x):
        b = np.where(np.isnan(x), nb - 1, np.searchsorted(edges, np.nan_to_num(x), side="right"))
        return (np.bincount(b, minlength=nb) + 0.5) / (len(x) + 0.5 * nb)
    p, q = shares(ref), shares(new)
    return float(np.sum((q - p) * np.log(q / p)))


def ks(ref: np.ndarray, new: np.ndarray) -> float:
    """The two-sample KS statistic of the present values of one feature."""
    a, b = np.sort(ref[~np.isnan(ref)]), np.sort(new[~np.isnan(new)])
    if not len(a) or not len(b):
        return float(len(a) != len(b))
    at = np.concatenate([a, b])
    fa = np.searchsorted(a, at, side="right") / len(a)
    fb = np.searchsorted(b, at, side="right") / len(b)
    return float(np.max(np.abs(fa - fb)))


def _shares(X: np.ndarray) -> dict:
    have = ~np.isnan(X)
    n_have = have.sum(axis=0)
    zero = np.where(have, X == 0, False).sum(axis=0)
    missing, constant = dead_columns(X)
    return {"missing": 1.0 - n_have / max(1, len(X)),
            "zero": np.divide(zero, n_have, out=np.full(X.shape[1], np.nan), where=n_have > 0),
            "dead": missing | constant, "all_missing": missing, "constant": constant}


def feature_drift(ref: np.ndarray, new: np.ndarray, names: list[str], q_ref: int, q_new: int,
                  alpha: float = ALPHA) -> dict:
    """Per feature of ``names`` (the columns of ``ref`` and ``new``), its shares, PSI, KS
    and flag (:func:`flag`), with the thresholds used (``q_ref``, ``q_new``: the queries
    behind each matrix)."""
    ref, new = np.asarray(ref, np.float64), np.asarray(new, np.float64)
    if ref.shape[1] != len(names) or new.shape[1] != len(names):
        raise ValueError(f"{len(names)} feature names for {ref.shape[1]} and {new.shape[1]} columns")
    th = thresholds(len(names), q_ref, q_new, alpha)
    r, n = _shares(ref), _shares(new)
    out = []
    for j, name in enumerate(names):
        row = {"feature": name, "missing": [float(r["missing"][j]), float(n["missing"][j])],
               "zero": [_num(r["zero"][j]), _num(n["zero"][j])],
               "dead": [_dead(r, j), _dead(n, j)],
               "psi": psi(ref[:, j], new[:, j]), "ks": ks(ref[:, j], new[:, j])}
        row["flag"], row["why"] = flag(row, th)
        out.append(row)
    return {"features": out, "thresholds": th.to_dict(), "queries": [q_ref, q_new],
            "rows": [len(ref), len(new)]}


def _num(v) -> float | None:
    return None if np.isnan(v) else float(v)


def _dead(shares: dict, j: int) -> str | None:
    if shares["all_missing"][j]:
        return "missing on every row"
    return "one value on every row" if shares["constant"][j] else None


def flag(row: dict, th: Thresholds) -> tuple[str, str]:
    """(``ok`` | ``drift`` | ``broken``, why) of one feature's statistics."""
    was, now = row["dead"]
    if now and not was:
        return "broken", f"{now} (it was not in the reference)"
    over = [f"{k.upper()} {row[k]:.3g} > {getattr(th, k):.3g}" for k in ("psi", "ks")
            if row[k] > getattr(th, k)]
    if over:
        return "drift", ", ".join(over)
    return "ok", ""
