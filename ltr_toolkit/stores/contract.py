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
(:func:`recorded`) and uses it unless told otherwise.

Where it lives on the cluster: the LTR plugin keeps no metadata with a model (its
``_createmodel`` refuses any field it does not know), so the toolkit keeps one document
per stored model in an index of its own, :data:`INDEX` (one shard), with the id
``STORE/MODEL`` (``_default_`` for the default store). The document names the hash of the
stored model it was written for: a record left behind by a model deleted and re-created
under the same name by other means is not applied to the new one.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import warnings
from dataclasses import dataclass, replace

from opensearchpy import exceptions as E

from .. import __version__
from ..data.querytext import SHORTENING
from ..errors import ClusterError, MissingResourceError, UserError
from ..transport.client import Connection, call, translate
from ..transport.lookups import fact, forget
from .params import stored_model
from .store import DEFAULT_STORE_KEY

FORMAT = "ltr-toolkit/serving@1"
#: the toolkit's own index of serving contracts (one document per stored model)
INDEX = "ltr-toolkit-contracts"
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


# --------------------------------------------------------------------------- on the cluster

def _id(model: str, store: str | None) -> str:
    return f"{store or DEFAULT_STORE_KEY}/{model}"


def model_hash(conn: Connection, model: str, store: str | None) -> str:
    """The sha256 of the stored model's definition (what a record was written for)."""
    body = stored_model(conn, model, store)
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _ensure_index(conn: Connection) -> None:
    client = conn.client()
    if call(conn, client.indices.exists, index=INDEX):
        return
    body = {"settings": {"number_of_shards": 1, "auto_expand_replicas": "0-1"},
            "mappings": {"dynamic": False, "properties": {
                "model": {"type": "keyword"}, "store": {"type": "keyword"},
                "model_sha256": {"type": "keyword"}, "recorded": {"type": "date"},
                "contract": {"type": "object", "enabled": False}}}}
    try:
        client.indices.create(index=INDEX, body=body)
    except E.RequestError as exc:            # another process created it meanwhile
        if "resource_already_exists" not in str(exc):
            raise


def record(conn: Connection, model: str, store: str | None, contract: Contract) -> None:
    """Store ``contract`` on the cluster for the stored ``model`` (see the module
    docstring); read back at once by :func:`recorded`."""
    _ensure_index(conn)
    doc = {"model": model, "store": store or DEFAULT_STORE_KEY,
           "model_sha256": model_hash(conn, model, store), "toolkit_version": __version__,
           "recorded": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "contract": contract.to_dict()}
    call(conn, conn.client().index, index=INDEX, id=_id(model, store), body=doc, refresh="true")
    forget(conn, "contract", store, model)


def recorded(conn: Connection, model: str, store: str | None = None) -> Contract | None:
    """The stored model's contract, None when it has none (uploaded by other means or
    before contracts existed; a record written for another model of that name, or one
    the cluster denies reading, is not applied, with a warning). Read once per process and
    kept a while (``transport.lookups``)."""
    def read() -> dict:
        try:
            doc = conn.client().get(index=INDEX, id=_id(model, store))
        except E.NotFoundError:              # no such index, or no record of the model
            return {}
        except E.AuthorizationException:     # a user who may search but not read it
            warnings.warn(ContractOverrideWarning(
                f"the cluster denies reading {INDEX} (HTTP 403): model {model} is served with "
                "the toolkit's defaults, not its serving contract (grant read on the index, or "
                "pass the settings)"))
            return {}
        except (E.TransportError, E.ConnectionError) as exc:
            raise translate(exc, conn, store) from None
        return (doc.get("_source") or {}) if doc.get("found") else {}
    doc = fact(conn, ("contract", store, model), read)
    if not doc:
        return None
    if doc.get("model_sha256") != model_hash(conn, model, store):
        warnings.warn(ContractOverrideWarning(
            f"the serving contract recorded for model {model} was written for another model of "
            "that name: it is not applied (upload the model with `ltr model upload` to record one)"))
        return None
    contract = Contract.from_dict(doc["contract"])
    contract.check(model)
    return contract


def forget_record(conn: Connection, model: str, store: str | None = None) -> None:
    """Delete the model's contract (its model is being deleted); nothing when absent."""
    forget(conn, "contract", store, model)
    try:
        conn.client().delete(index=INDEX, id=_id(model, store), refresh="true")
    except E.NotFoundError:
        pass


def forget_store(conn: Connection, store: str | None = None) -> None:
    """Delete the contracts of a dropped store's models; nothing when there are none.
    They are found by a search and deleted in one bulk request (not ``_delete_by_query``:
    Elasticsearch's test distribution has no reindex module)."""
    c = conn.client()
    try:
        hits = call(conn, c.search, index=INDEX, body={
            "size": 10_000, "_source": False,
            "query": {"term": {"store": store or DEFAULT_STORE_KEY}}})["hits"]["hits"]
    except (E.NotFoundError, MissingResourceError):
        return
    except ClusterError as exc:
        if "no such index" in str(exc) or "index_not_found" in str(exc):
            return
        raise
    if hits:
        lines = [{"delete": {"_index": INDEX, "_id": h["_id"]}} for h in hits]
        call(conn, c.bulk, body=lines, refresh="true")
