"""``ltr model``: a model artifact into the cluster (``upload``: the LTR plugin's store,
versioned, or an Elasticsearch trained model) or into a file (``export``), and the
stored models (``list``, ``show``, ``delete``, ``prune``, ``explain``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, List, Optional

import typer
from rich.table import Table

from ..errors import UserError
from ..versions import ELASTICSEARCH_VERSION   # models.native.DEFAULT_VERSION, without NumPy
from .common import (JsonOpt, ReportOpt, StoreOpt, Target, _conn, _ltr_conn, _print_json,
                     _writable, alias, app, err, model_app, out)
if TYPE_CHECKING:
    from ..models.served import ServedModel

FeaturesetOpt = Annotated[Optional[str], typer.Option("--featureset", help="The feature set the training data was logged with: a stored set's name or a feature set file (default: the one the model names).")]


@model_app.command("upload")
def upload_cmd(ctx: typer.Context,
               model: Annotated[Path, typer.Argument(help="A model artifact (`ltr train -o`).")],
               name: Annotated[str, typer.Option("--name", help="Base name; the next -vN is used unless --exact.")],
               featureset: FeaturesetOpt = None,
               store: StoreOpt = None,
               index: Annotated[Optional[str], typer.Option("--index", help="Validate the model with a query on this index first, and measure what it takes in the plugin's cache.")] = None,
               exact: Annotated[bool, typer.Option("--exact", help="Use NAME as is; fail if it exists.")] = False,
               target: Annotated[Target, typer.Option("--target", help="Where the model is served: the LTR plugin's store, or an Elasticsearch trained model for its native learning_to_rank rescorer (tree models; needs x-pack-ml and a license with it).")] = Target.plugin,
               model_alias: Annotated[Optional[str], typer.Option("--alias", help="With --target elasticsearch: point this model alias at the new model (reassigned from the one it named), so searches that name the alias never change.")] = None):
    """Export MODEL.json to the plugin's format, check it, and create it in the store (or,
    with --target elasticsearch, as an Elasticsearch trained model)."""
    from ..query.firststage import FirstStage
    from ..pipeline.artifact import load_model
    from ..stores.contract import describe
    from ..stores.model_store import upload
    from ..stores.modelcache import cache_warnings
    if target is Target.elasticsearch:
        return upload_native(ctx, model, name, featureset, model_alias, store)
    if model_alias:
        raise UserError("--alias goes with --target elasticsearch", "the plugin names versions NAME-vN")
    art, m = load_model(model)
    fs = featureset or art.get("featureset")
    if not fs:
        raise UserError("the model does not say which feature set it was trained on", "pass --featureset")
    conn = _ltr_conn(ctx)
    res = upload(conn, art, m, name, fs, store, index, versioned=not exact)
    out.print(f"uploaded {res['name']} ({res['type']}) for feature set {fs}")
    contract = res["contract"]
    out.print(f"serving contract stored with it ({describe(contract)}): ltr query search|explain "
              "and ltr evaluate serve it so unless a flag says otherwise")
    if contract.first_stage:
        stage = FirstStage.from_dict(contract.first_stage)
        out.print(f"term statistics: {stage.statistics} (search_type {stage.search_type})")
    if contract.max_terms:
        out.print(f"long queries: at most {contract.max_terms} distinct words, as logging did "
                  "(in your own code: ltr_toolkit.data.querytext.fit_keywords)")
    if contract.encoder:
        e = contract.encoder
        out.print(f"query vectors: {e['name']} ({e['sha256'][:12]}, {e['dim']} dimensions), the "
                  f"encoder of the index's '{contract.vector_field or 'vector'}' field: serve "
                  "with that model (--encoder / LTR_ENCODER), or pass query_vector yourself")
    cache, warns = cache_warnings(conn, res["name"], store, index)
    if cache["model_bytes"] is not None:
        out.print(f"plugin cache: the model takes {cache['model_bytes'] / 1024:.1f} KB of "
                  f"ltr.caches.max_mem {cache['limit_bytes'] / 1024 ** 2:.1f} MB per node")
    for w in res["warnings"] + warns:
        err.print(f"warning: {w}")


@model_app.command("list")
def model_list(ctx: typer.Context, store: StoreOpt = None):
    """List stored models."""
    from ..stores.model_store import list_models
    conn = _ltr_conn(ctx)
    table = Table("name", "type", "features")
    for m in list_models(conn, store):
        model = m.get("model", {})
        table.add_row(m.get("name", "?"), model.get("model", {}).get("type", "?"),
                      str(len(model.get("feature_set", {}).get("features", []))))
    out.print(table)


@model_app.command("show")
def model_show(ctx: typer.Context, name: Annotated[str, typer.Argument(help="The stored model's name.")], store: StoreOpt = None):
    """Print a stored model as JSON."""
    from ..stores.model_store import get_model
    conn = _ltr_conn(ctx)
    m = get_model(conn, name, store)
    if m is None:
        raise UserError(f"model {name} not found in store {store or '(default)'}")
    _print_json(m)


@model_app.command("delete")
def model_delete(ctx: typer.Context, name: Annotated[str, typer.Argument(help="The stored model's name.")], store: StoreOpt = None):
    """Delete a stored model."""
    from ..stores.model_store import delete_model
    conn = _ltr_conn(ctx)
    if not delete_model(conn, name, store):
        raise UserError(f"model {name} not found in store {store or '(default)'}")
    out.print(f"deleted model {name}")


@model_app.command("prune")
def model_prune(ctx: typer.Context, base: Annotated[str, typer.Argument(help="The name `ltr model upload` versioned: BASE-v1, BASE-v2, ...")],
                keep: Annotated[int, typer.Option("--keep", min=1, help="How many of the newest versions to keep.")] = 3,
                store: StoreOpt = None,
                yes: Annotated[bool, typer.Option("--yes", help="Confirm: the older versions are deleted.")] = False):
    """Delete all but the newest --keep versions BASE-vN of a model (lists them without --yes)."""
    from ..stores.model_store import prune_versions
    conn = _ltr_conn(ctx)
    kept, doomed = prune_versions(conn, base, keep, store, dry_run=not yes)
    if not doomed:
        out.print(f"nothing to prune: {len(kept)} version(s) of {base}, keeping {keep}")
        return
    out.print(f"keep: {', '.join(kept)}")
    if not yes:
        out.print(f"would delete: {', '.join(doomed)}")
        raise UserError(f"pruning {base} deletes {len(doomed)} model(s); nothing deleted",
                        "pass --yes to confirm")
    out.print(f"deleted: {', '.join(doomed)}")


@model_app.command("explain")
def model_explain(ctx: typer.Context,
                  model: Annotated[str, typer.Argument(help="A stored model's name, or a model artifact file (no cluster needed).")],
                  data: Annotated[Path, typer.Argument(help="Logged feature rows (with their sidecar).")],
                  store: StoreOpt = None,
                  rows: Annotated[int, typer.Option("--rows", min=1, help="Rows explained (a random sample of the file when it has more).")] = 5000,
                  output: ReportOpt = None, as_json: JsonOpt = False):
    """The model's global picture: per feature, the mean absolute contribution to its
    scores over logged rows (baseline: a document that matches no feature) and their
    spread (for one query's documents: `ltr query explain`)."""
    import numpy as np

    from ..data.svmlight import load_logged
    from ..io.atomic import write_json
    _writable(output)
    from ..models.shapley import contributions, summary
    from ..serving.explain import BASELINE
    served = _served_or_artifact(ctx, model, store)
    ds = load_logged(data)
    names = ds.meta.get("sidecar", {}).get("feature_names") or served.names
    if list(names) != list(served.names):
        raise UserError(f"{data} was logged with features {names[:4]}..., model {model} uses "
                        f"{served.names[:4]}...", "explain it on data logged with its feature set")
    X = ds.X
    if len(X) > rows:
        X = X[np.sort(np.random.default_rng(0).choice(len(X), rows, replace=False))]
    phi, base = contributions(served.score, X)
    rep = {"model": model, "rows": int(len(X)), "baseline": {"document": BASELINE, "score": base},
           "features": summary(phi, served.names)}
    if output:
        write_json(output, rep)
    if as_json:
        return _print_json(rep)
    table = Table("feature", "mean |contribution|", "sd", "mean")
    for r in rep["features"]:
        table.add_row(r["feature"], f"{r['mean_abs']:.4g}", f"{r['sd']:.4g}", f"{r['mean']:+.4g}")
    out.print(table)
    out.print(f"{len(X)} rows of {data}; baseline {BASELINE}, scored {base:.6g}")


def _served_or_artifact(ctx, model: str, store) -> ServedModel:
    from ..models.served import ServedModel
    from ..models.export import plugin_model
    from ..pipeline.artifact import load_model
    from ..serving.explain import served_model
    path = Path(model)
    if path.suffix == ".json" and path.is_file():
        art, m = load_model(path)
        body, _ = plugin_model(art, m)
        return ServedModel(body, art["feature_names"])
    return served_model(_ltr_conn(ctx), model, store)[0]


def _params(values: list[str]) -> dict:
    pairs = {}
    for v in values:
        key, sep, value = v.partition("=")
        if not sep or not key:
            raise UserError(f"--default-param {v!r}: expected NAME=VALUE")
        pairs[key] = value
    return pairs


def _features(ctx, art: dict, featureset: Optional[str], store) -> list[dict]:
    """The feature set the model was trained on: the file given, else the stored set
    named (by --featureset or the artifact: the cluster with the plugin); another version
    is refused."""
    from ..stores.params import featureset_info, file_featureset_info
    if featureset is not None and Path(featureset).is_file():
        info = file_featureset_info(Path(featureset))
    elif featureset or art.get("featureset"):
        info = featureset_info(_ltr_conn(ctx), featureset or art["featureset"], store)
    else:
        raise UserError("the model does not say which feature set it was trained on",
                        "pass --featureset FILE")
    if art.get("featureset_sha256") and info["sha256"] != art["featureset_sha256"]:
        raise UserError(f"{featureset or info['name']} is another version of the feature set "
                        f"than the model was trained on ({art.get('featureset')})",
                        "pass the feature set file the training data was logged with")
    return info["features"]


@model_app.command("export")
def export_cmd(ctx: typer.Context,
               model: Annotated[Path, typer.Argument(help="A model artifact (`ltr train -o`).")],
               output: Annotated[Path, typer.Option("-o", "--output", help="The body, as JSON.")],
               target: Annotated[Target, typer.Option("--target", help="Where the model will be served: plugin writes the LTR plugin's _createmodel body; elasticsearch the PUT _ml/trained_models body of Elasticsearch's native learning to rank (tree models).")] = Target.plugin,
               featureset: FeaturesetOpt = None,
               es_version_: Annotated[str, typer.Option("--es-version", help="The Elasticsearch version deployed to (input.field_names before 8.15 only).")] = ELASTICSEARCH_VERSION,
               default_param: Annotated[Optional[List[str]], typer.Option("--default-param", help="NAME=VALUE: a template parameter's value when the rescorer's params do not give it (repeatable).")] = None,
               default_score: Annotated[float, typer.Option("--default-score", min=0.0, help="A feature's value when a parameter of its template is missing (0: the feature is missing).")] = 0.0,
               store: StoreOpt = None):
    """Write MODEL as the body that creates it where --target serves it, without a
    cluster (`ltr model upload` creates it in the cluster)."""
    from ..io.atomic import write_json
    from ..models.native import es_version, native_body, refuse_non_trees, rescorer_params
    from ..pipeline.artifact import load_model
    from ..stores.params import is_derived
    _writable(output)
    es_version(es_version_)
    if target is Target.plugin:
        return _export_plugin(model, output)
    art, _ = load_model(model)
    refuse_non_trees(art["algorithm"])
    features = _features(ctx, art, featureset, store)
    defaults = _params(default_param or [])
    body = native_body(art, features, es_version_, defaults, default_score)
    write_json(output, body)
    ens = body["definition"]["trained_model"]["ensemble"]
    out.print(f"{output}: {art['algorithm']}, {len(ens['trained_models'])} trees over "
              f"{len(features)} query extractors, for Elasticsearch {es_version_} "
              f"({'with' if 'input' in body else 'without'} input.field_names); create it with "
              "PUT _ml/trained_models/<id>")
    needed = [p for p in rescorer_params(features) if p not in defaults]
    if needed:
        out.print(f"the rescorer's params must give: {', '.join(needed)}")
    if art.get("max_query_terms"):
        out.print(f"long queries: send at most {art['max_query_terms']} distinct words, as "
                  "logging did (ltr_toolkit.data.querytext.fit_keywords)")
    derived = [p for p in needed if is_derived(p)]
    if derived:
        err.print(f"warning: {', '.join(derived)} are computed by the toolkit at logging; your "
                  "search code must pass them in the rescorer's params (see stores/params.py)")


def upload_native(ctx, model: Path, name: str, featureset: Optional[str], alias: Optional[str],
                  store) -> None:
    """``ltr model upload MODEL --target elasticsearch``: the trained model created from the
    export's body (for the connected cluster's version) and ``alias`` pointed at it; one
    line naming what is missing where the cluster cannot serve it (nothing created)."""
    from ..models.native import native_body, refuse_non_trees
    from ..pipeline.artifact import load_model
    from ..stores.trained_models import create, native_support
    from ..transport.engine import detect
    art, _ = load_model(model)
    refuse_non_trees(art["algorithm"])
    conn = _conn(ctx)
    why = native_support(conn)       # before anything else is asked of the cluster
    if why:
        raise UserError(why, "upload to the LTR plugin instead (ltr model upload without --target), "
                             "or use a cluster with x-pack-ml and a license that has it")
    features = _features(ctx, art, featureset, store)
    body = native_body(art, features, detect(conn).version)
    res = create(conn, name, body, alias)
    out.print(f"created trained model {res['model_id']}" + (f", alias {alias} points at it" if alias else ""))


def _export_plugin(model: Path, output: Path) -> None:
    """``ltr model export --target plugin``: the model as the plugin's ``_createmodel``
    definition (``{"type", "definition", "feature_normalizers"?}``), as the upload sends it."""
    from ..io.atomic import write_json
    from ..models.export import plugin_model
    from ..pipeline.artifact import load_model
    art, m = load_model(model)
    body, _ = plugin_model(art, m)
    write_json(output, body)
    out.print(f"{output}: {art['algorithm']} as {body['type']} over {len(art['feature_names'])} "
              f"features of feature set {art.get('featureset') or '(unnamed)'}: "
              f"POST _ltr/_featureset/<set>/_createmodel with {{\"model\": {{\"name\": ..., \"model\": <this>}}}}")


alias(app, "upload", "model upload", upload_cmd)
alias(app, "export", "model export", export_cmd)
