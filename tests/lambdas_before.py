"""A frozen copy of the lambda objective's block implementation as it was at e816473
(ltr_toolkit/rank/lambdas.py: RankPairs and QueryPairs over padded blocks of pairs, in
NumPy), kept as the reference the compiled kernel (ltr_toolkit/rank/pairs.py) is compared
with in tests/test_kernel.py. Not used by the package; do not change it."""

from __future__ import annotations

import threading

import numpy as np

from ltr_toolkit.rank.lambdas import (DEFAULT_MU, QUERY_NORMALIZATIONS, check_doc_weights,
                                      check_weighting, exp_gain, ideal_dcg, loss2_discount)

#: Pair cells per block of the pair arithmetic (RankPairs' and QueryPairs' ``chunk``).
CHUNK = 1 << 18

#: Position weights kept between calls: for each of the _WPOS_KEEP most recently used
#: parameter sets, one array for whole blocks (rows 0 to the block's last, every column),
#: as large as the largest such block asked for, so at most _WPOS_KEEP blocks of at most
#: ``chunk`` cells each (4 MiB in float32 with the default chunk; a query longer than the
#: chunk: one row of it); smaller blocks get views of it. Row slices of a query split into
#: several blocks are computed per call.
_WPOS_KEEP = 4
_wpos_cache: dict = {}
_wpos_lock = threading.Lock()


def _position_weights(r0: int, r1: int, n: int, weighting: str, k: int | None, mu: float,
                      dtype: str, truncate: bool = True) -> np.ndarray:
    """The part of W_ab that depends on rank positions only, for positions r0 <= a < r1
    (rows) and b < n (columns): 0 unless b > a (each unordered pair once, the
    better-ranked position first). ``truncate``: discounts are 0 from rank k on (NDCG@k's
    swap); otherwise the untruncated DCG's (k then only selects the pairs, as xgboost's
    rank:ndcg). Read-only. W_ab does not depend on the shape asked for, so a cached
    array with at least the rows and columns asked for serves a view."""
    key = (weighting, k, mu, dtype, truncate)
    whole = r0 == 0 and r1 == (n if k is None or weighting == "ranknet" else min(k, n))
    with _wpos_lock:
        w = _wpos_cache.pop(key, None)
        if whole and (w is None or w.shape[1] < n):
            w = _compute_position_weights(0, r1, n, *key)
        if w is not None:
            _wpos_cache[key] = w              # the most recently used last
            while len(_wpos_cache) > _WPOS_KEEP:
                del _wpos_cache[next(iter(_wpos_cache))]
    if w is not None and r1 <= w.shape[0] and n <= w.shape[1]:
        return w[r0:r1, :n]
    return _compute_position_weights(r0, r1, n, *key)


_position_weights.cache_clear = _wpos_cache.clear


def _compute_position_weights(r0, r1, n, weighting, k, mu, dtype, truncate) -> np.ndarray:
    if weighting == "ranknet":
        w = (np.arange(n)[None, :] > np.arange(r0, r1)[:, None]).astype(dtype)
    else:
        disc = 1.0 / np.log2(np.arange(max(r1, n)) + 2.0)
        if k is not None and truncate:
            disc[k:] = 0.0
        w = np.zeros((r1 - r0, n), dtype=dtype if weighting == "lambdarank" else np.float64)
        if weighting != "ndcg-loss2":
            # |disc_a - disc_b| where b > a, else 0 (discounts never grow with the rank)
            np.subtract(disc[r0:r1, None], disc[None, :n], out=w, casting="same_kind")
            np.maximum(w, 0.0, out=w)
        if weighting != "lambdarank":
            # NDCG-Loss2's delta(b - a) (0 where b <= a): row a is a window of its values
            v = loss2_discount(np.arange(1 - r1, n - r0))
            delta = np.lib.stride_tricks.sliding_window_view(v, n)[::-1] * (
                mu if weighting == "ndcg-loss2++" else 1.0)
            if k is not None:
                delta[max(0, k - r0):] = 0.0  # b > a >= k: neither in the top k
            w += delta
            w = w.astype(dtype)
    w.flags.writeable = False
    return w


def _block(ys, Gs, ss, lengths, Wpos, r0, sigma, ranknet, score_normalization, hessian=True,
           ws=None):
    """Lambdas of the pairs (a, b), r0 <= a < r0 + len(Wpos), b > a, of a block of queries
    whose documents are sorted by descending score: ``ys``, ``Gs``, ``ss`` are [B, n]
    (labels, normalised gains, scores; padding after each query's ``lengths`` documents,
    with finite scores); ``ws`` [B, n] or None: document weights, each pair's lambda times
    its preferred document's (after the sum of |lambda_ab| returned, which the per-query
    normalisation reads: the weights scale the normalised lambdas linearly). Returns
    ([B, n] lambdas, [B, n] hessians or None, [B] sum of unweighted |lambda_ab| over the
    block's pairs). A few passes over [B, rows, n] arrays, in place."""
    r1 = r0 + Wpos.shape[0]
    dt = ys.dtype.type
    sig = dt(sigma)
    sign, W = _block_pair_weights(ys, Gs, lengths, Wpos, r0, r1, ranknet)
    gap = np.subtract(ss[:, r0:r1, None], ss[:, None, :])   # >= 0 where b > a
    if score_normalization:
        _normalise_by_score_gap(W, gap, ss, lengths, dt)
    p = _better_loses(gap, sign, sig, dt)                # gap's buffer, reused
    lam = W                                              # |lambda_ab| = sigma W p
    lam *= p
    if sig != 1:
        lam *= sig
    total = lam.sum(axis=(1, 2), dtype=np.float64)
    if ws is not None:
        lam *= np.where(sign > 0, ws[:, r0:r1, None], ws[:, None, :])
    hess = _block_hessian(lam, p, sig, dt, r0, r1) if hessian else None
    signed = lam
    signed *= sign                                       # the better one gets -|lambda_ab|
    grad = signed.sum(axis=1)                            # b's side: + over a
    grad[:, r0:r1] -= signed.sum(axis=2)                 # a's side: - over b
    return grad, hess, total


def _block_pair_weights(ys, Gs, lengths, Wpos, r0, r1, ranknet):
    """([B, rows, n] sign of y_a - y_b, pair weights W: |G_a - G_b| (1 for RankNet) times
    the position weights, 0 for padding)."""
    n = ys.shape[1]
    sign = np.subtract(ys[:, r0:r1, None], ys[:, None, :])
    np.sign(sign, out=sign)                              # +1 where a is the better one
    if ranknet:
        W = np.abs(sign)
    else:
        W = np.subtract(Gs[:, r0:r1, None], Gs[:, None, :])
        np.abs(W, out=W)
    W *= Wpos
    if np.any(lengths < n):
        W *= (np.arange(n) < lengths[:, None])[:, None, :]
    return sign, W


def _normalise_by_score_gap(W, gap, ss, lengths, dt) -> None:
    """xgboost's rank:ndcg: W / (|s_a - s_b| + 0.01), in place, unless all the query's
    scores tie."""
    last = np.take_along_axis(ss, np.maximum(lengths - 1, 0)[:, None], axis=1)[:, 0]
    flat = (ss[:, 0] - last) <= 0
    if not flat.all():
        d = np.abs(gap)
        d += dt(0.01)
        if flat.any():
            d[flat] = 1.0
        W /= d


def _better_loses(gap, sign, sig, dt):
    """p = 1 / (1 + exp(sigma (s_better - s_worse))), finite for any gap (in ``gap``'s
    buffer)."""
    p = gap
    p *= sign
    if sig != 1:
        p *= sig
    np.clip(p, -50.0, 50.0, out=p)
    np.exp(p, out=p)
    p += dt(1.0)
    np.reciprocal(p, out=p)
    return p


def _block_hessian(lam, p, sig, dt, r0, r1):
    """[B, n] sums of sigma^2 W p (1 - p) = sigma lam (1 - p) over each document's pairs
    (in ``p``'s buffer)."""
    h = np.subtract(dt(1.0), p, out=p)
    h *= lam
    if sig != 1:
        h *= sig
    hess = h.sum(axis=1)
    hess[:, r0:r1] += h.sum(axis=2)
    return hess


def _sorted_rows(scores_pad, lengths, *arrays):
    """Sort each row by descending score (ties by position: stable), padding last with
    the row's lowest real score (finite, so no inf - inf); the other arrays follow."""
    n = scores_pad.shape[1]
    real = np.arange(n) < lengths[:, None]
    s = np.where(real, scores_pad, -np.inf)
    order = np.argsort(-s, axis=1, kind="stable")
    s = np.take_along_axis(s, order, axis=1)
    low = np.take_along_axis(s, np.maximum(lengths - 1, 0)[:, None], axis=1)
    s = np.where(real, s, low)
    return (s, *(np.take_along_axis(a, order, axis=1) for a in arrays))


class RankPairs:
    """Lambdas and hessians of every document of a training set for the tree objective.

    Pairs are pairs of *rank positions* (a, b), a < b, inside a query in the current
    score order: with a truncation k only a < k (at least one document in the current top
    k), otherwise all. Queries of similar size are padded into blocks of at most ``chunk``
    pair cells ([B queries, k rows, n columns]); a query too large for one block is split
    by rows. Each round sorts every block's rows by score and computes all its pairs at
    once (``_block``): per-document lambdas are row and column sums, so no pair list is
    ever stored and memory is O(documents + chunk), whatever the query sizes.
    The numbers are those of :func:`lambdaloss_lambdas` query by query
    (``tests/test_lambdaloss.py``), optionally scaled per query (:data:`QUERY_NORMALIZATIONS`).
    ``score_normalization`` divides every pair weight by ``|s_a - s_b| + 0.01`` as xgboost's
    ``rank:ndcg`` does: pairs the model barely separates weigh more (the lambdas are then
    no longer the gradient of a fixed-weight loss). ``hessian_scale`` multiplies the
    hessians (xgboost's rank:ndcg uses 2). ``truncate_discounts``: |delta DCG| with the
    discounts of NDCG@k (0 from rank k on); False: the untruncated discounts, k then only
    selecting the pairs and the IDCG@k (xgboost's rank:ndcg; with score normalisation,
    pairs normalisation and hessian_scale 2 these are its gradient and hessian). Pair arithmetic runs in ``dtype``
    (float32 by default: xgboost keeps gradients in float32). ``doc_weights`` (one per
    document; None: none): each pair's lambda and hessian times its preferred document's
    weight (the module docstring), after the per-query normalisation has read the
    unweighted lambdas, so the weights scale a query's lambdas linearly.
    """

    def __init__(self, labels, offsets, weighting: str = "lambdarank", sigma: float = 1.0,
                 k: int | None = None, mu: float = DEFAULT_MU,
                 normalization: str | None = "pairs", score_normalization: bool = False,
                 gain=exp_gain, dtype=np.float32, chunk: int = CHUNK,
                 hessian_scale: float = 1.0, truncate_discounts: bool = True, doc_weights=None):
        check_weighting(weighting)
        if normalization not in QUERY_NORMALIZATIONS:
            raise ValueError(f"query normalization must be one of {QUERY_NORMALIZATIONS}")
        y = np.asarray(labels, dtype=np.float64)
        offsets = np.asarray(offsets, dtype=np.int64)
        sizes = np.diff(offsets)
        self.n = int(offsets[-1]) if len(offsets) else 0
        self.n_queries = len(sizes)
        self.sigma = float(sigma)
        self.k = None if k is None else int(k)
        self.mu = float(mu)
        self.normalization = normalization
        self.score_normalization = bool(score_normalization)
        self.weighting = weighting
        self.dtype = np.dtype(dtype)
        self.chunk = int(chunk)
        self.hessian_scale = float(hessian_scale)
        self.truncate_discounts = bool(truncate_discounts)
        self.doc_weights = None if doc_weights is None else check_doc_weights(doc_weights, len(y))
        # gains normalised by the query's IDCG@k (a query without any gain: 0)
        g = gain(y)
        useful = sizes >= 2          # and with two different labels: others have no pair
        if useful.any():
            lo = np.minimum(offsets[:-1], self.n - 1)
            useful &= np.maximum.reduceat(y, lo) > np.minimum.reduceat(y, lo)
        idcg = np.zeros(self.n_queries)
        for q in np.flatnonzero(useful):
            idcg[q] = ideal_dcg(g[offsets[q]:offsets[q + 1]], self.k)
        inv = np.divide(1.0, idcg, out=np.zeros_like(idcg), where=idcg > 0)
        G = g * np.repeat(inv, sizes)
        # blocks: queries with label variance, by size, B * rows * n_max <= chunk
        self.blocks = []
        queries = np.flatnonzero(useful)
        queries = queries[np.argsort(sizes[queries], kind="stable")]
        start = 0
        while start < len(queries):
            end = start + 1
            while end < len(queries):
                n_new = int(sizes[queries[end]])
                if (end - start + 1) * self._rows(n_new) * n_new > self.chunk:
                    break
                end += 1
            self._add_block(queries[start:end], sizes, offsets, y, G)
            start = end
        self.n_pairs = int(sum(b["pairs"] for b in self.blocks))

    def _rows(self, n: int) -> int:
        return n if (self.k is None or self.weighting == "ranknet") else min(self.k, n)

    def _add_block(self, qs, sizes, offsets, y, G):
        lengths = sizes[qs]
        n_max = int(lengths.max())
        col = np.arange(n_max)
        idx = offsets[qs][:, None] + np.minimum(col[None, :], lengths[:, None] - 1)
        m = self._rows(n_max)
        step = max(1, self.chunk // n_max) if len(qs) == 1 else m
        rows = [(r0, min(m, r0 + step)) for r0 in range(0, m, step)]
        mq = np.minimum(lengths, m)
        pairs = int(np.sum(mq * (lengths - 1) - mq * (mq - 1) // 2))
        self.blocks.append({"lengths": lengths, "idx": idx, "rows": rows,
                            "y": y[idx].astype(self.dtype), "G": G[idx].astype(self.dtype),
                            "n_max": n_max, "pairs": pairs,
                            "w": None if self.doc_weights is None else self.doc_weights[idx].astype(self.dtype)})

    def grad_hess(self, scores):
        """(lambdas, diagonal hessians) of every document for the current scores."""
        s = np.asarray(scores, dtype=np.float64)
        grad = np.zeros(self.n)
        hess = np.zeros(self.n)
        for blk in self.blocks:
            lengths, n_max = blk["lengths"], blk["n_max"]
            real = np.arange(n_max) < lengths[:, None]
            ss, ys, Gs, idx, *ws = _sorted_rows(s[blk["idx"]].astype(self.dtype), lengths, blk["y"],
                                                blk["G"], blk["idx"], *[w for w in [blk["w"]] if w is not None])
            g = np.zeros(ys.shape, dtype=np.float64)
            h = np.zeros(ys.shape, dtype=np.float64)
            total = np.zeros(len(lengths))
            for r0, r1 in blk["rows"]:
                Wpos = _position_weights(r0, r1, n_max, self.weighting, self.k, self.mu,
                                         self.dtype.name, self.truncate_discounts)
                gb, hb, lb = _block(ys, Gs, ss, lengths, Wpos, r0, self.sigma,
                                    self.weighting == "ranknet", self.score_normalization,
                                    ws=ws[0] if ws else None)
                g += gb
                h += hb
                total += lb
            if self.normalization is not None:
                if self.normalization == "pairs":
                    total = 2.0 * total
                else:
                    total = np.where(real, np.abs(g), 0.0).sum(axis=1)
                scale = np.divide(np.log2(1.0 + total), total, out=np.zeros_like(total),
                                  where=total > 0)
                g *= scale[:, None]
                h *= scale[:, None]
            if self.hessian_scale != 1.0:
                h *= self.hessian_scale
            grad[idx[real]] = g[real]
            hess[idx[real]] = h[real]
        return grad, hess


# --------------------------------------------------------------------------- networks

class QueryPairs:
    """One query's lambdas for the networks' factorised step, any weighting of
    :data:`WEIGHTINGS`: the query's labels and normalised gains are kept (O(n)); every
    call sorts by score and computes the pairs with a document in the current top k (all
    pairs for RankNet or without k) in blocks of at most ``chunk`` pair cells (rows of
    the pair matrix at a time, ``_block``), summing each document's lambdas over the
    blocks: no step allocates anything n x n. The numbers are those of
    :func:`lambdaloss_lambdas` (``doc_weights`` too; with them RankNet takes the blocks
    as the other weightings do)."""

    def __init__(self, labels, sigma: float = 1.0, k: int | None = None, gain=exp_gain,
                 dtype=np.float64, mu: float = DEFAULT_MU, chunk: int = CHUNK, doc_weights=None):
        y = np.asarray(labels, dtype=np.float64)
        self.n = len(y)
        self.sigma = float(sigma)
        self.k = None if k is None else int(k)
        self.mu = float(mu)
        self.dtype = np.dtype(dtype)
        self.step = max(1, int(chunk) // max(self.n, 1))     # pair-matrix rows per block
        g = gain(y)
        idcg = float(ideal_dcg(g, k)) if self.n else 0.0
        self.y = y.astype(self.dtype)
        self.G = (g * (1.0 / idcg if idcg > 0 else 0.0)).astype(self.dtype)
        self.w = None if doc_weights is None else check_doc_weights(doc_weights, self.n).astype(self.dtype)
        self._lengths = np.array([self.n])
        # RankNet's label-only parts, documents grouped by label: how many are better,
        # how many have another label, where each label's group starts and ends
        self._by_label = np.argsort(y, kind="stable")
        ys = y[self._by_label]
        lo, hi = np.searchsorted(ys, ys, side="left"), np.searchsorted(ys, ys, side="right")
        self._better = (self.n - hi).astype(self.dtype)
        self._count = (self.n - (hi - lo)).astype(self.dtype)
        edges = np.flatnonzero(np.diff(ys)) + 1
        self._groups = list(zip([0, *edges.tolist()], [*edges.tolist(), self.n]))

    def ranknet(self, scores) -> np.ndarray:
        """RankNet's lambdas without sorting by score: over every ordered pair with
        different labels, ``lambda_i = sigma sum_j (U_ij - p_ij)``, U_ij = 1 where j is the
        better one, ``p_ij = 1/(1 + exp(sigma (s_i - s_j))) = (1 - t_ij) / 2`` with
        ``t_ij = tanh(sigma (s_i - s_j) / 2)``. The U part is a count (labels only); the t
        part is summed over blocks of rows, each block's same-label pairs zeroed first
        (documents grouped by label: a row's same-label columns are its group's range)."""
        s = np.asarray(scores, dtype=self.dtype)[self._by_label]
        rows = np.empty(self.n, dtype=self.dtype)
        for r0 in range(0, self.n, self.step):
            r1 = min(self.n, r0 + self.step)
            t = np.subtract(s[r0:r1, None], s[None, :])
            t *= self.dtype.type(0.5 * self.sigma)
            np.tanh(t, out=t)
            for lo, hi in self._groups:       # at most one range per grade
                if lo < r1 and hi > r0:
                    t[max(lo, r0) - r0:min(hi, r1) - r0, lo:hi] = 0.0
            rows[r0:r1] = t.sum(axis=1)
        lam = np.empty(self.n, dtype=self.dtype)
        lam[self._by_label] = self.sigma * (self._better - 0.5 * (self._count - rows))
        return lam

    def lambdarank(self, scores) -> np.ndarray:
        return self.lambdas(scores, "lambdarank")

    def lambdas(self, scores, weighting: str = "lambdarank") -> np.ndarray:
        """One lambda per document (in input order) for a weighting of :data:`WEIGHTINGS`."""
        check_weighting(weighting)
        out = np.zeros(self.n, dtype=self.dtype)
        if self.n < 2:
            return out
        ranknet = weighting == "ranknet"
        if ranknet and self.w is None:
            return self.ranknet(scores)
        s = np.asarray(scores, dtype=self.dtype)
        order = np.argsort(-s, kind="stable")
        ss, ys, Gs = s[order][None, :], self.y[order][None, :], self.G[order][None, :]
        ws = None if self.w is None else self.w[order][None, :]
        m = self.n if self.k is None or ranknet else min(self.k, self.n)
        g = np.zeros(self.n, dtype=self.dtype)
        for r0 in range(0, m, self.step):
            Wpos = _position_weights(r0, min(m, r0 + self.step), self.n, weighting, self.k,
                                     self.mu, self.dtype.name)
            g += _block(ys, Gs, ss, self._lengths, Wpos, r0, self.sigma, ranknet, False,
                        hessian=False, ws=ws)[0][0]
        out[order] = g
        return out
