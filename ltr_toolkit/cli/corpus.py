"""``ltr index`` and ``ltr judgments``: documents into an index (with vectors and
neighbours), judgment lists from files, Cranfield or clicks."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from ..errors import UserError
from .common import (ClickModel, ClicksAsOpt, DaysOpt, EventsIndexOpt, Format,
                     Grading, InputFormatOpt, Positions, QueriesFileOpt, QueriesIndexOpt,
                     SinceOpt, Split, UntilOpt, _conn, _event_log, _partial, _progress, _writable, err,
                     index_app, judgments_app, out)


ShardsOpt = Annotated[int, typer.Option("--shards", min=1, help="Primary shards of the new index.")]
ReplicasOpt = Annotated[int, typer.Option("--replicas", min=0, help="Replicas of each shard.")]
NeighboursOpt = Annotated[int, typer.Option(
    "--neighbours", min=0, help="Each document's K nearest neighbours (more_like_this) whose text "
    "is indexed in a 'neighbours' field: index-time feedback for the neighbours_bm25 feature. 0: none.")]


#: ``ltr index jsonl --vector-fields``'s default: the collection's main text fields
MAIN = "main"
VectorsOpt = Annotated[str, typer.Option(
    "--vector-fields", help="Comma-separated fields whose text each document's vector encodes "
    "(those the collection has; all its fields when none; 'main': a collection's main text "
    "fields), written to a knn_vector field 'vector' for the semantic features (needs the "
    "k-NN plugin); 'none': no vectors.")]
NeighbourFieldsOpt = Annotated[str, typer.Option(
    "--neighbour-fields", help="Comma-separated text fields more_like_this compares to find a "
    "document's neighbours (best with term vectors).")]


def _vector_fields(spec: str):
    if spec.strip().lower() in ("", "none", "0"):
        return None
    return tuple(f.strip() for f in spec.split(",") if f.strip())


def _expansion(k: int, fields: tuple[str, ...] | None = None):
    """``k`` neighbours over ``fields`` (default: title and abstract, else every text field)."""
    from ..indexing.neighbours import Expansion
    if not k:
        return None
    return Expansion(k=k, fields=fields) if fields else Expansion(k=k)


#: documents the engine refused that are named, with their field, value and why
REJECTED_SHOWN = 5


def _indexed(res: dict, what: str, source: str) -> None:
    """What was indexed; the documents the engine refused named (the first few) and
    counted, exit 3 (the others are indexed)."""
    from ..indexing.rejections import describe
    note = "" if res["analyzer"] == "english" else " (the node has no english analyzer)"
    out.print(f"indexed {res['count']} documents into {what} with the {res['analyzer']} analyzer"
              f"{note}" + (f"; {res['errors']} failed" if res["errors"] else ""))
    if res.get("vectors"):
        v = res["vectors"]
        out.print(f"vectors of {', '.join(v['text_fields'])} by {v['encoder']['name']} in field "
                  f"{v['field']} ({v['encoder']['dim']} dimensions)")
    elif res.get("no_vectors"):
        err.print(f"note: no vectors: {res['no_vectors']}")
    _partial("document", [(r["id"], describe(r)) for r in res["rejected"][:REJECTED_SHOWN]],
             count=res["errors"], fix=f"correct those values in {source} (or leave the field "
             "out), then index again with --recreate")


@index_app.command("cranfield")
def index_cranfield(ctx: typer.Context,
                    index: Annotated[str, typer.Option("--index", help="The index created (the demo's by default).")] = "cranfield",
                    recreate: Annotated[bool, typer.Option("--recreate", help="Delete INDEX first when it exists.")] = False,
                    shards: ShardsOpt = 1, replicas: ReplicasOpt = 0, neighbours: NeighboursOpt = 3,
                    vectors: VectorsOpt = "title,abstract"):
    """Load the bundled Cranfield collection (1,400 documents) into INDEX."""
    from ..datasets import cranfield
    from ..indexing.documents import index_documents
    _indexed(index_documents(_conn(ctx), index, cranfield.documents(), recreate=recreate,
                             shards=shards, replicas=replicas, expansion=_expansion(neighbours),
                             vector_fields=_vector_fields(vectors)),
             index, "the bundled collection")


@index_app.command("jsonl")
def index_jsonl(ctx: typer.Context, path: Annotated[Path, typer.Argument(help="One JSON object per line: an id and its fields (text, numbers, booleans, dates, arrays, objects, nulls).")],
                index: Annotated[str, typer.Option("--index", help="The index created.")],
                recreate: Annotated[bool, typer.Option("--recreate", help="Delete INDEX first when it exists.")] = False,
                shards: ShardsOpt = 1, replicas: ReplicasOpt = 0, neighbours: NeighboursOpt = 3,
                vectors: VectorsOpt = MAIN):
    """Load your own documents into INDEX, each field typed by its values: the main text
    fields (in half the documents or more) analysed for BM25 with FIELD.lmd / FIELD.dfr
    multi-fields and FIELD_len counts, other text with a keyword sub-field, numbers,
    dates, booleans and objects as they are; the neighbours field and the documents'
    vectors, both over the main text fields unless said otherwise (--vector-fields none
    skips the encoding, the slowest step). Exit 3 when the engine refused some documents
    (the first few named, with the field, the value and why; the others are indexed)."""
    from ..indexing.documents import index_documents, pick_analyzer, read_jsonl_documents
    coll = read_jsonl_documents(path)
    conn = _conn(ctx)
    analyzer = pick_analyzer(conn)
    t0 = time.monotonic()
    res = index_documents(conn, index, coll.docs, analyzer, recreate=recreate, fields=coll.text_fields,
                          meta=f"jsonl:{path.name}", shards=shards, replicas=replicas,
                          expansion=_expansion(neighbours, coll.text_fields),
                          vector_fields=coll.text_fields if vectors == MAIN else _vector_fields(vectors),
                          typed=coll.properties(analyzer),
                          log=lambda m: err.print(f"[{time.monotonic() - t0:6.1f}s] {m}"))
    _field_report(coll.report())
    _indexed(res, f"{index} (main text fields {', '.join(coll.text_fields) or 'none'})", str(path))


def _field_report(rows: list[dict]) -> None:
    """What was done with each field of a collection."""
    table = Table("field", "kind", "documents", "mapped as")
    for r in rows[:40]:
        table.add_row(r["field"], r["kind"], f"{r['documents']} ({r['share']:.0%})", r["mapped"])
    out.print(table)
    if len(rows) > 40:
        kinds = {}
        for r in rows[40:]:
            kinds[r["mapped"]] = kinds.get(r["mapped"], 0) + 1
        out.print(f"and {len(rows) - 40} more fields: " + ", ".join(f"{n} {k}" for k, n in kinds.items()))


@index_app.command("vectors")
def index_vectors_cmd(ctx: typer.Context,
                      index: Annotated[str, typer.Option("--index", help="Your index.")],
                      fields: VectorsOpt = "title,abstract",
                      field: Annotated[Optional[str], typer.Option("--vector-field", help="With --existing: the knn_vector field your own pipeline writes.")] = None,
                      existing: Annotated[bool, typer.Option("--existing", help="The vectors are already there (your ingest pipeline wrote them with --encoder's model): record the field and its model, compute nothing.")] = False):
    """Write each document's vector (FIELDS encoded) into the knn_vector field 'vector' of
    an existing INDEX, in batches; restartable (a second run writes only the documents
    still without one). Exit 3 when some documents failed (named)."""
    from ..indexing.vectors import add_vectors, register
    conn = _conn(ctx)
    names = _vector_fields(fields)
    if not names:
        raise UserError(f"--vector-fields {fields!r}: name the text fields each vector encodes")
    if existing:
        if not field:
            raise UserError("--existing needs --vector-field: the knn_vector field your pipeline writes")
        res = register(conn, index, field, text_fields=names if ctx.get_parameter_source("fields").name != "DEFAULT" else None)
        note = (f"; checked on a sample: median cosine {res['checked_cosine']:.4f}"
                if res.get("checked_cosine") is not None else "")
        out.print(f"recorded field {field} of {index} as vectors of {res['encoder']['name']}{note}")
        return
    with _progress("vectors") as update:
        res = add_vectors(conn, index, names, progress=lambda n: update(n))
    out.print(f"wrote vectors of {', '.join(res['fields'])} by {res['encoder']['name']} for "
              f"{res['written']} documents of {index}"
              + (f"; {res['no_text']} without text in those fields (no vector)" if res["no_text"] else ""))
    _partial("document", res["failed"], shown=REJECTED_SHOWN,
             fix="run the command again (it writes only the documents still without a vector)")


@index_app.command("neighbours")
def index_neighbours(ctx: typer.Context,
                     index: Annotated[str, typer.Option("--index", help="Your index.")],
                     fields: NeighbourFieldsOpt = "title,abstract",
                     k: Annotated[int, typer.Option("--neighbours", min=1, help="Neighbours per document.")] = 3):
    """Write each document's K nearest neighbours' text into the 'neighbours' field of an
    existing INDEX (index-time feedback for a neighbours_bm25 feature; run it again after
    changing documents)."""
    from ..indexing.neighbours import Expansion, expand
    spec = Expansion(fields=tuple(f.strip() for f in fields.split(",") if f.strip()), k=k)
    res = expand(_conn(ctx), index, spec)
    out.print(f"wrote the text of {k} neighbours into {res['field']} for {res['written']} of "
              f"{res['documents']} documents of {index}"
              + (f"; {res['errors']} failed" if res["errors"] else ""))
    if res["in_source"]:
        out.print(f"note: {index}'s _source keeps {res['field']}, which slows every search's fetch "
                  f"phase; an index created with _source.excludes [{res['field']}] does not")
    _partial("document", [], count=res["errors"], fix="run the command again")


@judgments_app.command("cranfield")
def judgments_cranfield(output: Annotated[Path, typer.Option("-o", "--output", help="The judgment list (RankLib format).")],
                        split: Annotated[Split, typer.Option("--split", help="The queries of the fixed seeded 60/20/20 split, or all.")] = Split.all):
    """Write the Cranfield judgments (fixed seeded 60/20/20 query split) in the toolkit's format."""
    from ..data.judgments import save_ranklib
    from ..datasets import cranfield
    split = split.value
    jl = cranfield.split_judgments(split)
    save_ranklib(jl, output)
    out.print(f"{len(jl)} judgments for {len(jl.queries)} queries ({split}) written to {output}")


@judgments_app.command("check")
def judgments_check(file: Annotated[Path, typer.Argument(help="The judgment list (RankLib, TREC qrels, CSV or JSONL).")],
                    input_format: InputFormatOpt = None, queries: QueriesFileOpt = None):
    """Validate a judgment file: counts, duplicates; exit 2 with file:line on errors."""
    from ..data.judgments import load_judgments
    jl = load_judgments(file, input_format.value if input_format else None, queries)
    for d in jl.duplicates:
        err.print(f"warning: {d}")
    out.print(f"{len(jl)} judgments, {len(jl.queries)} queries, {len(jl.duplicates)} duplicates")


@judgments_app.command("clicks")
def judgments_clicks(ctx: typer.Context,
                     output: Annotated[Path, typer.Option("-o", "--output", help="The judgment list, its format by its name: .qrels (TREC, queries in OUT.queries), .tsv, .csv, .jsonl or .ndjson, each gzip'd as .gz, else RankLib; OUT.counts.csv and OUT.json go beside it.")],
                     file: Annotated[Optional[Path], typer.Argument(help="UBI events: NDJSON or the bulk format (both indices in one file). Without it: the cluster's UBI indices.")] = None,
                     model: Annotated[ClickModel, typer.Option("--click-model", help="How clicks become grades: click-through rate, COEC, a cascade (sdbn), position-based (pbm) or user browsing (ubm) model, or auto (the least held-out perplexity).")] = ClickModel.pbm,
                     fmt: Annotated[Optional[Format], typer.Option("--output-format", help="The judgment list's format; guessed from the output's name when omitted.")] = None,
                     prior: Annotated[Optional[float], typer.Option("--prior", min=0, help="Pseudo-observations towards the average (default: 0 for coec, 1 otherwise).")] = None,
                     min_impressions: Annotated[int, typer.Option("--min-impressions", min=1, help="Pairs seen fewer times are left out.")] = 5,
                     grades: Annotated[Grading, typer.Option("--grades", help="levels (whole grades 0..--levels) or estimate (the model's number).")] = Grading.levels,
                     levels: Annotated[int, typer.Option("--levels", min=1, help="With --grades levels: the highest grade (grades 0..LEVELS).")] = 4,
                     positions: Annotated[Positions, typer.Option("--positions", help="Positions counted from (auto: 1 when no impression has position 0).")] = Positions.auto,
                     max_rank: Annotated[int, typer.Option("--max-rank", min=1, help="COEC: ranks with a rank CTR (the Workbench's maxRank).")] = 20,
                     days: DaysOpt = None, since: SinceOpt = None, until: UntilOpt = None,
                     queries_index: QueriesIndexOpt = "ubi_queries", events_index: EventsIndexOpt = "ubi_events",
                     clicks_as: ClicksAsOpt = "click"):
    """Judgments from User Behavior Insights events through a click model (ctr, coec as the
    Search Relevance Workbench computes it, sdbn, pbm, ubm); bad event data is counted and
    reported."""
    from ..clicks.judging.judge import ClickSettings, judge
    from ..clicks.judging.output import write_counts, write_judgments, write_report
    settings = ClickSettings(model=model.value, prior=prior, min_impressions=min_impressions,
                             mapping=grades.value, levels=levels, positions=positions.value, max_rank=max_rank)
    _writable(output)
    log, source = _event_log(ctx, file, clicks_as, since, until, days, queries_index, events_index)
    jl, rows, report = judge(log, settings, source)
    files = write_judgments(jl, output, fmt.value if fmt else None)
    files += [write_counts(rows, output), write_report(report, output)]
    for line in log.problems.lines():
        err.print(f"bad data: {line}")
    c = report["counts"]
    _model_choice(report["model_choice"])
    used = report["settings"]["model"]
    out.print(f"{c['events']} events, {c['searches']} searches, {c['clicks']} clicks (positions counted "
              f"from {report['positions_counted_from']}); {used}: {c['judged_pairs']} judgments for "
              f"{c['queries']} queries ({c['pairs_below_min_impressions']} pairs under {min_impressions} "
              f"impressions left out) written to {', '.join(str(f) for f in files)}")


def _model_choice(choice: dict) -> None:
    """The held-out scores of every click model (and what --model auto chose)."""
    if not choice.get("models"):
        err.print(f"note: no held-out model choice ({choice.get('why')})")
        return
    table = Table("click model", "held-out perplexity", "log-likelihood / row")
    for m, v in sorted(choice["models"].items(), key=lambda kv: kv[1]["perplexity"]):
        table.add_row(m + (" (chosen)" if m == choice.get("auto") else ""), f"{v['perplexity']:.4f}",
                      f"{v['log_likelihood']:.4f}")
    out.print(table)
    out.print(f"held out: {choice['held_out']} ({choice['held_out_searches']} searches, "
              f"{choice['held_out_rows']} rows); least perplexity: {choice['chosen']}")
