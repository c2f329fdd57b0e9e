"""The lambda objective over a training set: every document's lambda (and hessian) for
the trees (:class:`RankPairs`) and one query's lambdas for the networks' step
(:class:`QueryPairs`). The numbers are those of :func:`lambdas.lambdaloss_lambdas`
query by query; the pair loop is compiled (``rank.kernel``): each round sorts every query
once by score and visits only the pairs the truncation keeps, with nothing stored per
pair."""

from __future__ import annotations

import numpy as np

from .lambdas import (DEFAULT_MU, QUERY_NORMALIZATIONS, check_doc_weights, check_weighting,
                      exp_gain, ideal_dcg, loss2_discount)

_NORMALIZATION_CODES = {None: 0, "pairs": 1, "documents": 2}

#: Pairs from which the tree objective shares its queries out among threads: below it, one
#: thread (handing out less work costs more than it saves, the more so on a busy machine)
PARALLEL_PAIRS = 1 << 20
_EMPTY = np.empty(0)


_KERNEL = None


def _kernel(threads: int | None = None):
    """The compiled kernel, imported on first use (numba takes a few tenths of a second to
    import: commands that do not train never pay it); ``threads``: the number of threads
    of its parallel loops from now on in this thread (capped at numba's)."""
    global _KERNEL
    if _KERNEL is None:
        from . import kernel
        _KERNEL = kernel
    if threads:
        from numba import config, set_num_threads
        set_num_threads(max(1, min(int(threads), config.NUMBA_NUM_THREADS)))
    return _KERNEL


def query_modes(y: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Each query's commonest label (the smallest of those tied; 0.0 for an empty query):
    the kernel skips that label's pairs with itself without visiting them."""
    sizes = np.diff(offsets)
    modes = np.zeros(len(sizes))
    if not len(y):
        return modes
    values, code = np.unique(y, return_inverse=True)
    keys, counts = np.unique(np.repeat(np.arange(len(sizes)), sizes) * len(values) + code.ravel(),
                             return_counts=True)
    query = keys // len(values)
    order = np.lexsort((-counts, query))          # per query: the largest count first
    first = order[np.r_[True, query[order][1:] != query[order][:-1]]]
    modes[query[first]] = values[keys[first] % len(values)]
    return modes


def position_terms(n: int, weighting: str, k: int | None, mu: float, truncate: bool = True):
    """(disc, cl, cd, delta) of the position weights of rows a < b < n: ``cl |disc_a -
    disc_b| + cd delta(b - a)``; ``truncate``: the discounts are 0 from rank k on (NDCG@k's
    swap), otherwise the untruncated DCG's (k then only selects the pairs)."""
    disc = 1.0 / np.log2(np.arange(max(n, 1)) + 2.0)
    if k is not None and truncate:
        disc[k:] = 0.0
    delta = loss2_discount(np.arange(max(n, 1) + 1))
    cl, cd = {"ranknet": (0.0, 0.0), "lambdarank": (1.0, 0.0), "ndcg-loss2": (0.0, 1.0),
              "ndcg-loss2++": (1.0, float(mu))}[weighting]
    return disc, cl, cd, delta


def normalised_gains(g, offsets, k: int | None, queries=None) -> np.ndarray:
    """Gains over their query's IDCG@k (a query without any gain, or outside ``queries``
    when given: 0)."""
    sizes = np.diff(offsets)
    idcg = np.zeros(len(sizes))
    for q in range(len(sizes)) if queries is None else queries:
        idcg[q] = ideal_dcg(g[offsets[q]:offsets[q + 1]], k)
    inv = np.divide(1.0, idcg, out=np.zeros_like(idcg), where=idcg > 0)
    return g * np.repeat(inv, sizes)


class QueryLambdas:
    """The networks' lambdas for every query of a training set at once, as the compiled
    epoch (``models.netkernel``) reads them: the numbers of :class:`QueryPairs` query by
    query (labels, gains over each query's IDCG@k, document weights, commonest labels,
    the last scores' order), position terms for the largest query, and the options."""

    def __init__(self, labels, offsets, weighting: str, sigma: float = 1.0, k: int | None = None,
                 mu: float = DEFAULT_MU, doc_weights=None, gain=exp_gain):
        check_weighting(weighting)
        y = np.asarray(labels, dtype=np.float64)
        offsets = np.asarray(offsets, dtype=np.int64)
        w = _EMPTY if doc_weights is None else check_doc_weights(doc_weights, len(y))
        self.labels = (y, normalised_gains(gain(y), offsets, k), w, query_modes(y, offsets),
                       np.arange(len(y), dtype=np.int64))
        size = int(np.diff(offsets).max(initial=1))
        self.options = (position_terms(size, weighting, k, float(mu)), -1 if k is None else int(k),
                        weighting == "ranknet", float(sigma))


class RankPairs:
    """Lambdas and hessians of every document of a training set for the tree objective.

    Pairs are pairs of *rank positions* (a, b), a < b, inside a query in the current score
    order: with a truncation k only a < k (at least one document in the current top k),
    otherwise all. The numbers are those of :func:`lambdas.lambdaloss_lambdas` query by
    query (``tests/test_lambdaloss.py``), optionally scaled per query
    (:data:`lambdas.QUERY_NORMALIZATIONS`). ``score_normalization`` divides every pair
    weight by ``|s_a - s_b| + 0.01`` as xgboost's ``rank:ndcg`` does: pairs the model
    barely separates weigh more (the lambdas are then no longer the gradient of a
    fixed-weight loss). ``hessian_scale`` multiplies the hessians (xgboost's rank:ndcg uses
    2). ``truncate_discounts``: |delta DCG| with the discounts of NDCG@k (0 from rank k on);
    False: the untruncated discounts, k then only selecting the pairs and the IDCG@k
    (xgboost's rank:ndcg; with score normalisation, pairs normalisation and hessian_scale
    2 these are its gradient and hessian). ``dtype``: the precision the scores are ranked
    in (float32 by default: xgboost's predictions), the pair arithmetic being float64.
    ``doc_weights`` (one per document; None: none): each pair's lambda and hessian times
    its preferred document's weight (``rank.lambdas``' docstring), after the per-query
    normalisation has read the unweighted lambdas, so the weights scale a query's lambdas
    linearly. ``threads``: the queries are shared out among that many threads (None:
    numba's default, the cores; one below :data:`PARALLEL_PAIRS` pairs).
    """

    def __init__(self, labels, offsets, weighting: str = "lambdarank", sigma: float = 1.0,
                 k: int | None = None, mu: float = DEFAULT_MU,
                 normalization: str | None = "pairs", score_normalization: bool = False,
                 gain=exp_gain, dtype=np.float32, hessian_scale: float = 1.0,
                 truncate_discounts: bool = True, doc_weights=None, threads: int | None = None):
        check_weighting(weighting)
        if normalization not in QUERY_NORMALIZATIONS:
            raise ValueError(f"query normalization must be one of {QUERY_NORMALIZATIONS}")
        self.y = np.asarray(labels, dtype=np.float64)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        sizes = np.diff(self.offsets)
        self.n = int(self.offsets[-1]) if len(self.offsets) else 0
        self.n_queries = len(sizes)
        self.sigma, self.mu = float(sigma), float(mu)
        self.k = None if k is None else int(k)
        self.normalization = normalization
        self.score_normalization = bool(score_normalization)
        self.weighting = weighting
        self.dtype = np.dtype(dtype)
        self.hessian_scale = float(hessian_scale)
        self.threads = threads
        self.doc_weights = None if doc_weights is None else check_doc_weights(doc_weights, self.n)
        self.queries = self._useful(sizes)
        self.modes = query_modes(self.y, self.offsets)
        self._order = np.arange(self.n, dtype=np.int64)   # the last call's score order
        self.G = self._normalised_gains(gain(self.y), sizes)
        self._terms = position_terms(int(sizes.max(initial=1)), weighting, self.k, self.mu,
                                     bool(truncate_discounts))
        m = sizes if self.k is None or weighting == "ranknet" else np.minimum(sizes, self.k)
        self.n_pairs = int(np.sum((m * (sizes - 1) - m * (m - 1) // 2)[self.queries]))

    def _useful(self, sizes) -> np.ndarray:
        """The queries with two documents of different labels (the others have no pair)."""
        useful = sizes >= 2
        if useful.any():
            lo = np.minimum(self.offsets[:-1], self.n - 1)
            useful &= np.maximum.reduceat(self.y, lo) > np.minimum.reduceat(self.y, lo)
        return np.flatnonzero(useful).astype(np.int64)

    def _normalised_gains(self, g, sizes) -> np.ndarray:
        return normalised_gains(g, self.offsets, self.k, self.queries)

    def warm(self) -> None:
        """Load the compiled kernel :meth:`grad_hess` will call (numba's cache: about half
        a second a process) by calling it on two documents with these options: run in a
        thread while xgboost builds its matrix (which leaves the GIL free most of the
        time), the load is hidden."""
        tiny = RankPairs(np.array([0.0, 1.0]), np.array([0, 2]), self.weighting, self.sigma,
                         self.k, self.mu, self.normalization, self.score_normalization,
                         dtype=self.dtype, hessian_scale=self.hessian_scale,
                         doc_weights=None if self.doc_weights is None else np.ones(2),
                         threads=self.threads)
        tiny.n_pairs = self.n_pairs                 # the same kernel: serial or parallel
        tiny.grad_hess(np.zeros(2))

    def grad_hess(self, scores):
        """(lambdas, diagonal hessians) of every document for the current scores."""
        s = np.asarray(scores).astype(self.dtype).astype(np.float64)
        grad = np.zeros(self.n)
        hess = np.zeros(self.n)
        w = _EMPTY if self.doc_weights is None else self.doc_weights
        opts = (-1 if self.k is None else self.k, self.weighting == "ranknet", self.sigma,
                self.score_normalization, _NORMALIZATION_CODES[self.normalization],
                self.hessian_scale)
        threads = self.threads or 0
        if threads != 1 and self.n_pairs >= PARALLEL_PAIRS:
            run = _kernel(threads).tree_grad_hess
        else:
            run = _kernel().tree_grad_hess_serial
        run(s, self.y, self.G, w, self.offsets, self.modes, self.queries, self._terms, opts, grad,
            hess, self._order)
        return grad, hess


class QueryPairs:
    """One query's lambdas for the networks' factorised step, any weighting of
    :data:`lambdas.WEIGHTINGS`: the query's labels and normalised gains are kept (O(n));
    every call sorts by score and visits the pairs with a document in the current top k
    (all pairs for RankNet or without k): nothing n x n is allocated. The numbers are
    those of :func:`lambdas.lambdaloss_lambdas` (``doc_weights`` too), returned in
    ``dtype``."""

    def __init__(self, labels, sigma: float = 1.0, k: int | None = None, gain=exp_gain,
                 dtype=np.float64, mu: float = DEFAULT_MU, doc_weights=None):
        self.y = np.asarray(labels, dtype=np.float64)
        self.n = len(self.y)
        self.sigma = float(sigma)
        self.k = None if k is None else int(k)
        self.mu = float(mu)
        self.dtype = np.dtype(dtype)
        g = gain(self.y)
        idcg = float(ideal_dcg(g, k)) if self.n else 0.0
        self.G = g * (1.0 / idcg if idcg > 0 else 0.0)
        self.w = _EMPTY if doc_weights is None else check_doc_weights(doc_weights, self.n)
        self._terms = {}
        self._order = np.arange(self.n, dtype=np.int64)   # the last call's score order
        self.mode = float(query_modes(self.y, np.array([0, self.n]))[0])

    def ranknet(self, scores) -> np.ndarray:
        return self.lambdas(scores, "ranknet")

    def lambdarank(self, scores) -> np.ndarray:
        return self.lambdas(scores, "lambdarank")

    def lambdas(self, scores, weighting: str = "lambdarank") -> np.ndarray:
        """One lambda per document (in input order) for a weighting of
        :data:`lambdas.WEIGHTINGS`."""
        check_weighting(weighting)
        if self.n < 2:
            return np.zeros(self.n, dtype=self.dtype)
        terms = self._terms.get(weighting)
        if terms is None:
            terms = self._terms[weighting] = position_terms(self.n, weighting, self.k, self.mu)
        s = np.asarray(scores).astype(self.dtype).astype(np.float64)
        lam = _kernel().query_lambdas(s, self.y, self.G, self.w, self.mode, terms,
                                      -1 if self.k is None else self.k, weighting == "ranknet",
                                      self.sigma, self._order)
        return lam.astype(self.dtype, copy=False)
