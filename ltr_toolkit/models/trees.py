"""LambdaMART (and RankNet-on-trees) through a custom xgboost objective.

The gradient and hessian of every boosting round come from ``rank.lambdas`` (the same
factorised lambdas as the neural rankers, summed per document over blocks of pairs:
``RankPairs``): ``xgboost.train(obj=...)``. ``weighting`` picks the pair weights
(RankNet, LambdaRank's |delta NDCG|, LambdaLoss's NDCG-Loss2 / NDCG-Loss2++ with ``mu``).
``base_score`` is 0, so the model's score is exactly the sum of its leaves — what the LTR
plugin computes (it ignores base_score). ``pairs`` swaps in another per-query objective
(a callable: labels -> object with ``grad_hess(scores)``), e.g. the NumPy reproduction of
xgboost's own ``rank:ndcg`` in benchmarks/_reference.py, to compare the two like for like.

Defaults: the toolkit's lambdas computed the way xgboost's ``rank:ndcg`` computes its
gradient, so that with the same trees, depth and learning rate the two grow the same trees
(``tests/test_trees.py``; up to float32 rounding, which can flip a near-tied split after
many rounds: benchmarks/results/quality.md counts the seeds whose models stay identical):
LambdaRank weights over the pairs with a document in the current top ``truncation`` = 32,
|delta DCG| with untruncated discounts over the IDCG@32, pair weights over
``|s_i - s_j| + 0.01`` (``score_normalization``), the per-query normalisation over pairs
log2(1 + L) / L, ``min_child_weight`` 1, sigma 1, and the hessian ``sigma^2 W p (1 - p)``
times ``hessian_scale`` = 2 (the same trees as the exact hessian with half the learning
rate, reg_lambda and min_child_weight: a more cautious Newton step).
Each of these was measured against the alternatives (benchmarks/defaults.py: 5-fold
cross-validation over the 43 *training* queries; benchmarks/quality.py: the test set).
Truncating at the metric's k = 10, the exact hessian (factor 1), no score normalisation
and normalising by the net per-document lambdas each scored lower. No variant, the
LambdaLoss weightings included, beat these by more than the spread between folds or
seeds, NDCG@32's truncated discounts (``truncate_discounts``, the default before) neither.
xgboost's default evaluation metric is disabled: the validation NDCG@k (named ``ndcg@k``)
is the only metric, the one early stopping (``early_stopping_rounds``, off by default)
watches.
"""

from __future__ import annotations

import json
import os
import threading
from numbers import Integral, Real

import numpy as np

from ..data.dataset import RankingDataset, graded
from ..rank.lambdas import DEFAULT_MU, QUERY_NORMALIZATIONS, check_weighting
from ..rank.metrics import ndcg
from ..rank.pairs import RankPairs
from .base import (BOOLEAN, EstimatorParams, Interval, Kind, Options, query_batches,
                   row_batches, training_sets)

ALGOS = {"lambdamart": "lambdarank", "ranknet-tree": "ranknet"}

#: What a missing feature (NaN) becomes for the trees: larger than any real value, so it
#: takes every split's right ("no") branch, as the LTR plugin routes NaN on 3.x (its split
#: test is ``threshold > value``, false for NaN, whatever the node's ``missing`` says).
#: Training on it makes xgboost learn trees that treat missing exactly as served.
MISSING_AS = np.float32(1e30)


def default_threads() -> int:
    """xgboost's threads when a model does not set ``nthread``: ``$LTR_THREADS``, else the
    machine's cores (parallel fits give each worker its share through the variable)."""
    env = os.environ.get("LTR_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return os.cpu_count() or 1


def _quietly(fn) -> None:
    """``fn()`` (if any) with its exception dropped: a warm-up whose failure the real call
    repeats and raises."""
    if fn is None:
        return
    try:
        fn()
    except Exception:       # noqa: BLE001 - raised again by the real call
        pass


def fill_missing(X: np.ndarray) -> np.ndarray:
    """Rows as the trees see them: a float32 copy, NaN replaced by :data:`MISSING_AS`."""
    X = np.array(X, dtype=np.float32)
    np.copyto(X, MISSING_AS, where=np.isnan(X))
    return X


class LambdaMART(EstimatorParams):
    """scikit-learn style: hyper-parameters in ``__init__`` (stored unchanged, checked by
    ``fit``), ``get_params``/``set_params`` from the signature, ``fit`` returns self.

    ``k``: the NDCG@k of the validation metric (and of the weights' IDCG);
    ``truncation``: pairs count when one document is in the current top ``truncation``
    ("k": the metric's k, None: every pair); ``weighting``: ``rank.lambdas.WEIGHTINGS``,
    by default the algorithm's own; ``mu``: NDCG-Loss2++'s mixing weight;
    ``query_normalization``: ``rank.lambdas.QUERY_NORMALIZATIONS`` (True, in artifacts
    written before it took names, is "documents"); ``score_normalization``: every pair
    weight over ``|s_i - s_j| + 0.01`` (as xgboost's rank:ndcg); ``hessian_scale``: the
    diagonal hessians times this factor (2, as xgboost's rank:ndcg; 1: the exact
    second derivative of the weighted pair loss); ``truncate_discounts``: the swap's
    |delta DCG| with NDCG@truncation's discounts (0 from that rank on) rather than the
    untruncated ones (xgboost's rank:ndcg: the truncation then only selects the pairs);
    ``warm_start`` (scikit-learn's meaning): ``fit`` on the same data after raising
    ``n_estimators`` adds trees to the fitted ones instead of starting again."""

    _parameter_constraints = {
        "algo": [Options(*ALGOS)], "n_estimators": [Interval(Integral, 1, None)],
        "max_depth": [Interval(Integral, 1, None)],
        "learning_rate": [Interval(Real, 0, None, "neither")], "k": [Interval(Integral, 1, None)],
        "sigma": [Interval(Real, 0, None, "neither")],
        "early_stopping_rounds": [None, Interval(Integral, 1, None)],
        "min_child_weight": [Interval(Real, 0, None)], "reg_lambda": [Interval(Real, 0, None)],
        "tree_method": [Options("hist", "approx", "exact")], "max_bin": [Interval(Integral, 2, None)],
        "nthread": [None, Interval(Integral, 1, None)], "seed": [Kind(Integral)],
        "pairs": [None, Kind(callable, name="a callable (labels of one query) -> an object "
                                             "with grad_hess(scores)")],
        "subsample": [Interval(Real, 0, 1, "right")], "colsample_bytree": [Interval(Real, 0, 1, "right")],
        "query_normalization": [None, Options(*QUERY_NORMALIZATIONS, True, False)],
        "truncation": [Options("k"), None, Interval(Integral, 1, None)],
        "weighting": [None, Kind(str)], "mu": [Interval(Real, 0, None)],
        "score_normalization": [BOOLEAN, Options(0, 1)], "hessian_scale": [Interval(Real, 0, None, "neither")],
        "truncate_discounts": [BOOLEAN, Options(0, 1)], "warm_start": [BOOLEAN, Options(0, 1)],
    }

    def __init__(self, algo: str = "lambdamart", n_estimators: int = 300, max_depth: int = 6,
                 learning_rate: float = 0.1, k: int = 10, sigma: float = 1.0,
                 early_stopping_rounds: int | None = None, min_child_weight: float = 1.0,
                 reg_lambda: float = 1.0, tree_method: str = "hist", max_bin: int = 256,
                 nthread: int | None = None, seed: int = 0, pairs=None,
                 subsample: float = 1.0, colsample_bytree: float = 1.0,
                 query_normalization: str | None = "pairs", truncation: int | None | str = 32,
                 weighting: str | None = None, mu: float = DEFAULT_MU,
                 score_normalization: bool = True, hessian_scale: float = 2.0,
                 truncate_discounts: bool = False, warm_start: bool = False):
        self.algo = algo
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.k = k
        self.sigma = sigma
        self.early_stopping_rounds = early_stopping_rounds
        self.min_child_weight = min_child_weight
        self.reg_lambda = reg_lambda
        self.tree_method = tree_method
        self.max_bin = max_bin
        self.nthread = nthread
        self.seed = seed
        self.pairs = pairs
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.query_normalization = query_normalization
        self.truncation = truncation
        self.weighting = weighting
        self.mu = mu
        self.score_normalization = score_normalization
        self.hessian_scale = hessian_scale
        self.truncate_discounts = truncate_discounts
        self.warm_start = warm_start

    # ------------------------------------------------------------------ resolved parameters
    @property
    def metric_name(self) -> str:
        """The name of the validation metric in xgboost's evaluation log."""
        return f"ndcg@{int(self.k)}"

    def _weighting(self) -> str:
        return self.weighting or ALGOS[self.algo]

    def _truncation(self) -> int | None:
        t = self.truncation
        return int(self.k) if t == "k" else (None if t is None else int(t))

    def _query_normalization(self) -> str | None:
        q = self.query_normalization
        if q is True:          # artifacts written when this was a bool
            return "documents"
        return None if q is False else q

    def _validate(self) -> None:
        self._validate_params()
        check_weighting(self._weighting())

    def threads(self) -> int:
        """``nthread``, or when None :func:`default_threads`."""
        return int(self.nthread) if self.nthread else default_threads()

    def booster_params(self) -> dict:
        """Tree parameters shared with a native-objective booster (for comparisons)."""
        self._validate()
        return {"max_depth": int(self.max_depth), "eta": float(self.learning_rate),
                "min_child_weight": float(self.min_child_weight), "lambda": float(self.reg_lambda),
                "tree_method": self.tree_method, "max_bin": int(self.max_bin),
                "nthread": self.threads(), "seed": int(self.seed), "base_score": 0.0,
                "subsample": float(self.subsample), "colsample_bytree": float(self.colsample_bytree)}

    # ------------------------------------------------------------------ objective
    def objective(self, train: RankingDataset):
        """A callable ``obj(preds, dtrain) -> (grad, hess)`` for ``xgboost.train``."""
        self._validate()
        if self.pairs is not None:      # another objective, e.g. for comparisons
            slices = [train.query(q) for q in np.flatnonzero(graded(train.y, train.offsets))]
            caches = [self.pairs(train.y[sl]) for sl in slices]
            n = train.n_docs

            def other(preds, dtrain):
                grad = np.zeros(n)
                hess = np.zeros(n)
                for sl, c in zip(slices, caches):
                    grad[sl], hess[sl] = c.grad_hess(preds[sl])
                return grad, hess
            return other
        pairs = self.rank_pairs(train.y, train.offsets, train.weights)

        def obj(preds, dtrain):
            return pairs.grad_hess(preds)
        obj.warm = pairs.warm
        return obj

    def rank_pairs(self, labels, offsets, weights=None) -> RankPairs:
        """The objective's pairs of these queries (labels, row offsets, optional document
        weights: ``RankingDataset.weights``): per query, so a part of the queries gets
        exactly those queries' lambdas (``distributed.dask_trees``)."""
        return RankPairs(labels, offsets, self._weighting(), float(self.sigma),
                         self._truncation(), float(self.mu), self._query_normalization(),
                         score_normalization=bool(self.score_normalization),
                         hessian_scale=float(self.hessian_scale),
                         truncate_discounts=bool(self.truncate_discounts), doc_weights=weights,
                         threads=self.threads())

    def stopping_callbacks(self) -> list:
        """xgboost's early stopping on the validation NDCG@k, when asked for."""
        import xgboost as xgb
        if self.early_stopping_rounds is None:
            return []
        return [xgb.callback.EarlyStopping(
            rounds=int(self.early_stopping_rounds), metric_name=self.metric_name,
            data_name="valid", maximize=True, save_best=False)]

    # ------------------------------------------------------------------ fit / predict
    def _dmatrix(self, ds: RankingDataset, ref=None):
        """xgboost's matrix of a dataset, fed in batches of whole queries with NaN as
        :data:`MISSING_AS` (never a second full copy of the features; a query cut between
        two batches would count as two groups): a QuantileDMatrix (the histogram index
        only) for ``hist``, a DMatrix otherwise."""
        import xgboost as xgb
        qid = np.repeat(np.arange(ds.n_queries), ds.group_sizes)
        if self.tree_method != "hist":
            d = xgb.DMatrix(fill_missing(ds.X), label=ds.y, missing=np.nan, nthread=self.threads())
            d.set_group(ds.group_sizes)
            return d
        X, y = ds.X, ds.y

        class Batches(xgb.DataIter):
            def __init__(self):
                self._todo = query_batches(ds.offsets)
                super().__init__()

            def next(self, input_data):
                lo, hi = next(self._todo, (None, None))
                if lo is None:
                    return False
                input_data(data=fill_missing(X[lo:hi]), label=y[lo:hi], qid=qid[lo:hi])
                return True

            def reset(self):
                self._todo = query_batches(ds.offsets)
        return xgb.QuantileDMatrix(Batches(), max_bin=int(self.max_bin), nthread=self.threads(),
                                   missing=np.nan, ref=ref)

    def _ndcg_metric(self, valid: RankingDataset):
        k, name = int(self.k), self.metric_name

        def metric(preds, dm):
            return name, float(np.mean(ndcg(preds, valid.y, valid.offsets, k)))
        return metric

    def fit(self, X, y=None, qid=None, *, valid=None, callbacks=None):
        """``fit(train_dataset[, valid_dataset])`` or ``fit(X, y, qid=...[, valid=(X, y, qid)])``.

        With validation data, the validation NDCG@k (``metric_name``) is evaluated every
        round — xgboost's default metric is disabled. With ``early_stopping_rounds``, early
        stopping watches it by name; ``best_iteration_`` is its best round, and ``predict``
        uses the trees up to it. By default (None, xgboost's and LightGBM's default) every
        tree is kept: on the MSLR 5k extract, stopping on a validation fifth of the training
        queries lost NDCG@10 at every patience tried (benchmarks/early_stopping.py)."""
        import xgboost as xgb
        train, valid = training_sets(X, y, qid, valid)
        self._validate()
        if self.warm_start and hasattr(self, "booster_"):
            self._check_n_features(train.X)
        self.n_features_in_ = train.n_features
        objective = self.objective(train)
        # the compiled kernel loads while xgboost builds the matrix (a failure there
        # shows again, and is raised, at the objective's first call)
        warm = threading.Thread(target=_quietly, args=(getattr(objective, "warm", None),))
        warm.start()
        dtrain = self._dmatrix(train)
        params = dict(self.booster_params(), disable_default_eval_metric=1)
        evals, metric = [], None
        cbs = list(callbacks or [])
        if valid is not None:
            evals = [(self._dmatrix(valid, ref=dtrain), "valid")]
            metric = self._ndcg_metric(valid)
            cbs += self.stopping_callbacks()
        previous = getattr(self, "booster_", None) if self.warm_start else None
        done = previous.num_boosted_rounds() if previous is not None else 0
        if done > int(self.n_estimators):
            raise ValueError(f"warm_start: n_estimators={self.n_estimators} is fewer than the "
                             f"{done} trees fitted")
        warm.join()
        self.booster_ = xgb.train(
            params, dtrain, num_boost_round=int(self.n_estimators) - done, obj=objective,
            evals=evals, custom_metric=metric, verbose_eval=False, callbacks=cbs,
            xgb_model=previous)
        self.set_booster(self.booster_, valid is not None)
        return self

    def set_booster(self, booster, validated: bool) -> None:
        """The fitted booster (``best_iteration_``: its best round when early stopping
        watched a validation set, else its last)."""
        self.booster_ = booster
        self.best_iteration_ = int(self.n_estimators) - 1
        if validated and self.early_stopping_rounds is not None:
            self.best_iteration_ = int(booster.best_iteration)

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Scores (the sum of the trees' leaves up to ``best_iteration_``), in batches of
        rows: memory beyond the input is O(batch)."""
        self._check_fitted("booster_")
        X = self._check_n_features(X)
        out = np.empty(len(X), dtype=np.float64)
        for lo, hi in row_batches(len(X)):
            out[lo:hi] = self.booster_.inplace_predict(
                fill_missing(X[lo:hi]), iteration_range=(0, self.best_iteration_ + 1),
                predict_type="margin", missing=np.nan)
        return out

    def trees_json(self) -> list:
        dump = self.booster_.get_dump(dump_format="json")[: self.best_iteration_ + 1]
        return [json.loads(t) for t in dump]

    # ------------------------------------------------------------------ artifact
    def state(self) -> dict:
        raw = self.booster_.save_raw("json")
        return {"params": self._json_params(), "best_iteration": int(self.best_iteration_),
                "booster": json.loads(bytes(raw).decode())}

    @classmethod
    def from_state(cls, state: dict) -> "LambdaMART":
        import xgboost as xgb
        names = cls._param_names()
        params = {k: v for k, v in state["params"].items() if k in names}
        # artifacts from before these were parameters: what the objective did then
        params.setdefault("truncation", "k")
        params.setdefault("score_normalization", False)
        params.setdefault("hessian_scale", 1.0)
        params.setdefault("truncate_discounts", True)
        m = cls(**params)
        m.booster_ = xgb.Booster()
        m.booster_.load_model(bytearray(json.dumps(state["booster"]).encode()))
        m.best_iteration_ = int(state["best_iteration"])
        m.n_features_in_ = int(m.booster_.num_features())
        return m
