"""LambdaMART and RankNet-trees on ``xgboost.dask`` with the toolkit's own objective.

xgboost.dask runs ``xgboost.train`` on every worker over the rows that worker holds and
sums the gradient histograms across workers (its collective, an allreduce), so the trees
are those of one model over all rows. The custom objective runs on each worker for its
own rows: :class:`WorkerObjective` builds the same ``RankPairs`` as one process over the
worker's queries (``LambdaMART.rank_pairs``); every query is whole on one worker
(``ranges``), and the lambdas are per query, so each document's gradient and hessian are
the single process's. Differences left: xgboost's histogram cuts come from a sketch merged
across workers (one process sketches all rows itself), which can move a split threshold.
The validation NDCG@k (:class:`WorkerNDCG`) is each worker's sum over its queries,
summed across workers with xgboost's allreduce: every worker sees the mean over all
validation queries, so early stopping stops every worker at the same, single-process round.
"""

from __future__ import annotations

import numpy as np

from ..models.trees import LambdaMART
from ..rank.metrics import evaluate, ndcg


def _local_queries(dmatrix):
    """(labels, query row offsets) of a worker's part of a DMatrix."""
    y = np.asarray(dmatrix.get_label(), dtype=np.float64)
    ptr = np.asarray(dmatrix.get_uint_info("group_ptr"), dtype=np.int64)
    if len(ptr) == 0:
        ptr = np.zeros(1, dtype=np.int64)
    return y, ptr


class WorkerObjective:
    """``obj(preds, dtrain)`` on a worker: the toolkit's lambdas of its queries (the
    pairs are built on the first round and kept)."""

    def __init__(self, model: LambdaMART):
        self.model = model
        self._pairs = None

    def __call__(self, preds, dtrain):
        if self._pairs is None:
            self._pairs = self.model.rank_pairs(*_local_queries(dtrain))
        return self._pairs.grad_hess(preds)


class WorkerNDCG:
    """``custom_metric(preds, dvalid)``: NDCG@k over all workers' validation queries."""

    def __init__(self, k: int, name: str):
        self.k, self.name = int(k), name

    def __call__(self, preds, dvalid):
        from xgboost import collective
        y, ptr = _local_queries(dvalid)
        local = ndcg(preds, y, ptr, self.k) if len(ptr) > 1 else np.zeros(0)
        total = collective.allreduce(np.array([float(np.sum(local)), float(len(local))]),
                                     collective.Op.SUM)
        return self.name, float(total[0] / max(total[1], 1.0))


def _dmatrix(client, model: LambdaMART, loaded, ref=None):
    import xgboost as xgb
    import xgboost.dask  # noqa: F401  (a submodule xgboost does not import itself)
    X, y, qid = loaded.arrays()
    if model.tree_method != "hist":
        return xgb.dask.DaskDMatrix(client, X, y, qid=qid, missing=np.nan)
    return xgb.dask.DaskQuantileDMatrix(client, X, y, qid=qid, missing=np.nan,
                                        max_bin=int(model.max_bin), ref=ref)


def fit(client, model: LambdaMART, train, valid=None, callbacks=()) -> dict:
    """Fit ``model`` (a LambdaMART) on parts loaded on the cluster (``ranges.load``);
    returns xgboost's evaluation history (``{"valid": {"ndcg@k": [...]}}``)."""
    import xgboost as xgb
    import xgboost.dask  # noqa: F401  (a submodule xgboost does not import itself)
    if model.pairs is not None:
        raise ValueError("a custom pairs objective is not supported on Dask")
    params = dict(model.booster_params(), disable_default_eval_metric=1)
    del params["nthread"]          # each worker's own threads (more would spin-wait)
    dtrain = _dmatrix(client, model, train)
    evals, metric, cbs = [], None, list(callbacks)
    if valid is not None:
        evals = [(_dmatrix(client, model, valid, ref=dtrain), "valid")]
        metric = WorkerNDCG(model.k, model.metric_name)
        cbs += model.stopping_callbacks()
    out = xgb.dask.train(client, params, dtrain, num_boost_round=int(model.n_estimators),
                         evals=evals, obj=WorkerObjective(model), custom_metric=metric,
                         verbose_eval=False, callbacks=cbs or None)
    model.set_booster(out["booster"], valid is not None)
    return out["history"]


def _part_metrics(data: dict, model: LambdaMART, k: int, max_grade: float) -> dict:
    """(on a worker) Sums over the part's queries of the standard metrics."""
    nq = len(data["offsets"]) - 1
    if nq == 0:
        return {"queries": 0}
    means = evaluate(model.predict(data["X"]), data["y"], data["offsets"], k,
                     max_grade=max_grade)
    return {"queries": nq, **{name: v * nq for name, v in means.items()}}


def evaluate_parts(client, model: LambdaMART, loaded, k: int, max_grade: float) -> dict:
    """The metrics of ``train_model``'s report over parts loaded on the cluster: the
    mean over all their queries of each query's value."""
    sums = client.gather(client.map(_part_metrics, loaded.futures, model=model, k=k,
                                    max_grade=max_grade, pure=False))
    n = sum(s["queries"] for s in sums)
    names = [key for key in next((s for s in sums if s["queries"]), {}) if key != "queries"]
    out = {name: float(sum(s.get(name, 0.0) for s in sums) / n) for name in names}
    out["queries"] = n
    return out
