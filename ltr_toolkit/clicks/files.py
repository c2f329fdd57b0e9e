"""Reading UBI files (NDJSON or bulk, see :mod:`.events`); big ones fast: blocks of lines parsed by pyarrow's JSON reader (C++,
only the fields the click models use, by an explicit schema; the rest of each document is
skipped), then the columns built with NumPy and the strings interned once per distinct
value -- no Python work per event.

Why pyarrow: its JSON reader is the well-kept columnar parser for line-delimited JSON;
a typed per-document decoder (msgspec) decodes as fast, but building the columns from
its records costs Python work per event (about 216,000 events/s on this machine in all,
against 210,000 for ``json.loads`` per line). pyarrow is optional (``pip install -e
".[events]"``): without it files are read line by line.

A block that pyarrow cannot read as expected (a line that is not JSON, a field of
another type, a blank line) is read again line by line by :class:`.events.EventReader`,
which counts each problem with its ``file:line``: the columns are the same either way
(``tests/test_click_choice.py``). Memory: one block (16 MB of text and its columns) at a
time, plus the columns.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from ..errors import InputError
from .events import CLICK_ACTIONS, IMPRESSION_ACTIONS, EventLog, EventReader, interleaving_attrs

BLOCK_BYTES = 16 << 20


def available() -> bool:
    """Whether the optional pyarrow is installed."""
    return importlib.util.find_spec("pyarrow") is not None


def _schema():
    import pyarrow as pa
    obj = pa.struct([("object_id", pa.string())])
    pos = pa.struct([("ordinal", pa.int64())])
    return pa.schema([("action_name", pa.string()), ("query_id", pa.string()),
                      ("user_query", pa.string()),
                      ("event_attributes", pa.struct([("object", obj), ("position", pos)])),
                      ("query_response_hit_ids", pa.list_(pa.string())),
                      ("query_attributes", pa.struct([("interleaving", pa.struct(
                          [(k, pa.string()) for k in ("experiment", "a", "b", "teams")]))])),
                      ("index", pa.struct([("_index", pa.string())])),
                      ("create", pa.struct([("_index", pa.string())]))])


def read_lines_arrow(reader: EventReader, fh, source: str) -> None:
    """All of a binary file's lines into ``reader`` (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.json as pj
    options = pj.ParseOptions(explicit_schema=_schema(), unexpected_field_behavior="ignore")
    first = 1
    while True:
        block = fh.read(BLOCK_BYTES)
        if not block:
            return
        if not block.endswith(b"\n"):
            block += fh.readline()
        n = block.count(b"\n") + (not block.endswith(b"\n"))
        try:       # blank lines are skipped by pyarrow: the row count tells
            table = pj.read_json(pa.BufferReader(block), parse_options=options,
                                 read_options=pj.ReadOptions(block_size=1 << 20))
        except (pa.ArrowInvalid, UnicodeDecodeError):
            table = None
        if table is None or table.num_rows != n:
            lines = block.split(b"\n")[:n]
            reader.read_lines((ln.decode("utf-8") for ln in lines), source, first)
        else:
            _add_table(reader, _columns(table), source, first)
            reader.log.lines += n
        first += n


def _columns(table) -> dict:
    """The fields the models use, as Arrow arrays (positions as NumPy)."""
    import pyarrow.compute as pc
    ea = table.column("event_attributes").combine_chunks()
    pos = pc.struct_field(pc.struct_field(ea, [1]), [0])
    col = {"action": table.column("action_name"), "qid": table.column("query_id"),
           "text": table.column("user_query"), "hits": table.column("query_response_hit_ids"),
           "inter": pc.struct_field(table.column("query_attributes").combine_chunks(), [0]),
           "obj": pc.struct_field(pc.struct_field(ea, [0]), [0]),
           "index": pc.coalesce(pc.struct_field(table.column("index"), [0]),
                                pc.struct_field(table.column("create"), [0]))}
    col = {k: (v.combine_chunks() if hasattr(v, "combine_chunks") else v) for k, v in col.items()}
    col.update(n=table.num_rows, attrs=_np(ea.is_valid()), pos=_np(pc.fill_null(pos, -1)),
               pos_valid=_np(pos.is_valid()))
    return col


def _np(a) -> np.ndarray:
    return a.to_numpy(zero_copy_only=False)


def _nonempty(a) -> np.ndarray:
    import pyarrow.compute as pc
    return _np(pc.fill_null(pc.not_equal(a, ""), False))


def _add_table(reader: EventReader, c: dict, source: str, first: int) -> None:
    """Classify the rows as the line reader does (a bulk action line names the next
    row's index), then add the events and the query records."""
    n = c["n"]
    has = {k: _np(c[k].is_valid()) for k in ("action", "qid", "text", "hits", "index")}
    action = has["index"] & ~(has["action"] | has["qid"] | has["text"] | has["hits"] | c["attrs"])
    tq, te = np.zeros(n, bool), np.zeros(n, bool)
    if action.any():
        after = np.flatnonzero(action[:-1]) + 1
        names = c["index"].take(after - 1).to_pylist()
        tq[after] = ["quer" in t for t in names]
        te[after] = ["event" in t for t in names]
    query = ~action & (tq | (~te & ~has["action"] & (has["text"] | has["hits"])))
    event = ~action & ~query & (te | has["action"])
    for i in np.flatnonzero(~action & ~query & ~event):
        reader.log.problems.add("not_an_event", 1, f"{source}:{first + i}")
    _add_events(reader, c, np.flatnonzero(event), source, first)
    _add_queries(reader, c, np.flatnonzero(query), source, first)


def _codes(interner, arr, rows: np.ndarray | None = None) -> np.ndarray:
    """Interned codes of ``arr``'s strings (at ``rows``; -1 for null): one lookup per
    distinct string, in order of first appearance."""
    import pyarrow as pa
    import pyarrow.compute as pc
    if rows is not None:
        arr = arr.take(pa.array(rows, pa.int64()))
    enc = pc.dictionary_encode(arr)
    mapping = np.append(interner.codes_of(enc.dictionary.to_pylist()), -1)
    return mapping[_np(enc.indices.fill_null(len(mapping) - 1))]


def _add_events(reader: EventReader, c: dict, rows: np.ndarray, source: str, first: int) -> None:
    import pyarrow.compute as pc
    p, log = reader.log.problems, reader.log
    enc = pc.dictionary_encode(c["action"].take(rows))      # a few distinct action names
    names = enc.dictionary.to_pylist() + [None]
    kind_of = np.array([reader.kind.get(a.lower(), -1) if a is not None else -1 for a in names], np.int8)
    which = _np(enc.indices.fill_null(len(names) - 1)).astype(np.int64)
    kinds = kind_of[which]
    has_q, has_o = _nonempty(c["qid"])[rows], _nonempty(c["obj"])[rows]
    unknown = kinds < 0
    noq, noo = ~unknown & ~has_q, ~unknown & has_q & ~has_o
    for i in np.flatnonzero(unknown):
        p.action(str(names[which[i]]), f"{source}:{first + rows[i]}")
    for kind, mask in (("no_query_id", noq), ("no_object_id", noo)):
        if mask.any():
            p.add(kind, int(mask.sum()), f"{source}:{first + rows[np.flatnonzero(mask)[0]]}")
    ok = ~(unknown | noq | noo)
    keep = rows[ok]
    pos, valid = c["pos"][keep], c["pos_valid"][keep]
    bad = valid & (pos < 0)
    if bad.any():
        p.add("bad_position", int(bad.sum()), f"{source}:{first + keep[np.flatnonzero(bad)[0]]}")
    text = pc.utf8_trim_whitespace(c["text"])
    text = pc.if_else(pc.equal(text, ""), pa_null(text), text)
    cols = reader.cols                     # array.frombytes: a copy, no loop
    cols["search"].frombytes(_codes(log.query_ids, c["qid"], keep).astype(np.int32).tobytes())
    cols["doc"].frombytes(_codes(log.docs, c["obj"], keep).astype(np.int32).tobytes())
    cols["pos"].frombytes(np.where(valid & ~bad, pos, -1).astype(np.int32).tobytes())
    cols["text"].frombytes(_codes(log.texts, text, keep).astype(np.int32).tobytes())
    reader.actions.frombytes(kinds[ok].astype(np.int8).tobytes())


def pa_null(like):
    import pyarrow as pa
    return pa.scalar(None, like.type)


def _add_queries(reader: EventReader, c: dict, rows: np.ndarray, source: str, first: int) -> None:
    """Query records: as :meth:`.events.EventReader.query`, their hit lists interned at once."""
    import pyarrow as pa
    log = reader.log
    good = _nonempty(c["qid"])[rows]
    for i in rows[~good]:
        log.problems.add("no_query_id", 1, f"{source}:{first + i}")
    rows = rows[good]
    if not len(rows):
        return
    import pyarrow.compute as pc
    take = pa.array(rows, pa.int64())
    qcodes = _codes(log.query_ids, c["qid"].take(take))
    text = pc.utf8_trim_whitespace(c["text"].take(take))
    tcodes = _codes(log.texts, pc.if_else(pc.equal(text, ""), pa_null(text), text))
    named = tcodes >= 0
    log.record_text.update(zip(qcodes[named].tolist(), tcodes[named].tolist()))
    hits = c["hits"].take(take)
    offsets = _np(hits.offsets)
    flat = _codes(log.docs, hits.flatten()).tolist() if len(hits.flatten()) else []
    some = np.flatnonzero(_np(hits.is_valid()) & (offsets[1:] > offsets[:-1]))
    q = qcodes.tolist()
    log.record_hits.update((q[j], flat[offsets[j]:offsets[j + 1]]) for j in some.tolist())
    _add_interleaving(log, c["inter"].take(take), hits, q)


def _add_interleaving(log: EventLog, inter, hits, qcodes: list[int]) -> None:
    """The interleaved searches' attributes (records, not events: a few per search)."""
    for j in np.flatnonzero(_np(inter.is_valid())).tolist():
        got = interleaving_attrs(inter[j].as_py(), hits[j].as_py())
        if got:
            log.record_interleaving[qcodes[j]] = got


def read_file(path, impression_actions=IMPRESSION_ACTIONS, click_actions=CLICK_ACTIONS) -> EventLog:
    """Read a UBI file (NDJSON or bulk; with pyarrow, block by block). A file that cannot
    be read, or holds no usable event at all, is a one-line error naming it; anything
    else bad is counted."""
    path = Path(path)
    reader = EventReader(impression_actions, click_actions)
    try:
        if available():
            with open(path, "rb") as fh:
                read_lines_arrow(reader, fh, str(path))
        else:
            with open(path, encoding="utf-8") as fh:
                reader.read_lines(fh, str(path))
    except OSError as exc:
        raise InputError(path, None, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(path, reader.log.lines + 1, "not UTF-8 text") from None
    log = reader.finish()
    if not len(log):
        seen = "; ".join(log.problems.lines()) or "the file is empty"
        raise InputError(path, None, f"no impression or click events found ({seen})")
    return log
