"""Elasticsearch's native learning to rank: a tree model as an ``_ml/trained_models`` body.

Elasticsearch (x-pack ml, 8.12+, GA in 8.15) reranks with its ``learning_to_rank``
rescorer over a trained model whose ``inference_config.learning_to_rank`` computes the
features (``feature_extractors``: one ``query_extractor`` per feature, a mustache query
template rendered with the rescorer's ``params`` over ``default_params``) and whose
``definition.trained_model.ensemble`` scores them. The body is made here from the model
artifact and its feature set alone (no cluster: ``ltr model export``); sending it is
``ltr model upload --target elasticsearch``'s.

The ensemble, read from the booster's saved JSON model (what the artifact stores):

* one ``tree`` per boosting round up to the artifact's best iteration, over every
  feature of the set (``feature_names``; ``split_feature`` indexes it), nodes numbered
  from the root in breadth-first order (Elasticsearch follows ``left_child`` /
  ``right_child`` as list positions);
* ``decision_type: lt``: xgboost sends ``x < split`` left (``yes``);
* thresholds and leaves are xgboost's float32 values, written as the doubles they are
  (a feature Elasticsearch reads is a float32 query score, so ``x < threshold`` in double
  is xgboost's float32 test);
* ``default_left: false`` on every split: a feature whose query does not match the
  document has no value in Elasticsearch (``default_left`` decides), in the plugin (NaN
  takes the "no" branch) and in the toolkit's training (missing values are trained as
  larger than any threshold, ``models.trees.MISSING_AS``): all three go right;
* the intercept: xgboost >= 2 keeps it in the saved ``learner_model_param.base_score``
  (``"[0E0]"``; estimated from the labels when not given, not 0.5). The toolkit trains
  with ``base_score`` 0, so its trees alone are the score the plugin serves (the plugin
  ignores ``base_score``); a booster with another intercept gets it as a one-leaf tree,
  as eland adds one, so the sum is xgboost's margin;
* ``aggregate_output: weighted_sum`` without weights: the plain double sum of the trees.

Trees have no feature normalisers. Linear and network models are refused: the native
rescorer takes tree ensembles.
"""

from __future__ import annotations

import json
import re
from collections import deque

import numpy as np

from ..data.featuresets import template_params
from ..errors import UserError
from ..versions import ELASTICSEARCH_VERSION
from .export import ExportError, check_feature_names
from .trees import ALGOS as TREE_ALGOS

#: the first version with the ``learning_to_rank`` inference config
FIRST_VERSION = (8, 12, 0)
#: from this version a learning-to-rank model must not name ``input.field_names``
NO_FIELD_NAMES_FROM = (8, 15, 0)
#: the version a body is made for unless one is named: the local node's
DEFAULT_VERSION = ELASTICSEARCH_VERSION
#: objectives whose intercept adds to the sum of the trees as it is (an identity link)
_IDENTITY = re.compile(r"^(reg:(squarederror|linear|absoluteerror|pseudohubererror|quantileerror)"
                       r"|rank:\w+)$")


def es_version(text: str) -> tuple[int, int, int]:
    """``"8.17.0"`` -> (8, 17, 0); refused in one line when it is no version or predates
    the ``learning_to_rank`` config."""
    m = re.fullmatch(r"\s*(\d+)\.(\d+)(?:\.(\d+))?\s*", str(text))
    if not m:
        raise UserError(f"Elasticsearch version {text!r}: expected MAJOR.MINOR[.PATCH], e.g. 8.17.0")
    version = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    if version < FIRST_VERSION:
        raise UserError(f"Elasticsearch {text} has no learning_to_rank models (they came in 8.12)",
                        "name the version of the cluster you deploy to (--es-version)")
    return version


def refuse_non_trees(algo: str) -> None:
    if algo in TREE_ALGOS:
        return
    kind = "a linear model" if algo == "linear" else "a neural network"
    raise ExportError(f"{algo} is {kind}: Elasticsearch's learning_to_rank rescorer takes tree "
                      "ensembles only", "train lambdamart or ranknet-tree for the native path, "
                      "or serve this model with the LTR plugin: ltr model upload")


# --------------------------------------------------------------------------- the ensemble

def _base_score(booster: dict) -> float:
    raw = str(booster["learner"]["learner_model_param"]["base_score"])
    values = [float(v) for v in raw.strip("[]").split(",") if v.strip()]
    if len(values) != 1:
        raise ExportError(f"the booster has {len(values)} intercepts: one output is expected")
    return values[0]


def intercept(booster: dict) -> float:
    """What xgboost adds to the sum of the trees: the saved ``base_score`` (an identity
    link: the toolkit's custom objective is saved as ``reg:squarederror``)."""
    objective = booster["learner"].get("objective", {}).get("name", "")
    base = _base_score(booster)
    if base != 0.0 and not _IDENTITY.match(objective):
        raise ExportError(f"objective {objective} maps its base_score {base:g} through a link "
                          "function: not a ranking model's plain sum")
    return base


def _f32(value) -> float:
    return float(np.float32(value))


def tree_nodes(tree: dict, n_features: int) -> list[dict]:
    """One xgboost tree (the saved model's arrays) as Elasticsearch's ``tree_structure``."""
    left, right = tree["left_children"], tree["right_children"]
    cond, feat = tree["split_conditions"], tree["split_indices"]
    if any(int(t) != 0 for t in tree.get("split_type", [])):
        raise ExportError("the booster has categorical splits: Elasticsearch's trees take numbers")
    order, index = [0], {0: 0}
    queue = deque([0])
    while queue:                          # breadth first from the root, deleted nodes skipped
        i = queue.popleft()
        for child in (left[i], right[i]) if left[i] != -1 else ():
            index[child] = len(order)
            order.append(child)
            queue.append(child)
    nodes = []
    for i in order:
        if left[i] == -1:
            nodes.append({"node_index": index[i], "leaf_value": [_f32(cond[i])]})
            continue
        if not 0 <= int(feat[i]) < n_features:
            raise ExportError(f"a split on feature {int(feat[i]) + 1} beyond the {n_features} "
                              "features of the set")
        nodes.append({"node_index": index[i], "split_feature": int(feat[i]),
                      "threshold": _f32(cond[i]), "decision_type": "lt", "default_left": False,
                      "left_child": index[left[i]], "right_child": index[right[i]]})
    return nodes


def ensemble(booster: dict, names: list[str], n_trees: int | None = None) -> dict:
    """``definition.trained_model`` of a saved xgboost model: the trees of its first
    ``n_trees`` rounds (all: None) over the features ``names``, plus the intercept when it
    is not 0."""
    gb = booster["learner"]["gradient_booster"]
    if gb.get("name") != "gbtree":
        raise ExportError(f"booster {gb.get('name')}: only gbtree boosters (a plain sum of "
                          "trees) can be exported")
    model = gb["model"]
    if any(int(t) != 0 for t in model.get("tree_info", [])):
        raise ExportError("the booster has several outputs: a ranking model has one")
    rounds = model.get("iteration_indptr") or list(range(len(model["trees"]) + 1))
    n = len(rounds) - 1 if n_trees is None else min(int(n_trees), len(rounds) - 1)
    trees = model["trees"][: rounds[n]]

    def as_tree(nodes):
        return {"tree": {"feature_names": list(names), "target_type": "regression",
                         "tree_structure": nodes}}
    out = [as_tree(tree_nodes(t, len(names))) for t in trees]
    base = intercept(booster)
    if base != 0.0:
        out.append(as_tree([{"node_index": 0, "leaf_value": [_f32(base)]}]))
    return {"ensemble": {"feature_names": list(names), "target_type": "regression",
                         "aggregate_output": {"weighted_sum": {}}, "trained_models": out}}


# --------------------------------------------------------------------------- the features

def extractor_query(feature: dict) -> dict:
    """A feature's template as a ``query_extractor`` query: an object (Elasticsearch
    renders its JSON text with the rescorer's params when it holds ``{{``, with the same
    escaping as the plugin's)."""
    name, template = feature["name"], feature.get("template")
    lang = feature.get("template_language", "mustache")
    if lang != "mustache":
        raise ExportError(f"feature {name} is a {lang} feature: Elasticsearch's query "
                          "extractors take mustache query templates only")
    if isinstance(template, str):
        try:
            template = json.loads(template)
        except ValueError:
            raise ExportError(f"feature {name}: its template is JSON only once rendered (a "
                              "parameter written unquoted, e.g. {{#toJson}}v{{/toJson}}), and "
                              "Elasticsearch stores a query extractor's query as an object",
                              "write the feature as an object template with quoted "
                              "parameters") from None
    if not isinstance(template, dict):
        raise ExportError(f"feature {name}: its template is not a query object")
    return template


def feature_extractors(features: list[dict], default_score: float = 0.0) -> list[dict]:
    """One ``query_extractor`` per feature, in the set's order (the ensemble's features)."""
    return [{"query_extractor": {"feature_name": f["name"], "query": extractor_query(f),
                                 "default_score": float(default_score)}} for f in features]


def rescorer_params(features: list[dict]) -> list[str]:
    """The parameters the rescorer's ``params`` (or ``default_params``) must give."""
    seen: list[str] = []
    for f in features:
        for p in sorted(template_params(f.get("template", ""))):
            if p not in seen:
                seen.append(p)
    return seen


# --------------------------------------------------------------------------- the body

def native_body(artifact: dict, features: list[dict], version: str = DEFAULT_VERSION,
                default_params: dict | None = None, default_score: float = 0.0) -> dict:
    """The complete ``PUT _ml/trained_models/<id>`` body of a tree model artifact, its
    features from ``features`` (the set it was trained on: names and order checked),
    for Elasticsearch ``version`` (``input.field_names`` before 8.15 only)."""
    refuse_non_trees(artifact["algorithm"])
    names = artifact["feature_names"]
    check_feature_names(names, [f["name"] for f in features])
    state = artifact["model"]
    body = {
        "description": f"ltr-toolkit {artifact['algorithm']} on feature set "
                       f"{artifact.get('featureset') or '?'}",
        "inference_config": {"learning_to_rank": {
            "feature_extractors": feature_extractors(features, default_score),
            "default_params": dict(default_params or {})}},
        "definition": {"trained_model": ensemble(state["booster"], names,
                                                  int(state["best_iteration"]) + 1)},
        "metadata": {"ltr_toolkit": {k: artifact.get(k) for k in (
            "toolkit_version", "algorithm", "featureset", "featureset_sha256", "first_stage",
            "max_query_terms", "created")}},
    }
    if es_version(version) < NO_FIELD_NAMES_FROM:
        body["input"] = {"field_names": list(names)}
    return body


def put_request(model_id: str, body: dict) -> tuple[str, str, dict]:
    """(method, path, body) creating the trained model."""
    return "PUT", f"/_ml/trained_models/{model_id}", body


def alias_request(model_id: str, alias: str) -> tuple[str, str, dict]:
    """(method, path, params) pointing ``alias`` at ``model_id``, taken from whatever
    model it named before (``reassign``): searches that name the alias never change."""
    return "PUT", f"/_ml/trained_models/{model_id}/model_aliases/{alias}", {"reassign": "true"}


def rescorer(model: str, params: dict, window: int = 100) -> dict:
    """The ``rescore`` part of a search reranking its top ``window`` with the trained
    model (or alias) ``model``, its templates rendered with ``params``."""
    return {"window_size": int(window),
            "learning_to_rank": {"model_id": model, "params": dict(params)}}
