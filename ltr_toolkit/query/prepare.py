"""One path prepares a query for the cluster.

Logging (``features.featurelog``), serving (``serving.rerank``), explanations
(``serving.explain``), evaluation and interleaving (through ``serving.Serving``) send a
query's features the parameters :meth:`QueryPlan.params` makes, always in this order:

1. the query's vector (``query_vector``, for semantic features) from its FULL text, by
   the index's encoder (checked against the one the model recorded); a vector the caller
   passes is kept;
2. ``keywords`` shortened to the term budget (``data.querytext.fit_keywords``): the first
   stage and every feature receive the same shortened text;
3. the first stage's top ids (``first_stage_id_N``, for feedback features), from a
   first-stage request of the shortened text unless the caller has them;
4. the ids of the documents being scored (``window_ids``): the logged candidates at
   logging, the first stage's top window at serving.

How a stored model is served -- its window, rescore weights (alone or blended with the
first stage), term budget, first stage and encoder -- is its serving contract
(``stores.contract``), settled by :func:`contracted`: an explicit setting that differs
from the contract wins, and says so in one warning line.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, replace

from ..data.querytext import fit_params
from ..indexing.vectors import with_query_vectors
from ..stores.contract import DEFAULT_WINDOW, MODEL_ONLY, Contract, ContractOverrideWarning
from ..stores.contract_record import recorded
from ..stores.params import (derived_depth, first_ids_depth, model_params, thread_safe,
                             uses_window, with_first_stage_ids, with_window_ids)
from ..transport.client import Connection
from ..transport.lookups import planned, replanned, shard_count
from .clauses import term_budget, too_many_clauses
from .firststage import FirstStage
from .requests import Rescore, msearch_ids


@dataclass(frozen=True)
class QueryPlan:
    """How the queries of one feature set (logging) or stored model (serving) are
    prepared: see the module docstring. ``names``: the parameters its features use;
    ``window``: the first stage's top window a model reranks (0 at logging: the scored
    documents are the logged ones); ``expected_encoder``: the encoder identity the model
    recorded (a query encoder that differs is refused). A stored model's plan
    (:func:`model_plan`) also carries its settled ``rescore``, whether the index has
    several shards (``restrict``: the rescore is restricted to the first stage's global
    top ids), whether the plugin may score the model concurrently (``serial``: not) and
    the contract overrides to warn about on each query (``overrides``)."""
    index: str
    first_stage: FirstStage
    names: tuple[str, ...] = ()
    max_terms: int | None = None
    window: int = 0
    store: str | None = None
    encoder: object = None
    expected_encoder: dict | None = None
    rescore: Rescore | None = None
    restrict: bool = False
    serial: bool = False
    overrides: str | None = None
    measured: bool = False

    @classmethod
    def for_model(cls, conn: Connection, index: str, first_stage: FirstStage, rescore: Rescore,
                  max_terms: int | None = None, encoder=None, sample: dict | None = None
                  ) -> "QueryPlan":
        """The plan of a (resolved: :func:`contracted`) rescore's model; without
        ``max_terms``, the budget is measured with ``sample`` (one query's parameters)
        when given (``query.clauses``), else long queries are sent whole."""
        names = tuple(model_params(conn, rescore.model, rescore.store))
        measured = max_terms is None and sample is not None
        if measured:
            max_terms = term_budget(conn, index, first_stage, sample, model=rescore.model,
                                    store=rescore.store)
        contract = rescore.contract
        return cls(index, first_stage, names, max_terms, rescore.window_size, rescore.store,
                   encoder, contract.encoder if contract else None, measured=measured)

    @property
    def feedback_depth(self) -> int:
        """How many first-stage ids the feedback features take (0: none)."""
        return derived_depth(self.names)

    @property
    def first_depth(self) -> int:
        """How many first-stage ids serving needs before the rescore (feedback, window)."""
        return first_ids_depth(self.names, self.window)

    def keywords(self, params: dict) -> dict:
        """``params`` as the first stage and the features receive them (long queries
        shortened): step 2 alone."""
        return fit_params(params, self.max_terms)

    def first_ids(self, conn: Connection, raw: list[dict], depth: int, *,
                  failures: dict | None = None, batch: int = 50,
                  stats: dict | None = None) -> list[list[str] | None]:
        """The first stage's top ``depth`` ids of each query (shortened as in step 2; a
        query the cluster rejects: None, its reason in ``failures``)."""
        return msearch_ids(conn, self.index, raw, self.first_stage, depth, store=self.store,
                           batch=batch, max_terms=self.max_terms, failures=failures,
                           stats=stats)

    def params(self, conn: Connection, raw: list[dict], *,
               first_ids: list[list[str] | None] | None = None,
               scored: list[list[str]] | None = None, failures: dict | None = None,
               batch: int = 50, stats: dict | None = None) -> list[dict | None]:
        """Each query's feature parameters (steps 1-4 of the module docstring) from its
        raw parameters (the full text). ``first_ids``: each query's first-stage ids when
        the caller has them (fetched here when a feature needs them); ``scored``: the
        documents each query's features score (default: its first ``window`` first-stage
        ids). A query whose first stage failed (None ids) gets None."""
        with_vectors = with_query_vectors(conn, self.index, raw, self.names, self.encoder,
                                          self.expected_encoder)
        fitted = [self.keywords(p) for p in with_vectors]
        windowed = uses_window(self.names)
        if not self.feedback_depth and not (windowed and scored is None):
            return [with_window_ids(p, ids, self.names) for p, ids in zip(fitted, scored)] \
                if windowed else fitted
        if first_ids is None:
            first_ids = self.first_ids(conn, raw, max(self.feedback_depth, self.first_depth),
                                       failures=failures, batch=batch, stats=stats)
        out: list[dict | None] = []
        for i, (p, ids) in enumerate(zip(fitted, first_ids)):
            if ids is None:
                out.append(None)
                continue
            p = with_first_stage_ids(p, ids, self.feedback_depth)
            out.append(with_window_ids(p, scored[i] if scored is not None else ids[:self.window],
                                       self.names))
        return out


# --------------------------------------------------------------------------- the contract

def _stage_of(contract: Contract | None) -> FirstStage | None:
    return FirstStage.from_dict(contract.first_stage) if contract and contract.first_stage else None


def _same_stage(a: FirstStage, b: FirstStage) -> bool:
    return a.template == b.template and a.statistics == b.statistics


def _brief_stage(stage: FirstStage) -> str:
    return f"{stage.source} ({stage.statistics} statistics)"


class _Settled:
    """Each setting: the explicit one, else the contract's, else the toolkit's default;
    explicit ones that differ from the contract are collected for one warning."""

    def __init__(self, model: str):
        self.model, self.overrides = model, []

    def pick(self, what: str, given, recorded_value, default, same=None, show=str):
        if given is None:
            return recorded_value if recorded_value is not None else default
        if recorded_value is not None and not (same or (lambda a, b: a == b))(given, recorded_value):
            self.overrides.append((what, show(given), show(recorded_value)))
        return given

    def weights(self, given, contract: Contract | None) -> tuple[float, float]:
        base = contract.weights if contract else MODEL_ONLY
        if given is None:
            return tuple(base)
        full = tuple(float(b if g is None else g) for g, b in zip(given, base))
        return self.pick("rescore weights", full, contract and tuple(contract.weights), MODEL_ONLY,
                         show=lambda w: f"({w[0]:g}, {w[1]:.6g})")

    def message(self) -> str | None:
        """The one warning line of the explicit settings that differ (None: none)."""
        if not self.overrides:
            return None
        given = ", ".join(f"{w} {g}" for w, g, _ in self.overrides)
        was = ", ".join(f"{w} {r}" for w, _, r in self.overrides)
        return f"model {self.model} is served with {given}, overriding its serving contract ({was})"


def contracted(conn: Connection, rescore: Rescore, first_stage: FirstStage | None = None,
               max_terms: int | None = None) -> tuple[Rescore, FirstStage, int | None]:
    """(the rescore with its window and weights settled, the first stage, the term budget
    (None: to be measured)) of a stored model: what is given (not None; weights may give
    one of the two), else its serving contract's, else the toolkit's defaults (window
    :data:`~ltr_toolkit.stores.contract.DEFAULT_WINDOW`, the model alone, the default
    fields). Settled once: a settled rescore (``resolved``) is returned as it is."""
    rescore, stage, terms, overrides = _settle(conn, rescore, first_stage, max_terms)
    if overrides:
        warnings.warn(ContractOverrideWarning(overrides), stacklevel=2)
    return rescore, stage, terms


def _settle(conn: Connection, rescore: Rescore, first_stage: FirstStage | None,
            max_terms: int | None) -> tuple[Rescore, FirstStage, int | None, str | None]:
    """:func:`contracted`'s answer and the override warning's line (None: no override)."""
    if rescore.resolved:
        contract = rescore.contract
        stage = first_stage or _stage_of(contract) or FirstStage.from_fields()
        return rescore, stage, max_terms if max_terms is not None else (
            contract.max_terms if contract else None), None
    contract = recorded(conn, rescore.model, rescore.store)
    s = _Settled(rescore.model)
    window = s.pick("window", rescore.window, contract and contract.window, DEFAULT_WINDOW)
    weights = s.weights(rescore.weights, contract)
    terms = s.pick("long-query budget", max_terms, contract and contract.max_terms, None)
    stage = s.pick("first stage", first_stage, _stage_of(contract), FirstStage.from_fields(),
                   same=_same_stage, show=_brief_stage)
    return (replace(rescore, window=int(window), weights=weights, resolved=True,
                    contract=contract), stage, terms, s.message())


# --------------------------------------------------------------------------- plans kept

def model_plan(conn: Connection, index: str, rescore: Rescore,
               first_stage: FirstStage | None = None, max_terms: int | None = None,
               encoder=None, sample: dict | None = None) -> QueryPlan:
    """The plan of a stored model served on ``index`` with these settings (None: its
    contract's, :func:`contracted`), made once per process and then reused: reading the
    contract, the model's parameters, the shard count and measuring the budget (without
    one given or recorded, with ``sample``: :meth:`QueryPlan.for_model`) are not repeated
    per query. A model's name never changes meaning in the plugin (a new version is a new
    name), so the plan is kept under it, without expiry; it is forgotten with the model or
    its contract (``transport.lookups.forget``), and its budget measured again when the
    cluster rejects a query as too long (:func:`remeasured`)."""
    settings = (index, rescore.window, None if rescore.weights is None else tuple(rescore.weights),
                rescore.resolved, _stage_key(first_stage), max_terms, _hashable(encoder),
                sample is not None)
    return planned(conn, rescore.store, rescore.model, settings,
                   lambda: _made(conn, index, rescore, first_stage, max_terms, encoder, sample))


def _made(conn, index, rescore, first_stage, max_terms, encoder, sample) -> QueryPlan:
    rescore, stage, terms, overrides = _settle(conn, rescore, first_stage, max_terms)
    plan = QueryPlan.for_model(conn, index, stage, rescore, terms, encoder, sample)
    return replace(plan, rescore=rescore, restrict=shard_count(conn, index) > 1,
                   serial=not thread_safe(conn, rescore.model, rescore.store),
                   overrides=overrides)


def _stage_key(stage: FirstStage | None) -> str | None:
    return None if stage is None else json.dumps(stage.to_dict(), sort_keys=True, default=str)


def _hashable(value):
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


def remeasured(conn: Connection, plan: QueryPlan, sample: dict, reason: str) -> QueryPlan | None:
    """After the cluster rejected a query of ``plan`` for ``reason``: when it says the
    query is too long and the plan's budget was measured (not given, not recorded), the
    plan with its budget measured again with ``sample`` (the cluster's clause limit may
    have changed), kept in place of the old one; None otherwise, or when the new budget is
    the same (nothing to try again)."""
    if not (plan.measured and plan.rescore and too_many_clauses(reason)):
        return None
    budget = term_budget(conn, plan.index, plan.first_stage, sample, model=plan.rescore.model,
                         store=plan.store, fresh=True)
    if budget == plan.max_terms:
        return None
    fresh = replace(plan, max_terms=budget)
    replanned(conn, plan.store, plan.rescore.model, plan, fresh)
    return fresh
