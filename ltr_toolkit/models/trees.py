"""LambdaMART (and RankNet-on-trees) through a custom xgboost objective.

The gradient and hessian of every boosting round come from ``rank.lambdas`` (the same
lambdas as the neural rankers): ``xgboost.train(obj=...)``. ``base_score`` is 0, so the
model's score is exactly the sum of its leaves — what the LTR plugin computes (it
ignores base_score). ``native_topk=K`` switches to a NumPy reproduction of xgboost's own
``rank:ndcg`` pair selection, so that the two can be compared like for like.
"""

from __future__ import annotations

import json

import numpy as np

from ..data.dataset import RankingDataset
from ..rank.lambdas import NativeTopKPairs, QueryPairs
from ..rank.metrics import ndcg

ALGOS = {"lambdamart": "lambdarank", "ranknet-tree": "ranknet"}

#: What a missing feature (NaN) becomes for the trees: larger than any real value, so it
#: takes every split's right ("no") branch, as the LTR plugin routes NaN on 3.x (its split
#: test is ``threshold > value``, false for NaN, whatever the node's ``missing`` says).
#: Training on it makes xgboost learn trees that treat missing exactly as served.
MISSING_AS = np.float32(1e30)


def fill_missing(X: np.ndarray) -> np.ndarray:
    """Rows as the trees see them: float32, NaN replaced by :data:`MISSING_AS`."""
    X = np.asarray(X, dtype=np.float32)
    return np.where(np.isnan(X), MISSING_AS, X)


class LambdaMART:
    def __init__(self, algo: str = "lambdamart", n_estimators: int = 300, max_depth: int = 6,
                 learning_rate: float = 0.1, k: int = 10, sigma: float = 1.0,
                 early_stopping_rounds: int | None = 30, min_child_weight: float = 0.0,
                 reg_lambda: float = 1.0, tree_method: str = "hist", max_bin: int = 256,
                 nthread: int = 2, seed: int = 0, native_topk: int | None = None,
                 subsample: float = 1.0, colsample_bytree: float = 1.0,
                 query_normalization: bool = True):
        if algo not in ALGOS:
            raise ValueError(f"algo must be one of {sorted(ALGOS)}")
        self.algo = algo
        self.n_estimators = int(n_estimators)
        self.max_depth = int(max_depth)
        self.learning_rate = float(learning_rate)
        self.k = int(k)
        self.sigma = float(sigma)
        self.early_stopping_rounds = early_stopping_rounds
        self.min_child_weight = float(min_child_weight)
        self.reg_lambda = float(reg_lambda)
        self.tree_method = tree_method
        self.max_bin = int(max_bin)
        self.nthread = int(nthread)
        self.seed = int(seed)
        self.native_topk = native_topk
        self.subsample = float(subsample)
        self.colsample_bytree = float(colsample_bytree)
        self.query_normalization = bool(query_normalization)

    def get_params(self) -> dict:
        return {k: getattr(self, k) for k in (
            "algo", "n_estimators", "max_depth", "learning_rate", "k", "sigma",
            "early_stopping_rounds", "min_child_weight", "reg_lambda", "tree_method", "max_bin",
            "nthread", "seed", "native_topk", "subsample", "colsample_bytree",
            "query_normalization")}

    def booster_params(self) -> dict:
        """Tree parameters shared with a native-objective booster (for comparisons)."""
        return {"max_depth": self.max_depth, "eta": self.learning_rate,
                "min_child_weight": self.min_child_weight, "lambda": self.reg_lambda,
                "tree_method": self.tree_method, "max_bin": self.max_bin,
                "nthread": self.nthread, "seed": self.seed, "base_score": 0.0,
                "subsample": self.subsample, "colsample_bytree": self.colsample_bytree}

    # ------------------------------------------------------------------ objective
    def objective(self, train: RankingDataset):
        """A callable ``obj(preds, dtrain) -> (grad, hess)`` for ``xgboost.train``."""
        offsets = train.offsets
        queries = [q for q in range(train.n_queries) if np.ptp(train.y[train.query(q)]) > 0]
        slices = [train.query(q) for q in queries]
        if self.native_topk is not None:
            caches = [NativeTopKPairs(train.y[sl], self.native_topk) for sl in slices]
        else:
            # float32 pair arithmetic: xgboost stores gradients as float32 anyway
            caches = [QueryPairs(train.y[sl], self.sigma, self.k, dtype=np.float32) for sl in slices]
        kind = ALGOS[self.algo]
        n = int(offsets[-1])

        def obj(preds, dtrain):
            grad = np.zeros(n)
            hess = np.zeros(n)
            for sl, c in zip(slices, caches):
                if self.native_topk is not None:
                    g, h = c.grad_hess(preds[sl])
                else:
                    g, h = c.grad_hess(preds[sl], kind)
                    if self.query_normalization:
                        # LightGBM's per-query scale log2(1 + L) / L, L = sum |lambda|:
                        # queries with many mis-ordered pairs do not dominate a tree
                        total = float(np.abs(g).sum())
                        if total > 0:
                            scale = np.log2(1.0 + total) / total
                            g, h = g * scale, h * scale
                grad[sl] = g
                hess[sl] = h
            return grad, hess
        return obj

    # ------------------------------------------------------------------ fit / predict
    def _dmatrix(self, ds: RankingDataset):
        import xgboost as xgb
        d = xgb.DMatrix(fill_missing(ds.X), label=ds.y, missing=np.nan, nthread=self.nthread)
        d.set_group(ds.group_sizes)
        return d

    def _ndcg_metric(self, valid: RankingDataset):
        k = self.k

        def metric(preds, dm):
            return f"ndcg@{k}", float(np.mean(ndcg(preds, valid.y, valid.offsets, k)))
        return metric

    def fit(self, train: RankingDataset, valid: RankingDataset | None = None, callbacks=None):
        import xgboost as xgb
        dtrain = self._dmatrix(train)
        evals, metric = [], None
        if valid is not None:
            evals = [(self._dmatrix(valid), "valid")]
            metric = self._ndcg_metric(valid)
        self.booster_ = xgb.train(
            self.booster_params(), dtrain, num_boost_round=self.n_estimators,
            obj=self.objective(train), evals=evals, custom_metric=metric, maximize=True,
            early_stopping_rounds=self.early_stopping_rounds if valid is not None else None,
            verbose_eval=False, callbacks=callbacks)
        self.best_iteration_ = getattr(self.booster_, "best_iteration", self.n_estimators - 1)
        if valid is None:
            self.best_iteration_ = self.n_estimators - 1
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        import xgboost as xgb
        d = xgb.DMatrix(fill_missing(X), missing=np.nan, nthread=self.nthread)
        return self.booster_.predict(d, output_margin=True,
                                     iteration_range=(0, self.best_iteration_ + 1)).astype(np.float64)

    def trees_json(self) -> list:
        dump = self.booster_.get_dump(dump_format="json")[: self.best_iteration_ + 1]
        return [json.loads(t) for t in dump]

    # ------------------------------------------------------------------ artifact
    def state(self) -> dict:
        raw = self.booster_.save_raw("json")
        return {"params": self.get_params(), "best_iteration": int(self.best_iteration_),
                "booster": json.loads(bytes(raw).decode())}

    @classmethod
    def from_state(cls, state: dict) -> "LambdaMART":
        import xgboost as xgb
        m = cls(**state["params"])
        m.booster_ = xgb.Booster()
        m.booster_.load_model(bytearray(json.dumps(state["booster"]).encode()))
        m.best_iteration_ = int(state["best_iteration"])
        return m
