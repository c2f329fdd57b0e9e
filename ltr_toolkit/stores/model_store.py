"""Models in the plugin's store: upload (versioned, validated, checked), list, show,
delete, prune old versions.

Models are immutable in the plugin (re-creating a name fails with HTTP 405): an upload
either takes an explicit new name, or — with ``versioned`` — the next free ``{base}-v{n}``.
Nothing is ever deleted and re-created silently.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..errors import UserError
from ..transport.client import Connection, request
from ..transport.engine import detect
from ..transport.lookups import forget_model
from .contract import of_artifact
from .contract_record import forget_record, record
from .params import QUERY_VECTOR, featureset_info, placeholder_params
from ..indexing.vectors import index_vectors, placeholder_vector
from .store import get_document, list_elements, refresh_store, store_path
from ..models.export import plugin_model
from ..models.trees import ALGOS as TREE_ALGOS


def list_models(conn: Connection, store: str | None = None, prefix: str | None = None) -> list[dict]:
    return list_elements(conn, "_model", store, prefix)


def model_names(conn: Connection, store: str | None = None, prefix: str | None = None) -> list[str]:
    return [m.get("name") for m in list_models(conn, store, prefix)]


def get_model(conn: Connection, name: str, store: str | None = None) -> dict | None:
    return get_document(conn, f"{store_path(store)}/_model/{name}", store)


def delete_model(conn: Connection, name: str, store: str | None = None,
                 refresh: bool = True) -> bool:
    """False when there is no such model. ``refresh``: the store's listing no longer
    names it when this returns (see ``refresh_store``)."""
    if get_model(conn, name, store) is None:
        return False
    request(conn, "DELETE", f"{store_path(store)}/_model/{name}", store=store)
    forget_model(conn, name, store)
    forget_record(conn, name, store)
    if refresh:
        refresh_store(conn, store)
    return True


def delete_models(conn: Connection, names: list[str], store: str | None = None) -> dict[str, str]:
    """Delete each model, then refresh the listing once. Returns {name: why} of those that
    could not be deleted (not raised: a clean-up goes on past one failure)."""
    failed: dict[str, str] = {}
    for name in names:
        try:
            delete_model(conn, name, store, refresh=False)
        except Exception as exc:    # noqa: BLE001 - reported with its reason to the caller
            failed[name] = str(exc) or type(exc).__name__
    if len(failed) < len(names):
        refresh_store(conn, store)
    return failed


def _versions(base: str, names: list[str]) -> list[tuple[int, str]]:
    """(n, name) of every ``{base}-v{n}`` among names, oldest first."""
    pat = re.compile(rf"^{re.escape(base)}-v(\d+)$")
    return sorted((int(m.group(1)), n) for n in names if (m := pat.match(n or "")))


def next_version(base: str, existing: list[str]) -> str:
    taken = _versions(base, existing)
    return f"{base}-v{taken[-1][0] + 1 if taken else 1}"


def prune_versions(conn: Connection, base: str, keep: int, store: str | None = None,
                   dry_run: bool = False) -> tuple[list[str], list[str]]:
    """Delete all but the newest ``keep`` (>= 1) versions ``{base}-v{n}`` of a model;
    other names (``{base}`` itself, ``{base}-v2-old``, ``{base}x-v1``) are never touched.
    Returns (kept, deleted) names, oldest first; ``dry_run`` deletes nothing. The plugin
    does not refresh its store after a delete; this does, so a listing right after agrees.
    A model already gone is skipped."""
    if int(keep) < 1:
        raise UserError(f"--keep {keep}: keep at least 1 version (ltr model delete removes one)")
    versions = [n for _, n in _versions(base, model_names(conn, store, prefix=base))]
    cut = max(0, len(versions) - int(keep))
    doomed, kept = versions[:cut], versions[cut:]
    if not dry_run:
        for name in doomed:
            delete_model(conn, name, store, refresh=False)
        if doomed:
            refresh_store(conn, store)
    return kept, doomed


def upload(conn: Connection, artifact: dict, model, name: str, featureset: str,
           store: str | None = None, index: str | None = None, versioned: bool = True,
           validation_params: dict | None = None) -> dict:
    """Export, check against the stored feature set, ``_createmodel``, and record the
    artifact's serving contract on the cluster (``stores.contract``; a model whose
    contract cannot be recorded is deleted again: it would be served otherwise than it
    was evaluated). Returns {"name", "type", "export", "contract"}."""
    fsinfo = featureset_info(conn, featureset, store)
    _check_trained_on(artifact, featureset, fsinfo)
    check_missing_rule(detect(conn), artifact)
    names = fsinfo["feature_names"]
    art = dict(artifact)
    if art.get("featureset") is None and len(art["feature_names"]) == len(names) and \
            all(re.fullmatch(r"f\d+", n) for n in art["feature_names"]):
        art["feature_names"] = names   # unnamed training data: the set's ordinal order
    body, info = plugin_model(art, model, featureset_names=names)
    existing = model_names(conn, store, prefix=name)   # the name and its -vN versions
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
            validation_params = placeholder_params(fsinfo["params"], _vector_for(
                conn, index, fsinfo["params"], artifact.get("encoder")))
        req["validation"] = {"params": validation_params, "index": index}
    request(conn, "POST", f"{store_path(store)}/_featureset/{featureset}/_createmodel", body=req,
            store=store)
    contract = replace(of_artifact(artifact), featureset=featureset)
    try:
        record(conn, final, store, contract)
    except BaseException:
        delete_model(conn, final, store)
        raise
    warnings = []
    if body["type"] == "model/ranklib":
        warnings.append("RankLib networks are not thread-safe in the LTR plugin (3.6): under "
                        "concurrent queries a network can score with another query's values "
                        "(measured on this toolkit's test node); prefer linear or lambdamart "
                        "for concurrent production traffic")
    return {"name": final, "type": body["type"], "export": info, "warnings": warnings,
            "contract": contract}


def check_missing_rule(engine, artifact: dict) -> None:
    """A tree model trained on data where a feature that did not match is missing (NaN,
    sent down each split's ``no`` branch by ``ltr predict``) scores otherwise on a cluster
    whose plugin reads it as 0.0 (``Engine.missing_rule``): refused in one line naming the
    version difference, never served silently different. Linear models and networks read
    a missing feature as 0.0 on every version; data logged from that cluster reads it as
    0.0 too, and trains models that serve there as predicted."""
    if artifact.get("algorithm") not in TREE_ALGOS:
        return
    trained = artifact.get("missing_features")
    if trained == "absent" and engine.missing_rule == "zero":
        raise UserError(f"{engine.label}'s LTR plugin reads a missing feature as 0.0 in tree "
                        "models; this model was trained with missing features as missing (sent "
                        "down each split's no branch, as OpenSearch 3.2+ and Elasticsearch serve "
                        "them): it would score otherwise here than ltr predict",
                        f"log the judgments on this cluster ({engine.label}: the data then reads "
                        "missing as 0.0) and train again, or serve it on OpenSearch >= 3.2")


def _check_trained_on(artifact: dict, featureset: str, fsinfo: dict) -> None:
    trained_on = artifact.get("featureset_sha256")
    if trained_on and trained_on != fsinfo["sha256"]:
        raise UserError(f"the model was trained on data logged with another version of feature "
                        f"set {artifact.get('featureset') or '?'} than the stored {featureset} "
                        "(their content hashes differ): the plugin would compute other features",
                        f"upload it with --featureset {artifact.get('featureset')} as it was logged, "
                        "or log and train again with this one")


def _vector_for(conn, index: str, names, recorded: dict | None):
    """A stand-in query vector for a semantic feature set's validation query, after
    checking the model was trained on the vectors of the index's encoder."""
    if QUERY_VECTOR not in names:
        return None
    record = index_vectors(conn, index)
    if record and recorded and record["encoder"].get("sha256") != recorded.get("sha256"):
        raise UserError(f"the model was trained with encoder {recorded.get('name')} "
                        f"({recorded.get('sha256', '?')[:12]}), index {index}'s vectors come from "
                        f"{record['encoder'].get('name')} ({record['encoder'].get('sha256', '?')[:12]})",
                        "log and train on this index's vectors, or upload for the index the model was trained on")
    return placeholder_vector(conn, index)
