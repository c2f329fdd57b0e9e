"""What is served, in one place: the index, the store, the first stage (with the term
statistics every search uses, ``FirstStage.statistics``), the depth it is reranked to
(``window``: exactly its global top ``window``), the long-query budget and, for
reranking, the model with its rescore weights.

Logging candidates, cross-validation, ``ltr evaluate``, ``ltr search`` and users' own
code take one :class:`Serving` and call its methods, so what a model is trained on (the
candidates :meth:`Serving.log_candidates` logs) and what it reranks
(:meth:`Serving.rerank`, :meth:`Serving.search`) come from the same values::

    serving = Serving("products", FirstStage.from_fields(["title", "body"]), window=100,
                      max_terms=artifact["max_query_terms"])
    hits = serving.for_model("ranker-v3", weights=(1.0, 0.4)).search(conn, {"keywords": q})
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..features.candidates import judged_candidates
from ..features.featurelog import log_features
from ..transport.client import Connection
from ..query.firststage import FirstStage
from ..query.requests import MODEL_ONLY, Rescore, msearch_ids
from ..rank.interleave import team_draft
from .rerank import rerank_ids, search

#: the name of a side of an interleaving that is the first stage alone
FIRST_STAGE_NAME = "first-stage"


@dataclass(frozen=True)
class Serving:
    index: str
    first_stage: FirstStage = field(default_factory=FirstStage.from_fields)
    window: int = 100
    store: str | None = None
    max_terms: int | None = None
    model: str | None = None
    weights: tuple[float, float] = MODEL_ONLY
    #: the query encoder (a model folder or module:function; None: $LTR_ENCODER or the
    #: default), for models with semantic features; checked against the index's vectors
    encoder: str | None = None
    #: how candidates are logged (``features.featurelog.VIAS``): the plugin, or named
    #: queries (the values Elasticsearch's native learning to rank computes)
    via: str = "plugin"

    def for_model(self, model: str | None, weights=MODEL_ONLY) -> "Serving":
        """The same serving with ``model`` (None: the first stage alone)."""
        return replace(self, model=model, weights=tuple(weights))

    def with_budget(self, max_terms: int | None) -> "Serving":
        return replace(self, max_terms=max_terms)

    @property
    def rescore(self) -> Rescore | None:
        """The rescore of this serving's model (None: the first stage alone)."""
        return Rescore(self.model, self.window, self.store, self.weights) if self.model else None

    def to_dict(self) -> dict:
        return {"index": self.index, "first_stage": self.first_stage.to_dict(),
                "window": self.window, "store": self.store, "max_query_terms": self.max_terms,
                "model": self.model, "rescore_weights": list(self.weights),
                "encoder": self.encoder, "via": self.via}

    # ------------------------------------------------------------------ the first stage
    def first_ids(self, conn: Connection, param_list: list[dict], depth: int = 0,
                  failures: dict | None = None, batch: int = 50) -> list[list[str] | None]:
        """The first stage's global top ``max(window, depth)`` ids per query (a query the
        cluster rejects: None, and its reason in ``failures``)."""
        n = max(self.window, depth)
        return msearch_ids(conn, self.index, param_list, self.first_stage, n, store=self.store,
                           batch=batch, max_terms=self.max_terms, failures=failures)

    def log_candidates(self, conn: Connection, jl, featureset: str, out, **kw) -> tuple[dict, dict]:
        """The first stage's top ``window`` per judged query, labelled from ``jl`` and
        logged with ``featureset`` into ``out``: (sidecar, candidates info). ``kw``: more
        ``candidate_judgments`` / ``log_features`` options (unjudged, judged_outside,
        batch)."""
        picks = {k: kw.pop(k) for k in ("unjudged", "judged_outside") if k in kw}
        cands, info, budget = judged_candidates(conn, self.index, jl, featureset, self.first_stage,
                                                self.store, self.window, max_terms=self.max_terms,
                                                via=self.via, **picks)
        side = log_features(conn, cands, featureset, self.index, out, self.store,
                            first_stage=self.first_stage, candidates=info,
                            max_terms=budget, encoder=self.encoder, via=self.via, **kw)
        return side, info

    # ------------------------------------------------------------------ reranking
    def rerank(self, conn: Connection, param_list: list[dict], size: int = 10,
               first_ids: list[list[str]] | None = None, fallbacks: dict | None = None,
               batch: int = 50) -> list[list[str]]:
        """Ranked ids per query: the first stage's global top ``window`` reordered by the
        model (the first stage alone without one)."""
        if first_ids is not None:
            first_ids = [list(ids or []) for ids in first_ids]      # a failed query: none
        if not self.model:
            ids = first_ids or self.first_ids(conn, param_list, batch=batch)
            return [list(i or [])[:size] for i in ids]
        return rerank_ids(conn, self.index, param_list, self.first_stage, self.rescore, size,
                          first_ids=first_ids, max_terms=self.max_terms, fallbacks=fallbacks,
                          encoder=self.encoder, batch=batch)

    def search(self, conn: Connection, params: dict, size: int = 10) -> list[dict]:
        """One query's hits (rank, id, score, title), as ``ltr search`` shows them."""
        return search(conn, self.index, params, self.first_stage, self.rescore, size,
                      max_terms=self.max_terms, encoder=self.encoder)

    # ------------------------------------------------------------------ online tests
    @property
    def ranker(self) -> str:
        """What ranks: the model's name, or :data:`FIRST_STAGE_NAME`."""
        return self.model or FIRST_STAGE_NAME

    def interleave(self, conn: Connection, params: dict, model_a: str | None, model_b: str | None,
                   size: int = 10, rng: np.random.Generator | None = None) -> list[dict]:
        """One query's team-draft interleaving of ``model_a``'s and ``model_b``'s top
        ``size`` (None or :data:`FIRST_STAGE_NAME`: the first stage alone), each served
        as :meth:`search` serves it: see :func:`interleaved`."""
        side = (lambda m: self.for_model(None if m in (None, FIRST_STAGE_NAME) else m, self.weights))
        return interleaved(side(model_a), side(model_b), conn, params, size, rng)


def interleaved(a: Serving, b: Serving, conn: Connection, params: dict, size: int = 10,
                rng: np.random.Generator | None = None) -> list[dict]:
    """Hits (rank, id, score, title, team, ranker) of ``a``'s and ``b``'s results for one
    query, team-draft interleaved (:func:`ltr_toolkit.rank.interleave.team_draft`); the
    score is the one the team's own ranker gave."""
    hits = {"a": {h["id"]: h for h in a.search(conn, params, size)},
            "b": {h["id"]: h for h in b.search(conn, params, size)}}
    ids, teams = team_draft(list(hits["a"]), list(hits["b"]), size, rng or np.random.default_rng())
    names = {"a": a.ranker, "b": b.ranker}
    return [{**hits[t][d], "rank": r + 1, "team": t, "ranker": names[t]}
            for r, (d, t) in enumerate(zip(ids, teams))]
