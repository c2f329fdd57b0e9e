"""Exports to the LTR plugin's model types, each checked before anything is sent.

* networks -> ``model/ranklib`` RankNet text: sigmoid on every hidden layer and on the
  output, the bias as an extra input neuron connected to every non-input neuron. The
  plugin returns ``(float) sigmoid(logit)``: monotone in our logit, so the ranking is the
  same. float32 keeps sigmoid distinct only below 0, so the output layer is mapped
  affinely (:func:`output_map`) to put every training logit in [-71, -1].
* trees -> ``model/xgboost+json`` with an objective the plugin accepts (``reg:linear``:
  the plain sum of leaves) and splits naming features by name; every split's ``missing``
  is its ``no`` branch, where plugin 3.x sends a missing feature (and 3.8+ follows the
  node's ``missing``: both agree).
* linear -> ``model/linear`` (feature name -> weight; the plugin has no intercept, a
  constant that does not change the ranking).
* standardisation travels as the plugin's ``feature_normalizers`` (``standard``).

``plugin_scores`` computes what the plugin will return for logged feature rows (missing
features, float32 arithmetic and all): ``ltr predict`` writes these serving scores.
"""

from __future__ import annotations

import json

import numpy as np

from ..errors import UserError
from .forest import Forest
from .mlp import MLP
from .neural import NeuralRanker, fill_missing as fill_missing_dense, output_map
from .trees import LambdaMART

PLUGIN_XGB_OBJECTIVES = {"binary:logitraw", "rank:ndcg", "rank:map", "rank:pairwise",
                         "reg:linear", "binary:logistic", "reg:logistic"}


class ExportError(UserError):
    pass


def _finite(values, what: str) -> None:
    arr = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ExportError(f"{what} contains NaN or inf: the plugin cannot parse it",
                          "retrain (lower the learning rate) before exporting")


def check_feature_names(model_names: list[str], featureset_names: list[str] | None) -> None:
    if featureset_names is None:
        return
    if list(model_names) != list(featureset_names):
        missing = [n for n in model_names if n not in featureset_names]
        if missing:
            raise ExportError(f"model features {missing[:5]} are not in the feature set")
        raise ExportError(
            f"model was trained on {len(model_names)} features in another order than the "
            f"feature set's {len(featureset_names)}", "re-log the training data with this feature set")


# --------------------------------------------------------------------------- networks

def ranknet_text(model: NeuralRanker, omap: dict | None = None,
                 feature_ids: list[int] | None = None) -> str:
    net: MLP = model.net_
    if net.activation != "sigmoid":
        raise ExportError(f"RankLib RankNet needs sigmoid units; this network uses {net.activation}")
    W, b = [np.asarray(w, dtype=np.float64) for w in net.weights], [np.asarray(v, dtype=np.float64) for v in net.biases]
    omap = omap or {"scale": 1.0, "shift": 0.0}
    W[-1] = W[-1] * omap["scale"]
    b[-1] = b[-1] * omap["scale"] + omap["shift"]
    for i, (w, v) in enumerate(zip(W, b)):
        _finite(w, f"layer {i} weights")
        _finite(v, f"layer {i} biases")
    n_in = net.n_in
    ids = feature_ids or list(range(1, n_in + 1))
    if len(ids) != n_in:
        raise ExportError(f"{len(ids)} feature ids for a network with {n_in} inputs")
    fmt = repr  # shortest text that parses back (Double.parseDouble) to the same double
    lines = ["## RankNet", "## exported by ltr-toolkit",
             " ".join(str(i) for i in ids), str(len(net.hidden))]
    lines += [str(h) for h in net.hidden]
    # layer 0: every input neuron's out-links to the first non-input layer
    for i in range(n_in):
        lines.append(f"0 {i} " + " ".join(fmt(float(x)) for x in W[0][i]))
    # the bias neuron (index n_in): one weight per non-input neuron, layer by layer
    lines.append(f"0 {n_in} " + " ".join(fmt(float(x)) for layer_b in b for x in layer_b))
    for li in range(1, len(W)):
        for j in range(W[li].shape[0]):
            lines.append(f"{li} {j} " + " ".join(fmt(float(x)) for x in W[li][j]))
    return "\n".join(lines) + "\n"


def score_ranknet_text(text: str, X: np.ndarray) -> np.ndarray:
    """Evaluate RankLib RankNet text as RankLib does (an independent reading of the
    format, used to check an export): returns float32 sigmoid outputs."""
    rows = [ln.strip() for ln in text.splitlines()]
    rows = [ln for ln in rows if ln and not ln.startswith("##")]
    ids = [int(t) for t in rows[0].split(" ")]
    n_hidden = int(rows[1])
    sizes = [len(ids)] + [int(rows[2 + i]) for i in range(n_hidden)] + [1]
    W = [np.zeros((sizes[i], sizes[i + 1])) for i in range(len(sizes) - 1)]
    bias = [np.zeros(s) for s in sizes[1:]]
    for ln in rows[2 + n_hidden:]:
        parts = ln.split(" ")
        layer, neuron = int(parts[0]), int(parts[1])
        w = np.array([float(x) for x in parts[2:]])
        if layer == 0 and neuron == len(ids):
            pos = 0
            for bv in bias:
                bv[:] = w[pos:pos + len(bv)]
                pos += len(bv)
        else:
            W[layer][neuron] = w
    Xf = np.asarray(X, dtype=np.float32).astype(np.float64)
    h = Xf[:, [i - 1 for i in ids]]
    for w, bv in zip(W, bias):
        h = 1.0 / (1.0 + np.exp(-(h @ w + bv)))
    return h[:, 0].astype(np.float32).astype(np.float64)


def standard_normalizers(model: NeuralRanker, names: list[str]) -> dict:
    out = {}
    for name, m, s in zip(names, model.mean_, model.std_):
        _finite([m, s], f"normaliser of {name}")
        out[name] = {"standard": {"mean": float(m), "standard_deviation": float(s)}}
    return out


# --------------------------------------------------------------------------- trees

def xgboost_definition(model: LambdaMART, names: list[str]) -> dict:
    trees = model.trees_json()

    def rename(node):
        if "leaf" in node:
            _finite([node["leaf"]], "a leaf")
            return
        j = int(node["split"][1:]) if node["split"].startswith("f") else None
        if j is None or j >= len(names):
            raise ExportError(f"split on feature {node['split']} beyond the {len(names)} features of the set")
        node["split"] = names[j]
        node["missing"] = node["no"]   # where the plugin sends a missing feature
        _finite([node["split_condition"]], "a split threshold")
        for c in node["children"]:
            rename(c)
    for t in trees:
        rename(t)
    return {"objective": "reg:linear", "splits": trees}


# --------------------------------------------------------------------------- linear

def linear_definition(model: NeuralRanker, names: list[str]) -> dict:
    if model.net_.hidden:
        raise ExportError("model/linear needs a linear model")
    w = np.asarray(model.net_.weights[0][:, 0], dtype=np.float64)
    _finite(w, "linear weights")
    return {n: float(v) for n, v in zip(names, w)}


# --------------------------------------------------------------------------- bodies

def plugin_model(artifact: dict, model, X_train: np.ndarray | None = None,
                 featureset_names: list[str] | None = None) -> tuple[dict, dict]:
    """(``model`` object for ``_createmodel``, export info incl. the logit scale)."""
    names = artifact["feature_names"]
    check_feature_names(names, featureset_names)
    algo = artifact["algorithm"]
    info = {"algorithm": algo}
    if isinstance(model, LambdaMART):
        body = {"type": "model/xgboost+json", "definition": json.dumps(xgboost_definition(model, names))}
    elif algo == "linear":
        body = {"type": "model/linear", "definition": json.dumps(linear_definition(model, names))}
    else:
        omap = artifact.get("output_map") or output_map(model, X_train)
        info["output_map"] = omap
        body = {"type": "model/ranklib", "definition": ranknet_text(model, omap)}
    if isinstance(model, NeuralRanker) and model.standardize:
        body["feature_normalizers"] = standard_normalizers(model, names)
    return body, info


def plugin_scores(artifact: dict, model, X: np.ndarray) -> np.ndarray:
    """The scores the plugin returns for rows X (NaN = the feature did not match),
    computed the plugin's way: float32 features; trees sum float32 leaves in float32 and
    send NaN right; linear models and networks see a missing feature as 0.0, normalise in
    float32, and (linear) accumulate ``w * x`` in float32; RankLib networks run in double
    and return ``(float) sigmoid``."""
    if isinstance(model, (LambdaMART, Forest)):
        # xgboost's own predictor on rows with NaN as MISSING_AS sends NaN right and sums
        # the float32 leaves tree by tree in float32: the JSON walk the plugin does
        # (xgbjson.score_trees), bit for bit (tests/test_trees.py), at C speed; a Forest
        # gives the same scores without xgboost (tests/test_forest.py)
        return model.predict(X)
    X32 = fill_missing_dense(X).astype(np.float32)
    Z = ((X32 - model.mean_.astype(np.float32)) / model.std_.astype(np.float32)).astype(np.float32)
    if artifact["algorithm"] == "linear":
        w = model.net_.weights[0][:, 0].astype(np.float32)
        acc = np.zeros(Z.shape[0], dtype=np.float32)
        for j in range(Z.shape[1]):       # the plugin's order of float32 additions
            acc = (acc + w[j] * Z[:, j]).astype(np.float32)
        return acc.astype(np.float64)
    omap = artifact.get("output_map") or {"scale": 1.0, "shift": 0.0}
    logit = model.net_.forward(Z.astype(np.float64)).astype(np.float64) * omap["scale"] + omap["shift"]
    return (1.0 / (1.0 + np.exp(-logit))).astype(np.float32).astype(np.float64)
