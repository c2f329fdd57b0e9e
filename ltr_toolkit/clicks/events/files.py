"""Reading UBI files (NDJSON or bulk, see :mod:`.eventlog`); big ones fast: blocks of lines
parsed by pyarrow's JSON reader, the columns built with NumPy and the strings interned
once per distinct value per block -- no Python work per event or per line.

Why pyarrow: its JSON reader is the well-kept columnar parser for line-delimited JSON
(C++, typed by an explicit schema that names only the fields the click models use: the
rest of each document is skipped, and it releases the GIL). A typed per-document decoder
(msgspec, orjson) decodes as fast, but building the columns from its records costs
Python work per event (about 216,000 events/s on this machine in all, against 210,000
for ``json.loads`` per line). pyarrow is a dependency and this is the one way files are
read: on 1 million simulated events the line-by-line reader took 2.1-3.0x the block
reader's CPU seconds (2.2-3.7x its wall time), and ``json.loads`` of every line alone,
no event added, 1.3-2.1x (``benchmarks/results/clicks_readers.md``): no line reader on
the standard library's parser comes near.

Per block (16 MB of whole lines; one never ends with a bulk action line, which goes
with its document into the next block; the partial last line is read again with the
next block, by a seek back):

* bulk: the lines are found by NumPy (newline offsets: no Python object per line); when
  every other line is one of a few distinct action lines (each checked once with
  ``json.loads``), Arrow takes the documents out of the block and they are parsed
  alone: the action lines cost no parsing (they were over a third of it), and each
  document's index comes from its action's dictionary code;
* NDJSON, and a bulk block that does not alternate so: the block is parsed as it is;
  rows with ``index``/``create`` are told to be action lines by their text (a few
  distinct) and name the next row's index;
* pyarrow parses with a slim schema (``query_attributes``, ``index`` and ``create``
  typed null, ~18% cheaper: a struct costs in every row that lacks it) until a block
  holds one of them, then with the full schema;
* the columns go into the reader as :mod:`.columns` adds them (one pass of NumPy masks
  classifies the rows as the line reader does, the problems counted with the
  ``file:line`` of the first, the strings interned in the order of the lines).

A second thread reads and parses the next block (pyarrow's own threads parsing its 4 MB
pieces side by side) while the first adds the last one to the reader, so on two cores
the parse and the interning overlap.

A block that pyarrow cannot read as expected (a line that is not JSON, a field of
another type, a blank line, a null hit id) is read again line by line
(:func:`read_lines`, each document added by :class:`.eventlog.EventReader`), which counts
each problem with its ``file:line``: the result is the same either way, codes included
(``tests/test_click_choice.py``).
Memory: two blocks at a time (their text, the documents' copy and their columns, a few
times 16 MB), plus the columns and the interned strings
(``benchmarks/results/clicks_reading.md``: the peak for 10 million events).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import InputError
from .columns import add_rows, as_numpy, read_columns, schema
from .eventlog import CLICK_ACTIONS, IMPRESSION_ACTIONS, EventLog, EventReader

BLOCK_BYTES = 16 << 20
#: pyarrow's own blocks within one (parsed by its threads side by side)
PARSE_BYTES = 4 << 20
#: distinct action lines a block may have (more: it is not read as bulk)
MAX_ACTIONS = 64


class _Parser:
    """pyarrow's JSON reader, by the slim schema until a block needs the full one (it
    holds ``query_attributes`` or action lines), by the full one from then on: a struct
    that a row lacks still costs ~8% of the parse (all three ~18%)."""

    def __init__(self):
        import pyarrow.json as pj
        self.schemas = [pj.ParseOptions(explicit_schema=schema(slim), unexpected_field_behavior="ignore")
                        for slim in (True, False)]

    def __call__(self, buf):
        """The table of a buffer of lines (one chunk per ``PARSE_BYTES``), or None when
        pyarrow cannot read it."""
        import pyarrow as pa
        import pyarrow.json as pj
        read = pj.ReadOptions(block_size=PARSE_BYTES or max(len(buf), 1 << 20))
        for i, options in enumerate(self.schemas):
            try:
                table = pj.read_json(pa.BufferReader(buf), parse_options=options, read_options=read)
            except (pa.ArrowInvalid, UnicodeDecodeError):
                continue
            self.schemas = self.schemas[i:]
            return table
        return None


def read_lines_arrow(reader: EventReader, fh, source: str) -> None:
    """All of a binary file's lines into ``reader`` (see the module docstring): the next
    block is read and parsed by a second thread (pyarrow and NumPy release the GIL) while
    this one adds the last to ``reader``."""
    from concurrent.futures import ThreadPoolExecutor
    parse = _Parser()
    blocks = _blocks(fh)
    first = 1
    with ThreadPoolExecutor(1) as pool:
        ahead = pool.submit(_prepare, blocks, parse)
        while (block := ahead.result()) is not None:
            ahead = pool.submit(_prepare, blocks, parse)
            first += _add(reader, block, source, first)


def _blocks(fh):
    """Blocks of whole lines (bytes, or a view of them), each ending with a newline and
    never with a bulk action line (nor one and blank lines): that one starts the next
    block, with its document. What a block leaves is read again with the next one (a
    seek back: no copy of the block)."""
    seekable = fh.seekable()
    while data := fh.read(BLOCK_BYTES):
        cut = _cut(data) if seekable else 0
        if not cut:                # a block that is one line or less; a pipe
            yield _extend(fh, data)
        elif cut < len(data):
            fh.seek(cut - len(data), 1)
            yield memoryview(data)[:cut]
        else:
            yield data


def _cut(data: bytes) -> int:
    """Where the block ``data`` should end: after its last whole line, or before the bulk
    action lines its last non-blank lines are; 0 when it cannot."""
    end = stop = data.rfind(b"\n") + 1
    while stop:
        start = data.rfind(b"\n", 0, stop - 1) + 1
        line = data[start:stop]
        if line.strip():
            if _action_index(line) is None:
                return end
            end = start            # an action line: it goes with the next block
        stop = start
    return 0


def _extend(fh, data: bytes) -> bytes:
    """``data`` and the lines after it, up to a whole line that is a document."""
    more = [] if data.endswith(b"\n") else [fh.readline()]
    if _cut(data + b"".join(more)) != len(data) + sum(map(len, more)):
        while line := fh.readline():
            more.append(line)
            if line.strip() and _action_index(line) is None:
                break
    if not (more[-1] if more else data).endswith(b"\n"):
        more.append(b"\n")        # the file's last line
    return b"".join([data, *more]) if more else data


def read_lines(reader: EventReader, lines, source: str, first: int = 1) -> None:
    """NDJSON or bulk lines (an iterable of str; the first is line ``first`` of
    ``source``) into ``reader`` one by one, bad lines counted: a block pyarrow cannot read
    as expected."""
    target = None
    for i, raw in enumerate(lines, start=first):
        reader.log.lines += 1
        if not raw.strip():
            continue
        try:
            doc = json.loads(raw)
        except ValueError:
            reader.log.problems.add("invalid_json", 1, f"{source}:{i}")
            target = None
            continue
        action = bulk_action(doc)
        if action is not None:
            target = action
            continue
        reader.add(doc, f"{source}:{i}", target)
        target = None


def bulk_action(doc) -> str | None:
    """The ``_index`` of a bulk action line (``""`` when it names none), else None."""
    if isinstance(doc, dict) and len(doc) == 1:
        (op, body), = doc.items()
        if op in ("index", "create") and isinstance(body, dict):
            return str(body.get("_index", ""))
    return None


def _action_index(line: bytes) -> str | None:
    """The ``_index`` a bulk action line names (``""`` for none), else None."""
    try:
        return bulk_action(json.loads(line))
    except ValueError:
        return None


@dataclass
class _Block:
    """A block read and parsed: its lines and, when pyarrow read it as expected, its
    columns, the index kind each row's action line names, the action lines and the
    line of row 0 and between rows (1, 1 for NDJSON; 2, 2 for bulk)."""
    text: bytes | memoryview
    n: int
    c: dict | None = None
    target: np.ndarray | None = None
    skip: np.ndarray | None = None
    line0: int = 0
    step: int = 1


def _prepare(blocks, parse: _Parser) -> _Block | None:
    """The next block, read and parsed (nothing added to a reader: a thread of its own)."""
    text = next(blocks, None)
    if text is None:
        return None
    if _starts_bulk(text):
        got = _bulk_block(text, parse)
        if got is not None:
            return got
    n = int(np.count_nonzero(np.frombuffer(text, np.uint8) == 10))
    table = parse(text)
    c = read_columns(table) if table is not None and table.num_rows == n else None
    target = _ndjson_targets(text, c) if c is not None else None
    if target is None:      # blank lines are skipped by pyarrow: the row count tells
        return _Block(text, n)
    return _Block(b"", n, c, *target)      # (the text is not needed any more)


def _add(reader: EventReader, b: _Block, source: str, first: int) -> int:
    """A prepared block into ``reader`` (its first line is line ``first``; read line by
    line when pyarrow could not); its number of lines."""
    if b.c is None:
        read_lines(reader, (ln.decode("utf-8") for ln in bytes(b.text).split(b"\n")[:b.n]), source, first)
    else:
        add_rows(reader, b.c, b.target, b.skip, lambda r: f"{source}:{first + b.line0 + b.step * r}")
        reader.log.lines += b.n
    return b.n


def _starts_bulk(text) -> bool:
    head = bytes(text[:4096])       # (an action line is short)
    return _action_index(head[:head.find(b"\n")]) is not None


def _lines(block: bytes):
    """The block's lines (each with its newline) as an Arrow binary array over the
    block's bytes: newline offsets by NumPy, no copy, no object per line."""
    import pyarrow as pa
    ends = np.flatnonzero(np.frombuffer(block, np.uint8) == 10)
    offsets = np.zeros(len(ends) + 1, np.int64)
    offsets[1:] = ends + 1
    return pa.Array.from_buffers(pa.large_binary(), len(ends),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(block)])


def _actions(lines):
    """(per line: its distinct action's number, the distinct actions' ``_index``), or None
    when there are too many distinct lines or one is not an action line."""
    import pyarrow.compute as pc
    enc = pc.dictionary_encode(lines)
    if len(enc.dictionary) > MAX_ACTIONS:
        return None
    names = [_action_index(a) for a in enc.dictionary.to_pylist()]
    return None if None in names else (as_numpy(enc.indices), names)


def _kinds(names: list[str]) -> np.ndarray:
    """1: a query record's index, 2: an event's, 0: neither (as :meth:`EventReader.add`)."""
    return np.array([1 if "quer" in t else 2 if "event" in t else 0 for t in names], np.int8)


def _bulk_block(text: bytes, parse: _Parser) -> _Block | None:
    """A block of alternating action lines and documents, the documents parsed alone;
    None when it is not one."""
    lines = _lines(text)
    n = len(lines)
    if n % 2:
        return None
    got = _actions(lines.take(np.arange(0, n, 2)))
    if got is None:
        return None
    docs = lines.take(np.arange(1, n, 2))
    size = int(np.frombuffer(docs.buffers()[1], np.int64, 1, 8 * (n // 2))[0])
    table = parse(docs.buffers()[2].slice(0, size))
    if table is None or table.num_rows != n // 2:
        return None
    c = read_columns(table)
    if c is None or c["index"].any():             # a document with "index": the general path
        return None
    return _Block(b"", n, c, _kinds(got[1])[got[0]], None, line0=1, step=2)


def _ndjson_targets(block: bytes, c: dict):
    """(per row: the index kind a preceding action line names, the action lines), the
    action lines told by their text; None when they cannot be (read line by line)."""
    n = c["n"]
    target = np.zeros(n, np.int8)
    rows = np.flatnonzero(c["index"])
    if not len(rows):
        return target, None
    got = _actions(_lines(block).take(rows))
    if got is None:           # too many distinct, or one that is a document: check each
        return None if len(rows) > MAX_ACTIONS else _each_action(block, c, rows)
    action = np.zeros(n, bool)
    action[rows] = True
    after = rows[rows < n - 1]
    target[after + 1] = _kinds(got[1])[got[0][rows < n - 1]]
    return target, action


def _each_action(block: bytes, c: dict, rows: np.ndarray):
    """As :func:`_ndjson_targets`, for a few rows with ``index`` each checked alone."""
    lines = _lines(block).take(rows).to_pylist()
    n = c["n"]
    target, action = np.zeros(n, np.int8), np.zeros(n, bool)
    for r, line in zip(rows.tolist(), lines):
        name = _action_index(line)
        if name is not None:
            action[r] = True
            if r + 1 < n:
                target[r + 1] = _kinds([name])[0]
    return target, action


def read_file(path, impression_actions=IMPRESSION_ACTIONS, click_actions=CLICK_ACTIONS) -> EventLog:
    """Read a UBI file (NDJSON or bulk) block by block. A file that cannot be read, or
    holds no usable event at all, is a one-line error naming it; anything else bad is
    counted."""
    path = Path(path)
    reader = EventReader(impression_actions, click_actions)
    try:
        with open(path, "rb") as fh:
            read_lines_arrow(reader, fh, str(path))
    except OSError as exc:
        raise InputError(path, None, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(path, reader.log.lines + 1, "not UTF-8 text") from None
    log = reader.finish()
    if not len(log):
        seen = "; ".join(log.problems.lines()) or "the file is empty"
        raise InputError(path, None, f"no impression or click events found ({seen})")
    return log
