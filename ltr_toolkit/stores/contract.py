"""The serving contract: what a model needs to be served the way it was evaluated.

A model's scores mean what its evaluation measured only when it is served with the same
settings: the rescore weights (the model alone, or a blend with the first stage's score,
``query_weight`` 1 and ``rescore_query_weight`` beta, chosen in cross-validation), the
window it reranks (the first stage's top K it was trained on), the long-query budget and
the rule that shortens a longer query (``data.querytext``), the first stage itself (with
its term statistics), the feature that is the first stage's score (what a blend adds),
the encoder of its query vectors, and the feature set it was logged with (its hash).

:class:`Contract` holds them. It is written into the model artifact when the model is
trained (from the logged data's sidecar) and completed when its settings are chosen (a
blend's weights); ``stores.model_store.upload`` stores it on the cluster beside the
model, and every path that serves or explains a stored model reads it from there
(``stores.contract_record.recorded``) and uses it unless told otherwise. This module is
the contract alone, with no cluster client: offline training imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..data.querytext import SHORTENING
from ..errors import UserError

FORMAT = "ltr-toolkit/serving@1"
#: (query_weight, rescore_query_weight) of a model served alone: its score orders the window
MODEL_ONLY = (0.0, 1.0)
#: the window a model without a contract is served with
DEFAULT_WINDOW = 100


class ContractOverrideWarning(UserWarning):
    """An explicit setting differs from the model's serving contract: the setting is used."""


@dataclass(frozen=True)
class Contract:
    """How a model is served (see the module docstring). ``first_stage``: the first
    stage's recorded form (``FirstStage.to_dict``); ``first_stage_feature``: the name of
    the feature whose template is the first stage (None: none is)."""
    weights: tuple[float, float] = MODEL_ONLY
    window: int | None = None
    max_terms: int | None = None
    shortening: str = SHORTENING
    first_stage: dict | None = None
    first_stage_feature: str | None = None
    encoder: dict | None = None
    vector_field: str | None = None
    featureset: str | None = None
    featureset_sha256: str | None = None

    @property
    def blended(self) -> bool:
        """Served as first stage + beta x model (a blend), not the model alone."""
        return float(self.weights[0]) != 0.0

    def with_weights(self, query_weight: float, rescore_query_weight: float) -> "Contract":
        return replace(self, weights=(float(query_weight), float(rescore_query_weight)))

    def to_dict(self) -> dict:
        return {"format": FORMAT,
                "rescore": {"query_weight": float(self.weights[0]),
                            "rescore_query_weight": float(self.weights[1])},
                "window": self.window,
                "long_queries": {"max_terms": self.max_terms, "rule": self.shortening},
                "first_stage": self.first_stage,
                "first_stage_feature": self.first_stage_feature,
                "encoder": self.encoder, "vector_field": self.vector_field,
                "featureset": {"name": self.featureset, "sha256": self.featureset_sha256}}

    @classmethod
    def from_dict(cls, d: dict) -> "Contract":
        r, long, fs = d.get("rescore") or {}, d.get("long_queries") or {}, d.get("featureset") or {}
        return cls(weights=(float(r.get("query_weight", MODEL_ONLY[0])),
                            float(r.get("rescore_query_weight", MODEL_ONLY[1]))),
                   window=d.get("window"), max_terms=long.get("max_terms"),
                   shortening=long.get("rule", SHORTENING), first_stage=d.get("first_stage"),
                   first_stage_feature=d.get("first_stage_feature"), encoder=d.get("encoder"),
                   vector_field=d.get("vector_field"), featureset=fs.get("name"),
                   featureset_sha256=fs.get("sha256"))

    def check(self, model: str) -> None:
        """Refuse a contract this toolkit cannot honour (another shortening rule)."""
        if self.max_terms is not None and self.shortening != SHORTENING:
            raise UserError(f"model {model} was evaluated with long queries shortened by rule "
                            f"{self.shortening!r}, which this toolkit does not apply",
                            "serve it with the toolkit version that trained it, or train again")


def from_sidecar(side: dict) -> Contract:
    """The contract of a model trained on data logged with this sidecar, served alone
    (selection may make it a blend: :meth:`Contract.with_weights`)."""
    return Contract(window=(side.get("candidates") or {}).get("k"),
                    max_terms=side.get("max_query_terms"), first_stage=side.get("first_stage"),
                    first_stage_feature=side.get("first_stage_feature"),
                    encoder=side.get("encoder"), vector_field=side.get("vector_field"),
                    featureset=side.get("featureset"),
                    featureset_sha256=side.get("featureset_sha256"))


def of_artifact(art: dict) -> Contract:
    """A model artifact's contract (``serving``); artifacts written before it existed:
    from the entries they have (``rescore``, ``max_query_terms``, ``first_stage``, ...)."""
    if art.get("serving"):
        return Contract.from_dict(art["serving"])
    old = from_sidecar(art)
    r = art.get("rescore") or {}
    return old.with_weights(r.get("query_weight", MODEL_ONLY[0]),
                            r.get("rescore_query_weight", MODEL_ONLY[1]))


def describe(c: Contract) -> str:
    """One line: what serving a model with this contract means."""
    how = (f"blended: first stage + {c.weights[1]:.6g} x model" if c.blended
           else f"the model alone (rescore weights {c.weights[0]:g}, {c.weights[1]:.6g})")
    window = f"window {c.window}" if c.window else "window not recorded"
    terms = f"long queries cut to {c.max_terms} distinct words" if c.max_terms else "no query-term budget"
    stats = (c.first_stage or {}).get("statistics")
    return "; ".join([how, window, terms] + ([f"{stats} term statistics"] if stats else []))
