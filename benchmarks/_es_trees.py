"""Elasticsearch's tree-ensemble inference, written from x-pack ml's code
(``TreeInferenceModel``, ``EnsembleInferenceModel``, ``WeightedSum``, ``Operator``,
``QueryFeatureExtractor``) and not from the toolkit's exporter: what its
``learning_to_rank`` rescorer gives a document, for checking ``ltr export`` bodies
(``tests/test_native_export.py``) and other converters (``benchmarks/eland.py``).

A tree's features are looked up by name in the extracted feature map (a feature whose
query did not match the document is absent: NaN); at an inner node a value that is not a
valid double (NaN, infinite) takes ``default_left``, others go left when ``value OP
threshold`` holds (``decision_type``: lt, lte, gt, gte; lte when absent); children are
positions in the ``tree_structure`` list; a leaf gives ``leaf_value[0]`` (a bare number
is read too); ``weighted_sum`` adds the trees' values (times ``weights`` when given) in
double; the rescorer keeps ``(float) value``.
"""

from __future__ import annotations

import math
import operator
from pathlib import Path

import numpy as np

OPS = {"lt": operator.lt, "lte": operator.le, "gt": operator.gt, "gte": operator.ge}


def tree_value(tree: dict, features: dict) -> float:
    nodes = tree["tree_structure"]
    assert [n["node_index"] for n in nodes] == list(range(len(nodes)))
    names = tree["feature_names"]
    node = nodes[0]
    while "leaf_value" not in node:
        value = features.get(names[node["split_feature"]], math.nan)
        if math.isnan(value) or math.isinf(value):
            child = node["left_child"] if node.get("default_left", False) else node["right_child"]
        else:
            test = OPS[node.get("decision_type", "lte")]
            child = node["left_child"] if test(value, node["threshold"]) else node["right_child"]
        node = nodes[child]
    leaf = node["leaf_value"]
    return float(leaf[0] if isinstance(leaf, list) else leaf)


def es_score(trained_model: dict, features: dict) -> float:
    """What the rescorer gives a document whose extracted features are ``features``
    (``trained_model``: a body's ``definition.trained_model``)."""
    ens = trained_model["ensemble"]
    assert ens["target_type"] == "regression" and set(ens["aggregate_output"]) == {"weighted_sum"}
    weights = ens["aggregate_output"]["weighted_sum"].get("weights")
    values = [tree_value(m["tree"], features) for m in ens["trained_models"]]
    if weights is not None:
        values = [v * w for v, w in zip(values, weights)]
    return float(np.float32(sum(values)))


def feature_maps(path: Path, names: list[str]) -> list[dict]:
    """Each row of a logged file as the rescorer's feature map: the logged values only,
    each the float32 query score it was (``QueryFeatureExtractor`` puts
    ``scorer.score()``, a float, in the map; the log writes it in 9 digits, which read
    as a double is not the float: 4.06435 vs 4.064350128173828)."""
    maps = []
    for line in Path(path).read_text().splitlines():
        tokens = line.split("#")[0].split()[2:]
        maps.append({names[int(k) - 1]: float(np.float32(v)) for k, v in (t.split(":") for t in tokens)})
    return maps
