"""``ltr upload``, ``ltr model`` and ``ltr search``: models into the plugin, versioned,
and reranked searches."""

from __future__ import annotations

import json
from pathlib import Path

from typing import TYPE_CHECKING, Annotated, List, Optional

import typer
from rich.table import Table

from ..errors import UserError
from .common import choices
from .common import (FieldsOpt, MaxTermsOpt, QueryWeightOpt, RescoreWeightOpt, ServedStatsOpt,
                     StoreOpt, TemplateOpt, WindowOpt, _conn, _given_first_stage, _ltr_conn,
                     _weights, app, err, model_app, out)
if TYPE_CHECKING:
    from ..models.served import ServedModel
    from ..query.firststage import FirstStage
    from ..serving.serving import Serving
from .export import upload_native


UploadTarget = choices("UploadTarget", "plugin", "elasticsearch")


@app.command("upload")
def upload_cmd(ctx: typer.Context, model: Path,
               name: Annotated[str, typer.Option("--name", help="Base name; the next -vN is used unless --exact.")],
               featureset: Annotated[Optional[str], typer.Option("--featureset", help="Feature set (default: the one the training data was logged with).")] = None,
               store: StoreOpt = None,
               index: Annotated[Optional[str], typer.Option("--index", help="Validate the model with a query on this index first, and measure what it takes in the plugin's cache.")] = None,
               exact: Annotated[bool, typer.Option("--exact", help="Use NAME as is; fail if it exists.")] = False,
               target: Annotated[UploadTarget, typer.Option("--target", help="plugin: the LTR plugin's store; elasticsearch: an Elasticsearch trained model for its native learning_to_rank rescorer (tree models; needs x-pack-ml and a license with it).")] = UploadTarget.plugin,
               alias: Annotated[Optional[str], typer.Option("--alias", help="With --target elasticsearch: point this model alias at the new model (reassigned from the one it named), so searches that name the alias never change.")] = None):
    """Export MODEL.json to the plugin's format, check it, and create it in the store (or,
    with --target elasticsearch, as an Elasticsearch trained model)."""
    from ..query.firststage import FirstStage
    from ..pipeline.artifact import load_model
    from ..stores.contract import describe
    from ..stores.model_store import upload
    from ..stores.modelcache import cache_warnings
    if target is UploadTarget.elasticsearch:
        fs_file = Path(featureset) if featureset and Path(featureset).is_file() else None
        return upload_native(ctx, model, name, fs_file, alias, store)
    if alias:
        raise UserError("--alias goes with --target elasticsearch", "the plugin names versions NAME-vN")
    art, m = load_model(model)
    fs = featureset or art.get("featureset")
    if not fs:
        raise UserError("the model does not say which feature set it was trained on", "pass --featureset")
    conn = _ltr_conn(ctx)
    res = upload(conn, art, m, name, fs, store, index, versioned=not exact)
    out.print(f"uploaded {res['name']} ({res['type']}) for feature set {fs}")
    contract = res["contract"]
    out.print(f"serving contract stored with it ({describe(contract)}): ltr search, evaluate, "
              "explain and interleaving serve it so unless a flag says otherwise")
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
def model_show(ctx: typer.Context, name: str, store: StoreOpt = None):
    """Print a stored model as JSON."""
    from ..stores.model_store import get_model
    conn = _ltr_conn(ctx)
    m = get_model(conn, name, store)
    if m is None:
        raise UserError(f"model {name} not found in store {store or '(default)'}")
    out.print_json(json.dumps(m))


@model_app.command("delete")
def model_delete(ctx: typer.Context, name: str, store: StoreOpt = None):
    """Delete a stored model."""
    from ..stores.model_store import delete_model
    conn = _ltr_conn(ctx)
    if not delete_model(conn, name, store):
        raise UserError(f"model {name} not found in store {store or '(default)'}")
    out.print(f"deleted model {name}")


@model_app.command("prune")
def model_prune(ctx: typer.Context, base: Annotated[str, typer.Argument(help="The name ltr upload versioned: BASE-v1, BASE-v2, ...")],
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


# --------------------------------------------------------------------------- search / evaluate

@app.command("search")
def search_cmd(ctx: typer.Context, text: str, index: Annotated[str, typer.Option("--index")] = "cranfield",
               model: Annotated[Optional[str], typer.Option("--model", help="Rerank with this stored model, served as its serving contract says unless the options below say otherwise.")] = None,
               window: WindowOpt = None, size: Annotated[int, typer.Option("--size", min=1)] = 10,
               store: StoreOpt = None,
               param: Annotated[Optional[List[str]], typer.Option("--param", help="Extra template parameter NAME=VALUE (repeatable).")] = None,
               fields: FieldsOpt = None, first_stage: TemplateOpt = None,
               statistics: ServedStatsOpt = None,
               max_terms: MaxTermsOpt = None,
               query_weight: QueryWeightOpt = None, rescore_weight: RescoreWeightOpt = None,
               interleave: Annotated[Optional[str], typer.Option("--interleave", help="A,B: the team-draft interleaving of two stored models' results (first-stage: the first stage alone); each hit's team shown.")] = None,
               ubi: Annotated[bool, typer.Option("--ubi", help="With --interleave: write the search's ubi_queries record with its teams, for `ltr evaluate interleaving` to credit the clicks your application logs under the printed query id.")] = False,
               experiment: Annotated[Optional[str], typer.Option("--experiment", help="With --interleave: the experiment's name (default A-vs-B).")] = None,
               queries_index: Annotated[str, typer.Option("--queries-index", help="With --ubi: the UBI queries index.")] = "ubi_queries",
               show_request: Annotated[bool, typer.Option("--show-request", help="Print the search request (first stage and rescore) instead of running it.")] = False,
               target: Annotated[UploadTarget, typer.Option("--target", help="With --show-request: the rescore of the LTR plugin (sltr) or of Elasticsearch's native learning_to_rank (--model: the trained model's id or alias).")] = UploadTarget.plugin):
    """The first stage, then (with --model) the sltr rescore of its top WINDOW; a table of
    the hits. When the rescore fails, the first stage's hits, with a warning."""
    from ..serving.serving import Serving
    params = _params(text, param)
    stage = _given_first_stage(fields, first_stage, statistics)
    if show_request:
        return _show_request(ctx, stage, params, model, window, size, store, target,
                             _weights(query_weight, rescore_weight), max_terms)
    conn = _conn(ctx)
    serving = Serving(index, stage, window, store, max_terms, model,
                      _weights(query_weight, rescore_weight))
    serving = serving.served(conn) if model else serving      # the model's contract, settled
    serving.stage.check(conn, index)
    if interleave:
        return _interleaved(conn, serving, params, interleave, size, ubi, experiment, queries_index)
    if ubi or experiment:
        raise UserError("--ubi and --experiment go with --interleave A,B")
    hits = serving.search(conn, params, size)
    table = Table("rank", "doc id", "score", "title")
    for h in hits:
        table.add_row(str(h["rank"]), h["id"], f"{h['score']:.4f}", h["title"][:70])
    out.print(table)


def _show_request(ctx, stage: FirstStage | None, params: dict, model, window, size: int, store,
                  target, weights, max_terms) -> None:
    """``ltr search --show-request``: the body a search sends, as JSON on stdout: the first
    stage, and with ``--model`` the plugin's ``sltr`` rescore -- the stored model's serving
    contract read from the cluster, the options overriding it -- or Elasticsearch's native
    ``learning_to_rank`` rescorer over its top ``window`` (parameters the toolkit derives,
    such as ``query_vector``, are the caller's to add: see stores/params.py)."""
    from ..query.firststage import FirstStage
    from ..data.querytext import fit_params
    from ..models.native import rescorer
    from ..query.prepare import contracted
    from ..query.requests import Rescore, search_body
    from ..stores.contract import DEFAULT_WINDOW
    rescore = None
    if model and target is UploadTarget.plugin:
        rescore, stage, max_terms = contracted(_conn(ctx), Rescore(model, window, store, weights),
                                               stage, max_terms)
    stage = stage or FirstStage.from_fields()
    body = search_body(stage, fit_params(params, max_terms), size, rescore)
    if model and target is UploadTarget.elasticsearch:
        body["rescore"] = rescorer(model, params, window or DEFAULT_WINDOW)
    print(json.dumps(body, indent=2))


def _interleaved(conn, serving: Serving, params: dict, pair: str, size: int, ubi: bool,
                 experiment: str | None, queries_index: str) -> None:
    """``ltr search --interleave A,B``: the interleaved hits, and with ``--ubi`` the
    search's UBI record (the teams) written."""
    from ..clicks import interleaving, ubi as ubi_index
    from ..serving.serving import FIRST_STAGE_NAME
    names = [n.strip() for n in pair.split(",")]
    if len(names) != 2 or not all(names) or names[0] == names[1] or serving.model:
        raise UserError(f"--interleave {pair!r}: expected two different rankers A,B (stored "
                        f"models, or {FIRST_STAGE_NAME}), and no --model")
    hits = serving.interleave(conn, params, names[0], names[1], size)
    table = Table("rank", "team", "doc id", "score", "title")
    for h in hits:
        table.add_row(str(h["rank"]), h["ranker"], h["id"], f"{h['score']:.4f}", h["title"][:60])
    out.print(table)
    if ubi:
        rec = interleaving.record(params["keywords"], [h["id"] for h in hits],
                                  "".join(h["team"] for h in hits), names[0], names[1], experiment)
        ubi_index.create_indices(conn, queries=queries_index)
        ubi_index.write_documents(conn, [(ubi_index.QUERIES, rec)], queries=queries_index)
        out.print(f"query_id {rec['query_id']}: log your clicks under it in ubi_events")


# --------------------------------------------------------------------------- explanations

def _params(text: str, param: list[str] | None) -> dict:
    params = {"keywords": text}
    for p in param or []:
        name, eq, value = p.partition("=")
        if not eq or not name:
            raise UserError(f"--param {p!r}: expected NAME=VALUE")
        params[name] = value
    return params


@app.command("explain")
def explain_cmd(ctx: typer.Context, text: str,
                model: Annotated[str, typer.Option("--model", help="The stored model to explain.")],
                index: Annotated[str, typer.Option("--index")] = "cranfield",
                judgments: Annotated[Optional[Path], typer.Option("--judgments", help="Judgments (a query with this text gets its grades shown).")] = None,
                window: WindowOpt = None,
                size: Annotated[int, typer.Option("--size", min=1)] = 10,
                store: StoreOpt = None,
                param: Annotated[Optional[List[str]], typer.Option("--param", help="Extra template parameter NAME=VALUE (repeatable).")] = None,
                fields: FieldsOpt = None, first_stage: TemplateOpt = None,
                statistics: ServedStatsOpt = None, max_terms: MaxTermsOpt = None,
                query_weight: QueryWeightOpt = None, rescore_weight: RescoreWeightOpt = None,
                as_json: Annotated[bool, typer.Option("--json", help="Print the explanation as JSON.")] = False):
    """The reranked top SIZE of a live query, served as the model's serving contract says:
    each document's rank under the first stage and the model, its grade, its logged
    feature values, and per-feature contributions that add up (with the stated baseline)
    to the score the plugin served (a blend's: first stage + beta x model)."""
    from ..serving.serving import Serving
    from ..data.judgments import load_judgments
    from ..serving.explain import explain_query
    params = _params(text, param)
    grades = None
    if judgments is not None:
        jl = load_judgments(judgments)
        qid = next((q for q, t in jl.queries.items() if t == text), None)
        grades = {d: g for (q, d), g in jl.grades.items() if q == qid} if qid else None
    conn = _ltr_conn(ctx)
    stage = _given_first_stage(fields, first_stage, statistics)
    serving = Serving(index, stage, window, store, max_terms, model,
                      _weights(query_weight, rescore_weight)).served(conn)
    serving.first_stage.check(conn, index)
    rep = explain_query(conn, serving, params, size, grades)
    if as_json:
        out.print_json(json.dumps(rep))
        return
    _explain_table(rep, judged=grades is not None)


def _explain_table(rep: dict, judged: bool) -> None:
    table = Table("rank", "first stage", "doc id", "grade", "served", "baseline + sum",
                  "largest contributions")
    for d in rep["documents"]:
        top = sorted(d["contributions"].items(), key=lambda kv: -abs(kv[1]))[:3]
        grade = d["grade"] if d["grade"] is not None else ("-" if judged else "")
        table.add_row(str(d["rank"]), str(d["first_stage_rank"]), d["id"], str(grade),
                      f"{d['served_score']:.6g}", f"{d['contributions_sum']:.6g}",
                      ", ".join(f"{n} {c:+.3g}" for n, c in top))
    out.print(table)
    q, beta = rep["rescore"]["query_weight"], rep["rescore"]["rescore_query_weight"]
    how = f"{q:g} x first stage + {beta:.6g} x {rep['model']}" if q else (
        rep["model"] if beta == 1 else f"{beta:.6g} x {rep['model']}")
    out.print(f"baseline: {rep['baseline']['document']}, scored {rep['baseline']['score']:.6g} "
              f"by {how} ({rep['model_type']})")


@model_app.command("explain")
def model_explain(ctx: typer.Context, model: str,
                  data: Annotated[Path, typer.Option("--data", help="Logged feature rows (with their sidecar).")],
                  store: StoreOpt = None,
                  rows: Annotated[int, typer.Option("--rows", min=1, help="Rows explained (a random sample of the file when it has more).")] = 5000,
                  as_json: Annotated[Optional[Path], typer.Option("--json", help="Write the summary here.")] = None):
    """The model's global picture: per feature, the mean absolute contribution to its
    scores over logged rows (baseline: a document that matches no feature) and their
    spread. MODEL: a stored model's name, or a model artifact file (no cluster needed)."""
    import numpy as np

    from ..data.svmlight import load_logged
    from ..io.atomic import write_json
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
    table = Table("feature", "mean |contribution|", "sd", "mean")
    for r in rep["features"]:
        table.add_row(r["feature"], f"{r['mean_abs']:.4g}", f"{r['sd']:.4g}", f"{r['mean']:+.4g}")
    out.print(table)
    out.print(f"{len(X)} rows of {data}; baseline {BASELINE}, scored {base:.6g}")
    if as_json:
        write_json(as_json, rep)


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
