"""The model artifact read back: its JSON checked, its model, the features of data scored
with it, and ``ltr predict`` (:func:`predict_file`).

Scoring a file imports only what that needs: a tree model is scored by
:class:`..models.forest.Forest` from the booster the artifact stores (xgboost's scores bit
for bit, without importing xgboost), a network or a linear model by its own NumPy code;
nothing here imports the cluster client.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..data.logged import missing_value, own_rule, read_sidecar, resolve_rule
from ..data.svmlight import scored_chunks
from ..errors import InputError, UserError
from ..io.atomic import atomic_write, check_writable
from ..io.text import read_text
from ..models.export import plugin_scores
from ..models.forest import Forest
from ..models.neural import ALGOS as NEURAL_ALGOS, NeuralRanker
from ..models.trees import ALGOS as TREE_ALGOS, LambdaMART

ARTIFACT_FORMAT = "ltr-toolkit/model@1"


def read_artifact(path) -> dict:
    """A model artifact's JSON, checked to be one (no model built: nothing imported)."""
    path = Path(path)
    try:
        art = json.loads(read_text(path))
    except ValueError as exc:
        raise InputError(path, getattr(exc, "lineno", None), "not a model artifact (invalid JSON)") from None
    if not isinstance(art, dict) or art.get("format") != ARTIFACT_FORMAT:
        raise InputError(path, None, f"not an ltr-toolkit model artifact (format {art.get('format') if isinstance(art, dict) else type(art).__name__!r})")
    return art


def load_model(path, art: dict | None = None, scorer: bool = False):
    """(the artifact, its fitted model); ``art``: the artifact already read from ``path``;
    ``scorer``: a tree model as a :class:`Forest` (scores only, no xgboost)."""
    art = read_artifact(path) if art is None else art
    try:
        if scorer and art["algorithm"] in TREE_ALGOS:
            return art, Forest.from_state(art["model"])
        return art, model_from_artifact(art)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(Path(path), None, f"broken model artifact: {exc}") from None


def check_same_features(ref_name, ref: dict, path, side: dict) -> None:
    """Refuse data logged with other features than ``ref`` (a sidecar, or a model artifact):
    another version of the feature set (its sha256), or other feature names. What either
    does not record is not compared (files without sidecars, older artifacts)."""
    a, b = ref.get("featureset_sha256"), side.get("featureset_sha256")
    if a and b and a != b:
        raise UserError(f"{path} was logged with another version of feature set "
                        f"{side.get('featureset') or '?'} than {ref_name}",
                        "log both with the same feature set version")
    a, b = ref.get("feature_names"), side.get("feature_names")
    if a and b and a != b:
        raise UserError(f"{path} has other features than {ref_name} "
                        f"({len(b)}: {', '.join(b[:3])}... vs {len(a)}: {', '.join(a[:3])}...)",
                        "log both with the same feature set")


def model_from_artifact(art: dict):
    """The fitted model an artifact holds."""
    if art["algorithm"] in NEURAL_ALGOS:
        return NeuralRanker.from_state(art["model"])
    if art["algorithm"] in TREE_ALGOS:
        return LambdaMART.from_state(art["model"])
    raise ValueError(f"unknown algorithm {art['algorithm']!r}")


def predict_file(model_path, data_path, output) -> int:
    """One score per data row, in the file's row order: the score the plugin serves for
    that row (see ``models.export.plugin_scores``), absent features read by the file's
    missing-feature rule, else the model's (``data.logged``). A broken artifact, data
    logged with other features or another missing-feature rule, is refused before any
    row is read; the rows are scored as they are
    read and written as they are scored (``data.svmlight.scored_chunks``), never held
    all at once."""
    check_writable(output)
    art, model = load_model(model_path, scorer=True)
    side = read_sidecar(data_path)
    check_same_features(model_path, {"featureset_sha256": art.get("featureset_sha256"),
                                     "feature_names": art.get("feature_names") if art.get("featureset") else None},
                        data_path, side)
    # what an absent feature means: the file's own rule, else the model's
    rule = resolve_rule(data_path, own_rule(data_path, side), art.get("missing_features"),
                        f"model {model_path}")
    n_features = art.get("n_features") or model.n_features_in_
    rows = 0
    with atomic_write(output) as fh:
        for scores in scored_chunks(data_path, n_features, lambda X: plugin_scores(art, model, X),
                                    missing_value(rule)):
            fh.write(("%.9g\n" * len(scores)) % tuple(scores.tolist()))   # one format call
            rows += len(scores)
    return rows
