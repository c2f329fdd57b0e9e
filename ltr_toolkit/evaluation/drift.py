"""Feature drift between two logged matrices, pure (NumPy, no cluster): a reference (the
data a deployed model was trained on, or the snapshot at deployment) and a newer one,
columns in the feature set's order, NaN where a feature did not match, rows grouped by
query (``offsets``).

Per feature:

* ``missing``: the share of rows where it did not match, in each;
* ``zero``: the share of its present values that are 0, in each; ``dead``: missing on
  every row, or one value on every row (``features.check.dead_columns``);
* ``psi``: the population stability index over the reference's deciles of its present
  values (read on the grid below) and one bin for "missing", each bin's share smoothed by
  half a row: sum((q - p) ln(q / p));
* ``ks``: the Kolmogorov-Smirnov statistic of the present values, read on a grid of the
  pooled present values' :data:`KS_BINS`-quantiles (ties merged; 1 when one side has
  none and the other has some).

Thresholds are calibrated on each run, from the run's own queries (:func:`null_statistics`):
with nothing changed, the reference's and the new set's queries are drawn alike, so the
two snapshots' queries are pooled and split at random, whole (the rows of a query stay
together, so their correlation is kept), :data:`DRAWS` times into a pseudo-reference and a
pseudo-new set of the two sets' actual numbers of queries, and each feature's PSI and KS
computed on every split (on a grid of the pooled values' quantiles, a function of the
pooled queries alone). Each statistic is standardised by its own null (its mean and spread
over the splits), and the threshold ``z`` is the 1 - :data:`ALPHA` order statistic of the
largest standardised statistic of each split, over every feature and both statistics (a
max-statistic): the splits are exchangeable with the real one when nothing changed, so an
unchanged feature set is ``ok`` as a whole in at least 1 - ALPHA of runs, whatever the
number of features, their shapes and their correlation (a permutation test). A level the
draws cannot resolve is never read (:func:`max_threshold`). Resampling the reference alone
(a bootstrap) was tried first: its tails were too light for features with an atom (60%
zeros: 8.3% whole-set false alarms at 6 features, 1,000 queries a side, 300 runs).

Flags (:func:`flag`): ``broken`` when the feature is dead in the new data and was not in
the reference, with enough support there to tell (:func:`support`); ``drift`` when its
standardised PSI or KS exceeds ``z``; ``ok`` otherwise.
"""

from __future__ import annotations

import math

import numpy as np

from ..features.check import dead_columns

#: PSI's bins: the reference's deciles of a feature's present values (missing is one more)
BINS = 10
#: KS is read at the reference's quantiles in steps of 1 / KS_BINS (a multiple of BINS)
KS_BINS = 20
#: the whole feature set is ``ok`` in at least 1 - ALPHA of runs with nothing changed
ALPHA = 0.05
#: random splits the threshold is calibrated on (at ALPHA 0.05 the max is their 381st of
#: 400; at 0.025, their 391st)
DRAWS = 400
#: ``broken`` needs the reference to show the feature alive on this share of its rows
MIN_ROW_SHARE = 0.01
#: cells of a resampled count block (memory does not grow with the data)
BLOCK_CELLS = 1 << 23
FLAGS = ("ok", "drift", "broken")
_MISSING = KS_BINS            # the code of a missing value


def edges(X: np.ndarray) -> list[np.ndarray]:
    """Per feature, the inner edges of the KS_BINS-quantile bins of its present values in
    ``X`` (ties merged): the grid every statistic is read on."""
    levels = np.arange(1, KS_BINS) / KS_BINS
    out = []
    for j in range(X.shape[1]):                    # a loop over features, vectorised inside
        x = X[:, j][~np.isnan(X[:, j])]
        out.append(np.unique(np.quantile(x, levels)) if len(x) else np.empty(0))
    return out


def codes(X: np.ndarray, fine: list[np.ndarray]) -> np.ndarray:
    """[rows, features]: each value's bin among ``fine`` (:data:`_MISSING`: missing)."""
    out = np.empty(X.shape, np.int64)
    for j, e in enumerate(fine):
        col = X[:, j]
        out[:, j] = np.where(np.isnan(col), _MISSING, np.searchsorted(e, np.nan_to_num(col), side="right"))
    return out


def query_counts(c: np.ndarray, offsets: np.ndarray, features=slice(None)) -> np.ndarray:
    """[queries, features, KS_BINS + 1]: each query's rows per bin (of ``codes``)."""
    c = c[:, features]
    q = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    f = c.shape[1]
    at = (q[:, None] * f + np.arange(f)[None, :]) * (KS_BINS + 1) + c
    flat = np.bincount(at.ravel(), minlength=(len(offsets) - 1) * f * (KS_BINS + 1))
    return flat.reshape(len(offsets) - 1, f, KS_BINS + 1).astype(np.float64)


def statistics(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(PSI, KS) of bin counts ``a`` (the reference) and ``b`` ([..., features, KS_BINS +
    1] on one grid of :func:`edges`, the last bin missing; float32: counts are exact in it,
    and the observed and the null statistics are computed alike). PSI's deciles are those of
    ``a`` itself, read on the grid (each split's pseudo-reference has its own, as the
    reference has)."""
    ca, cb = np.cumsum(a[..., :KS_BINS], axis=-1), np.cumsum(b[..., :KS_BINS], axis=-1)
    na, nb = ca[..., -1:], cb[..., -1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(na > 0, ca / na, 1.0)
        ks = np.abs(ca / na - cb / nb).max(axis=-1)
    ks = np.where((na[..., 0] > 0) & (nb[..., 0] > 0), ks, (na[..., 0] > 0) != (nb[..., 0] > 0))
    # the decile each grid bin falls in, by a's cumulative share; then counts per decile
    d = np.clip(np.ceil(share * BINS - 1e-4) - 1, 0, BINS - 1).astype(np.int64)   # float32 slack
    rows = np.arange(d.size // KS_BINS).reshape(d.shape[:-1] + (1,)) * BINS
    per = np.bincount((rows + d).ravel(), minlength=d.size // KS_BINS * BINS)
    upto = np.cumsum(per.reshape(d.shape[:-1] + (BINS,)), axis=-1)      # grid bins in deciles <= k
    zero = np.zeros(a.shape[:-1] + (1,), a.dtype)

    def coarse(c):
        cum = np.concatenate([zero, c], axis=-1)
        return np.diff(np.concatenate([zero, np.take_along_axis(cum, upto, axis=-1)], axis=-1), axis=-1)
    pa = np.concatenate([coarse(ca), a[..., KS_BINS:]], axis=-1)
    pb = np.concatenate([coarse(cb), b[..., KS_BINS:]], axis=-1)
    used = (pa > 0) | (pb > 0)
    used[..., -1] = True
    bins = used.sum(axis=-1, keepdims=True).astype(a.dtype)
    p = (pa + 0.5) / (pa.sum(axis=-1, keepdims=True) + 0.5 * bins)
    q = (pb + 0.5) / (pb.sum(axis=-1, keepdims=True) + 0.5 * bins)
    psi = np.where(used, (q - p) * np.log(q / p), 0.0).sum(axis=-1)
    return psi.astype(np.float64), ks.astype(np.float64)


def _split(queries: int, first: int, draws: int, rng) -> np.ndarray:
    """[draws, queries]: 1 for the ``first`` queries of a random split, else 0."""
    order = np.argsort(rng.random((draws, queries)), axis=1)
    m = np.zeros((draws, queries))
    np.put_along_axis(m, order[:, :first], 1.0, axis=1)
    return m


def null_statistics(c: np.ndarray, offsets: np.ndarray, q_ref: int, draws: int = DRAWS,
                    seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """([draws, features] PSI, KS) between the two sides of random splits of the queries
    (``c``: their rows' :func:`codes`, grouped at ``offsets``) into ``q_ref`` queries and
    the rest: whole queries, so the correlation of a query's rows is kept."""
    rng = np.random.default_rng(seed)
    queries = len(offsets) - 1
    m_ref = _split(queries, q_ref, draws, rng).astype(np.float32)   # counts: exact in float32
    width = max(1, BLOCK_CELLS // max(1, (queries + 2 * draws) * (KS_BINS + 1)))
    psi, ks = np.empty((draws, c.shape[1])), np.empty((draws, c.shape[1]))
    for start in range(0, c.shape[1], width):       # feature blocks, vectorised inside
        block = slice(start, min(start + width, c.shape[1]))
        h = query_counts(c, offsets, block).reshape(queries, -1).astype(np.float32)
        a = m_ref @ h
        b = h.sum(axis=0) - a                          # the other side: the rest of the queries
        psi[:, block], ks[:, block] = statistics(a.reshape(draws, -1, KS_BINS + 1),
                                                 b.reshape(draws, -1, KS_BINS + 1))
    return psi, ks


def standardise(values: np.ndarray, null: np.ndarray) -> np.ndarray:
    """``values`` in units of ``null``'s spread above its mean, per column ([draws,
    features] null); a statistic that never varies in the null is 0 at its value, infinite
    above it."""
    mu, sd = null.mean(axis=0), null.std(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (values - mu) / sd
    above = values > mu + 1e-6 * np.maximum(1.0, np.abs(mu))      # float32 statistics
    return np.where(sd > 0, z, np.where(above, np.inf, 0.0))


def max_threshold(maxima: np.ndarray, alpha: float = ALPHA) -> float:
    """The ``z`` that the largest standardised statistic of a null draw exceeds in at most
    ``alpha`` of draws: the ceil((1 - alpha)(draws + 1))-th smallest; refused when the
    draws cannot resolve the level (fewer than 1 / alpha - 1)."""
    rank = math.ceil((1 - alpha) * (len(maxima) + 1))
    if rank > len(maxima):
        raise ValueError(f"{len(maxima)} draws cannot resolve a level of {alpha}: at least "
                         f"{math.ceil(1 / alpha) - 1} needed")
    return float(np.sort(maxima)[rank - 1])


def support(ref: np.ndarray, new: np.ndarray, offsets: np.ndarray, q_new: int,
            alpha: float = ALPHA) -> dict:
    """Per feature: the reference's rows and queries where it differs from the state the
    new data has on every row (missing, or its first row's value), and whether that is
    enough to call the feature ``broken`` when it is dead now: at least
    :data:`MIN_ROW_SHARE` of the rows, and so many queries that ``q_new`` queries drawn
    alike would all miss them with probability below alpha / features (their expected
    number of such queries at least ln(features / alpha))."""
    state = new[0] if len(new) else np.full(ref.shape[1], np.nan)
    differs = ~(ref == state) & ~(np.isnan(ref) & np.isnan(state))
    q_ref = len(offsets) - 1
    cum = np.concatenate([np.zeros((1, ref.shape[1]), np.int64), np.cumsum(differs, axis=0)])
    hits = cum[offsets[1:]] - cum[offsets[:-1]]            # per query
    rows, queries = differs.sum(axis=0), (hits > 0).sum(axis=0)
    needed = math.log(max(1, ref.shape[1]) / alpha) * max(1, q_ref) / max(1, q_new)
    enough = (rows >= MIN_ROW_SHARE * max(1, len(ref))) & (queries >= needed)
    return {"rows": rows, "queries": queries, "enough": enough, "needed_queries": needed}


def _shares(X: np.ndarray) -> dict:
    have = ~np.isnan(X)
    n_have = have.sum(axis=0)
    zero = np.where(have, X == 0, False).sum(axis=0)
    missing, constant = dead_columns(X)
    return {"missing": 1.0 - n_have / max(1, len(X)),
            "zero": np.divide(zero, n_have, out=np.full(X.shape[1], np.nan), where=n_have > 0),
            "dead": missing | constant, "all_missing": missing, "constant": constant}


def feature_drift(ref: np.ndarray, new: np.ndarray, names: list[str], ref_offsets: np.ndarray,
                  new_offsets: np.ndarray, alpha: float = ALPHA, draws: int = DRAWS,
                  seed: int = 0) -> dict:
    """Per feature of ``names`` (the columns of ``ref`` and ``new``, rows grouped by
    query at ``ref_offsets`` and ``new_offsets``), its shares, PSI, KS, their standardised
    values, their limits in its own units and its flag (:func:`flag`), with the threshold
    calibrated on this run's queries (``draws`` splits, seeded)."""
    ref, new = np.asarray(ref, np.float64), np.asarray(new, np.float64)
    if ref.shape[1] != len(names) or new.shape[1] != len(names):
        raise ValueError(f"{len(names)} feature names for {ref.shape[1]} and {new.shape[1]} columns")
    q_ref, q_new = len(ref_offsets) - 1, len(new_offsets) - 1
    both = np.concatenate([ref, new])
    fine = edges(both)
    c = codes(both, fine)
    psi, ks = statistics(_counts(c[:len(ref)]), _counts(c[len(ref):]))     # as the null's
    offsets = np.concatenate([ref_offsets, len(ref) + np.asarray(new_offsets)[1:]])
    null_psi, null_ks = null_statistics(c, offsets, q_ref, draws, seed)
    # standardised by the spread of all the splits, the real one among them: symmetric,
    # so the real split's rank among them is uniform when nothing changed
    all_psi, all_ks = np.vstack([psi, null_psi]), np.vstack([ks, null_ks])
    z = np.maximum(standardise(all_psi, all_psi), standardise(all_ks, all_ks))
    z_max = max_threshold(z[1:].max(axis=1), alpha)
    z_psi, z_ks = standardise(psi, all_psi), standardise(ks, all_ks)
    limit = {"psi": _raw(z_max, all_psi), "ks": _raw(z_max, all_ks)}
    r, n = _shares(ref), _shares(new)
    sup = support(ref, new, ref_offsets, q_new, alpha)
    out = []
    for j, name in enumerate(names):               # the report's rows (no data touched)
        row = {"feature": name, "missing": [float(r["missing"][j]), float(n["missing"][j])],
               "zero": [_num(r["zero"][j]), _num(n["zero"][j])],
               "dead": [_dead(r, j), _dead(n, j)], "psi": float(psi[j]), "ks": float(ks[j]),
               "z": [float(z_psi[j]), float(z_ks[j])],
               "limit": [float(limit["psi"][j]), float(limit["ks"][j])],
               "support": [int(sup["rows"][j]), int(sup["queries"][j])],
               "enough_support": bool(sup["enough"][j])}
        row["flag"], row["why"] = flag(row, z_max)
        out.append(row)
    return {"features": out, "queries": [q_ref, q_new], "rows": [len(ref), len(new)],
            "thresholds": {"z": z_max, "draws": draws, "alpha": alpha,
                           "min_row_share": MIN_ROW_SHARE,
                           "min_queries": float(sup["needed_queries"])}}


def _counts(c: np.ndarray) -> np.ndarray:
    """[features, KS_BINS + 1]: the rows per bin of :func:`codes`."""
    f = c.shape[1]
    at = np.arange(f)[None, :] * (KS_BINS + 1) + c
    return np.bincount(at.ravel(), minlength=f * (KS_BINS + 1)).reshape(f, KS_BINS + 1).astype(np.float32)


def _raw(z: float, null: np.ndarray) -> np.ndarray:
    """A standardised threshold in each feature's own units."""
    return null.mean(axis=0) + z * null.std(axis=0)


def _num(v) -> float | None:
    return None if np.isnan(v) else float(v)


def _dead(shares: dict, j: int) -> str | None:
    if shares["all_missing"][j]:
        return "missing on every row"
    return "one value on every row" if shares["constant"][j] else None


def flag(row: dict, z: float) -> tuple[str, str]:
    """(``ok`` | ``drift`` | ``broken``, why) of one feature's statistics (``z``: the
    calibrated threshold of the standardised statistics)."""
    was, now = row["dead"]
    if now and not was and row["enough_support"]:
        return "broken", f"{now} (it was not in the reference)"
    over = [f"{k.upper()} {row[k]:.3g} > {lim:.3g}" for k, zk, lim in
            zip(("psi", "ks"), row["z"], row["limit"]) if zk > z]
    if over:
        tail = "" if not now or was else \
            f"; {now}, but the reference has it on only {row['support'][0]} rows: not enough to call it broken"
        return "drift", ", ".join(over) + tail
    return "ok", ""


def pair(ref: np.ndarray, new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(PSI, KS) per column of two matrices, uncalibrated (the statistics alone)."""
    ref, new = (np.asarray(x, np.float64).reshape(len(x), -1) for x in (ref, new))
    c = codes(np.concatenate([ref, new]), edges(np.concatenate([ref, new])))
    return statistics(_counts(c[:len(ref)]), _counts(c[len(ref):]))
