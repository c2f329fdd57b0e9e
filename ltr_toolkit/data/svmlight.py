"""SVMlight / LETOR / RankLib ranking files: ``grade qid:N 1:v 2:v ... # docid``.

The reader streams the file in chunks of about a megabyte and parses each chunk with
vectorised NumPy on the raw bytes (token boundaries from byte masks, numbers decoded
eight digits at a time in 64-bit words, the classic SWAR technique, exactly as float()
rounds them), two chunks at a time on two threads (NumPy releases the GIL). Rows go
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
RankLib convention), NaN for files logged by this toolkit, whose JSON sidecar says
``"missing_features": "absent"`` (:func:`load_logged` reads that). NaN means "the
feature did not match": each model family then treats it as the plugin does. Queries
are kept in the order they first appear; rows of a query that appear in several runs
are gathered together, stably, and ``ds.meta["input_rows"]`` then records where each
row came from (``ltr predict`` writes its scores back in input order with it).
"""

from __future__ import annotations

import json
import math
import mmap
import os
import re
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..versions import PLUGIN_MAX_FEATURES
from ..errors import InputError
from ..io.atomic import atomic_write
from .dataset import RankingDataset

#: Sidecar value of ``missing_features``: a feature absent from a row did not match.
MISSING_ABSENT = "absent"

#: The highest feature id a row may name: the LTR plugin's limit on the features of one
#: feature set (the limit ``data.featuresets`` checks uploads against). A larger id is an
#: input error (with ``file:line``), never a reason to allocate a matrix that wide.
MAX_FEATURE_ID = PLUGIN_MAX_FEATURES

_CHUNK_BYTES = 1 << 20          # parse unit: big enough to amortise NumPy calls
_THREADS = max(1, min(2, os.cpu_count() or 1))
_F32_LIMIT = 2.0 ** 128 - 2.0 ** 103   # |v| >= this rounds to inf in float32
_NUM_TOKEN = re.compile(r"^\d+:[^\s:]+$")
_SHAPE = "expected `grade qid:N index:value ...`"


def sidecar_path(path) -> Path:
    path = Path(path)
    return path.with_suffix(path.suffix + ".json")


def read_sidecar(path) -> dict:
    """The JSON sidecar ``PATH.json`` written beside logged data, or {}."""
    side = sidecar_path(path)
    if not side.is_file():
        return {}
    try:
        return json.loads(side.read_text())
    except ValueError as exc:
        raise InputError(side, getattr(exc, "lineno", None), "sidecar is not valid JSON") from None


def load_logged(path, n_features: int | None = None,
                byte_range: tuple[int, int] | None = None) -> RankingDataset:
    """:func:`load_svmlight` with what the sidecar says: feature names, and absent
    features as missing (NaN) when it records ``"missing_features": "absent"``."""
    side = read_sidecar(path)
    missing = np.nan if side.get("missing_features") == MISSING_ABSENT else 0.0
    names = side.get("feature_names")
    if n_features is None and names:
        n_features = len(names)   # trailing features may be absent from every row
    ds = load_svmlight(path, n_features=n_features, missing=missing, feature_names=names,
                       byte_range=byte_range)
    ds.meta["sidecar"] = side
    return ds


# --------------------------------------------------------------------------- reading

@dataclass
class _Part:
    """One parsed chunk: ``block`` holds its rows (features 1..block.shape[1])."""
    block: np.ndarray                   # float32 [rows, width]
    y: np.ndarray                       # float64 [rows]
    qnames: list                        # the chunk's distinct qids (str)
    qinv: np.ndarray                    # [rows] index into qnames
    doc_ids: np.ndarray | None          # one str per row ('U' array), or None if none has one
    n_lines: int                        # lines in the chunk (splitlines semantics)
    n_newlines: int
    n_bytes: int


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
    if n_features is not None:
        n_features = int(n_features)
    try:
        fh = open(path, "rb") if byte_range is None else _ByteRange(path, *byte_range)
    except OSError as exc:
        raise InputError(path, None, f"cannot read: {exc.strerror or exc}") from None
    builder = _Builder(path, n_features, missing, feature_names)
    if byte_range is not None:
        builder.size = max(1, byte_range[1] - byte_range[0])
    _keep_freed_memory()
    with fh, ThreadPoolExecutor(_THREADS) as pool:
        pending: deque = deque()     # at most one chunk ahead of the workers
        try:
            for buf in _chunks(fh, path):
                pending.append(pool.submit(_parse_chunk, buf, n_features, missing))
                if len(pending) > _THREADS:
                    builder.add(pending.popleft())
            while pending:
                builder.add(pending.popleft())
        except BaseException:
            for fut in pending:
                fut.cancel()
            raise
    return builder.finish()


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
    reused buffers: ``load_svmlight`` holds at most ``_THREADS + 1`` of them at once."""
    ring = [bytearray(_CHUNK_BYTES) for _ in range(_THREADS + 2)]
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
        self.lines = 0
        self.newlines = 0
        self.y, self.q = [], []
        self.qid_index: dict[str, int] = {}
        self.doc_parts: list[tuple[int, np.ndarray]] = []

    def add(self, fut):
        try:
            part = fut.result()
        except _ChunkError as err:
            base = self.newlines if err.by_newlines else self.lines
            raise InputError(self.path, base + err.line, err.problem) from None
        n = len(part.y)
        self.lines += part.n_lines
        self.newlines += part.n_newlines
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


def _matrix(rows: int, width: int) -> np.ndarray:
    """An uninitialised float32 [rows, width] matrix in its own anonymous memory map.
    Its pages take memory only when written, and writing them is cheap: NumPy asks
    Linux for huge pages for large arrays, and on a busy machine each first write to
    one waits for the kernel to assemble 2 MiB (measured: 1.2 s for a 272 MB matrix,
    0.3 s with ordinary pages)."""
    mm = mmap.mmap(-1, max(1, rows * width) * 4)
    return np.frombuffer(mm, dtype=np.float32, count=rows * width).reshape(rows, width)


def _parse_chunk(buf, n_features, missing) -> _Part:
    part = _fast_chunk(buf, n_features, missing)
    if part is None:
        part = _slow_chunk(buf, n_features, missing)
    return part


# ---------------------------------------------------------------- the reference path

def _slow_chunk(buf, n_features, missing) -> _Part:
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
        hash_pos = line.find("#")
        if hash_pos >= 0:
            comment = line[hash_pos + 1:].split(None, 1)
            line = line[:hash_pos]
        else:
            comment = None
        parts = line.split(None, 2)
        if not parts:
            continue
        if len(parts) < 2 or not parts[1].startswith("qid:") or len(parts[1]) == 4:
            raise _ChunkError(i, _SHAPE)
        try:
            grade = float(parts[0])
        except ValueError:
            raise _ChunkError(i, f"grade {parts[0]!r} is not a number") from None
        if not math.isfinite(grade):
            raise _ChunkError(i, f"grade {parts[0]!r} is not a finite number")
        r = len(labels)
        seen = set()
        for tok in (parts[2].split() if len(parts) == 3 else ()):
            if not _NUM_TOKEN.match(tok):
                raise _ChunkError(i, f"bad feature token {tok!r} (expected index:value)")
            key, text_value = tok.split(":")
            try:
                value = float(text_value)
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
            if not -_F32_LIMIT < value < _F32_LIMIT:
                raise _ChunkError(i, f"feature {key} has value {text_value}: "
                                     "features must be finite float32 numbers")
            rows.append(r)
            cols.append(j - 1)
            vals.append(value)
        labels.append(grade)
        qids.append(parts[1][4:])
        docs.append(comment[0] if comment else "")
    n = len(labels)
    width = max(cols) + 1 if cols else 0
    block = np.full((n, width), missing, dtype=np.float32)
    if cols:
        block[np.asarray(rows), np.asarray(cols)] = np.asarray(vals, dtype=np.float64)
    qnames, qinv = _distinct(qids)
    return _Part(block=block, y=np.asarray(labels, dtype=np.float64), qnames=qnames, qinv=qinv,
                 doc_ids=np.array(docs, dtype=str) if any(docs) else None, n_lines=len(lines),
                 n_newlines=buf.count(b"\n"), n_bytes=len(buf))


def _distinct(names: list) -> tuple[list, np.ndarray]:
    index: dict = {}
    inv = np.fromiter((index.setdefault(s, len(index)) for s in names), dtype=np.int64,
                      count=len(names))
    return list(index), inv


# ------------------------------------------------------------------ the fast path

_PAD = 16
_U = np.uint64
_ZEROS = _U(0x3030303030303030)     # eight '0'
_HIGH_NIBBLES = _U(0xF0F0F0F0F0F0F0F0)
_SIXES = _U(0x0606060606060606)
_LOW7 = _U(0x7F7F7F7F7F7F7F7F)
_DOTS = _U(0x2E2E2E2E2E2E2E2E)
_BYTE_SUM = _U(0x0101010101010101)
_BYTE_RANK = _U(0x0706050403020100)
_PAIR = _U(0x000000FF000000FF)
_MUL1 = _U(100 + (1000000 << 32))
_MUL2 = _U(1 + (10000 << 32))
_ALL = (1 << 64) - 1
#: _KEEP[n]: the top n bytes of a little-endian word (the last n characters loaded)
_KEEP = np.array([0] + [(_ALL << (8 * (8 - n))) & _ALL for n in range(1, 9)], dtype=np.uint64)
_FILL = _ZEROS & ~_KEEP               # '0' in the other bytes
_POW10 = 10.0 ** np.arange(24)
_local = threading.local()
_UNICODE_LINE_BREAKS = ("\u0085".encode(), "\u2028".encode(), "\u2029".encode())


def _workspace(n: int) -> np.ndarray:
    """This thread's reusable byte buffer for a chunk of n bytes plus padding (8-aligned)."""
    need = (n + 2 * _PAD + 7) // 8 * 8
    buf = getattr(_local, "work", None)
    if buf is None or len(buf) < need:
        buf = _local.work = np.empty(max(need, _CHUNK_BYTES + 4096), dtype=np.uint8)
    return buf[:need]


def _load8(words, pos):
    """The eight bytes at byte offsets ``pos`` as little-endian uint64 (two aligned
    loads and a funnel shift: much cheaper than an unaligned gather in NumPy)."""
    q = pos >> 3
    r = ((pos & 7) << 3).astype(np.uint64)
    lo = words.take(q)
    lo >>= r
    hi = words.take(q + 1)
    hi <<= _U(63) - r                  # 64 - r in two steps: r may be 0
    hi <<= _U(1)
    lo |= hi
    return lo


def _eight_digits(x):
    """Eight ASCII digits (first character in the lowest byte) -> their number."""
    x -= _ZEROS
    x = x * _U(10) + (x >> _U(8))
    return ((x & _PAIR) * _MUL1 + ((x >> _U(16)) & _PAIR) * _MUL2) >> _U(32)


def _all_digits(x):
    return ((x & _HIGH_NIBBLES) == _ZEROS) & (((x + _SIXES) & _HIGH_NIBBLES) == _ZEROS)


def _dot_bytes(x):
    """1 in the lowest bit of every byte of x that is '.', 0 elsewhere."""
    y = x ^ _DOTS
    t = y & _LOW7
    t += _LOW7
    t |= y
    t |= _LOW7
    return ~t >> _U(7)


def _decimals(words, starts, ends, first):
    """Parse ``[-]digits[.digits]`` fields of up to 16 characters after the sign
    (``first``: their first bytes) exactly as Python's float() does: the digits, the
    dot dropped, make one integer below 2**53, divided once by a power of ten (one
    rounding, as strtod). Returns the values and a mask of the fields it could not
    decode that way (exponents, '+', long fields, junk): float() decides those."""
    neg = first == 45
    n = ends - starts - neg
    n1 = np.minimum(n, 8)                 # characters in the later word
    n0 = np.minimum(n - n1, 8)            # ... and in the earlier one
    w1 = _load8(words, ends - 8)
    w1 &= _KEEP[n1]
    w1 |= _FILL[n1]
    w0 = _load8(words, ends - 16)
    w0 &= _KEEP[n0]
    w0 |= _FILL[n0]
    d1, d0 = _dot_bytes(w1), _dot_bytes(w0)
    s1, s0 = d1 != 0, d0 != 0
    frac = (((d1 * _BYTE_RANK) >> _U(56)) + ((d0 * _BYTE_RANK) >> _U(56))) & _U(7)
    frac += s0 * _U(8)                    # digits after the dot
    ndots = ((d1 + d0) * _BYTE_SUM) >> _U(56)
    # drop the dot: the characters before it move up one byte, across both words
    below = d1 - s1
    kept = ~(below | d1 * _U(0xFF))
    kept &= w1
    below &= w1
    below <<= _U(8)
    kept |= below
    kept |= (w0 >> _U(56)) * s1
    w1 = kept
    below = (d0 - s0) | (_U(0) - s1)
    kept = ~(below | d0 * _U(0xFF))
    kept &= w0
    below &= w0
    below <<= _U(8)
    kept |= below
    kept |= (s0 | s1) * _U(0x30)
    w0 = kept
    ok = _all_digits(w0)
    ok &= _all_digits(w1)
    ok &= ndots <= 1
    ok &= n > (s0 | s1)
    ok &= n <= 16
    mantissa = _eight_digits(w0) * _U(100_000_000) + _eight_digits(w1)
    ok &= mantissa < _U(1 << 53)
    value = mantissa.astype(np.float64)
    value /= _POW10[frac.astype(np.intp)]
    np.negative(value, out=value, where=neg)
    return value, ~ok


def _python_floats(a, starts, ends, which, out) -> bool:
    """float() on the fields ``which``; False if one is not a finite float32 number."""
    for i in which.tolist():
        try:
            v = float(a[starts[i]:ends[i]].tobytes().decode("ascii"))
        except ValueError:
            return False
        if not -_F32_LIMIT < v < _F32_LIMIT:
            return False
        out[i] = v
    return True


def _strings(a, starts, ends) -> np.ndarray:
    """The fields as a NumPy bytes array (fixed width, gathered without Python loops)."""
    lens = ends - starts
    width = max(1, int(lens.max())) if len(lens) else 1
    cols = np.arange(width)
    g = a.take(np.minimum(starts[:, None] + cols, len(a) - 1))
    g[cols >= lens[:, None]] = 0
    return g.view(f"S{width}").ravel()


def _first_words(a, starts, ends) -> np.ndarray:
    """The first whitespace-delimited word of each field [starts, ends) ('' if none),
    where a[ends] is whitespace: str.split()[0] without a Python loop."""
    width = min(64, int((ends - starts).max()) + 1)
    cols = np.arange(width)
    solid = a.take(np.minimum(starts[:, None] + cols, ends[:, None])) > 32
    begin = solid.argmax(axis=1)
    after = ~solid
    after &= cols >= begin[:, None]
    stop = after.argmax(axis=1)
    stop[~solid.any(axis=1)] = 0
    words = _strings(a, starts + begin, starts + stop)
    cut = np.flatnonzero(~after.any(axis=1))     # a word past the window: the slow way
    if len(cut):
        words = words.astype(object)
        for i in cut.tolist():
            words[i] = a[starts[i]:ends[i]].tobytes().split(None, 1)[0]
        words = np.array(words.tolist(), dtype=bytes)
    return words


def _fast_chunk(buf, n_features, missing) -> _Part | None:
    """The chunk parsed with vectorised NumPy, or None if anything is off (the caller
    then re-parses it line by line, which reports the error). The GIL is released in
    nearly all of it, so two threads parse two chunks at once."""
    raw = np.frombuffer(buf, dtype=np.uint8)
    n = len(raw)
    if n == 0:
        return None
    unicode = raw.max() > 127
    if unicode:                    # fine in comments (doc ids), if valid UTF-8 and no
        text = bytes(buf)          # U+0085/U+2028/U+2029, which str.splitlines() splits at
        if any(sep in text for sep in _UNICODE_LINE_BREAKS):
            return None
        try:
            text.decode("utf-8")
        except UnicodeDecodeError:
            return None
    a = _workspace(n)
    a[:_PAD] = 32
    a[_PAD:_PAD + n] = raw
    a[_PAD + n:] = 32
    words = a.view("<u8")                         # little-endian on any machine
    nl = np.flatnonzero(a == 10)
    n_newlines = len(nl)
    n_ctrl = np.count_nonzero(a < 32)
    if n_ctrl != n_newlines:      # only \t and \r\n may join \n; other controls split lines
        text = bytes(buf)
        n_cr = text.count(b"\r")
        if n_ctrl != n_newlines + text.count(b"\t") + n_cr or n_cr != text.count(b"\r\n"):
            return None

    # comments: the first '#' of a line to its end; the doc id is the comment's first word
    hashes = np.flatnonzero(a == 35)
    comment_lines = None
    if len(hashes):
        line_of = np.searchsorted(nl, hashes)
        first = np.ones(len(hashes), dtype=bool)
        first[1:] = line_of[1:] != line_of[:-1]
        hashes, comment_lines = hashes[first], line_of[first]
        ends = nl[comment_lines]
        doc_words = _first_words(a, hashes + 1, ends)
        lens = ends - hashes
        blank = np.repeat(hashes - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
        if unicode:                # those comments: str.split() knows more spaces
            wide = np.flatnonzero(np.logical_or.reduceat(a[blank] > 127, np.cumsum(lens) - lens))
            doc_words[wide] = b""
            doc_words = doc_words.astype(str).astype(object)
            for i in wide.tolist():
                word = a[hashes[i] + 1:ends[i]].tobytes().decode("utf-8").split(None, 1)
                doc_words[i] = word[0] if word else ""
        doc_words = doc_words.astype(str)
        a[blank] = 32
    if unicode and a.max() > 127:                 # non-ASCII outside comments
        return None

    # tokens: maximal runs of bytes > 32 (the padding makes starts and ends alternate)
    ws = a <= 32
    edges = np.flatnonzero(ws[1:] != ws[:-1]) + 1
    ts, te = edges[0::2], edges[1::2]
    line_tok = np.empty(len(nl) + 2, dtype=np.intp)
    line_tok[0] = 0
    line_tok[1:-1] = np.searchsorted(ts, nl)
    line_tok[-1] = len(ts)
    per_line = np.diff(line_tok)
    row_lines = np.flatnonzero(per_line)
    n_rows = len(row_lines)
    if n_rows == 0:
        return _Part(np.zeros((0, 0), np.float32), np.zeros(0), [], np.zeros(0, np.int64),
                     None, n_newlines, n_newlines, n)
    per_row = per_line[row_lines]
    if per_row.min() < 2:
        return None
    firsts = line_tok[row_lines]                  # each row's grade token

    # every other token holds exactly one colon, neither first nor last: the k-th colon
    # of the chunk lies inside the k-th token that is not a grade
    colon = np.flatnonzero(a == 58)
    rs, re_ = np.delete(ts, firsts), np.delete(te, firsts)
    if len(colon) != len(rs) or not (np.all(rs < colon) and np.all(re_ - colon >= 2)):
        return None
    # ... and the first of them on each row is qid:VALUE
    qpos = firsts - np.arange(n_rows)
    qs, qc, qe = rs[qpos], colon[qpos], re_[qpos]
    if not (np.all(qc - qs == 3) and np.all(a[qs] == 113) and np.all(a[qs + 1] == 105)
            and np.all(a[qs + 2] == 100)):
        return None

    # features: index (1 to 5 digits) ':' value
    keep = np.ones(len(colon), dtype=bool)
    keep[qpos] = False
    fc = colon[keep]
    if len(fc):
        klen = fc - rs[keep]
        longest = int(klen.max())
        if longest > 5:
            return None
        digit = a.take(fc - 1) - np.uint8(48)
        if np.any(digit > 9):
            return None
        idx = digit.astype(np.int32)
        for k in range(2, longest + 1):
            digit = a.take(fc - k) - np.uint8(48)
            inside = klen >= k
            if np.any((digit > 9) & inside):
                return None
            digit *= inside
            idx += digit.astype(np.int32) * 10 ** (k - 1)
        limit = n_features if n_features is not None else MAX_FEATURE_ID
        if idx.min() < 1 or idx.max() > limit:
            return None
    else:
        idx = np.zeros(0, dtype=np.int32)

    # numbers: the grades, then the feature values
    starts = np.concatenate([ts[firsts], fc + 1])
    ends = np.concatenate([te[firsts], re_[keep]])
    first = a.take(starts)
    digit = first - np.uint8(48)
    vals = digit.astype(np.float64)               # right for the single characters
    bad = digit > 9
    longer = np.flatnonzero(ends - starts > 1)
    if len(longer):
        vals[longer], bad[longer] = _decimals(words, starts[longer], ends[longer], first[longer])
    if bad.any() and not _python_floats(a, starts, ends, np.flatnonzero(bad), vals):
        return None
    y, vals = vals[:n_rows].copy(), vals[n_rows:]    # (a view would keep all values)

    # rows: their features, no feature twice
    nnz = per_row - 2
    width = int(idx.max()) if len(idx) else 0
    k0 = int(nnz[0])
    if k0 == width and np.all(nnz == k0) and np.array_equal(
            idx.reshape(n_rows, k0), np.broadcast_to(np.arange(1, k0 + 1), (n_rows, k0))):
        block = vals.astype(np.float32).reshape(n_rows, k0)   # dense rows, ids 1..K in order
    else:
        row_of = np.repeat(np.arange(n_rows), nnz)
        key = row_of * (width + 1) + idx
        if len(key) > 1 and np.any(key[1:] <= key[:-1]):
            key = np.sort(key)
            if np.any(key[1:] == key[:-1]):
                return None                       # a feature twice in a row
        block = np.full((n_rows, width), missing, dtype=np.float32)
        block[row_of, idx - 1] = vals

    # qids (in order of first appearance) and doc ids
    uniq, first_at, inv = np.unique(_strings(a, qc + 1, qe), return_index=True,
                                     return_inverse=True)
    order = np.argsort(first_at)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    qnames = [q.decode("ascii") for q in uniq[order].tolist()]
    doc_ids = None
    if comment_lines is not None:
        where = np.searchsorted(row_lines, comment_lines)
        hit = where < n_rows
        hit[hit] = row_lines[where[hit]] == comment_lines[hit]
        found = doc_words[hit]
        if np.any(found != ""):
            doc_ids = np.zeros(n_rows, dtype=found.dtype)
            doc_ids[where[hit]] = found
    return _Part(block=block, y=y, qnames=qnames, qinv=rank[inv.ravel()], doc_ids=doc_ids,
                 n_lines=n_newlines, n_newlines=n_newlines, n_bytes=n)


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
    """Rows as text; float32 values printed with 9 significant digits (exact round trip).
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
        line = f"{lab} qid:{qid_of_row[r]} {feats}"
        if ds.doc_ids is not None and ds.doc_ids[r]:
            line += f" # {ds.doc_ids[r]}"
        lines.append(line)
    return "\n".join(lines) + ("\n" if lines else "")


def save_svmlight(ds: RankingDataset, path) -> None:
    with atomic_write(path) as fh:
        fh.write(format_rows(ds))
