"""RankNet / LambdaRank neural rankers (and a linear one) trained with factorised lambdas.

Per query: one forward pass over its documents, one lambda per document
(``rank.lambdas``: the pairwise lambdas summed), one backward pass with dC/ds = lambda,
one optimiser step. Never one backprop per pair (see benchmarks/_naive.py for that reference).
"""

from __future__ import annotations

import time
from numbers import Integral, Real

import numpy as np
from threadpoolctl import threadpool_limits

from ..data.dataset import RankingDataset, graded
from ..rank.lambdas import DEFAULT_MU, check_weighting
from ..rank.metrics import ndcg
from ..rank.pairs import QueryLambdas, QueryPairs
from .base import (BOOLEAN, EstimatorParams, Interval, Kind, Options, row_batches,
                   training_sets)
from .mlp import MLP, OPTIMIZERS, Adam

ALGOS = {
    "ranknet-nn": "ranknet",
    "lambdarank-nn": "lambdarank",
    "linear": "lambdarank",
}


class NeuralRanker(EstimatorParams):
    """scikit-learn style: hyper-parameters in ``__init__`` (stored unchanged, checked by
    ``fit``), ``fit`` returns self, ``get_params``/``set_params`` from the signature.

    ``objective``: the pair weighting of the factorised lambdas (``rank.lambdas.WEIGHTINGS``:
    ranknet, lambdarank, ndcg-loss2, ndcg-loss2++), by default the algorithm's own;
    ``mu``: NDCG-Loss2++'s mixing weight; ``truncation``: the k of the weights' top-k
    ("k": the metric's k, None: whole list); ``l2``: weight decay on the weights (not the
    biases), added to each query step's gradient."""

    _parameter_constraints = {
        "algo": [Options(*ALGOS)], "hidden": [Kind(tuple, list)], "activation": [Kind(str)],
        "optimizer": [Options(*OPTIMIZERS)], "lr": [Interval(Real, 0, None, "neither")],
        "epochs": [Interval(Integral, 1, None)], "sigma": [Interval(Real, 0, None, "neither")],
        "k": [Interval(Integral, 1, None)], "patience": [Interval(Integral, 0, None)],
        "standardize": [BOOLEAN], "seed": [Interval(Integral, 0, None)],
        "objective": [None, Kind(str)], "truncation": [Options("k"), None, Interval(Integral, 1, None)],
        "mu": [Interval(Real, 0, None)], "l2": [Interval(Real, 0, None)],
    }

    def __init__(self, algo: str = "lambdarank-nn", hidden=(64, 16), activation: str = "sigmoid",
                 optimizer: str = "adam", lr: float = 1e-3, epochs: int = 50,
                 sigma: float = 1.0, k: int = 10, patience: int = 10, standardize: bool = True,
                 seed: int = 42, dtype="float32", objective: str | None = None,
                 truncation: int | None | str = "k", mu: float = DEFAULT_MU, l2: float = 0.0):
        self.algo = algo
        self.hidden = hidden
        self.activation = activation
        self.optimizer = optimizer
        self.lr = lr
        self.epochs = epochs
        self.sigma = sigma
        self.k = k
        self.patience = patience
        self.standardize = standardize
        self.seed = seed
        self.dtype = dtype
        self.objective = objective
        self.truncation = truncation
        self.mu = mu
        self.l2 = l2

    # ------------------------------------------------------------------ resolved parameters
    def _hidden(self) -> tuple:
        return () if self.algo == "linear" else tuple(int(h) for h in self.hidden)

    def _dtype(self) -> np.dtype:
        return np.dtype(self.dtype)

    def _weighting(self) -> str:
        return self.objective or ALGOS[self.algo]

    def _truncation(self) -> int | None:
        t = self.truncation
        return int(self.k) if t == "k" else (None if t is None else int(t))

    def _validate(self) -> None:
        self._validate_params()
        check_weighting(self._weighting())

    # ------------------------------------------------------------------ fitting
    def _transform(self, X: np.ndarray) -> np.ndarray:
        """Rows as the network sees them (missing as 0.0, standardised, in the network's
        dtype), computed in batches of rows: no float64 copy of the whole matrix."""
        X = np.asarray(X)
        out = np.empty(X.shape, dtype=self._dtype())
        for lo, hi in row_batches(len(X)):
            Z = fill_missing(X[lo:hi])
            if self.standardize:
                Z -= self.mean_
                Z /= self.std_
            out[lo:hi] = Z
        return out

    def pairs_for(self, yq: np.ndarray, wq: np.ndarray | None = None) -> QueryPairs:
        """The lambdas of one query (labels ``yq``, optional document weights ``wq``)."""
        return QueryPairs(yq, float(self.sigma), self._truncation(), dtype=self._dtype(),
                          mu=float(self.mu), doc_weights=wq)

    def step_query(self, Xq: np.ndarray, pairs: QueryPairs) -> None:
        """The factorised update for one query (Xq already transformed, ``pairs`` from
        :meth:`pairs_for` its labels): one forward pass, one lambda per document, one
        backward pass, one optimiser step."""
        scores, acts = self.net_.forward(Xq, keep=True)
        lam = pairs.lambdas(scores, self._weighting())
        grad = self.net_.backward_flat(acts, lam)
        if self.l2:
            grad += self._decay * self.net_.flat
        self.opt_.step([self.net_.flat], [grad])

    def _epoch_runner(self, train: RankingDataset, Xt: np.ndarray, compiled: bool = True):
        """A callable(queries in the epoch's order): one pass of :meth:`step_query` over
        them, updating the network and the optimiser in place; compiled for the linear
        model (``models.netkernel``) unless ``compiled`` is False, NumPy's for networks
        with hidden layers."""
        if self._hidden() or not compiled:
            w = train.weights
            steps: dict = {}        # each trained query prepared once, at its first step

            def numpy_epoch(queries):
                for q in queries:
                    if q not in steps:
                        rows = train.query(q)
                        steps[q] = (Xt[rows], self.pairs_for(
                            train.y[rows], None if w is None else w[rows]))
                    self.step_query(*steps[q])
            return numpy_epoch
        from .netkernel import linear_epoch
        lam = QueryLambdas(train.y, train.offsets, self._weighting(), float(self.sigma),
                           self._truncation(), float(self.mu), train.weights)
        opt, net = self.opt_, (self.net_.flat, self.net_.grad_flat, self._decay)
        adam = isinstance(opt, Adam)
        t = np.array([opt.t if adam else 0], dtype=np.int64)
        unused = np.zeros(0)        # SGD keeps no moments
        state = (opt.m[0], opt.v[0], t) if adam else (unused, unused, t)
        hyper = (float(opt.lr), *((opt.b1, opt.b2, opt.eps) if adam else (0.0, 0.0, 0.0)), adam)
        X = np.ascontiguousarray(Xt)

        def linear(queries):
            linear_epoch(X, train.offsets, queries, lam.labels, net, (state, hyper), lam.options)
            if adam:
                opt.t = int(t[0])
        return linear

    def init(self, n_features: int, X_train: np.ndarray | None = None) -> "NeuralRanker":
        self._validate()
        if self.standardize and X_train is not None and len(X_train):
            self.mean_, std = _column_moments(X_train)
            self.std_ = np.where(std > 0, std, 1.0)
        else:
            self.mean_ = np.zeros(n_features)
            self.std_ = np.ones(n_features)
        self.net_ = MLP(n_features, self._hidden(), self.activation, seed=int(self.seed),
                        dtype=self._dtype())
        self.opt_ = OPTIMIZERS[self.optimizer]([self.net_.flat], lr=float(self.lr))
        decay = np.zeros_like(self.net_.flat)
        for view in self.net_._views(decay)[0::2]:     # weights only, not biases
            view[...] = float(self.l2)
        self._decay = decay
        return self

    def fit(self, X, y=None, qid=None, *, valid=None, on_epoch=None):
        """``fit(train_dataset[, valid_dataset])`` or ``fit(X, y, qid=...[, valid=(X, y, qid)])``.
        Early stopping (``patience`` epochs) on the validation NDCG@k when validation data
        is given; ``history`` holds that metric and the seconds of the epoch's training pass.
        Without validation data the epoch of best training NDCG is kept, unless the training
        data has document weights (``train.weights``, e.g. inverse propensities of clicks):
        its unweighted NDCG is the biased measure the weights correct, so the last epoch is
        kept."""
        train, valid = training_sets(X, y, qid, valid)
        _check(train)
        self.init(train.n_features, train.X)
        self.n_features_in_ = train.n_features
        Xt = self._transform(train.X)
        rng = np.random.default_rng(int(self.seed))
        k = int(self.k)
        useful = np.flatnonzero(graded(train.y, train.offsets)).astype(np.int64)
        run_epoch = self._epoch_runner(train, Xt)
        Xv = None if valid is None else self._transform(valid.X)
        best, best_params, since = -np.inf, self.net_.copy_params(), 0
        keep_last = valid is None and train.weights is not None
        self.history = []
        # one query's matrices are small: a multi-threaded BLAS only adds hand-offs
        # (measured: 17x slower per epoch when another process holds a core)
        with threadpool_limits(limits=1, user_api="blas"):
            for epoch in range(int(self.epochs)):
                t0 = time.perf_counter()
                run_epoch(rng.permutation(useful))
                seconds = time.perf_counter() - t0
                scores, monitor = (self._forward(Xt), train) if Xv is None else (self._forward(Xv), valid)
                metric = float(np.mean(ndcg(scores, monitor.y, monitor.offsets, k)))
                self.history.append({"epoch": epoch, f"ndcg@{k}": metric, "seconds": seconds})
                if on_epoch:
                    on_epoch(epoch, metric)
                if metric > best + 1e-12 or keep_last:
                    best, best_params, since = metric, self.net_.copy_params(), 0
                else:
                    since += 1
                    if valid is not None and since >= int(self.patience):
                        break
        self.net_.set_params(best_params)
        self.best_metric_ = best
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        self._check_fitted("net_")
        X = self._check_n_features(X)
        out = np.empty(len(X), dtype=np.float64)
        for lo, hi in row_batches(len(X)):
            out[lo:hi] = self.net_.forward(self._transform(X[lo:hi]))
        return out

    def _forward(self, Xt: np.ndarray) -> np.ndarray:
        """Scores of rows already transformed (``_transform``), in batches."""
        out = np.empty(len(Xt), dtype=np.float64)
        for lo, hi in row_batches(len(Xt)):
            out[lo:hi] = self.net_.forward(Xt[lo:hi])
        return out

    # ------------------------------------------------------------------ artifact
    def state(self) -> dict:
        return {"params": self._json_params(), "mean": self.mean_.tolist(), "std": self.std_.tolist(),
                "network": self.net_.state()}

    @classmethod
    def from_state(cls, state: dict) -> "NeuralRanker":
        p = dict(state["params"])
        p.pop("dtype", None)
        names = cls._param_names()
        m = cls(**{k: v for k, v in p.items() if k in names}, dtype="float64")
        m.history = []
        m.mean_ = np.asarray(state["mean"], dtype=np.float64)
        m.std_ = np.asarray(state["std"], dtype=np.float64)
        m.net_ = MLP.from_state(state["network"], dtype=np.float64)
        m.n_features_in_ = len(m.mean_)
        return m


def _column_moments(X: np.ndarray):
    """Per-column mean and (population) standard deviation of ``fill_missing(X)``, two
    passes over batches of rows in float64."""
    n = len(X)
    total = np.zeros(X.shape[1])
    for lo, hi in row_batches(n):
        total += fill_missing(X[lo:hi]).sum(axis=0)
    mean = total / n
    sq = np.zeros(X.shape[1])
    for lo, hi in row_batches(n):
        d = fill_missing(X[lo:hi]) - mean
        sq += np.einsum("ij,ij->j", d, d)
    return mean, np.sqrt(sq / n)


def fill_missing(X: np.ndarray) -> np.ndarray:
    """Missing features (NaN) as the plugin feeds them to ``model/ranklib`` and
    ``model/linear``: 0.0, before any normaliser. Returns a float64 copy."""
    X = np.array(X, dtype=np.float64)
    np.copyto(X, 0.0, where=np.isnan(X))
    return X


def _check(ds: RankingDataset) -> None:
    if ds.n_docs == 0 or ds.n_queries == 0:
        raise ValueError("training data has no rows")
    if np.any(np.isinf(ds.X)):
        raise ValueError("training features contain inf")


#: Where the highest training logit of a network is put, and the widest span kept below
#: it: float32 resolves sigmoid(x) for x < 0 to ~7 significant digits (sigmoid ~ e^x), so
#: logits 1e-7 apart stay distinct; near 1.0 it saturates (sigmoid(17) == 1.0f), and below
#: about -87 it leaves float32's normal range.
TOP_LOGIT = -1.0
LOGIT_SPAN = 70.0


def output_map(model: NeuralRanker, X_train: np.ndarray | None) -> dict:
    """``{"scale", "shift"}`` for the output layer (logit -> scale * logit + shift, scale
    in (0, 1]): the training logits land in [TOP_LOGIT - LOGIT_SPAN, TOP_LOGIT], where
    float32(sigmoid) keeps them distinct. Order-preserving, so rankings do not change."""
    if X_train is None or len(X_train) == 0:
        return {"scale": 1.0, "shift": 0.0}
    logits = model.predict(X_train)
    hi, lo = float(np.max(logits)), float(np.min(logits))
    scale = 1.0 if hi - lo <= LOGIT_SPAN else LOGIT_SPAN / (hi - lo)
    return {"scale": scale, "shift": TOP_LOGIT - scale * hi}
