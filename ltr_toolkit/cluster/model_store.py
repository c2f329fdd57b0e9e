"""Models in the plugin's store: upload (versioned, validated, checked), list, show, delete.

Models are immutable in the plugin (re-creating a name fails with HTTP 405): an upload
either takes an explicit new name, or — with ``versioned`` — the next free ``{base}-v{n}``.
Nothing is ever deleted and re-created silently.
"""

from __future__ import annotations

import re

from ..errors import UserError
from .client import Connection, request
from .featurelog import featureset_info
from .params import DERIVED, NO_DOC
from .store import get_document, store_path


def list_models(conn: Connection, store: str | None = None) -> list[dict]:
    resp = request(conn, "GET", f"{store_path(store)}/_model", params={"size": 1000}, store=store)
    return [h.get("_source", {}) for h in resp.get("hits", {}).get("hits", [])]


def model_names(conn: Connection, store: str | None = None) -> list[str]:
    return [m.get("name") for m in list_models(conn, store)]


def get_model(conn: Connection, name: str, store: str | None = None) -> dict | None:
    return get_document(conn, f"{store_path(store)}/_model/{name}", store)


def delete_model(conn: Connection, name: str, store: str | None = None) -> bool:
    if get_model(conn, name, store) is None:
        return False
    request(conn, "DELETE", f"{store_path(store)}/_model/{name}", store=store)
    return True


def next_version(base: str, existing: list[str]) -> str:
    pat = re.compile(rf"^{re.escape(base)}-v(\d+)$")
    taken = [int(m.group(1)) for n in existing if (m := pat.match(n or ""))]
    return f"{base}-v{max(taken, default=0) + 1}"


def upload(conn: Connection, artifact: dict, model, name: str, featureset: str,
           store: str | None = None, index: str | None = None, versioned: bool = True,
           validation_params: dict | None = None) -> dict:
    """Export, check against the stored feature set, and ``_createmodel``. Returns
    {"name", "type", "export"}."""
    from ..models.export import plugin_model
    fsinfo = featureset_info(conn, featureset, store)
    names = fsinfo["feature_names"]
    art = dict(artifact)
    if art.get("featureset") is None and len(art["feature_names"]) == len(names) and \
            all(re.fullmatch(r"f\d+", n) for n in art["feature_names"]):
        art["feature_names"] = names   # unnamed training data: the set's ordinal order
    body, info = plugin_model(art, model, featureset_names=names)
    existing = model_names(conn, store)
    if versioned:
        final = next_version(name, existing)
    else:
        if name in existing:
            raise UserError(f"model {name} already exists in store {store or '(default)'}: "
                            "models are immutable in the plugin",
                            "choose a new name, or drop --exact to get the next version")
        final = name
    req = {"model": {"name": final, "model": body}}
    if index:   # the plugin runs a query with the model before storing it
        if validation_params is None:
            validation_params = {p: NO_DOC if DERIVED.match(p) else "test" for p in fsinfo["params"]}
        req["validation"] = {"params": validation_params, "index": index}
    request(conn, "POST", f"{store_path(store)}/_featureset/{featureset}/_createmodel", body=req,
            store=store)
    warnings = []
    if body["type"] == "model/ranklib":
        warnings.append("RankLib networks are not thread-safe in the LTR plugin (3.6): under "
                        "concurrent queries a network can score with another query's values "
                        "(measured on this toolkit's test node); prefer linear or lambdamart "
                        "for concurrent production traffic")
    return {"name": final, "type": body["type"], "export": info, "warnings": warnings}
