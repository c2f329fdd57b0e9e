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

import warnings
from dataclasses import dataclass, replace

from ..data.querytext import fit_params
from ..indexing.vectors import with_query_vectors
from ..stores.contract import DEFAULT_WINDOW, MODEL_ONLY, Contract, ContractOverrideWarning
from ..stores.contract_record import recorded
from ..stores.params import (derived_depth, first_ids_depth, model_params, uses_window,
                             with_first_stage_ids, with_window_ids)
from ..transport.client import Connection
from .clauses import term_budget
from .firststage import FirstStage
from .requests import Rescore, msearch_ids


@dataclass(frozen=True)
class QueryPlan:
    """How the queries of one feature set (logging) or stored model (serving) are
    prepared: see the module docstring. ``names``: the parameters its features use;
    ``window``: the first stage's top window a model reranks (0 at logging: the scored
    documents are the logged ones); ``expected_encoder``: the encoder identity the model
    recorded (a query encoder that differs is refused)."""
    index: str
    first_stage: FirstStage
    names: tuple[str, ...] = ()
    max_terms: int | None = None
    window: int = 0
    store: str | None = None
    encoder: object = None
    expected_encoder: dict | None = None

    @classmethod
    def for_model(cls, conn: Connection, index: str, first_stage: FirstStage, rescore: Rescore,
                  max_terms: int | None = None, encoder=None, sample: dict | None = None
                  ) -> "QueryPlan":
        """The plan of a (resolved: :func:`contracted`) rescore's model; without
        ``max_terms``, the budget is measured with ``sample`` (one query's parameters)
        when given (``query.clauses``), else long queries are sent whole."""
        names = tuple(model_params(conn, rescore.model, rescore.store))
        if max_terms is None and sample is not None:
            max_terms = term_budget(conn, index, first_stage, sample, model=rescore.model,
                                    store=rescore.store)
        contract = rescore.contract
        return cls(index, first_stage, names, max_terms, rescore.window_size, rescore.store,
                   encoder, contract.encoder if contract else None)

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

    def warn(self) -> None:
        if self.overrides:
            given = ", ".join(f"{w} {g}" for w, g, _ in self.overrides)
            was = ", ".join(f"{w} {r}" for w, _, r in self.overrides)
            warnings.warn(ContractOverrideWarning(
                f"model {self.model} is served with {given}, overriding its serving contract "
                f"({was})"), stacklevel=3)


def contracted(conn: Connection, rescore: Rescore, first_stage: FirstStage | None = None,
               max_terms: int | None = None) -> tuple[Rescore, FirstStage, int | None]:
    """(the rescore with its window and weights settled, the first stage, the term budget
    (None: to be measured)) of a stored model: what is given (not None; weights may give
    one of the two), else its serving contract's, else the toolkit's defaults (window
    :data:`~ltr_toolkit.stores.contract.DEFAULT_WINDOW`, the model alone, the default
    fields). Settled once: a settled rescore (``resolved``) is returned as it is."""
    if rescore.resolved:
        contract = rescore.contract
        stage = first_stage or _stage_of(contract) or FirstStage.from_fields()
        return rescore, stage, max_terms if max_terms is not None else (
            contract.max_terms if contract else None)
    contract = recorded(conn, rescore.model, rescore.store)
    s = _Settled(rescore.model)
    window = s.pick("window", rescore.window, contract and contract.window, DEFAULT_WINDOW)
    weights = s.weights(rescore.weights, contract)
    terms = s.pick("long-query budget", max_terms, contract and contract.max_terms, None)
    stage = s.pick("first stage", first_stage, _stage_of(contract), FirstStage.from_fields(),
                   same=_same_stage, show=_brief_stage)
    s.warn()
    return (replace(rescore, window=int(window), weights=weights, resolved=True,
                    contract=contract), stage, terms)
