"""The LTR plugin's feature store: stores, feature sets, and the `sltr` query."""

from __future__ import annotations

import json
import warnings

from ..errors import ClusterError, UserError
from ..transport.client import Connection, request, translate
from ..data.featuresets import script_languages, semantic_field
from ..transport.engine import LANGUAGE_MODULES, QUERY_VECTOR, WINDOW_IDS, detect, require_vectors
from opensearchpy import exceptions as E


def store_path(store: str | None) -> str:
    """``_ltr`` for the default store, ``_ltr/{store}`` for a named one."""
    return "/_ltr" if not store else f"/_ltr/{store}"


def store_index(store: str | None) -> str:
    return ".ltrstore" if not store else f".ltrstore_{store}"


def refresh_store(conn: Connection, store: str | None) -> bool:
    """Make the store's listing current. The plugin lists with a search, which sees a
    delete only after the index's next refresh (about a second): a listing right after
    ``ltr model delete`` or a cross-validation's clean-up would still name the models.
    Best effort: OpenSearch warns that direct access to system indices such as
    ``.ltrstore`` may be refused in a future major version; then (False) the listing
    lags by that second again, and nothing else changes."""
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*system ind")
            request(conn, "POST", f"/{store_index(store)}/_refresh", store=store)
        return True
    except ClusterError:
        return False


DEFAULT_STORE_KEY = "_default_"


def list_stores(conn: Connection) -> dict:
    """{store name: {"store", "index", "version", "counts"}} as ``GET _ltr`` lists them;
    the default store is listed as ``_default_``."""
    resp = request(conn, "GET", "/_ltr")
    return resp.get("stores", {})


def store_exists(conn: Connection, store: str | None) -> bool:
    """From the listing: ``GET _ltr/{name}`` answers 404 for a missing named store and,
    on 3.6, ``{"exists": false}`` for ``_default_`` even while it exists."""
    return (store or DEFAULT_STORE_KEY) in list_stores(conn)


def init_store(conn: Connection, store: str | None) -> bool:
    """Create the store; returns False when it already existed."""
    if store_exists(conn, store):
        return False
    request(conn, "PUT", store_path(store), store=store)
    return True


def drop_store(conn: Connection, store: str | None) -> bool:
    if not store_exists(conn, store):
        return False
    request(conn, "DELETE", store_path(store), store=store)
    return True


def for_engine(conn: Connection, featureset: dict) -> dict:
    """The feature set as the connected engine runs it: a semantic feature (the cosine of
    the query's vector and a vector field, written for either engine: see
    ``data.featuresets.semantic_field``) gets this engine's template and parameters
    (``transport.engine``); a feature needing a script language the cluster does not run
    is refused in one line naming the feature and the module, before anything is sent."""
    body = featureset.get("featureset", featureset)
    name = body.get("name")
    engine = detect(conn)
    features = []
    for f in body.get("features", []):
        field = semantic_field(f)
        if field is not None:
            kind = require_vectors(conn, f"feature {f['name']} of feature set {name}")
            rest = [p for p in f.get("params", []) if p not in (QUERY_VECTOR, WINDOW_IDS)]
            f = dict(f, template_language="mustache", template=kind.feature_template(field),
                     params=rest + kind.feature_params())
        lang = engine.missing_language(script_languages(f))
        if lang is not None:
            raise UserError(f"feature {f['name']} of feature set {name} needs the script language "
                            f"{lang} ({LANGUAGE_MODULES.get(lang, 'its module')}), which "
                            f"{engine.label} at {conn.display_url} does not run",
                            "install the module on every node, or leave the feature out")
        features.append(f)
    return dict(body, features=features)


def upload_featureset(conn: Connection, featureset: dict, store: str | None = None) -> dict:
    """Create a feature set (``for_engine``'s form of it). The body is the plugin's
    ``{"featureset": {...}}`` form."""
    if not featureset.get("name"):
        raise UserError("feature set has no name")
    return _post_featureset(conn, for_engine(conn, featureset), store)


def _post_featureset(conn: Connection, adapted: dict, store: str | None) -> dict:
    """Create a feature set already in ``for_engine``'s form."""
    return request(conn, "POST", f"{store_path(store)}/_featureset/{adapted['name']}",
                   body={"featureset": adapted}, store=store)


def get_document(conn: Connection, path: str, store: str | None = None) -> dict | None:
    """A stored feature set or model (``_source``), or None when the store has none of
    that name; a missing store is a StoreMissingError."""
    try:
        resp = conn.client().transport.perform_request("GET", path)
    except E.NotFoundError as exc:
        if "index_not_found" in str(exc.info):
            raise translate(exc, conn, store) from None
        return None
    except (E.TransportError, E.ConnectionError) as exc:
        raise translate(exc, conn, store) from None
    return resp.get("_source") if resp.get("found", True) else None


def get_featureset(conn: Connection, name: str, store: str | None = None) -> dict | None:
    return get_document(conn, f"{store_path(store)}/_featureset/{name}", store)


def delete_featureset(conn: Connection, name: str, store: str | None = None) -> bool:
    """False when there is no such feature set. Models trained on it keep their own copy
    of its features (the plugin stores them with the model)."""
    if get_featureset(conn, name, store) is None:
        return False
    request(conn, "DELETE", f"{store_path(store)}/_featureset/{name}", store=store)
    return True


#: Elements per listing request; the plugin's own default is 20.
LIST_PAGE = 1000
#: The store index's result window (OpenSearch's index.max_result_window default).
LIST_MAX = 10_000


def list_elements(conn: Connection, kind: str, store: str | None = None,
                  prefix: str | None = None) -> list[dict]:
    """Every ``_featureset`` or ``_model`` of a store (optionally those whose name starts
    with ``prefix``, as the plugin matches it), paged with the plugin's from/size."""
    out: list[dict] = []
    params = {"prefix": prefix} if prefix else {}
    while True:
        resp = request(conn, "GET", f"{store_path(store)}/{kind}", store=store,
                       params=dict(params, **{"from": len(out), "size": LIST_PAGE}))
        total = resp.get("hits", {}).get("total", {})
        if total.get("relation") == "gte":     # counted up to the result window only
            raise UserError(f"store {store or '(default)'} holds more than {LIST_MAX} "
                            f"{kind.strip('_')}s, more than the plugin can list",
                            "delete old versions (ltr model prune) or use another store")
        hits = resp.get("hits", {}).get("hits", [])
        out += [h.get("_source", {}) for h in hits]
        if len(hits) < LIST_PAGE or len(out) >= total.get("value", float("inf")):
            return out


def list_featuresets(conn: Connection, store: str | None = None) -> list[dict]:
    return list_elements(conn, "_featureset", store)


def sltr(params: dict, featureset: str | None = None, model: str | None = None,
         store: str | None = None, name: str | None = None,
         active_features: list[str] | None = None) -> dict:
    """An ``sltr`` query clause for a feature set (logging) or a model (scoring)."""
    body: dict = {"params": params}
    if model:
        body["model"] = model
    elif featureset:
        body["featureset"] = featureset
    else:
        raise ValueError("sltr needs a featureset or a model")
    if store:
        body["store"] = store
    if name:
        body["_name"] = name
    if active_features:
        body["active_features"] = active_features
    return {"sltr": body}


def _canonical(fs: dict) -> str:
    body = fs.get("featureset", fs)
    return json.dumps(body.get("features", []), sort_keys=True)


def upload_featureset_versioned(conn: Connection, featureset: dict, store: str | None = None) -> tuple[str, str]:
    """Upload a feature set without ever replacing one that models may have been trained
    on: absent -> created; identical -> left alone; changed -> created as ``{name}-v{n}``.
    Returns (name used, "created" | "unchanged" | "new version")."""
    name = featureset["name"]
    featureset = for_engine(conn, featureset)          # adapted once, posted as it is
    existing = get_featureset(conn, name, store)
    if existing is None:
        _post_featureset(conn, featureset, store)
        return name, "created"
    if _canonical(existing) == _canonical(featureset):
        return name, "unchanged"
    n = 2
    while True:
        candidate = f"{name}-v{n}"
        other = get_featureset(conn, candidate, store)
        if other is None:
            _post_featureset(conn, dict(featureset, name=candidate), store)
            return candidate, "new version"
        if _canonical(other) == _canonical(featureset):
            return candidate, "unchanged"
        n += 1
