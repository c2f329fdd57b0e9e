"""A model as the LTR plugin stores and runs it, scored here the plugin's way.

:class:`ServedModel` reads the body the plugin keeps for a model (``type``,
``definition``, ``feature_normalizers``; ``GET _ltr/_model/NAME``, or the body the toolkit
would upload, :func:`~ltr_toolkit.models.export.plugin_model`) and scores logged feature
rows exactly as the plugin does (see ``export.plugin_scores``): what it explains is what
is served, whatever trained it.
"""

from __future__ import annotations

import json

import numpy as np

from ..errors import UserError
from .export import score_ranknet_text
from .neural import fill_missing
from .xgbjson import score_trees

TYPES = ("model/xgboost+json", "model/linear", "model/ranklib")


class ServedModel:
    """``score(X)``: the plugin's score of rows X (columns: ``names``, the feature set's
    order; NaN = the feature did not match)."""

    def __init__(self, body: dict, names: list[str]):
        kind = body.get("type")
        if kind not in TYPES:
            raise UserError(f"model type {kind!r} cannot be explained",
                            f"the toolkit explains {', '.join(TYPES)}")
        self.kind, self.names = kind, list(names)
        definition = body.get("definition")
        if kind == "model/ranklib":
            self._text = str(definition)
            if not self._text.lstrip().startswith("## RankNet"):
                raise UserError("only RankLib RankNet models can be explained",
                                "train the network with the toolkit (ranknet-nn, lambdarank-nn)")
        else:
            self._def = json.loads(definition) if isinstance(definition, str) else definition
        norms = body.get("feature_normalizers") or {}
        self.mean = np.array([norms.get(n, {}).get("standard", {}).get("mean", 0.0)
                              for n in self.names], dtype=np.float32)
        self.std = np.array([norms.get(n, {}).get("standard", {}).get("standard_deviation", 1.0)
                             for n in self.names], dtype=np.float32)

    @classmethod
    def from_stored(cls, stored: dict) -> "ServedModel":
        """From ``GET _ltr/_model/NAME``'s document."""
        model = stored.get("model", stored)
        names = [f["name"] for f in model["feature_set"]["features"]]
        return cls(model["model"], names)

    def score(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if self.kind == "model/xgboost+json":
            return score_trees(self._def["splits"], X, self.names)
        Z = ((fill_missing(X).astype(np.float32) - self.mean) / self.std).astype(np.float32)
        if self.kind == "model/ranklib":
            return score_ranknet_text(self._text, Z)
        w = np.array([float(self._def.get(n, 0.0)) for n in self.names], dtype=np.float32)
        acc = np.zeros(Z.shape[0], dtype=np.float32)
        for j in range(Z.shape[1]):       # the plugin's order of float32 additions
            acc = (acc + w[j] * Z[:, j]).astype(np.float32)
        return acc.astype(np.float64)
