"""What is served, in one place: the index, the store, the first stage (with the term
statistics every search uses, ``FirstStage.statistics``), the depth it is reranked to
(``window``: exactly its global top ``window``), the long-query budget and, for
reranking, the model with its rescore weights.

Logging candidates, cross-validation, ``ltr evaluate``, ``ltr query search`` and users' own
code take one :class:`Serving` and call its methods, so what a model is trained on (the
candidates :meth:`Serving.log_candidates` logs) and what it reranks
(:meth:`Serving.rerank`, :meth:`Serving.search`) come from the same values. A stored
model is served as its serving contract says (``stores.contract``: recorded when it was
trained and chosen, stored on the cluster with it): what a :class:`Serving` leaves None
(first stage, window, budget, weights) is the contract's, what it gives wins (with a
one-line ``ContractOverrideWarning`` when it differs)::

    hits = Serving("products").for_model("ranker-v3").search(conn, {"keywords": q})
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..features.candidates import judged_candidates
from ..features.featurelog import log_features
from ..transport.client import Connection
from ..query.firststage import FirstStage
from ..query.prepare import QueryPlan, contracted
from ..transport.lookups import shard_count
from ..query.requests import Rescore, msearch_ids
from ..stores.contract import DEFAULT_WINDOW, MODEL_ONLY, Contract
from ..rank.interleave import team_draft
from .rerank import rerank_ids, search

#: the name of a side of an interleaving that is the first stage alone
FIRST_STAGE_NAME = "first-stage"


@dataclass(frozen=True)
class Serving:
    index: str
    #: None: the model's contract's, else ``FirstStage.from_fields()``
    first_stage: FirstStage | None = None
    #: None: the model's contract's, else :data:`~ltr_toolkit.stores.contract.DEFAULT_WINDOW`
    window: int | None = None
    store: str | None = None
    #: None: the model's contract's, else measured on the cluster (``query.clauses``)
    max_terms: int | None = None
    model: str | None = None
    #: (query_weight, rescore_query_weight); None: the model's contract's, else the model alone
    weights: tuple | None = None
    #: the query encoder (a model folder or module:function; None: $LTR_ENCODER or the
    #: default), for models with semantic features; checked against the index's vectors
    #: and the encoder the model recorded
    encoder: str | None = None
    #: how candidates are logged (``features.featurelog.VIAS``): the plugin, or named
    #: queries (the values Elasticsearch's native learning to rank computes)
    via: str = "plugin"
    #: the model's serving contract, once settled (:meth:`served`)
    contract: Contract | None = None
    resolved: bool = False

    def for_model(self, model: str | None, weights=None) -> "Serving":
        """The same serving with ``model`` (None: the first stage alone), served as its
        contract says where this serving and ``weights`` leave a setting None."""
        return replace(self, model=model, weights=None if weights is None else tuple(weights),
                       contract=None, resolved=False)

    def with_budget(self, max_terms: int | None) -> "Serving":
        return replace(self, max_terms=max_terms)

    def served(self, conn: Connection) -> "Serving":
        """This serving with every setting settled: the model's serving contract where
        this serving leaves one None (an explicit one that differs says so in one
        warning line), the toolkit's defaults where there is no contract."""
        if self.resolved:
            return self
        if not self.model:
            return replace(self, first_stage=self.stage, window=self.depth, weights=MODEL_ONLY,
                           resolved=True)
        rescore, stage, terms = contracted(conn, Rescore(self.model, self.window, self.store,
                                                         self.weights),
                                           self.first_stage, self.max_terms)
        return replace(self, first_stage=stage, window=rescore.window, max_terms=terms,
                       weights=rescore.weights, contract=rescore.contract, resolved=True)

    @property
    def stage(self) -> FirstStage:
        """The first stage (the default fields when none is set)."""
        return self.first_stage or FirstStage.from_fields()

    @property
    def depth(self) -> int:
        """The window (:data:`~ltr_toolkit.stores.contract.DEFAULT_WINDOW` when none is set)."""
        return self.window if self.window is not None else DEFAULT_WINDOW

    @property
    def rescore(self) -> Rescore | None:
        """The rescore of this serving's model (None: the first stage alone); settled
        when this serving is (:meth:`served`)."""
        if not self.model:
            return None
        return Rescore(self.model, self.window, self.store, self.weights,
                       resolved=self.resolved, contract=self.contract)

    def to_dict(self) -> dict:
        return {"index": self.index, "first_stage": self.stage.to_dict(),
                "window": self.depth, "store": self.store, "max_query_terms": self.max_terms,
                "model": self.model,
                "rescore_weights": list(self.weights if self.weights is not None else MODEL_ONLY),
                "encoder": self.encoder, "via": self.via,
                "contract": self.contract.to_dict() if self.contract else None}

    def query_plan(self, conn: Connection, names) -> QueryPlan:
        """The plan of queries scored by features using the parameters ``names`` (a
        feature set's, e.g. when timing it): this serving's index, first stage, window,
        store, budget and encoder, and whether the index has several shards. A stored
        model's plan is ``query.prepare.model_plan``."""
        return QueryPlan(self.index, self.stage, tuple(dict.fromkeys(names)), self.max_terms,
                         self.depth, self.store, self.encoder,
                         restrict=shard_count(conn, self.index) > 1)

    # ------------------------------------------------------------------ the first stage
    def first_ids(self, conn: Connection, param_list: list[dict], depth: int = 0,
                  failures: dict | None = None, batch: int = 50) -> list[list[str] | None]:
        """The first stage's global top ``max(window, depth)`` ids per query (a query the
        cluster rejects: None, and its reason in ``failures``)."""
        n = max(self.depth, depth)
        return msearch_ids(conn, self.index, param_list, self.stage, n, store=self.store,
                           batch=batch, max_terms=self.max_terms, failures=failures)

    def log_candidates(self, conn: Connection, jl, featureset: str, out, **kw) -> tuple[dict, dict]:
        """The first stage's top ``window`` per judged query, labelled from ``jl`` and
        logged with ``featureset`` into ``out``: (sidecar, candidates info). ``kw``: more
        ``candidate_judgments`` / ``log_features`` options (unjudged, judged_outside,
        first_ids, first_progress, batch)."""
        picks = {k: kw.pop(k) for k in ("unjudged", "judged_outside", "first_ids", "first_progress")
                 if k in kw}
        cands, info, budget = judged_candidates(conn, self.index, jl, featureset, self.stage,
                                                self.store, self.depth, max_terms=self.max_terms,
                                                via=self.via, **picks)
        side = log_features(conn, cands, featureset, self.index, out, self.store,
                            first_stage=self.stage, candidates=info,
                            max_terms=budget, encoder=self.encoder, via=self.via, **kw)
        return side, info

    # ------------------------------------------------------------------ reranking
    def rerank(self, conn: Connection, param_list: list[dict], size: int = 10,
               first_ids: list[list[str]] | None = None, fallbacks: dict | None = None,
               batch: int = 50) -> list[list[str]]:
        """Ranked ids per query: the first stage's global top ``window`` reordered by the
        model (the first stage alone without one), as :meth:`served`."""
        if first_ids is not None:
            first_ids = [list(ids or []) for ids in first_ids]      # a failed query: none
        s = self.served(conn)
        if not s.model:
            ids = first_ids or s.first_ids(conn, param_list, batch=batch)
            return [list(i or [])[:size] for i in ids]
        return rerank_ids(conn, s.index, param_list, s.first_stage, s.rescore, size,
                          first_ids=first_ids, max_terms=s.max_terms, fallbacks=fallbacks,
                          encoder=s.encoder, batch=batch)

    def search(self, conn: Connection, params: dict, size: int = 10) -> list[dict]:
        """One query's hits (rank, id, score, title), as ``ltr query search`` shows them; the
        model's plan (its contract settled, :meth:`served`) is made at the first query and
        kept (``query.prepare.model_plan``)."""
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
        as :meth:`search` serves it -- each model as its own serving contract says, what
        this serving sets applying to both: see :func:`interleaved`."""
        sides = [self.for_model(None if m in (None, FIRST_STAGE_NAME) else m, self.weights)
                 .served(conn) for m in (model_a, model_b)]
        models = [x for x in sides if x.model]
        if self.first_stage is None and models:     # the first stage alone: as the model's
            sides = [x if x.model else replace(x, first_stage=models[0].first_stage,
                                               max_terms=models[0].max_terms) for x in sides]
        return interleaved(sides[0], sides[1], conn, params, size, rng)


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
