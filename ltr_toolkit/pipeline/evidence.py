"""Held-out evidence: a model's per-query gain over the first stage on queries it was not
trained on, recorded in its artifact when it is made (``held_out``), for ``ltr monitor``
to test the gain it finds later against (``evaluation.decay``).

It is measured as the monitor measures: NDCG@k of the model's ranking of each query's
logged rows (scored as served: :func:`model_scores`) minus the first stage's
(``evaluation.decay.per_query``), on queries whose rows do not all share one grade.

* ``ltr train --valid``: the validation split's queries (:func:`from_valid`). When the
  model stopped early on them (networks by default, trees with ``--patience``) they also
  chose its length: recorded as ``selected_on``, slightly optimistic.
* ``ltr evaluate cv --deploy``: each outer fold's model on its own fold's queries
  (:func:`from_folds`), the queries none of them was trained or tuned on.

The artifact's ``held_out``: {"source", "k", "qids", "gains", "selected_on"}; its
``training_data.qids``: the queries the deployed model was trained on.
"""

from __future__ import annotations

import numpy as np

from ..evaluation import decay as D
from ..models.export import plugin_scores
from ..stores.contract import of_artifact
from .artifact import load_model


def model_scores(art: dict, model, X: np.ndarray, names: list[str]) -> np.ndarray:
    """What the model ranks a window by, as served: the model's score, blended with the
    first stage's when its serving contract says so. A model on some of the logged
    features (a feature set chosen under a budget) reads its own columns."""
    contract = of_artifact(art)
    own = list(art.get("feature_names") or [])
    cols = X if own == list(names) or not set(own) <= set(names) else \
        X[:, [names.index(n) for n in own]]
    s = plugin_scores(art, model, cols)
    qw, rw = contract.weights
    feature = contract.first_stage_feature
    if float(qw) and feature in names:
        s = float(rw) * s + float(qw) * np.nan_to_num(X[:, names.index(feature)])
    elif float(rw) != 1.0:
        s = float(rw) * s
    return s


def _names(ds) -> list[str]:
    side = ds.meta.get("sidecar", {})
    return side.get("feature_names") or [f"f{j + 1}" for j in range(ds.n_features)]


def per_query(art: dict, model, ds, k: int) -> dict | None:
    """:func:`evaluation.decay.per_query` of the model (as served) and the first stage on
    logged data ``ds``; None when ``ds`` records no first-stage order."""
    first = D.first_stage_scores(ds.X, ds.offsets, ds.meta.get("sidecar", {}))
    if first is None:
        return None
    scores = model_scores(art, model, ds.X, _names(ds))
    return D.per_query(scores, first, ds.y, ds.offsets, ds.qids, k)


def evidence(pq: dict | None, k: int, source: str, selected_on: bool = False) -> dict | None:
    """The artifact's ``held_out`` from a :func:`per_query` (None: no evidence)."""
    if pq is None or not pq["qids"]:
        return None
    gains = np.asarray(pq[D.MODEL]) - np.asarray(pq[D.FIRST])
    return {"source": source, "k": int(k), "queries": len(pq["qids"]),
            "gain": float(gains.mean()), "qids": list(pq["qids"]),
            "gains": [float(g) for g in gains], "selected_on": bool(selected_on)}


def from_valid(art: dict, valid, k: int, early_stopped: bool) -> dict | None:
    """``ltr train --valid``'s evidence: the artifact's model on the validation split."""
    art, model = load_model("the artifact", art, scorer=True)
    return evidence(per_query(art, model, valid, k), k, f"validation split {valid.source}",
                    selected_on=early_stopped)


def from_folds(ds, arts: list[dict | None], fold_of_query: dict, k: int) -> dict | None:
    """``ltr evaluate cv``'s evidence for one system: fold ``f``'s artifact
    (``arts[f]``; None or without a model: the fold kept the first stage, gain 0) scoring
    its own fold's queries of the logged candidates ``ds``."""
    side = ds.meta.get("sidecar", {})
    first = D.first_stage_scores(ds.X, ds.offsets, side)
    if first is None:
        return None
    fold = np.repeat([fold_of_query.get(str(q), -1) for q in ds.qids], np.diff(ds.offsets))
    scores = first.copy()
    for f, art in enumerate(arts):
        rows = fold == f
        if art is not None and art.get("model") is not None and rows.any():
            art, model = load_model(f"fold {f + 1}", art, scorer=True)
            scores[rows] = model_scores(art, model, ds.X[rows], _names(ds))
    pq = D.per_query(scores, first, ds.y, ds.offsets, ds.qids, k)
    at = np.flatnonzero(np.isin(np.asarray(pq["qids"], dtype=object), list(fold_of_query)))
    pq = {"qids": [pq["qids"][i] for i in at], D.MODEL: pq[D.MODEL][at], D.FIRST: pq[D.FIRST][at]}
    return evidence(pq, k, f"{len(arts)}-fold cross-validation's outer folds")
