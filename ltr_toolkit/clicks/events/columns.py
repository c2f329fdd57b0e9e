"""UBI documents that pyarrow parsed, into an :class:`.eventlog.EventReader` as the line
reader adds them: the fields the click models use (:func:`schema`), read from the table
as Arrow arrays (:func:`read_columns`), then one pass of NumPy masks classifies the rows
(query record, event, neither), counts the problems with the place of the first, and
interns query ids, texts and documents in the order of the rows (the codes are the line
reader's): Arrow's ``dictionary_encode``, then one C-level dict lookup per distinct
string (:meth:`.eventlog.Interner.codes_of`), no Python loop. Both the file reader
(:mod:`.files`, a block of lines) and the cluster's pages (:mod:`.pages`, a search
page's hits) come through here.
"""

from __future__ import annotations

from itertools import compress

import numpy as np

from .eventlog import EventLog, EventReader, interleaving_attrs


def schema(slim: bool = False):
    """The fields read; ``slim``: ``query_attributes``, ``index`` and ``create`` typed null
    (a document that has one then fails to parse)."""
    import pyarrow as pa
    obj = pa.struct([("object_id", pa.string())])
    pos = pa.struct([("ordinal", pa.int64())])
    index = pa.null() if slim else pa.struct([("_index", pa.string())])
    return pa.schema([("action_name", pa.string()), ("query_id", pa.string()),
                      ("user_query", pa.string()),
                      ("event_attributes", pa.struct([("object", obj), ("position", pos)])),
                      ("query_response_hit_ids", pa.list_(pa.string())),
                      ("query_attributes", pa.null() if slim else pa.struct([("interleaving", pa.struct(
                          [(k, pa.string()) for k in ("experiment", "a", "b", "teams")]))])),
                      ("index", index), ("create", index)])


def read_columns(table) -> dict | None:
    """The fields the models use, as Arrow arrays (positions as NumPy); None when a hit
    list holds a null (the line reader's ``str(None)``)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    col = {k: table.column(name).combine_chunks() for k, name in
           (("action", "action_name"), ("qid", "query_id"), ("text", "user_query"),
            ("hits", "query_response_hit_ids"), ("ea", "event_attributes"), ("qa", "query_attributes"))}
    if col["hits"].flatten().null_count:
        return None
    ea = col.pop("ea")
    pos = pc.struct_field(ea, ["position", "ordinal"])
    index = as_numpy(table.column("index").is_valid()) | as_numpy(table.column("create").is_valid())
    qa = col.pop("qa")
    col.update(n=table.num_rows, inter=None if qa.type == pa.null() else pc.struct_field(qa, [0]),
               obj=pc.struct_field(ea, ["object", "object_id"]), index=index,
               pos=as_numpy(pc.fill_null(pos, -1)), pos_valid=as_numpy(pos.is_valid()))
    return col


def as_numpy(a) -> np.ndarray:
    return a.to_numpy(zero_copy_only=False)


def _nonempty(a) -> np.ndarray:
    import pyarrow.compute as pc
    return as_numpy(pc.fill_null(pc.not_equal(a, ""), False))


def _count(problems, kind: str, mask: np.ndarray, where) -> None:
    rows = np.flatnonzero(mask)
    if len(rows):
        problems.add(kind, len(rows), where(int(rows[0])))


def add_rows(reader: EventReader, c: dict, target: np.ndarray, skip, where) -> None:
    """Classify the rows as the line reader does (``target``: the kind of index a bulk
    action line names, 0 for none; ``skip``: the action lines), count the problems, add
    the events and the query records, interning their strings in the order of the rows."""
    ok, record, kinds, bad = _classify(reader, c, target, skip, where)
    _append(reader, c, ok, record, kinds, bad)


def _classify(reader: EventReader, c: dict, target: np.ndarray, skip, where):
    """(events kept, query records kept, each row's action kind, bad positions): masks
    over the rows, the problems counted."""
    import pyarrow.compute as pc
    p = reader.log.problems
    has_action = as_numpy(c["action"].is_valid())
    query = (target == 1) | ((target != 2) & ~has_action
                             & (as_numpy(c["text"].is_valid()) | as_numpy(c["hits"].is_valid())))
    event = ~query & ((target == 2) | has_action)
    if skip is not None:
        query, event = query & ~skip, event & ~skip
    _count(p, "not_an_event", ~(query | event | (False if skip is None else skip)), where)

    enc = pc.dictionary_encode(c["action"])                 # a few distinct action names
    names = enc.dictionary.to_pylist() + [None]
    kind_of = np.array([reader.kind.get(a.lower(), -1) if a is not None else -1 for a in names], np.int8)
    which = as_numpy(enc.indices.fill_null(len(names) - 1)).astype(np.int64)
    kinds = kind_of[which]
    has_q, has_o = _nonempty(c["qid"]), _nonempty(c["obj"])
    unknown = event & (kinds < 0)
    noq = event & ~unknown & ~has_q
    ok = event & ~unknown & has_q & has_o
    record = query & has_q
    pos, valid = c["pos"], c["pos_valid"]
    bad = ok & valid & (pos < 0)
    if unknown.any():
        per = np.bincount(which[unknown], minlength=len(names))
        for j in np.flatnonzero(per).tolist():
            p.unknown_actions[str(names[j])] = p.unknown_actions.get(str(names[j]), 0) + int(per[j])
        _count(p, "unknown_action", unknown, where)
    _count(p, "no_query_id", noq | (query & ~has_q), where)
    _count(p, "no_object_id", event & ~unknown & has_q & ~has_o, where)
    _count(p, "bad_position", bad, where)
    return ok, record, kinds, bad


def _append(reader: EventReader, c: dict, ok, record, kinds, bad) -> None:
    """The kept events into the reader's columns, the kept records into its dicts."""
    import pyarrow as pa
    import pyarrow.compute as pc
    log, n = reader.log, c["n"]
    pos, valid = c["pos"], c["pos_valid"]
    kept = np.flatnonzero(ok | record)
    ev, rec = np.flatnonzero(ok), np.flatnonzero(record)
    qcode = np.full(n, -1, np.int64)
    qcode[kept] = _codes(log.query_ids, c["qid"].take(kept))
    text = pc.utf8_trim_whitespace(c["text"])
    text = pc.if_else(pc.equal(text, ""), pa.scalar(None, text.type), text)
    tcode = np.full(n, -1, np.int64)
    tcode[kept] = _codes(log.texts, text.take(kept))
    hits = c["hits"].take(rec)
    lengths = as_numpy(pc.fill_null(pc.list_value_length(hits), 0)).astype(np.int64)
    doc, hit = _doc_codes(log, c["obj"].take(ev), hits.flatten(), lengths, ev, rec, n)

    cols = reader.cols                     # array.frombytes: a copy, no loop
    cols["search"].frombytes(qcode[ev].astype(np.int32).tobytes())
    cols["doc"].frombytes(doc.astype(np.int32).tobytes())
    cols["pos"].frombytes(np.where(valid & ~bad, pos, -1)[ev].astype(np.int32).tobytes())
    cols["text"].frombytes(tcode[ev].astype(np.int32).tobytes())
    reader.actions.frombytes(kinds[ev].astype(np.int8).tobytes())

    q = qcode[rec].tolist()
    t = tcode[rec]
    log.record_text.update(zip(compress(q, (t >= 0).tolist()), t[t >= 0].tolist()))
    ends = np.cumsum(lengths)
    some = lengths > 0
    log.record_hits.update(zip(compress(q, some.tolist()), map(hit.__getitem__, map(
        slice, (ends - lengths)[some].tolist(), ends[some].tolist()))))
    if c["inter"] is not None:
        _add_interleaving(log, c["inter"].take(rec), hits, q)


def _doc_codes(log: EventLog, obj, flat, lengths: np.ndarray, ev: np.ndarray, rec: np.ndarray, n: int):
    """Document codes of the events' objects (NumPy) and of the records' hit lists
    (``flat``, ``lengths`` per record; as the interner's own int objects, which the line
    reader keeps too: no int object per hit), interned in the order of the rows."""
    import pyarrow as pa
    import pyarrow.compute as pc
    per = np.zeros(n, np.int64)            # values per row, rows in order
    per[ev] = 1
    per[rec] = lengths
    start = np.cumsum(per) - per
    at_ev = start[ev]
    at_hit = np.repeat(start[rec] - (np.cumsum(lengths) - lengths), lengths) + np.arange(len(flat))
    order = np.empty(len(ev) + len(flat), np.int64)   # in row order: place in [objects, hits]
    order[at_ev] = np.arange(len(ev))
    order[at_hit] = len(ev) + np.arange(len(flat))
    enc = pc.dictionary_encode(pa.concat_arrays([obj, flat]).take(order))   # no nulls
    names = enc.dictionary.to_pylist()
    codes, which = log.docs.codes_of(names), as_numpy(enc.indices)
    ints = list(map(log.docs.codes.__getitem__, names))
    return codes[which[at_ev]], list(map(ints.__getitem__, which[at_hit].tolist()))


def _codes(interner, arr) -> np.ndarray:
    """Interned codes of ``arr``'s strings (-1 for null): one lookup per distinct string,
    in order of first appearance."""
    import pyarrow.compute as pc
    enc = pc.dictionary_encode(arr)
    mapping = np.append(interner.codes_of(enc.dictionary.to_pylist()), -1)
    return mapping[as_numpy(enc.indices.fill_null(len(mapping) - 1))]


def _add_interleaving(log: EventLog, inter, hits, qcodes: list[int]) -> None:
    """The interleaved searches' attributes (records, not events: a few per search)."""
    for j in np.flatnonzero(as_numpy(inter.is_valid())).tolist():
        got = interleaving_attrs(inter[j].as_py(), hits[j].as_py())
        if got:
            log.record_interleaving[qcodes[j]] = got
