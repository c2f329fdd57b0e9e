"""Training from files, and the self-describing model artifact it writes (read back,
and scored with, in :mod:`.artifact`)."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import numpy as np

from .. import __version__
from ..clicks.debias import DEFAULT_CLIP, POWERS, ClickData, check_power, ipw, parse_propensity
from ..data.dataset import graded
from ..data.svmlight import check_grades, load_logged
from ..errors import UserError
from ..io.atomic import check_writable, write_json
from ..models.neural import ALGOS as NEURAL_ALGOS, NeuralRanker, output_map
from ..models.trees import ALGOS as TREE_ALGOS, LambdaMART
from ..rank.metrics import evaluate
from ..stores.contract import from_sidecar
# the artifact read back (here too for the callers that import them from here)
from .artifact import (ARTIFACT_FORMAT, check_same_features, load_model,  # noqa: F401
                       model_from_artifact, predict_file, read_artifact)
from .evidence import from_valid

ALGORITHMS = sorted([*NEURAL_ALGOS, *TREE_ALGOS])


def train_from_files(data, algo="lambdarank-nn", valid=None, test=None, output=None,
                     propensity=None, propensity_clip=DEFAULT_CLIP, propensity_power=None,
                     **params) -> dict:
    """Train on SVMlight files (with their sidecars) and write the model artifact.
    ``propensity`` (click data from ``ltr judgments click-features``): the lambdas
    weighted by inverse examination propensities, ``pbm`` / ``ubm`` (estimated by EM on
    the file's clicks) or given per position (``clicks.debias``), clipped at
    ``propensity_clip``, raised to ``-propensity_power`` (default: ``clicks.debias.POWERS``
    of the algorithm's family)."""
    check_algorithm(algo)   # before reading any file
    if propensity is not None:
        parse_propensity(propensity)
        if propensity_power is None:
            propensity_power = POWERS["trees" if algo in TREE_ALGOS else "networks"]
        check_power(propensity_power)
    if output:
        check_writable(output)
    data = Path(data)
    train = load_logged(data)
    check_grades(train, data)
    if propensity is not None:
        train.weights = ipw(ClickData.from_dataset(train, data), propensity, propensity_clip,
                            propensity_power)
    nf = train.n_features
    # a file that does not say what an absent feature means: as in the training data
    rule, by = train.meta["missing_features"], f"the training data {data}"
    v = load_logged(valid, n_features=nf, rule=rule, rule_by=by) if valid else None
    t = load_logged(test, n_features=nf, rule=rule, rule_by=by) if test else None
    for path, ds in ((valid, v), (test, t)):
        if ds is not None:
            check_grades(ds, path)
    for other in (v, t):
        if other is not None:
            check_same_features(data, train.meta["sidecar"], other.source, other.meta["sidecar"])
    artifact = train_model(train, algo, v, t, source=str(data), **params)
    if v is not None:       # the gains ltr monitor tests decay against (pipeline.evidence)
        stopped = algo in NEURAL_ALGOS or params.get("patience") is not None
        artifact["held_out"] = from_valid(artifact, v, params.get("k", 10), stopped)
    if propensity is not None:
        artifact["training_data"]["propensity"] = {
            "spec": str(propensity), "clip": float(propensity_clip), "power": float(propensity_power),
            "max_weight": float(train.weights.max(initial=0.0))}
    if output:
        write_json(output, artifact)
    return artifact


def check_algorithm(algo: str) -> None:
    if algo not in ALGORITHMS:
        raise UserError(f"unknown algorithm {algo!r}", f"choose one of {', '.join(ALGORITHMS)}")


#: a network's epochs unless given (early stopping may end it sooner)
EPOCHS = 50


def make_estimator(algo: str, hidden=(64, 16), epochs=EPOCHS, lr=None, optimizer="adam",
                   sigma=1.0, k=10, patience=None, seed=42, trees=300, depth=6,
                   truncation="default", hessian_scale=None, min_child_weight=None, l2=None,
                   max_bin=None):
    """The estimator ``train_model`` fits, from its settings (None / "default": the
    family's own default; see :func:`train_model`)."""
    check_algorithm(algo)
    if lr is None:
        lr = 0.1 if algo in TREE_ALGOS else 1e-3
    for name, value in (("learning rate", lr), ("sigma", sigma)):
        if not (isinstance(value, (int, float)) and np.isfinite(value) and value > 0):
            raise UserError(f"{name} {value!r}: expected a number > 0")
    given = {"truncation": truncation} if truncation != "default" else {}
    if algo in NEURAL_ALGOS:
        return NeuralRanker(algo=algo, hidden=hidden, optimizer=optimizer, lr=lr, epochs=epochs,
                            sigma=sigma, k=k, seed=seed, **given,
                            **({} if patience is None else {"patience": patience}),
                            **({} if l2 is None else {"l2": l2}))
    return LambdaMART(algo=algo, n_estimators=trees, max_depth=depth, learning_rate=lr,
                      k=k, sigma=sigma, seed=seed, **given,
                      **({} if patience is None else {"early_stopping_rounds": patience}),
                      **({} if hessian_scale is None else {"hessian_scale": hessian_scale}),
                      **({} if min_child_weight is None else {"min_child_weight": min_child_weight}),
                      **({} if max_bin is None else {"max_bin": max_bin}))


def train_model(train, algo="lambdarank-nn", valid=None, test=None, source=None,
                on_epoch=None, k=10, seed=42, patience=None, **settings) -> dict:
    """Train on datasets (``train.meta["sidecar"]`` describes logged data) and return the
    self-describing model artifact. ``settings`` (:func:`make_estimator`): ``hidden``,
    ``epochs``, ``lr`` (None: 1e-3 networks, 0.1 trees), ``optimizer``, ``sigma``,
    ``trees``, ``depth``, ``min_child_weight`` (trees), ``l2`` (networks and linear),
    ``truncation`` ("default": the metric's k for networks, 32 for trees; else "k", None
    for all pairs, or an integer), ``hessian_scale``, ``max_bin`` (trees: histogram bins
    per feature, default 256). ``patience`` None: the
    family's early stopping (10 epochs for networks; none for trees, every tree kept)."""
    model = make_estimator(algo, k=k, seed=seed, patience=patience, **settings)
    if patience is not None and valid is None:
        raise UserError("--patience needs --valid: early stopping watches the validation NDCG",
                        "add --valid FILE, or drop --patience")
    splits = {"train": train}
    if valid is not None:
        splits["valid"] = valid
    if test is not None:
        splits["test"] = test
    side = train.meta.get("sidecar", {})
    if train.meta.get("missing_features"):      # the rule it was read with (data.logged)
        side = {**side, "missing_features": train.meta["missing_features"]}
    data = source or train.source
    warnings = grade_variation_check(train, data)
    nf = train.n_features
    if algo in NEURAL_ALGOS:
        normalisation, history, extra = _fit_network(model, algo, train, valid, on_epoch)
    else:
        normalisation, history, extra = _fit_trees(model, train, valid, on_epoch)
    metrics = _split_metrics(model, splits, k)
    return model_artifact(model, algo, side, nf, metrics, warnings=warnings,
                          training_data={"path": str(data), "sha256": train.content_hash(),
                                         "rows": train.n_docs, "queries": train.n_queries,
                                         "qids": [str(q) for q in train.qids]},
                          normalisation=normalisation, history=history, extra=extra)


def _fit_network(model, algo: str, train, valid, on_epoch) -> tuple[dict, list, dict]:
    """Fit a network (or linear) ranker: (its input normalisation, its history, the
    artifact's extra entries: the output map, except for linear models)."""
    model.fit(train, valid, on_epoch=on_epoch)
    normalisation = {"type": "standard", "mean": model.mean_.tolist(), "std": model.std_.tolist()}
    extra = {"output_map": output_map(model, train.X)} if algo != "linear" else {}
    return normalisation, model.history, extra


def _fit_trees(model, train, valid, on_epoch) -> tuple[None, list, dict]:
    """Fit a tree ensemble, reporting each round to ``on_epoch``: (no normalisation,
    trees split on raw (logged) feature values; no history; no extra entries)."""
    model.fit(train, valid, callbacks=_round_callbacks(model, on_epoch))
    return None, [], {}


def _round_callbacks(model, on_epoch) -> list:
    """xgboost callbacks that pass each round and its validation metric (None without
    --valid) to ``on_epoch``; none without ``on_epoch``."""
    if on_epoch is None:
        return []
    import xgboost as xgb

    class _Progress(xgb.callback.TrainingCallback):
        def after_iteration(self, booster, epoch, evals_log):
            vals = evals_log.get("valid", {}).get(model.metric_name)
            on_epoch(epoch, vals[-1] if vals else None)   # no --valid: no metric
            return False
    return [_Progress()]


def _split_metrics(model, splits: dict, k: int) -> dict:
    """Each split's metrics at ``k`` (and its number of queries) from the model's scores."""
    metrics = {}
    # ERR's grade scale: the largest label of every split reported, so theirs compare
    max_grade = max(float(ds.y.max()) for ds in splits.values() if ds.n_docs)
    for name, ds in splits.items():
        m = evaluate(model.predict(ds.X), ds.y, ds.offsets, k, max_grade=max_grade)
        m["queries"] = ds.n_queries
        metrics[name] = m
    return metrics


def model_artifact(model, algo: str, side: dict, nf: int, metrics: dict, *, warnings,
                   training_data: dict, normalisation=None, history=(), extra=None) -> dict:
    """The self-describing model artifact of a fitted model (``side``: the training
    data's sidecar)."""
    return {
        "format": ARTIFACT_FORMAT,
        "toolkit_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "algorithm": algo,
        "hyper_parameters": model.get_params(),
        "n_features": nf,
        "feature_names": side.get("feature_names") or [f"f{i + 1}" for i in range(nf)],
        "featureset": side.get("featureset"),
        "featureset_sha256": side.get("featureset_sha256"),
        "normalisation": normalisation,
        "missing_features": side.get("missing_features"),
        "first_stage": side.get("first_stage"),
        "featureset_params": side.get("featureset_params"),
        "max_query_terms": side.get("max_query_terms"),
        "encoder": side.get("encoder"),
        "vector_field": side.get("vector_field"),
        "candidates": side.get("candidates"),
        # how to serve it as it was evaluated (stores.contract); selection may blend it
        "serving": from_sidecar(side).to_dict(),
        "warnings": list(warnings),
        "training_data": training_data,
        "metrics": metrics,
        "history": list(history),
        "model": model.state(),
        **(extra or {}),
    }


def grade_variation_check(ds, path) -> list[str]:
    """Refuse data where no query has two different grades (nothing to learn: every
    lambda is 0, and the metric is 1.0 for any model); warn when most queries have none."""
    return grade_variation(int(graded(ds.y, ds.offsets).sum()), ds.n_queries, path)


def grade_variation(varied: int, n_queries: int, path) -> list[str]:
    """:func:`grade_variation_check` from the number of queries with two grades."""
    if varied == 0:
        raise UserError(f"{path}: no query has two different grades, so there is nothing to learn",
                        "log candidates (`ltr log --window K`) so that unjudged documents "
                        "appear as grade 0, or use judgments with graded relevance")
    if varied < n_queries / 2:
        return [f"{path}: only {varied} of {n_queries} queries have two different grades; "
                "the others teach the model nothing"]
    return []
