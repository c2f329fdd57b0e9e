"""Elasticsearch's own trained models (x-pack-ml): creating a learning-to-rank model
built by :mod:`ltr_toolkit.models.native` and pointing an alias at it.

Nothing is created unless the cluster can serve it: an Elasticsearch with the
machine-learning APIs (``GET _ml/info``) and a license that includes learning to rank
(Elastic sells it with some subscription levels only; a trial license has it). Each
refusal is one line naming what is missing. The alias is reassigned from whatever model
it named (``reassign=true``), so searches that name the alias never change; when the
alias cannot be set, the model just created is deleted again: nothing is left behind.
"""

from __future__ import annotations

from ..errors import ClusterError
from ..models.native import alias_request, put_request
from ..transport.client import Connection, request
from ..transport.engine import ELASTICSEARCH, detect

#: license types without Elasticsearch's native learning to rank
NO_LTR_LICENSES = frozenset({"basic", "standard", "gold", "missing"})


def _why_not_ml(conn: Connection) -> str | None:
    """Why ``conn``'s Elasticsearch cannot take a trained model (None: it can)."""
    try:
        request(conn, "GET", "/_ml/info")
    except ClusterError as exc:
        if "no handler found" in str(exc) or "405" in str(exc) or "404" in str(exc):
            return (f"the cluster at {conn.display_url} has no machine-learning APIs "
                    "(x-pack-ml is not installed: Elasticsearch's test distribution and "
                    "the OSS builds lack it)")
        raise
    lic = request(conn, "GET", "/_license").get("license", {})
    kind, status = lic.get("type", "missing"), lic.get("status", "?")
    if kind in NO_LTR_LICENSES or status != "active":
        return (f"the cluster at {conn.display_url} has a {kind} license ({status}), which does "
                "not include native learning to rank")
    return None


def native_support(conn: Connection) -> str | None:
    """Why the connected cluster cannot serve an Elasticsearch trained model for learning
    to rank, in one line (None when it can)."""
    engine = detect(conn)
    if engine.name != ELASTICSEARCH:
        return (f"the cluster at {conn.display_url} is {engine.label}: native learning to rank "
                "is Elasticsearch's (8.12 or later, with x-pack-ml)")
    if engine.version_tuple() < (8, 12):
        return f"the cluster at {conn.display_url} is {engine.label}: native learning to rank needs 8.12 or later"
    return _why_not_ml(conn)


def create(conn: Connection, model_id: str, body: dict, alias: str | None = None) -> dict:
    """Create the trained model ``model_id`` from ``body`` and point ``alias`` at it;
    refused in one line (nothing created) where the cluster cannot serve it."""
    why = native_support(conn)
    if why:
        raise ClusterError(why, "upload to the LTR plugin instead (ltr model upload without "
                                "--target), or use a cluster with x-pack-ml and a license that has it")
    method, path, payload = put_request(model_id, body)
    request(conn, method, path, body=payload)
    if alias:
        method, path, params = alias_request(model_id, alias)
        try:
            request(conn, method, path, params=params)
        except ClusterError:
            request(conn, "DELETE", f"/_ml/trained_models/{model_id}")
            raise
    return {"model_id": model_id, "alias": alias}
