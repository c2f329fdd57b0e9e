"""The cluster's search pages of UBI documents (``hits.hits[]._id/_source`` of one index)
parsed by pyarrow with the file reader's fields (:func:`.columns.schema`) and added as
its blocks are (:mod:`.columns`); :mod:`.ubi` fetches the pages."""

from __future__ import annotations

import numpy as np

from .columns import add_rows, read_columns, schema
from .eventlog import EventReader


def page_schemas(events: bool) -> list:
    """pyarrow parse options for a search page (``hits.hits[]._id/_source``) of one
    index: the events' sources by the slim schema (no ``query_attributes``), then the
    full one; the query records' by the full one."""
    import pyarrow as pa
    import pyarrow.json as pj
    out = []
    for slim in ((True, False) if events else (False,)):
        hit = pa.struct([("_id", pa.string()), ("_source", pa.struct(list(schema(slim))))])
        page = pa.schema([("hits", pa.struct([("hits", pa.list_(hit))]))])
        out.append(pj.ParseOptions(explicit_schema=page, unexpected_field_behavior="ignore"))
    return out


def parse_page(text: bytes, options):
    """(table of the hits' sources, their ids) of a search page by ``options``
    (:func:`page_schemas`); None when pyarrow cannot read it so."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj
    read = pj.ReadOptions(block_size=max(len(text) + 1, 1 << 20), use_threads=False)
    try:
        got = pj.read_json(pa.BufferReader(text), parse_options=options, read_options=read)
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None
    hits = pc.struct_field(got.column("hits").combine_chunks(), [0]).flatten()
    src = hits.field("_source")
    table = pa.table({f.name: pc.struct_field(src, [i]) for i, f in enumerate(src.type)})
    return table, hits.field("_id")


def add_table(reader: EventReader, table, kind: int, where) -> bool:
    """Documents of one index parsed by pyarrow with :func:`.columns.schema`'s fields (kind 1:
    query records, 2: events, as a bulk action naming the index) into ``reader``, as the
    line reader adds them; ``where(row)`` names a row in a problem. False (nothing added)
    when the columns cannot be read so (a null hit id): add those documents one by one."""
    c = read_columns(table)
    if c is None:
        return False
    add_rows(reader, c, np.full(c["n"], kind, np.int8), None, where)
    return True
