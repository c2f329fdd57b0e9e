"""RankNet / LambdaRank neural rankers (and a linear one) trained with factorised lambdas.

Per query: one forward pass over its documents, one lambda per document
(``rank.lambdas``: the pairwise lambdas summed), one backward pass with dC/ds = lambda,
one optimiser step. Never one backprop per pair (see models/naive for that reference).
"""

from __future__ import annotations

import numpy as np

from ..data.dataset import RankingDataset
from ..rank.lambdas import QueryPairs
from ..rank.metrics import ndcg
from .mlp import MLP, OPTIMIZERS

ALGOS = {
    "ranknet-nn": "ranknet",
    "lambdarank-nn": "lambdarank",
    "linear": "lambdarank",
}


class NeuralRanker:
    """scikit-learn style: hyper-parameters in ``__init__``, ``fit`` returns self."""

    def __init__(self, algo: str = "lambdarank-nn", hidden=(64, 16), activation: str = "sigmoid",
                 optimizer: str = "adam", lr: float = 1e-3, epochs: int = 50,
                 sigma: float = 1.0, k: int = 10, patience: int = 10, standardize: bool = True,
                 seed: int = 42, dtype=np.float32, objective: str | None = None,
                 truncation: int | None | str = "k"):
        if algo not in ALGOS:
            raise ValueError(f"algo must be one of {sorted(ALGOS)}")
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)}")
        self.algo = algo
        self.hidden = () if algo == "linear" else tuple(hidden)
        self.activation = activation
        self.optimizer = optimizer
        self.lr = float(lr)
        self.epochs = int(epochs)
        self.sigma = float(sigma)
        self.k = int(k)
        # LambdaRank weights |delta NDCG@truncation|: "k" (the metric's k) or None (whole list)
        self.truncation = self.k if truncation == "k" else (None if truncation is None else int(truncation))
        self.patience = int(patience)
        self.standardize = bool(standardize)
        self.seed = int(seed)
        self.dtype = np.dtype(dtype)
        self.objective = objective or ALGOS[algo]
        self.history: list[dict] = []

    # ------------------------------------------------------------------ params
    def get_params(self) -> dict:
        return {"algo": self.algo, "hidden": list(self.hidden), "activation": self.activation,
                "optimizer": self.optimizer, "lr": self.lr, "epochs": self.epochs,
                "sigma": self.sigma, "k": self.k, "truncation": self.truncation,
                "patience": self.patience,
                "standardize": self.standardize, "seed": self.seed,
                "objective": self.objective, "dtype": self.dtype.name}

    # ------------------------------------------------------------------ fitting
    def _transform(self, X: np.ndarray) -> np.ndarray:
        X = fill_missing(X)
        if self.standardize:
            X = (X - self.mean_) / self.std_
        return X.astype(self.dtype, copy=False)

    def pairs_for(self, yq: np.ndarray) -> QueryPairs:
        return QueryPairs(yq, self.sigma, self.truncation, dtype=self.dtype)

    def step_query(self, Xq: np.ndarray, pairs: QueryPairs) -> None:
        """The factorised update for one query (Xq already transformed, ``pairs`` from
        :meth:`pairs_for` its labels): one forward pass, one lambda per document, one
        backward pass, one optimiser step."""
        scores, acts = self.net_.forward(Xq, keep=True)
        if self.objective == "ranknet":
            lam = pairs.ranknet(scores)
        else:
            lam = pairs.lambdarank(scores)
        grad = self.net_.backward_flat(acts, lam)
        self.opt_.step([self.net_.flat], [grad])

    def init(self, n_features: int, X_train: np.ndarray | None = None) -> "NeuralRanker":
        if self.standardize and X_train is not None:
            X = fill_missing(X_train)
            self.mean_ = X.mean(axis=0)
            std = X.std(axis=0)
            self.std_ = np.where(std > 0, std, 1.0)
        else:
            self.mean_ = np.zeros(n_features)
            self.std_ = np.ones(n_features)
        self.net_ = MLP(n_features, self.hidden, self.activation, seed=self.seed, dtype=self.dtype)
        self.opt_ = OPTIMIZERS[self.optimizer]([self.net_.flat], lr=self.lr)
        return self

    def fit(self, train: RankingDataset, valid: RankingDataset | None = None, on_epoch=None):
        _check(train)
        self.init(train.n_features, train.X)
        Xt = self._transform(train.X)
        rng = np.random.default_rng(self.seed)
        useful = [q for q in range(train.n_queries)
                  if np.ptp(train.y[train.query(q)]) > 0]   # no label variance: zero lambdas
        pairs = {q: self.pairs_for(train.y[train.query(q)]) for q in useful}
        best, best_params, since = -np.inf, self.net_.copy_params(), 0
        self.history = []
        for epoch in range(self.epochs):
            for q in rng.permutation(useful):
                sl = train.query(q)
                self.step_query(Xt[sl], pairs[q])
            monitor = valid if valid is not None else train
            metric = float(np.mean(ndcg(self.predict(monitor.X), monitor.y, monitor.offsets, self.k)))
            self.history.append({"epoch": epoch, f"ndcg@{self.k}": metric})
            if on_epoch:
                on_epoch(epoch, metric)
            if metric > best + 1e-12:
                best, best_params, since = metric, self.net_.copy_params(), 0
            else:
                since += 1
                if valid is not None and since >= self.patience:
                    break
        self.net_.set_params(best_params)
        self.best_metric_ = best
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.net_.forward(self._transform(X)).astype(np.float64)

    # ------------------------------------------------------------------ artifact
    def state(self) -> dict:
        return {"params": self.get_params(), "mean": self.mean_.tolist(), "std": self.std_.tolist(),
                "network": self.net_.state()}

    @classmethod
    def from_state(cls, state: dict) -> "NeuralRanker":
        p = dict(state["params"])
        p.pop("dtype", None)
        m = cls(**{k: v for k, v in p.items()}, dtype=np.float64)
        m.mean_ = np.asarray(state["mean"], dtype=np.float64)
        m.std_ = np.asarray(state["std"], dtype=np.float64)
        m.net_ = MLP.from_state(state["network"], dtype=np.float64)
        return m


def fill_missing(X: np.ndarray) -> np.ndarray:
    """Missing features (NaN) as the plugin feeds them to ``model/ranklib`` and
    ``model/linear``: 0.0, before any normaliser. Returns float64."""
    X = np.asarray(X, dtype=np.float64)
    return np.where(np.isnan(X), 0.0, X)


def _check(ds: RankingDataset) -> None:
    if ds.n_docs == 0 or ds.n_queries == 0:
        raise ValueError("training data has no rows")
    if np.any(np.isinf(ds.X)):
        raise ValueError("training features contain inf")
