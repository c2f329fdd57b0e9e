"""The fast path of the SVMlight reader: a chunk of bytes parsed with vectorised NumPy.

Token boundaries come from byte masks, numbers are decoded eight digits at a time in
64-bit words (the classic SWAR technique, exactly as float() rounds them), and the GIL
is released in nearly all of it, so two threads parse two chunks at once. Anything it
is not sure about (an error, line breaks other than \\n and \\r\\n, non-ASCII text outside
comments) makes :func:`fast_chunk` answer None: ``svmlight`` then parses the chunk line
by line (the reference, which names every error's line); where both parse, they agree
(``tests/test_svmlight.py``).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

import numpy as np

from ..versions import PLUGIN_MAX_FEATURES


@dataclass
class Part:
    """One parsed chunk: ``block`` holds its rows (features 1..block.shape[1])."""
    block: np.ndarray                   # float32 [rows, width]
    y: np.ndarray                       # float64 [rows]
    qnames: list                        # the chunk's distinct qids (str)
    qinv: np.ndarray                    # [rows] index into qnames
    doc_ids: np.ndarray | None          # one str per row ('U' array), or None if none has one
    n_lines: int                        # lines in the chunk (splitlines semantics)
    n_newlines: int
    n_bytes: int


_MIN_WORK = (1 << 20) + 4096
F32_LIMIT = 2.0 ** 128 - 2.0 ** 103   # |v| >= this rounds to inf in float32


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
        buf = _local.work = np.empty(max(need, _MIN_WORK), dtype=np.uint8)
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


#: A number as the SVMlight format writes one (and xgboost and scikit-learn read it):
#: ASCII digits, an optional point, sign and exponent (or inf / nan). float() also takes
#: ``1_0`` and other scripts' digits (``١``), which no other reader does.
_PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
                           r"|[+-]?(?:inf|infinity|nan)", re.ASCII | re.IGNORECASE)


def plain_float(text: str) -> float:
    """float(text) of a number as :data:`_PLAIN_NUMBER` writes it; ValueError otherwise."""
    if not _PLAIN_NUMBER.fullmatch(text):
        raise ValueError(f"not a plain number: {text!r}")
    return float(text)


def python_floats(a, starts, ends, which, out) -> bool:
    """:func:`plain_float` on the fields ``which``; False if one is not a finite float32
    number."""
    for i in which.tolist():
        try:
            v = plain_float(a[starts[i]:ends[i]].tobytes().decode("ascii"))
        except ValueError:
            return False
        if not -F32_LIMIT < v < F32_LIMIT:
            return False
        out[i] = v
    return True


def strings(a, starts, ends) -> np.ndarray:
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
    words = strings(a, starts + begin, starts + stop)
    cut = np.flatnonzero(~after.any(axis=1))     # a word past the window: the slow way
    if len(cut):
        words = words.astype(object)
        for i in cut.tolist():
            words[i] = a[starts[i]:ends[i]].tobytes().split(None, 1)[0]
        words = np.array(words.tolist(), dtype=bytes)
    return words


def fast_chunk(buf, n_features, missing) -> Part | None:
    """The chunk parsed with vectorised NumPy, or None if anything is off (the caller
    then re-parses it line by line, which reports the error)."""
    raw = np.frombuffer(buf, dtype=np.uint8)
    n = len(raw)
    if n == 0 or not _plain(buf, raw):
        return None
    a = _workspace(n)
    a[:_PAD] = 32
    a[_PAD:_PAD + n] = raw
    a[_PAD + n:] = 32
    nl = np.flatnonzero(a == 10)
    if not _only_line_controls(a, buf, len(nl)):
        return None
    unicode = bool(raw.max() > 127)
    comment_lines, doc_words = _blank_comments(a, nl, unicode)
    if unicode and a.max() > 127:                 # non-ASCII outside comments
        return None
    tokens = _Tokens(a, nl)
    if tokens.n_rows == 0:
        return Part(np.zeros((0, 0), np.float32), np.zeros(0), [], np.zeros(0, np.int64),
                    None, len(nl), len(nl), n)
    if not tokens.shaped(a):
        return None
    idx = _feature_ids(a, tokens.fc, tokens.rs[tokens.keep], n_features)
    if idx is None:
        return None
    numbers = _numbers(a, a.view("<u8"), tokens)
    if numbers is None:
        return None
    y, vals = numbers
    block = _block(tokens, idx, vals, missing)
    if block is None:
        return None
    qnames, qinv = qid_groups(a, tokens.qc + 1, tokens.qe)
    return Part(block=block, y=y, qnames=qnames, qinv=qinv,
                doc_ids=_doc_ids(tokens, comment_lines, doc_words),
                n_lines=len(nl), n_newlines=len(nl), n_bytes=n)


def _plain(buf, raw) -> bool:
    """Non-ASCII bytes are fine in comments (doc ids) if the chunk is valid UTF-8 without
    U+0085/U+2028/U+2029, at which str.splitlines() splits lines."""
    if raw.max() <= 127:
        return True
    text = bytes(buf)
    if any(sep in text for sep in _UNICODE_LINE_BREAKS):
        return False
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _only_line_controls(a, buf, n_newlines: int) -> bool:
    """Only \\t and \\r\\n may join \\n; other control bytes split lines."""
    n_ctrl = np.count_nonzero(a < 32)
    if n_ctrl == n_newlines:
        return True
    text = bytes(buf)
    n_cr = text.count(b"\r")
    return n_ctrl == n_newlines + text.count(b"\t") + n_cr and n_cr == text.count(b"\r\n")


def _blank_comments(a, nl, unicode: bool):
    """(line of each comment, its first word: the doc id), or (None, None) without any;
    the comments (the first '#' of a line to its end) are blanked in ``a``."""
    hashes = np.flatnonzero(a == 35)
    if not len(hashes):
        return None, None
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
    a[blank] = 32
    return comment_lines, doc_words.astype(str)


class _Tokens:
    """The chunk's tokens: maximal runs of bytes > 32 (the padding makes starts and ends
    alternate), per line and per row, and the colons inside them."""

    def __init__(self, a, nl):
        ws = a <= 32
        edges = np.flatnonzero(ws[1:] != ws[:-1]) + 1
        self.ts, self.te = edges[0::2], edges[1::2]
        line_tok = np.empty(len(nl) + 2, dtype=np.intp)
        line_tok[0] = 0
        line_tok[1:-1] = np.searchsorted(self.ts, nl)
        line_tok[-1] = len(self.ts)
        per_line = np.diff(line_tok)
        self.row_lines = np.flatnonzero(per_line)
        self.n_rows = len(self.row_lines)
        self.per_row = per_line[self.row_lines]
        self.firsts = line_tok[self.row_lines]          # each row's grade token

    def shaped(self, a) -> bool:
        """Every token but the grades holds exactly one colon, neither first nor last
        (the k-th colon of the chunk lies inside the k-th token that is not a grade),
        and the first of them on each row is qid:VALUE."""
        if self.per_row.min() < 2:
            return False
        colon = np.flatnonzero(a == 58)
        # a qid's value may hold colons (Elastic's MSRD names its queries qid:5141): only
        # the first colon of each row's qid token separates
        tok = np.searchsorted(self.ts, colon, side="right") - 1
        qtok = np.zeros(len(self.ts), dtype=bool)
        qtok[self.firsts + 1] = True
        later = np.zeros(len(colon), dtype=bool)
        later[1:] = tok[1:] == tok[:-1]
        colon = colon[~(qtok[tok] & later)]
        rs, re_ = np.delete(self.ts, self.firsts), np.delete(self.te, self.firsts)
        if len(colon) != len(rs) or not (np.all(rs < colon) and np.all(re_ - colon >= 2)):
            return False
        qpos = self.firsts - np.arange(self.n_rows)
        qs, self.qc, self.qe = rs[qpos], colon[qpos], re_[qpos]
        if not (np.all(self.qc - qs == 3) and np.all(a[qs] == 113) and np.all(a[qs + 1] == 105)
                and np.all(a[qs + 2] == 100)):
            return False
        self.keep = np.ones(len(colon), dtype=bool)
        self.keep[qpos] = False
        self.fc, self.rs, self.re = colon[self.keep], rs, re_
        return True


def _feature_ids(a, fc, starts, n_features):
    """Each feature's index (1 to 5 digits before its colon), None if one is not."""
    if not len(fc):
        return np.zeros(0, dtype=np.int32)
    klen = fc - starts
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
    limit = n_features if n_features is not None else PLUGIN_MAX_FEATURES
    if idx.min() < 1 or idx.max() > limit:
        return None
    return idx


def _numbers(a, words, t: _Tokens):
    """(grades, feature values) decoded, None if one is not a number."""
    starts = np.concatenate([t.ts[t.firsts], t.fc + 1])
    ends = np.concatenate([t.te[t.firsts], t.re[t.keep]])
    first = a.take(starts)
    digit = first - np.uint8(48)
    vals = digit.astype(np.float64)               # right for the single characters
    bad = digit > 9
    longer = np.flatnonzero(ends - starts > 1)
    if len(longer):
        vals[longer], bad[longer] = _decimals(words, starts[longer], ends[longer], first[longer])
    if bad.any() and not python_floats(a, starts, ends, np.flatnonzero(bad), vals):
        return None
    return vals[:t.n_rows].copy(), vals[t.n_rows:]    # (a view would keep all values)


def _block(t: _Tokens, idx, vals, missing):
    """The rows' features as a float32 matrix, None if a row names a feature twice."""
    n_rows = t.n_rows
    nnz = t.per_row - 2
    width = int(idx.max()) if len(idx) else 0
    k0 = int(nnz[0])
    if k0 == width and np.all(nnz == k0) and np.array_equal(
            idx.reshape(n_rows, k0), np.broadcast_to(np.arange(1, k0 + 1), (n_rows, k0))):
        return vals.astype(np.float32).reshape(n_rows, k0)   # dense rows, ids 1..K in order
    row_of = np.repeat(np.arange(n_rows), nnz)
    key = row_of * (width + 1) + idx
    if len(key) > 1 and np.any(key[1:] <= key[:-1]):
        key = np.sort(key)
        if np.any(key[1:] == key[:-1]):
            return None
    block = np.full((n_rows, width), missing, dtype=np.float32)
    block[row_of, idx - 1] = vals
    return block


def qid_groups(a, starts, ends):
    """(the distinct qids a[starts:ends] in order of first appearance, each row's index)."""
    uniq, first_at, inv = np.unique(strings(a, starts, ends), return_index=True,
                                     return_inverse=True)
    order = np.argsort(first_at)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return [q.decode("ascii") for q in uniq[order].tolist()], rank[inv.ravel()]


def _doc_ids(t: _Tokens, comment_lines, doc_words):
    """Each row's doc id (its line's comment's first word), None if no row has one."""
    if comment_lines is None:
        return None
    where = np.searchsorted(t.row_lines, comment_lines)
    hit = where < t.n_rows
    hit[hit] = t.row_lines[where[hit]] == comment_lines[hit]
    found = doc_words[hit]
    if not np.any(found != ""):
        return None
    doc_ids = np.zeros(t.n_rows, dtype=found.dtype)
    doc_ids[where[hit]] = found
    return doc_ids
