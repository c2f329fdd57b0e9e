"""Paired comparisons of systems on the same queries: one entry point, :func:`compare`,
and the defaults every report, gate and verdict of the toolkit uses.

``compare(scores, baseline)`` takes per-query scores of several systems (``{name:
values}``, aligned on the same queries, as ranx's ``compare`` takes runs) and compares
every other system to the baseline, and with ``pairwise=True`` every pair of them:

* **the paired randomisation test** (sign flips): under the null hypothesis that the
  systems are exchangeable on each query, the sign of each query's delta is a coin flip.
  ``n_resamples`` draws flip the same queries in every system's deltas at once (they are
  paired on the queries), seeded; p = (draws at least as extreme + 1) / (draws + 1).
  Two-sided by default (``alternative="greater"``: one-sided, better than the baseline).
* **a multiple-comparison correction** as soon as a family holds more than one
  comparison (the systems vs the baseline are one family; the pairs among them another):
  ``correction="max-t"`` (default) is Westfall and Young's step-down max-T: each draw's
  largest statistic over the comparisons not yet rejected is the reference of the next
  largest observed one. It controls the family-wise error rate strongly and, because it
  uses the joint distribution of the very same flips, it knows that rerankers of one
  first stage on one set of queries are strongly correlated: Holm's bound (``"holm"``,
  on the plain p-values) treats them as possibly independent and loses power with every
  reranker added; max-T costs little when they are alike. ``"none"`` keeps the plain
  p-values. With one comparison the corrected p-value is the plain one.
* the statistic of max-T is the studentised mean delta (``statistic="t"``: comparisons of
  different spread count alike; a blend with the first stage varies far less than a
  model alone), or the mean delta itself (``"mean"``: the test of "the best by mean of
  all candidates", the selection gate's question). For one comparison both give the plain
  randomisation test of the mean (the t statistic is a monotone function of the mean
  under sign flips: the sum of squares does not change).
* **percentile-bootstrap confidence intervals** (``confidence_level``, resampling the
  queries with replacement, paired: one resample serves every system) of each system's
  mean and of each comparison's mean delta; ``None`` skips them.
* **wins / ties / losses** per comparison (a tie: |delta| <= :data:`TIE`).

``groups`` (one label per row) turns it into a clustered test: rows are averaged per
group first and the groups are the units flipped and resampled (interleaving's
impressions of one query; per-user scores). ``pruning`` (:class:`Halving`) makes the test
of a successive-halving search valid by replaying its pruning inside every draw.

Units that are not paired (one system on two different sets of queries: a model's gain on
queries it was held out from, recorded when it was made, against its gain on new queries)
are compared by :func:`two_sample`: the permutation test of the difference of means (Welch's
statistic) with the bootstrap interval of that difference.

scikit-learn's conventions: keyword-only options validated up front (``ValueError``
naming the option), a seed for every random draw, a frozen result with ``to_dict()``.
SciPy is not a runtime dependency: the exact sign test and the normal tail are NumPy
and ``math`` here (tests check them against SciPy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Hashable, Iterator, Mapping, Sequence

import numpy as np

#: the significance level of every verdict (report, recommendation, gate, interleaving)
ALPHA = 0.05
#: sign-flip draws, and bootstrap resamples
N_RESAMPLES = 10_000
#: level of the confidence intervals
CONFIDENCE = 0.95
#: a per-query delta no larger than this in absolute value is a tie
TIE = 1e-12
#: sign-flip (and bootstrap) cells drawn at once: memory does not grow with the draws
BLOCK_CELLS = 1 << 19
#: with ``pruning``, draws at most this many times ``n_resamples`` to keep ``n_resamples``
REPLAY_DRAWS = 10

CORRECTIONS = ("max-t", "holm", "none")
ALTERNATIVES = ("two-sided", "greater")
STATISTICS = ("t", "mean")


@dataclass(frozen=True)
class Test:
    """One paired comparison: ``system`` minus ``against``, per query (or group)."""

    system: Hashable
    against: Hashable
    mean_delta: float
    p_value: float                  # the plain randomisation test
    p_corrected: float              # corrected for the other comparisons of its family
    ci: tuple[float, float] | None  # of the mean delta
    wins: int
    ties: int
    losses: int

    def significant(self, alpha: float = ALPHA) -> bool:
        """Rejected at ``alpha`` after the correction."""
        return self.p_corrected < alpha

    def to_dict(self) -> dict:
        return {"mean_delta": self.mean_delta, "p_value": self.p_value,
                "p_corrected": self.p_corrected, "ci": None if self.ci is None else list(self.ci),
                "wins": self.wins, "ties": self.ties, "losses": self.losses}


@dataclass(frozen=True)
class Comparison:
    """What :func:`compare` found. ``tests``: per system vs the baseline; ``pairs``: per
    (a, b) of the other systems, b minus a (empty unless ``pairwise``). ``draws``: the
    sign flips the p-values rest on (with ``pruning``: those that replayed its path)."""

    baseline: Hashable
    units: int
    means: dict
    mean_ci: dict
    tests: dict
    pairs: dict
    correction: str
    alternative: str
    statistic: str
    draws: int
    seed: int
    confidence_level: float | None

    def to_dict(self) -> dict:
        return {"baseline": self.baseline, "units": self.units, "means": self.means,
                "mean_ci": {k: None if v is None else list(v) for k, v in self.mean_ci.items()},
                "tests": {k: t.to_dict() for k, t in self.tests.items()},
                "pairs": [{"a": a, "b": b, **t.to_dict()} for (a, b), t in self.pairs.items()],
                "correction": self.correction, "alternative": self.alternative,
                "statistic": self.statistic, "draws": self.draws, "seed": self.seed,
                "confidence_level": self.confidence_level}


@dataclass(frozen=True)
class Halving:
    """The path of a successive-halving search, for :func:`compare` to replay in every
    sign flip. ``rungs[r]``: each setting scored at rung r (rung 0 in the order it was
    scored) mapped to the names of its systems scored there. The search kept, after
    rung r, the settings of rung r with the best mean over their systems there (sorted
    by that, stably, in the order of rung r, which after rung 0 is that sort's order), as
    many as it scored at rung r + 1. A draw whose flipped means would have kept other
    settings is set aside: the test is conditional on the path, which makes it exact
    (the data the search never computed, the pruned settings' later rungs, are needed
    only by draws that are set aside)."""

    rungs: tuple

    def accept(self, signs: np.ndarray, deltas: np.ndarray, row: Mapping[Hashable, int]) -> np.ndarray:
        """Per draw (a row of ``signs``; ``deltas``: [systems, units], ``row`` names a
        system's row): did it keep, at every rung, the settings the search kept? The flipped
        means are computed rung by rung, only for the draws still in."""
        first = list(self.rungs[0])
        at = {s: i for i, s in enumerate(first)}
        order = np.tile(np.arange(len(first)), (len(signs), 1))
        live = np.arange(len(signs))
        for now, nxt in zip(self.rungs, self.rungs[1:]):
            cols = [[row[n] for n in names] for names in now.values()]
            means = signs[live] @ deltas[np.concatenate(cols)].T / deltas.shape[1]
            best = np.full((len(live), len(first)), -np.inf)
            starts = np.cumsum([0] + [len(c) for c in cols[:-1]])
            best[:, [at[s] for s in now]] = np.maximum.reduceat(means, starts, axis=1)
            rank = np.argsort(-np.take_along_axis(best, order, axis=1), axis=1, kind="stable")
            order = np.take_along_axis(order, rank[:, :len(nxt)], axis=1)
            same = (np.sort(order, axis=1) == np.sort([at[s] for s in nxt])).all(axis=1)
            live, order = live[same], order[same]
        ok = np.zeros(len(signs), bool)
        ok[live] = True
        return ok


def compare(scores: Mapping[Hashable, Sequence[float]], baseline: Hashable, *,
            pairwise: bool = False, correction: str = "max-t", alternative: str = "two-sided",
            statistic: str = "t", groups: Sequence | None = None, pruning: Halving | None = None,
            n_resamples: int = N_RESAMPLES, confidence_level: float | None = CONFIDENCE,
            seed: int = 0) -> Comparison:
    """Compare every system of ``scores`` to ``baseline`` (and, with ``pairwise``, to each
    other) on their per-query scores: paired randomisation tests, corrected for the
    comparisons of each family, bootstrap intervals, wins/ties/losses. See the module's
    docstring for the options."""
    _check(scores, baseline, correction, alternative, statistic, n_resamples, confidence_level)
    if pruning is not None and pairwise:
        raise ValueError("pruning tests the systems against the baseline: not with pairwise")
    names = [baseline] + [s for s in scores if s != baseline]
    values = _units(np.stack([np.asarray(scores[s], np.float64) for s in names]), groups)
    others = range(1, len(names))
    family = [(0, j) for j in others]
    pairs = [(i, j) for i in others for j in others if i < j] if pairwise else []
    tests, draws = _tests(values, family + pairs, len(family), names, pruning, correction=correction,
                          alternative=alternative, statistic=statistic, n_resamples=n_resamples,
                          seed=seed, level=confidence_level)
    return Comparison(
        baseline=baseline, units=values.shape[1],
        means={s: float(values[i].mean()) for i, s in enumerate(names)},
        mean_ci={s: ci for s, ci in zip(names, tests.pop("means"))},
        tests={names[j]: t for (_, j), t in zip(family, tests["tests"])},
        pairs={(names[i], names[j]): t for (i, j), t in zip(pairs, tests["tests"][len(family):])},
        correction=correction, alternative=alternative, statistic=statistic, draws=draws,
        seed=seed, confidence_level=confidence_level)


def _check(scores, baseline, correction, alternative, statistic, n_resamples, level) -> None:
    for name, value, allowed in (("correction", correction, CORRECTIONS),
                                 ("alternative", alternative, ALTERNATIVES),
                                 ("statistic", statistic, STATISTICS)):
        if value not in allowed:
            raise ValueError(f"{name}={value!r}: expected one of {', '.join(allowed)}")
    if baseline not in scores:
        raise ValueError(f"baseline {baseline!r} is not among the systems ({', '.join(map(str, scores))})")
    sizes = {len(np.asarray(v).reshape(-1)) for v in scores.values()}
    if len(sizes) != 1:
        raise ValueError(f"every system needs a score for each query: lengths {sorted(sizes)}")
    if sizes == {0}:
        raise ValueError("no queries to compare the systems on")
    if not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples={n_resamples!r}: a positive integer expected")
    if level is not None and not 0 < level < 1:
        raise ValueError(f"confidence_level={level!r}: expected in (0, 1), or None")


def _units(values: np.ndarray, groups) -> np.ndarray:
    """[systems, units]: the rows, or their means per group (in sorted group order)."""
    if groups is None:
        return values
    groups = np.asarray(groups).reshape(-1)
    if len(groups) != values.shape[1]:
        raise ValueError(f"groups: one label per query expected ({values.shape[1]}), got {len(groups)}")
    labels, code = np.unique(groups, return_inverse=True)
    sums = np.zeros((len(values), len(labels)))
    np.add.at(sums, (slice(None), code), values)
    return sums / np.bincount(code, minlength=len(labels))


def _tests(values, comparisons, first, names, pruning, *, correction, alternative, statistic,
           n_resamples, seed, level) -> tuple[dict, int]:
    """{"tests": a :class:`Test` per (i, j) comparison (j minus i), "means": each system's
    mean's interval}, and the draws. Comparisons ``[:first]`` are one family, the rest
    another: all tested on the same flips, each family corrected on its own."""
    if not comparisons:                       # the baseline alone: its interval only
        boot = None if level is None else resampled_means(values, n_resamples, seed)
        return {"tests": [], "means": [_interval(None if boot is None else boot[:, 0], level)]}, 0
    deltas = np.stack([values[j] - values[i] for i, j in comparisons])
    families = [np.arange(first), np.arange(first, len(comparisons))]
    accept = None
    if pruning is not None:
        row = {names[j]: r for r, (_, j) in enumerate(comparisons)}
        accept = lambda signs: pruning.accept(signs, deltas, row)       # noqa: E731
    plain, maxt, draws = flip_test(deltas, n_resamples, seed, alternative, statistic, accept, families)
    corrected = plain.copy()
    for f in families:
        if len(f) > 1 and correction != "none":
            corrected[f] = np.maximum(plain[f], maxt[f] if correction == "max-t" else holm(plain[f]))
    boot = None if level is None else resampled_means(values, n_resamples, seed)
    cis = [_interval(None if boot is None else boot[:, j] - boot[:, i], level) for i, j in comparisons]
    wtl = np.stack([(deltas > TIE).sum(1), (np.abs(deltas) <= TIE).sum(1), (deltas < -TIE).sum(1)], 1)
    return {"tests": [Test(names[j], names[i], float(d.mean()), float(p), float(c), ci, *map(int, w))
                      for (i, j), d, p, c, ci, w in zip(comparisons, deltas, plain, corrected, cis, wtl)],
            "means": [_interval(None if boot is None else b, level)
                      for b in (boot.T if boot is not None else [None] * len(values))]}, draws


def flip_blocks(n: int, units: int, seed: int) -> Iterator[np.ndarray]:
    """``n`` rows of ``units`` random signs, in blocks of at most :data:`BLOCK_CELLS`
    cells (the same stream as one ``(n, units)`` draw: p-values do not depend on the block
    size, and every earlier report's p-values were computed with this stream)."""
    rng = np.random.default_rng(seed)
    rows = max(1, BLOCK_CELLS // max(units, 1))
    for start in range(0, n, rows):
        yield rng.choice(np.array([-1.0, 1.0]), size=(min(rows, n - start), units))


def _side(x: np.ndarray, alternative: str) -> np.ndarray:
    return np.abs(x) if alternative == "two-sided" else x


def _studentise(means: np.ndarray, sumsq: np.ndarray, n: int) -> np.ndarray:
    """t = mean / (sd / sqrt(n)) from the mean and the (flip-invariant) sum of squares."""
    if n < 2:
        return means
    var = np.maximum(sumsq - n * means * means, 0.0) / (n * (n - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = means / np.sqrt(var)
    return np.where(var > 0, t, np.where(means == 0, 0.0, np.copysign(np.inf, means)))


def flip_test(deltas: np.ndarray, n_resamples: int = N_RESAMPLES, seed: int = 0,
              alternative: str = "two-sided", statistic: str = "t",
              accept: Callable[[np.ndarray], np.ndarray] | None = None,
              families: Sequence[np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """(plain p-values, step-down max-T p-values, draws) of the rows of ``deltas``
    ([comparisons, units]), from the same sign flips; max-T within each of ``families``
    (row indices; default: all rows one family). ``accept(signs)``: which draws to keep (a
    conditional test; the identity is always kept, as the +1); then draws go on until
    ``n_resamples`` are kept or ``REPLAY_DRAWS`` times as many were drawn."""
    c, n = deltas.shape
    if n == 0 or not deltas.any():
        return np.ones(c), np.ones(c), 0
    means = deltas.mean(axis=1)
    obs = _side(means, alternative)
    sumsq = (deltas * deltas).sum(axis=1)
    stat = (lambda m: _side(_studentise(m, sumsq, n) if statistic == "t" else m, alternative))
    top = stat(means)
    with np.errstate(invalid="ignore"):       # an infinite t (identical deltas) is its own bar
        bar = np.where(np.isinf(top), top, top - 1e-9 * np.maximum(1.0, np.abs(top)))
    orders = [f[np.argsort(-top[f], kind="stable")] for f in families or [np.arange(c)] if len(f)]
    plain, step, kept = np.zeros(c), np.zeros(c), 0
    for signs in flip_blocks(n_resamples * (REPLAY_DRAWS if accept else 1), n, seed):
        if accept is not None:
            signs = signs[accept(signs)]
        flipped = signs @ deltas.T / n
        kept += len(flipped)
        plain += (_side(flipped, alternative) >= obs - 1e-15).sum(axis=0)
        flipped = stat(flipped)
        for o in orders:            # the largest over the comparisons not stepped past yet
            step[o] += (np.maximum.accumulate(flipped[:, o[::-1]], axis=1)[:, ::-1] >= bar[o]).sum(axis=0)
        if accept is not None and kept >= n_resamples:
            break
    maxt = np.empty(c)
    for o in orders:
        maxt[o] = np.maximum.accumulate((step[o] + 1) / (kept + 1))
    return (plain + 1) / (kept + 1), maxt, kept


@dataclass(frozen=True)
class TwoSample:
    """:func:`two_sample`'s answer: ``b`` against ``a``, two independent samples."""

    mean_delta: float               # mean(b) - mean(a)
    p_value: float
    ci: tuple[float, float] | None  # of the mean delta
    sizes: tuple[int, int]
    alternative: str
    draws: int

    def to_dict(self) -> dict:
        return {"mean_delta": self.mean_delta, "p_value": self.p_value,
                "ci": None if self.ci is None else list(self.ci), "sizes": list(self.sizes),
                "alternative": self.alternative, "draws": self.draws}


def two_sample(a: Sequence[float], b: Sequence[float], *, alternative: str = "two-sided",
               n_resamples: int = N_RESAMPLES, confidence_level: float | None = CONFIDENCE,
               seed: int = 0) -> TwoSample:
    """``b`` against ``a`` when their units differ (other queries, not the same ones
    again): the permutation test of the means' difference, with Welch's studentised
    statistic (valid as the samples grow even when their spreads differ; the labels of
    the pooled values shuffled ``n_resamples`` times, seeded; p = (draws at least as
    extreme + 1) / (draws + 1)), and the percentile-bootstrap interval of mean(b) -
    mean(a) (each sample resampled on its own). ``alternative``: "two-sided", "greater"
    (b above a) or "less" (b below a)."""
    a, b = (np.asarray(x, np.float64).reshape(-1) for x in (a, b))
    if alternative not in (*ALTERNATIVES, "less"):
        raise ValueError(f"alternative={alternative!r}: expected one of two-sided, greater, less")
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"two_sample needs at least 2 units a side: got {len(a)} and {len(b)}")
    _check({0: [0.0]}, 0, "none", "two-sided", "t", n_resamples, confidence_level)
    pooled, n = np.concatenate([a, b]), len(a)
    sign = -1.0 if alternative == "less" else 1.0
    obs = _side(sign * _welch(pooled[None, :], n), alternative)[0]
    rng = np.random.default_rng(seed)
    rows, hits = max(1, BLOCK_CELLS // len(pooled)), 0
    for start in range(0, n_resamples, rows):
        perm = rng.permuted(np.tile(pooled, (min(rows, n_resamples - start), 1)), axis=1)
        hits += int((_side(sign * _welch(perm, n), alternative) >= obs - 1e-12).sum())
    ci = None
    if confidence_level is not None:
        diff = resampled_means(b[None, :], n_resamples, seed + 1)[:, 0] - \
            resampled_means(a[None, :], n_resamples, seed + 2)[:, 0]
        ci = _interval(diff, confidence_level)
    return TwoSample(float(b.mean() - a.mean()), (hits + 1) / (n_resamples + 1), ci,
                     (len(a), len(b)), alternative, n_resamples)


def _welch(values: np.ndarray, n: int) -> np.ndarray:
    """Per row of ``values`` ([draws, units]): Welch's t of its units ``[n:]`` against
    ``[:n]`` (0 when both spreads are 0 and the means equal)."""
    a, b = values[:, :n], values[:, n:]
    diff = b.mean(axis=1) - a.mean(axis=1)
    se = np.sqrt(a.var(axis=1, ddof=1) / a.shape[1] + b.var(axis=1, ddof=1) / b.shape[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(se > 0, diff / se, np.where(diff == 0, 0.0, np.copysign(np.inf, diff)))


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values."""
    p = np.asarray(p, np.float64)
    order = np.argsort(p, kind="stable")
    adj = np.empty_like(p)
    adj[order] = np.minimum(1.0, np.maximum.accumulate(p[order] * (len(p) - np.arange(len(p)))))
    return adj


def resampled_means(values: np.ndarray, n_resamples: int = N_RESAMPLES, seed: int = 0) -> np.ndarray:
    """[n_resamples, rows]: the means of the rows of ``values`` ([rows, units]) over
    bootstrap resamples of the units (with replacement; one resample for every row, so
    that a difference of two columns is the resampled mean difference), in blocks of at
    most :data:`BLOCK_CELLS` cells."""
    rows, n = values.shape
    rng = np.random.default_rng(seed)
    block = max(1, BLOCK_CELLS // n)
    out = []
    for start in range(0, n_resamples, block):
        b = min(block, n_resamples - start)
        at = (rng.integers(0, n, (b, n)) + n * np.arange(b)[:, None]).ravel()
        out.append(np.bincount(at, minlength=b * n).reshape(b, n) @ values.T / n)
    return np.concatenate(out)


def _interval(resampled: np.ndarray | None, level: float | None) -> tuple[float, float] | None:
    """The percentile interval at ``level`` of resampled means (None without them)."""
    if resampled is None:
        return None
    lo, hi = np.percentile(resampled, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def sign_test(k: int, n: int) -> float:
    """Two-sided exact binomial test of ``k`` successes in ``n`` trials at p = 1/2 (the
    sign-flip test of n outcomes of +-1, enumerated): the probability of every outcome no
    more likely than ``k`` (log pmf by the cumulative sum of log ratios ``C(n, j+1) /
    C(n, j)``: exact in float64, O(n))."""
    if n <= 0:
        return 1.0
    j = np.arange(n, dtype=np.float64)
    logpmf = np.concatenate([[0.0], np.cumsum(np.log(n - j) - np.log(j + 1))]) - n * np.log(2.0)
    return float(min(1.0, np.exp(logpmf[logpmf <= logpmf[k] + 1e-7]).sum()))   # scipy's tie tolerance


def z_test(deltas: np.ndarray) -> float:
    """Two-sided z-test of mean(deltas) = 0 (normal approximation, for many units)."""
    d = np.asarray(deltas, np.float64)
    se = d.std(ddof=1) / math.sqrt(len(d))
    return float(d.mean() == 0) if se == 0 else math.erfc(abs(d.mean()) / se / math.sqrt(2))
