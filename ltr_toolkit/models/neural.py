"""RankNet / LambdaRank neural rankers (and a linear one) trained with factorised lambdas.

Per query: one forward pass over its documents, one lambda per document
(``rank.lambdas``: the pairwise lambdas summed), one backward pass with dC/ds = lambda,
one optimiser step. Never one backprop per pair (see benchmarks/naive.py for that reference).
"""

from __future__ import annotations

import inspect
import time

import numpy as np
from threadpoolctl import threadpool_limits

from ..data.dataset import RankingDataset
from ..rank.lambdas import DEFAULT_MU, QueryPairs, check_weighting
from ..rank.metrics import ndcg
from .mlp import MLP, OPTIMIZERS

ALGOS = {
    "ranknet-nn": "ranknet",
    "lambdarank-nn": "lambdarank",
    "linear": "lambdarank",
}


class NotFittedError(ValueError, AttributeError):
    """``predict`` (or an export) before ``fit``: scikit-learn's exception of that name is
    also a ValueError and an AttributeError, so code catching either keeps working."""


class EstimatorParams:
    """scikit-learn's estimator conventions without depending on scikit-learn:
    ``__init__`` stores its arguments unchanged (validation happens in ``fit``), and
    ``get_params`` / ``set_params`` are derived from the ``__init__`` signature, so that
    ``sklearn.base.clone`` and grid searches work on the toolkit's estimators."""

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values()
                if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]

    def _check_fitted(self, attribute: str) -> None:
        if not hasattr(self, attribute):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet: call fit() "
                                 "before predict()")

    def get_params(self, deep: bool = True) -> dict:
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        names = self._param_names()
        for name, value in params.items():
            if name not in names:
                raise ValueError(f"invalid parameter {name!r} for {type(self).__name__}; "
                                 f"valid parameters: {', '.join(names)}")
            setattr(self, name, value)
        return self

    def _json_params(self) -> dict:
        """The parameters as plain JSON values (tuples as lists, numpy scalars and dtypes
        as Python values and names), for model artifacts."""
        return {k: _jsonable(v) for k, v in self.get_params().items()}

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        changed = [f"{k}={v!r}" for k, v in self.get_params().items()
                   if not (isinstance(v, type(defaults.get(k))) and _same(v, defaults.get(k)))]
        return f"{type(self).__name__}({', '.join(changed)})"


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return a is b


def _jsonable(v):
    if isinstance(v, (tuple, list)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (np.dtype, type)):
        return np.dtype(v).name
    return v


def as_ranking_dataset(X, y, qid) -> RankingDataset:
    """``X, y, qid`` (one query id per row, rows of a query need not be contiguous) as a
    :class:`RankingDataset`: queries in order of first appearance, rows in input order
    within a query. ``meta["input_rows"]`` maps the dataset's rows to the input rows."""
    if y is None or qid is None:
        raise ValueError("fit(X, y, qid=...) needs the labels y and one query id per row (qid)")
    X = np.asarray(X, dtype=np.float32)
    y = np.asarray(y, dtype=np.float64).ravel()
    qid = np.asarray(qid).ravel()
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D [n_rows, n_features], got shape {X.shape}")
    if not (len(X) == len(y) == len(qid)):
        raise ValueError(f"X, y and qid must have the same number of rows "
                         f"({len(X)}, {len(y)}, {len(qid)})")
    uniq, first, inv = np.unique(qid, return_index=True, return_inverse=True)
    by_first = np.argsort(first, kind="stable")
    position = np.empty_like(by_first)
    position[by_first] = np.arange(len(by_first))
    key = position[inv.ravel()]
    rows = np.argsort(key, kind="stable")
    sizes = np.bincount(key, minlength=len(uniq))
    ds = RankingDataset(X=X[rows], y=y[rows], offsets=np.concatenate([[0], np.cumsum(sizes)]),
                        qids=np.array([str(q) for q in uniq[by_first]], dtype=object))
    ds.meta["input_rows"] = rows
    return ds


def training_sets(X, y, qid, valid):
    """(train, valid) datasets from the two ``fit`` forms: ``fit(dataset[, valid_dataset])``
    and ``fit(X, y, qid=..., valid=(X_valid, y_valid, qid_valid))``."""
    if isinstance(X, RankingDataset):
        if isinstance(y, RankingDataset):           # fit(train, valid): the dataset form
            if valid is not None:
                raise ValueError("validation data given twice")
            valid = y
        elif y is not None or qid is not None:
            raise ValueError("fit(dataset) takes no y or qid: they are in the dataset")
        train = X
    else:
        train = as_ranking_dataset(X, y, qid)
    if valid is not None and not isinstance(valid, RankingDataset):
        try:
            Xv, yv, qv = valid
        except (TypeError, ValueError):
            raise ValueError("valid must be a RankingDataset or a tuple (X, y, qid)") from None
        valid = as_ranking_dataset(Xv, yv, qv)
    return train, valid


class NeuralRanker(EstimatorParams):
    """scikit-learn style: hyper-parameters in ``__init__`` (stored unchanged, checked by
    ``fit``), ``fit`` returns self, ``get_params``/``set_params`` from the signature.

    ``objective``: the pair weighting of the factorised lambdas (``rank.lambdas.WEIGHTINGS``:
    ranknet, lambdarank, ndcg-loss2, ndcg-loss2++), by default the algorithm's own;
    ``mu``: NDCG-Loss2++'s mixing weight; ``truncation``: the k of the weights' top-k
    ("k": the metric's k, None: whole list); ``l2``: weight decay on the weights (not the
    biases), added to each query step's gradient."""

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
        if self.algo not in ALGOS:
            raise ValueError(f"algo must be one of {sorted(ALGOS)}, not {self.algo!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)}, not {self.optimizer!r}")
        check_weighting(self._weighting())
        for name in ("k", "epochs"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1")
        if int(self.patience) < 0:
            raise ValueError("patience must be >= 0")
        if not float(self.lr) > 0 or not float(self.sigma) > 0:
            raise ValueError("lr and sigma must be > 0")
        if float(self.mu) < 0 or float(self.l2) < 0:
            raise ValueError("mu and l2 must be >= 0")
        t = self._truncation()
        if t is not None and t < 1:
            raise ValueError("truncation must be 'k', None or an integer >= 1")
        if any(h < 1 for h in self._hidden()):
            raise ValueError("hidden layer sizes must be >= 1")
        self._dtype()

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

    def pairs_for(self, yq: np.ndarray) -> QueryPairs:
        return QueryPairs(yq, float(self.sigma), self._truncation(), dtype=self._dtype(),
                          mu=float(self.mu))

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
        is given; ``history`` holds that metric and the seconds of the epoch's training pass."""
        train, valid = training_sets(X, y, qid, valid)
        _check(train)
        self.init(train.n_features, train.X)
        Xt = self._transform(train.X)
        rng = np.random.default_rng(int(self.seed))
        k = int(self.k)
        useful = [q for q in range(train.n_queries)
                  if np.ptp(train.y[train.query(q)]) > 0]   # no label variance: zero lambdas
        pairs = {q: self.pairs_for(train.y[train.query(q)]) for q in useful}
        best, best_params, since = -np.inf, self.net_.copy_params(), 0
        self.history = []
        for epoch in range(int(self.epochs)):
            t0 = time.perf_counter()
            # one query's matrices are small: a multi-threaded BLAS only adds hand-offs
            # (measured: 17x slower per epoch when another process holds a core)
            with threadpool_limits(limits=1, user_api="blas"):
                for q in rng.permutation(useful):
                    sl = train.query(q)
                    self.step_query(Xt[sl], pairs[q])
            seconds = time.perf_counter() - t0
            if valid is not None:
                scores, monitor = self.predict(valid.X), valid
            else:                   # the training rows are transformed already
                scores, monitor = self._forward(Xt), train
            metric = float(np.mean(ndcg(scores, monitor.y, monitor.offsets, k)))
            self.history.append({"epoch": epoch, f"ndcg@{k}": metric, "seconds": seconds})
            if on_epoch:
                on_epoch(epoch, metric)
            if metric > best + 1e-12:
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
        X = np.asarray(X)
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
        return m


#: Rows per batch when transforming or scoring a matrix.
BATCH_ROWS = 1 << 16


def row_batches(n: int):
    """(lo, hi) ranges of at most :data:`BATCH_ROWS` rows covering n rows."""
    return ((lo, min(lo + BATCH_ROWS, n)) for lo in range(0, n, BATCH_ROWS))


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
