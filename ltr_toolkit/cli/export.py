"""``ltr export``: a model artifact as another engine's model body, written to a file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import typer

from ..errors import UserError
from ..versions import ELASTICSEARCH_VERSION   # models.native.DEFAULT_VERSION, without NumPy
from .common import StoreOpt, _conn, _ltr_conn, _writable, app, choices, err, out

Target = choices("Target", "elasticsearch")


def _params(values: list[str]) -> dict:
    pairs = {}
    for v in values:
        key, sep, value = v.partition("=")
        if not sep or not key:
            raise UserError(f"--default-param {v!r}: expected NAME=VALUE")
        pairs[key] = value
    return pairs


def _features(ctx, art: dict, featureset: Optional[Path], store) -> list[dict]:
    """The feature set the model was trained on: the file given, else the stored set the
    artifact names (the cluster with the plugin); another version is refused."""
    from ..stores.params import featureset_info, file_featureset_info
    if featureset is not None:
        info = file_featureset_info(featureset)
    elif art.get("featureset"):
        info = featureset_info(_ltr_conn(ctx), art["featureset"], store)
    else:
        raise UserError("the model does not say which feature set it was trained on",
                        "pass --featureset FILE")
    if art.get("featureset_sha256") and info["sha256"] != art["featureset_sha256"]:
        raise UserError(f"{featureset or info['name']} is another version of the feature set "
                        f"than the model was trained on ({art.get('featureset')})",
                        "pass the feature set file the training data was logged with")
    return info["features"]


@app.command("export")
def export_cmd(ctx: typer.Context, model: Path,
               target: Annotated[Target, typer.Option("--target", help="elasticsearch: the PUT _ml/trained_models body of Elasticsearch's native learning to rank (tree models).")],
               output: Annotated[Path, typer.Option("-o", "--output", help="The body, as JSON.")],
               featureset: Annotated[Optional[Path], typer.Option("--featureset", help="The feature set file the training data was logged with (default: the stored set the model names, read from the cluster).")] = None,
               es_version_: Annotated[str, typer.Option("--es-version", help="The Elasticsearch version deployed to (input.field_names before 8.15 only).")] = ELASTICSEARCH_VERSION,
               default_param: Annotated[Optional[List[str]], typer.Option("--default-param", help="NAME=VALUE: a template parameter's value when the rescorer's params do not give it (repeatable).")] = None,
               default_score: Annotated[float, typer.Option("--default-score", min=0.0, help="A feature's value when a parameter of its template is missing (0: the feature is missing).")] = 0.0,
               store: StoreOpt = None):
    """Write MODEL as TARGET's model body, with its feature extractors."""
    from ..io.atomic import write_json
    from ..models.native import es_version, native_body, refuse_non_trees, rescorer_params
    from ..pipeline.artifact import load_model
    from ..stores.params import is_derived
    _writable(output)
    es_version(es_version_)
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


def upload_native(ctx, model: Path, name: str, featureset: Optional[Path], alias: Optional[str],
                  store) -> None:
    """``ltr upload MODEL --target elasticsearch``: the trained model created from the
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
        raise UserError(why, "upload to the LTR plugin instead (ltr upload without --target), "
                             "or use a cluster with x-pack-ml and a license that has it")
    features = _features(ctx, art, featureset, store)
    body = native_body(art, features, detect(conn).version)
    res = create(conn, name, body, alias)
    out.print(f"created trained model {res['model_id']}" + (f", alias {alias} points at it" if alias else ""))
