"""The serving contract's record on the cluster (the contract itself: :mod:`.contract`).

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

from opensearchpy import exceptions as E

from .. import __version__
from ..errors import ClusterError, MissingResourceError
from ..transport.client import Connection, call, translate
from ..transport.lookups import fact, forget
from .contract import Contract, ContractOverrideWarning
from .params import stored_model
from .store import DEFAULT_STORE_KEY

#: the toolkit's own index of serving contracts (one document per stored model)
INDEX = "ltr-toolkit-contracts"


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
