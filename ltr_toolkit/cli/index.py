"""``ltr index``: documents into an index (the bundled Cranfield collection, or your
own JSONL), with their vectors and neighbours, or those added to an existing index."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from ..errors import UserError
from .common import _conn, _partial, _steps, err, index_app, out


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
DaskOpt = Annotated[Optional[str], typer.Option(
    "--dask", help="Encode the vectors on Dask: a scheduler address (tcp://host:8786) or local:N "
    "(N local worker processes; 'local': 2), each worker loading the encoder once; the same "
    "vectors as one process. The neighbours and the load stay on the search cluster: they run "
    "while the workers encode when the workers leave the node cores (another machine, or fewer "
    "worker threads than cores here), the load streaming behind the vectors.")]
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
    with _steps() as progress:
        res = index_documents(_conn(ctx), index, cranfield.documents(), recreate=recreate,
                              shards=shards, replicas=replicas, expansion=_expansion(neighbours),
                              vector_fields=_vector_fields(vectors), progress=progress)
    _indexed(res, index, "the bundled collection")


@index_app.command("jsonl")
def index_jsonl(ctx: typer.Context, path: Annotated[Path, typer.Argument(help="One JSON object per line: an id and its fields (text, numbers, booleans, dates, arrays, objects, nulls).")],
                index: Annotated[str, typer.Option("--index", help="The index created.")],
                recreate: Annotated[bool, typer.Option("--recreate", help="Delete INDEX first when it exists.")] = False,
                shards: ShardsOpt = 1, replicas: ReplicasOpt = 0, neighbours: NeighboursOpt = 3,
                vectors: VectorsOpt = MAIN, dask: DaskOpt = None):
    """Load your own documents into INDEX, each field typed by its values: the main text
    fields (in half the documents or more) analysed for BM25 with FIELD.lmd / FIELD.dfr
    multi-fields and ltr_toolkit__FIELD_len counts, other text with a keyword sub-field, numbers,
    dates, booleans and objects as they are; the neighbours field and the documents'
    vectors, both over the main text fields unless said otherwise (--vector-fields none
    skips the encoding, the slowest step; --dask spreads it over a Dask cluster). Each step
    reports done/total, rate and ETA on stderr. A run stopped part-way resumes: the
    vectors are kept as they are encoded, and an index whose load did not finish says so
    (load it again with --recreate). Exit 3 when the engine refused some documents (the
    first few named, with the field, the value and why; the others are indexed)."""
    from ..indexing.documents import index_documents, pick_analyzer, read_jsonl_documents
    coll = read_jsonl_documents(path)
    conn = _conn(ctx)
    analyzer = pick_analyzer(conn)
    t0 = time.monotonic()
    encoded = coll.text_fields if vectors == MAIN else _vector_fields(vectors)
    with _encoding(dask if encoded else None, conn.display_url) as (encode_batches, beside), \
            _steps() as progress:
        res = index_documents(conn, index, coll.docs, analyzer, recreate=recreate,
                              fields=coll.text_fields, meta=f"jsonl:{path.name}", shards=shards,
                              replicas=replicas, expansion=_expansion(neighbours, coll.text_fields),
                              vector_fields=encoded, typed=coll.properties(analyzer), progress=progress,
                              encode_batches=encode_batches, beside_node=beside,
                              log=lambda m: err.print(f"[{time.monotonic() - t0:6.1f}s] {m}"))
    _field_report(coll.report())
    _indexed(res, f"{index} (main text fields {', '.join(coll.text_fields) or 'none'})", str(path))


@contextlib.contextmanager
def _encoding(address: Optional[str], node_url: str):
    """(where the vectors are encoded, whether beside the node's work): here (None), or
    on the Dask cluster at ``address`` (``local:N``: a LocalCluster, stopped at the end),
    beside the work of the node at ``node_url`` when they do not share its cores."""
    if address is None:
        yield None, False
        return
    from ..distributed import connect
    from ..distributed.encoding import batches_on, leaves_node_cores
    with connect(address) as client:
        beside = leaves_node_cores(client, node_url)
        err.print(f"Dask: the vectors are encoded by {len(client.nthreads())} workers at "
                  f"{client.scheduler.address}, " + ("while the node finds the neighbours" if beside
                  else "before the node's work (they share its machine's cores)"))
        yield batches_on(client), beside


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
    with _steps() as progress:
        res = add_vectors(conn, index, names, progress=progress)
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
    with _steps() as progress:
        res = expand(_conn(ctx), index, spec, progress=progress)
    out.print(f"wrote the text of {k} neighbours into {res['field']} for {res['written']} of "
              f"{res['documents']} documents of {index}"
              + (f"; {res['errors']} failed" if res["errors"] else ""))
    if res["in_source"]:
        out.print(f"note: {index}'s _source keeps {res['field']}, which slows every search's fetch "
                  f"phase; an index created with _source.excludes [{res['field']}] does not")
    _partial("document", [], count=res["errors"], fix="run the command again")
