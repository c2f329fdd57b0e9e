"""SVMlight / LETOR / RankLib ranking files: ``grade qid:N 1:v 2:v ... # docid``.

The reader streams the file in chunks of about a megabyte and parses each chunk with
vectorised NumPy on the raw bytes (:mod:`.svmlight_fast`) (token boundaries from byte masks, numbers decoded
eight digits at a time in 64-bit words, the classic SWAR technique, exactly as float()
rounds them), two chunks at a time on two threads (NumPy releases the GIL). Large files
(where numba's start-up pays, ``io.compiled``) go first through a compiled one-pass scan
(:mod:`.svmlight_jit`), about 2.5x faster, which takes the plain case only and otherwise hands
the chunk to the NumPy path. :func:`scored_chunks` streams a file through a model
(``ltr predict``) without ever holding its matrix. Rows go
chunk by chunk into one float32 matrix, so memory peaks near that matrix's size (twice
it when rows must be regrouped by query). A chunk the fast path is not sure about (any
error, line breaks other than \n and \r\n, non-ASCII text outside comments) is parsed
again line by line in Python: that path is the reference, it reports every error with
``file:line``, and the fast path only ever agrees with it (numbers it cannot decode
exactly, such as exponents, it hands to float() one by one).
Why not a library: ``sklearn.datasets.load_svmlight_file`` (Cython, but through Python
objects token by token) had not finished a 500k-row MSLR-shaped file after 180 s when
xgboost's parser took 8 s (benchmarks/svmlight.py); it also drops the ``# docid``
comments, reports errors without line numbers and refuses unsorted feature ids.
xgboost's own text parser is deprecated (since 3.1), and has no doc ids or line numbers.

Features absent from a row (sparse rows) take ``missing``: 0.0 by default (the LETOR /
RankLib convention), NaN for files logged by this toolkit, whose first line says
``# ltr-toolkit logged: missing=absent ...`` (:func:`load_logged` reads that, by the rule
of :mod:`.logged`; a comment line, skipped by every reader). NaN means "the feature did
not match": each model family then treats it as the plugin does. That header is the
toolkit's mark too (:mod:`.ids`): after it, qids and doc ids are percent-escaped, and
every parse path decodes them; in any other file they are kept as they are. Queries
are kept in the order they first appear; rows of a query that appear in several runs
are gathered together, stably, and ``ds.meta["input_rows"]`` then records where each
row came from (``ltr predict`` writes its scores back in input order with it).
"""

from __future__ import annotations

import math
import mmap
import os
import re
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..versions import PLUGIN_MAX_FEATURES
from ..errors import InputError
from ..io import compiled
from ..io.atomic import atomic_write
from .dataset import RankingDataset
from .ids import escape_id, unescape
from .logged import (header_line, is_own, missing_value, own_rule, read_header, read_sidecar,
                     resolve_rule)
from .svmlight_fast import F32_LIMIT, Part, fast_chunk, plain_float

#: The highest feature id a row may name: the LTR plugin's limit on the features of one
#: feature set (the limit ``data.featuresets`` checks uploads against). A larger id is an
#: input error (with ``file:line``), never a reason to allocate a matrix that wide.
MAX_FEATURE_ID = PLUGIN_MAX_FEATURES

_CHUNK_BYTES = 1 << 20          # parse unit: big enough to amortise NumPy calls
_THREADS = max(1, min(2, os.cpu_count() or 1))
#: chunks handed to the threads before the oldest is taken back (a thread that finishes
#: early finds the next one waiting)
_AHEAD = 2 * _THREADS
_NUM_TOKEN = re.compile(r"^[0-9]+:[^\s:]+$")   # ASCII digits only (\d takes any script's)
_SHAPE = "expected `grade qid:N index:value ...`"


def load_logged(path, n_features: int | None = None,
                 byte_range: tuple[int, int] | None = None, rule: str | None = None,
                 rule_by=None) -> RankingDataset:
    """:func:`load_svmlight` with what the data says about itself (:mod:`.logged`): the
    missing-feature rule of its header (or sidecar), its feature names, its number of
    features. A file that declares no rule takes ``rule`` (that of ``rule_by``: the
    training data, a model), else 0.0; one that declares another is refused.
    ``ds.meta``: ``sidecar``, ``missing_features`` (the rule it was read with)."""
    side = read_sidecar(path)
    header = read_header(path)
    missing = resolve_rule(path, own_rule(path, side, header), rule, rule_by)
    names = side.get("feature_names")
    if n_features is None:   # trailing features may be absent from every row
        n_features = len(names) if names else header.get("n_features")
    ds = load_svmlight(path, n_features=n_features, missing=missing_value(missing),
                       feature_names=names, byte_range=byte_range)
    ds.meta["sidecar"] = side
    ds.meta["missing_features"] = missing
    return ds


# --------------------------------------------------------------------------- reading

class _ChunkError(Exception):
    """An input error at a line counted from the chunk's start (1-based)."""

    def __init__(self, line: int, problem: str, by_newlines: bool = False):
        super().__init__(problem)
        self.line, self.problem, self.by_newlines = line, problem, by_newlines


def load_svmlight(path, n_features: int | None = None, missing: float = 0.0,
                  feature_names: list[str] | None = None,
                  byte_range: tuple[int, int] | None = None) -> RankingDataset:
    """``byte_range`` (start, end): only the lines in those bytes of the file (start and
    end at line starts; line numbers in errors then count from start)."""
    path = Path(path)
    builder = _Builder(path, None if n_features is None else int(n_features), missing,
                       feature_names)
    if byte_range is not None:
        builder.size = max(1, byte_range[1] - byte_range[0])
    for part, _ in parsed_chunks(path, builder.n_features, missing, byte_range):
        builder.add(part)
    return builder.finish()


def scored_chunks(path, n_features: int, score, missing: float = 0.0):
    """``score(X)`` of each chunk's rows [rows, n_features], chunk after chunk in file
    order: the file streamed, each chunk scored in the thread that parsed it, its rows as
    :func:`load_svmlight` would read them (the same checks and errors; ``missing`` for
    absent features: ``logged.missing_value`` of the file's rule, for logged data), the whole
    matrix never held. What ``ltr predict`` does. InputError if the file has no data rows."""
    n_features = int(n_features)

    def rows_scored(part):
        block = part.block
        if block.shape[1] < n_features:
            block = np.pad(block, ((0, 0), (0, n_features - block.shape[1])),
                           constant_values=missing)
        return np.asarray(score(block), dtype=np.float64)

    rows = 0
    for part, scores in parsed_chunks(path, n_features, missing, then=rows_scored, keys=False):
        if len(part.y):
            rows += len(part.y)
            yield scores
    if not rows:
        raise InputError(Path(path), None, "no data rows")


def parsed_chunks(path, n_features, missing, byte_range=None, then=None, keys=True):
    """(Part, ``then(Part)`` or None) of each chunk of the file, in file order, parsed two
    at a time on two threads (``then`` runs in the parsing thread); an error in a chunk
    is raised as :class:`InputError` with its file:line. ``keys=False``: the parts'
    qids and doc ids are not needed (the compiled path then skips them)."""
    path = Path(path)
    try:
        fh = open(path, "rb") if byte_range is None else _ByteRange(path, *byte_range)
        size = os.path.getsize(path) if byte_range is None else byte_range[1] - byte_range[0]
    except OSError as exc:
        raise InputError(path, None, f"cannot read: {exc.strerror or exc}") from None
    jit = _compiled_parser(size)
    escaped = is_own(path)              # the file's first line, whatever the range
    lines = _Lines(path)
    _keep_freed_memory()
    with fh, ThreadPoolExecutor(_THREADS) as pool:
        pending: deque = deque()     # at most _AHEAD chunks handed out, not yet taken back
        try:
            for buf in _chunks(fh, path):
                pending.append(pool.submit(_chunk_work, buf, n_features, missing, jit, then,
                                           keys, escaped))
                if len(pending) > _AHEAD:
                    yield lines.counted(pending.popleft())
            while pending:
                yield lines.counted(pending.popleft())
        except BaseException:
            for fut in pending:
                fut.cancel()
            raise


class _Lines:
    """Lines read so far: a chunk's error is raised with its line in the file."""

    def __init__(self, path):
        self.path, self.lines, self.newlines = path, 0, 0

    def counted(self, fut):
        try:
            part, done = fut.result()
        except _ChunkError as err:
            base = self.newlines if err.by_newlines else self.lines
            raise InputError(self.path, base + err.line, err.problem) from None
        self.lines += part.n_lines
        self.newlines += part.n_newlines
        return part, done


def _chunk_work(buf, n_features, missing, jit, then, keys, escaped=True):
    """The chunk parsed (its qids and doc ids decoded when the file is the toolkit's,
    ``escaped``: data.ids), and ``then`` of it."""
    part = _parse_chunk(buf, n_features, missing, jit, keys)
    if escaped and b"%" in bytes(buf):
        part.qnames = [unescape(name, True) for name in part.qnames]
        if part.doc_ids is not None:
            part.doc_ids = _unescaped(part.doc_ids)
    return part, (then(part) if then is not None and len(part.y) else None)


class _ByteRange:
    """A binary file read only from byte ``start`` up to ``end`` (``readinto``)."""

    def __init__(self, path, start: int, end: int):
        self._fh = open(path, "rb")
        self._fh.seek(start)
        self._left = max(0, end - start)

    def readinto(self, view) -> int:
        n = self._fh.readinto(view[:min(len(view), self._left)]) if self._left else 0
        self._left -= n
        return n

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()


def _keep_freed_memory():
    """Every chunk makes NumPy temporaries of a few hundred KiB. glibc's malloc hands
    freed heap memory back to the OS as soon as 128 KiB are free at its top, so each
    chunk would get fresh pages, and the page faults cost as much as the parsing
    (measured: ~2,700 faults per MB parsed, 1.7x the time). Freeing one 16 MiB block
    makes glibc raise its trim and mmap thresholds (its documented dynamic threshold,
    mallopt(3)), the state any NumPy program reaches after its first large temporary;
    the pages are never touched, and other allocators ignore it."""
    block = np.empty(16 << 20, dtype=np.uint8)
    del block


def _chunks(fh, path):
    """Chunks of about ``_CHUNK_BYTES`` that end with a newline, as memoryviews of a few
    reused buffers: ``parsed_chunks`` holds at most ``_AHEAD + 1`` of them at once."""
    ring = [bytearray(_CHUNK_BYTES) for _ in range(_AHEAD + 2)]
    slot = 0                        # moves on only once its chunk is handed out
    carry = b""
    while True:
        k = len(carry)
        buf = ring[slot]
        if len(buf) < k + _CHUNK_BYTES:          # a line longer than a chunk
            buf = ring[slot] = bytearray(k + _CHUNK_BYTES)
        buf[:k] = carry
        view = memoryview(buf)
        try:
            got = fh.readinto(view[k:k + _CHUNK_BYTES])
        except OSError as exc:
            raise InputError(path, None, f"cannot read: {exc.strerror or exc}") from None
        if not got:
            break
        end = k + got
        cut = buf.rfind(b"\n", 0, end) + 1
        carry = bytes(view[cut:end])
        if cut:
            yield view[:cut]
            slot = (slot + 1) % len(ring)
    if carry:
        yield carry + b"\n"


class _Builder:
    """Collects parsed chunks, in file order, into the dataset's arrays."""

    def __init__(self, path, n_features, missing, feature_names):
        self.path, self.n_features, self.missing = path, n_features, missing
        self.feature_names = feature_names
        # the old contract: exactly n_features columns when given, else the highest id
        # seen (or the number of names, when more)
        self.min_width = n_features if n_features is not None else \
            (len(feature_names) if feature_names else 0)
        try:
            self.size = max(1, os.path.getsize(path))
        except OSError:
            self.size = 1
        self.X = None
        self.rows = 0
        self.y, self.q = [], []
        self.qid_index: dict[str, int] = {}
        self.doc_parts: list[tuple[int, np.ndarray]] = []

    def add(self, part: Part):
        n = len(part.y)
        if n == 0:
            return
        width = part.block.shape[1]
        self._reserve(n, width, part.n_bytes)
        X, r0 = self.X, self.rows
        X[r0:r0 + n, :width] = part.block
        if width < X.shape[1]:
            X[r0:r0 + n, width:] = self.missing
        self.y.append(part.y)
        lut = np.array([self.qid_index.setdefault(name, len(self.qid_index))
                        for name in part.qnames], dtype=np.int64)
        self.q.append(lut[part.qinv])
        if part.doc_ids is not None:
            self.doc_parts.append((r0, part.doc_ids))
        self.rows += n

    def _reserve(self, n: int, width: int, n_bytes: int):
        """Room for ``n`` more rows of at least ``width`` features. The first chunk
        reserves rows for the whole file from its bytes per row (reserved pages that are
        never written cost no memory); a copy grows it when that falls short."""
        X = self.X
        width = max(width, self.min_width, X.shape[1] if X is not None else 0)
        rows = self.rows + n
        if X is None:
            cap = int(self.size / max(1.0, n_bytes / n) * 1.15) + 64
            self.X = _matrix(max(cap, rows), width)
            return
        if width > X.shape[1] or rows > X.shape[0]:   # a higher feature id, more rows
            bigger = _matrix(max(X.shape[0], int(rows * 1.25) + 64), width)
            bigger[:self.rows, :X.shape[1]] = X[:self.rows]
            bigger[:self.rows, X.shape[1]:] = self.missing
            self.X = bigger

    def finish(self) -> RankingDataset:
        n = self.rows
        if n == 0:
            raise InputError(self.path, None, "no data rows")
        X = self.X[:n]                  # the unwritten reserve never took memory
        self.X = None
        y = np.concatenate(self.y)
        q_of_row = np.concatenate(self.q)
        self.y = self.q = None
        doc_ids = None
        if self.doc_parts:
            doc_ids = np.empty(n, dtype=object)
            doc_ids[:] = ""
            for r0, docs in self.doc_parts:
                doc_ids[r0:r0 + len(docs)] = docs      # str objects, made in C
        self.doc_parts = None
        qids = np.empty(len(self.qid_index), dtype=object)
        qids[:] = list(self.qid_index)
        perm = None
        if np.any(q_of_row[1:] < q_of_row[:-1]):
            # a query's rows in several runs: gather them (stably), remember the order
            perm = np.argsort(q_of_row, kind="stable")
            # (mode="clip": with the default "raise" NumPy would buffer a third copy)
            X = np.take(X, perm, axis=0, out=_matrix(n, X.shape[1]), mode="clip")
            y, q_of_row = y[perm], q_of_row[perm]
            if doc_ids is not None:
                doc_ids = doc_ids[perm]
        sizes = np.bincount(q_of_row, minlength=len(qids))
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        ds = RankingDataset(X=X, y=y, offsets=offsets, qids=qids, doc_ids=doc_ids,
                            feature_names=self.feature_names, source=str(self.path))
        if perm is not None:
            ds.meta["input_rows"] = perm   # row r of ds was data row perm[r] of the file
        return ds


def _unescaped(docs: np.ndarray) -> np.ndarray:
    """A chunk's doc ids with the percent-escapes of :mod:`.ids` decoded (only the ids
    that have a ``%`` are touched)."""
    escaped = np.flatnonzero(np.char.find(docs.astype(str), "%") >= 0)
    if len(escaped):
        docs = docs.astype(object)
        docs[escaped] = [unescape(d, True) for d in docs[escaped]]
    return docs


def _matrix(rows: int, width: int) -> np.ndarray:
    """An uninitialised float32 [rows, width] matrix in its own anonymous memory map.
    Its pages take memory only when written, and writing them is cheap: NumPy asks
    Linux for huge pages for large arrays, and on a busy machine each first write to
    one waits for the kernel to assemble 2 MiB (measured: 1.2 s for a 272 MB matrix,
    0.3 s with ordinary pages)."""
    mm = mmap.mmap(-1, max(1, rows * width) * 4)
    return np.frombuffer(mm, dtype=np.float32, count=rows * width).reshape(rows, width)


#: seconds the NumPy path spends per byte over the compiled one (two threads; measured on
#: 200,000 MSLR-shaped rows: 4.4-5.1 against 1.7-1.8 ms a MB): numba's start-up pays from
#: about 160 MB
_SAVED_PER_BYTE = 2.8e-9


def _compiled_parser(size: int):
    """:func:`.svmlight_jit.jit_chunk` where numba pays for its start-up on ``size``
    bytes (or is loaded already), else None."""
    if not compiled.pays(size * _SAVED_PER_BYTE):
        return None
    from .svmlight_jit import jit_chunk
    return jit_chunk


def _parse_chunk(buf, n_features, missing, jit=None, keys=True) -> Part:
    """The chunk by the first path that takes it: compiled (``jit``), NumPy, line by line."""
    part = jit(buf, n_features, missing, keys) if jit is not None else None
    if part is None:
        part = fast_chunk(buf, n_features, missing)
    if part is None:
        part = _slow_chunk(buf, n_features, missing)
    return part


# ---------------------------------------------------------------- the reference path

def _slow_chunk(buf, n_features, missing) -> Part:
    """Line by line, every check, every error with its line: the reference semantics."""
    buf = bytes(buf)
    try:
        text = buf.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _ChunkError(buf[:exc.start].count(b"\n") + 1, "not UTF-8 text", True) from None
    lines = text.splitlines()
    labels, qids, docs, rows, cols, vals = [], [], [], [], [], []
    limit = n_features if n_features is not None else MAX_FEATURE_ID
    for i, line in enumerate(lines, start=1):
        line, comment = _without_comment(line)
        parts = line.split(None, 2)
        if not parts:
            continue
        grade = _row_grade(i, parts)
        row_cols, row_vals = _row_features(i, parts[2] if len(parts) == 3 else "", limit,
                                           n_features)
        rows.extend([len(labels)] * len(row_cols))
        cols.extend(row_cols)
        vals.extend(row_vals)
        labels.append(grade)
        qids.append(parts[1][4:])
        docs.append(comment[0] if comment else "")
    block = _sparse_block(len(labels), rows, cols, vals, missing)
    qnames, qinv = _distinct(qids)
    return Part(block=block, y=np.asarray(labels, dtype=np.float64), qnames=qnames, qinv=qinv,
                 doc_ids=np.array(docs, dtype=str) if any(docs) else None, n_lines=len(lines),
                 n_newlines=buf.count(b"\n"), n_bytes=len(buf))


def _without_comment(line: str) -> tuple[str, list | None]:
    """(the line before its ``#``, the comment's words split off its first; None
    without a comment)."""
    hash_pos = line.find("#")
    if hash_pos < 0:
        return line, None
    return line[:hash_pos], line[hash_pos + 1:].split(None, 1)


def _row_grade(i: int, parts: list[str]) -> float:
    """The grade of line ``i`` split into ``grade qid:N [rest]``, the shape checked."""
    if len(parts) < 2 or not parts[1].startswith("qid:") or len(parts[1]) == 4:
        raise _ChunkError(i, _SHAPE)
    try:
        grade = plain_float(parts[0])
    except ValueError:
        raise _ChunkError(i, f"grade {parts[0]!r} is not a number") from None
    if not math.isfinite(grade):
        raise _ChunkError(i, f"grade {parts[0]!r} is not a finite number")
    return grade


def _row_features(i: int, rest: str, limit: int, n_features) -> tuple[list, list]:
    """(0-based columns, values) of line ``i``'s ``index:value`` tokens, each checked:
    ids from 1 to ``limit``, none twice, values finite in float32."""
    cols, vals = [], []
    seen = set()
    for tok in rest.split():
        if not _NUM_TOKEN.match(tok):
            raise _ChunkError(i, f"bad feature token {tok!r} (expected index:value)")
        key, text_value = tok.split(":")
        try:
            value = plain_float(text_value)
        except ValueError:
            raise _ChunkError(i, f"bad feature value in {tok!r}") from None
        j = int(key)
        if j < 1:
            raise _ChunkError(i, "feature indices must be whole numbers >= 1")
        if j > limit:
            if n_features is not None:
                raise _ChunkError(i, f"feature {j} beyond the {n_features} expected")
            raise _ChunkError(i, f"feature id {j} is above {MAX_FEATURE_ID}, the most "
                                 "features a feature set of the LTR plugin can have")
        if j in seen:
            raise _ChunkError(i, f"feature {j} appears twice in the row")
        seen.add(j)
        if not -F32_LIMIT < value < F32_LIMIT:
            raise _ChunkError(i, f"feature {key} has value {text_value}: "
                                 "features must be finite float32 numbers")
        cols.append(j - 1)
        vals.append(value)
    return cols, vals


def _sparse_block(n: int, rows: list, cols: list, vals: list, missing) -> np.ndarray:
    """The float32 [n, highest column + 1] matrix of the (row, column, value) entries,
    ``missing`` elsewhere."""
    width = max(cols) + 1 if cols else 0
    block = np.full((n, width), missing, dtype=np.float32)
    if cols:
        block[np.asarray(rows), np.asarray(cols)] = np.asarray(vals, dtype=np.float64)
    return block


def _distinct(names: list) -> tuple[list, np.ndarray]:
    index: dict = {}
    inv = np.fromiter((index.setdefault(s, len(index)) for s in names), dtype=np.int64,
                      count=len(names))
    return list(index), inv


def row_line(path, row: int) -> int | None:
    """The 1-based line of data row ``row`` (0-based, in file order) of an SVMlight file:
    for messages about a row found after loading (lines without data are skipped as the
    readers skip them)."""
    with open(path, "rb") as fh:
        seen = -1
        for i, line in enumerate(fh, start=1):
            if line.split(b"#", 1)[0].strip():
                seen += 1
                if seen == row:
                    return i
    return None


def check_grades(ds: RankingDataset, path) -> None:
    """Grades are gains >= 0 (as in judgment lists): the first negative one is refused
    with its file:line."""
    neg = np.flatnonzero(ds.y < 0)
    if len(neg):
        perm = ds.meta.get("input_rows")                 # dataset row -> file row
        file_rows = neg if perm is None else np.asarray(perm)[neg]
        first = int(np.argmin(file_rows))
        raise InputError(path, row_line(path, int(file_rows[first])),
                         f"grade {ds.y[neg[first]]:g} is negative: grades are gains >= 0 "
                         "(map negative judgments to 0)")


# --------------------------------------------------------------------------- writing

def format_rows(ds: RankingDataset, start: int = 0, stop: int | None = None) -> str:
    """Rows as text; float32 values printed with 9 significant digits (exact round trip);
    qids and doc ids percent-escaped (:mod:`.ids`: only for a file that starts with the
    header, :func:`save_svmlight`).
    An absent feature (NaN: logged data read with ``missing_features: absent``) is left out
    of its row, as the LTR plugin's log leaves it out: the readers refuse ``nan`` values."""
    stop = ds.n_docs if stop is None else stop
    qid_of_row = ds.qids[ds.row_query]
    nf = ds.n_features
    idx_prefix = [f"{j + 1}:" for j in range(nf)]
    lines = []
    for r in range(start, stop):
        label = ds.y[r]
        lab = str(int(label)) if float(label).is_integer() else repr(float(label))
        feats = " ".join(p + ("%.9g" % v) for p, v in zip(idx_prefix, ds.X[r].tolist()) if v == v)
        line = f"{lab} qid:{escape_id(qid_of_row[r])} {feats}"
        if ds.doc_ids is not None and ds.doc_ids[r]:
            line += f" # {escape_id(ds.doc_ids[r])}"
        lines.append(line)
    return "\n".join(lines) + ("\n" if lines else "")


def save_svmlight(ds: RankingDataset, path) -> None:
    """The rows after the header of :mod:`.logged`, the mark of their escaped ids
    (:mod:`.ids`), with the missing-feature rule ``ds`` was read with when it declared one
    (``ds.meta["missing_features"]``), so the file keeps it."""
    with atomic_write(path) as fh:
        fh.write(header_line(ds.n_features, ds.meta.get("missing_features")))
        fh.write(format_rows(ds))
