"""``ltr query``: live queries -- ``search`` (the first stage, then a stored model's
rescore, or two rankers interleaved) and ``explain`` (why the model ranked them so)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.table import Table

from ..errors import UserError
from .common import (FieldsOpt, IndexOpt, JsonOpt, MaxTermsOpt, ParamOpt, QueriesIndexOpt,
                     QueryWeightOpt, RescoreWeightOpt, ServedStatsOpt, SizeOpt, StoreOpt,
                     TemplateOpt, WindowOpt, _conn, _given_first_stage, _ltr_conn, _print_json,
                     Target, _weights, alias, app, out, query_app)
if TYPE_CHECKING:
    from ..query.firststage import FirstStage
    from ..serving.serving import Serving


@query_app.command("search")
def search_cmd(ctx: typer.Context,
               text: Annotated[str, typer.Argument(help="The query's text (the templates' {{keywords}}).")],
               index: IndexOpt,
               model: Annotated[Optional[str], typer.Option("--model", help="Rerank with this stored model, served as its serving contract says unless the options below say otherwise.")] = None,
               window: WindowOpt = None, size: SizeOpt = 10,
               store: StoreOpt = None,
               param: ParamOpt = None,
               fields: FieldsOpt = None, first_stage: TemplateOpt = None,
               statistics: ServedStatsOpt = None,
               max_terms: MaxTermsOpt = None,
               query_weight: QueryWeightOpt = None, rescore_weight: RescoreWeightOpt = None,
               interleave: Annotated[Optional[str], typer.Option("--interleave", help="A,B: the team-draft interleaving of two stored models' results (first-stage: the first stage alone); each hit's team shown.")] = None,
               ubi: Annotated[bool, typer.Option("--ubi", help="With --interleave: write the search's ubi_queries record with its teams, for `ltr evaluate interleaving` to credit the clicks your application logs under the printed query id.")] = False,
               experiment: Annotated[Optional[str], typer.Option("--experiment", help="With --interleave: the experiment's name (default A-vs-B).")] = None,
               queries_index: QueriesIndexOpt = "ubi_queries",
               show_request: Annotated[bool, typer.Option("--show-request", help="Print the search request (first stage and rescore) instead of running it.")] = False,
               target: Annotated[Target, typer.Option("--target", help="Where the model is served: the LTR plugin (sltr rescore), or Elasticsearch's native learning_to_rank rescorer (--model: the trained model's id or alias; with --show-request only).")] = Target.plugin,
               as_json: JsonOpt = False):
    """The first stage, then (with --model) the sltr rescore of its top WINDOW; a table of
    the hits. When the rescore fails, the first stage's hits, with a warning."""
    from ..serving.serving import Serving
    params = _params(text, param)
    stage = _given_first_stage(fields, first_stage, statistics, model)
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
    if target is Target.elasticsearch:
        raise UserError("--target elasticsearch goes with --show-request (the toolkit serves the plugin's models)")
    hits = serving.search(conn, params, size)
    if as_json:
        return _print_json(hits)
    table = Table("rank", "doc id", "score", "title")
    for h in hits:
        table.add_row(str(h["rank"]), h["id"], f"{h['score']:.4f}", h["title"][:70])
    out.print(table)


def _show_request(ctx, stage: FirstStage | None, params: dict, model, window, size: int, store,
                  target, weights, max_terms) -> None:
    """``ltr query search --show-request``: the body a search sends, as JSON on stdout: the first
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
    if model and target is Target.plugin:
        rescore, stage, max_terms = contracted(_conn(ctx), Rescore(model, window, store, weights),
                                               stage, max_terms)
    stage = stage or FirstStage.from_fields()
    body = search_body(stage, fit_params(params, max_terms), size, rescore)
    if model and target is Target.elasticsearch:
        body["rescore"] = rescorer(model, params, window or DEFAULT_WINDOW)
    print(json.dumps(body, indent=2))


def _interleaved(conn, serving: Serving, params: dict, pair: str, size: int, ubi: bool,
                 experiment: str | None, queries_index: str) -> None:
    """``ltr query search --interleave A,B``: the interleaved hits, and with ``--ubi`` the
    search's UBI record (the teams) written."""
    from ..clicks import interleaving
    from ..clicks.events import ubi as ubi_index
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


@query_app.command("explain")
def explain_cmd(ctx: typer.Context,
                text: Annotated[str, typer.Argument(help="The query's text (the templates' {{keywords}}).")],
                model: Annotated[str, typer.Option("--model", help="The stored model whose reranking is explained.")],
                index: IndexOpt,
                judgments: Annotated[Optional[Path], typer.Option("--judgments", help="Judgments (a query with this text gets its grades shown).")] = None,
                window: WindowOpt = None,
                size: SizeOpt = 10,
                store: StoreOpt = None,
                param: ParamOpt = None,
                fields: FieldsOpt = None, first_stage: TemplateOpt = None,
                statistics: ServedStatsOpt = None, max_terms: MaxTermsOpt = None,
                query_weight: QueryWeightOpt = None, rescore_weight: RescoreWeightOpt = None,
                as_json: JsonOpt = False):
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
    stage = _given_first_stage(fields, first_stage, statistics, model)
    serving = Serving(index, stage, window, store, max_terms, model,
                      _weights(query_weight, rescore_weight)).served(conn)
    serving.first_stage.check(conn, index)
    rep = explain_query(conn, serving, params, size, grades)
    if as_json:
        return _print_json(rep)
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


alias(app, "search", "query search", search_cmd)
alias(app, "explain", "query explain", explain_cmd)
