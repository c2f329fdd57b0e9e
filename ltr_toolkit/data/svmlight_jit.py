"""The compiled path of the SVMlight reader: a chunk of bytes parsed by numba in one pass.

For large files (``svmlight`` decides: where numba's start-up, about 0.45 s, pays for
itself, or where numba is already loaded) each chunk goes first through :func:`jit_chunk`:
one loop over the bytes finds each line's tokens and decodes the numbers, a second writes
the rows into the float32 block. It takes only the plain case: ASCII bytes, lines broken by
``\\n`` or ``\\r\\n``, every row ``grade qid:VALUE id:value ...`` with ids from 1 to the limit,
none twice. Anything else makes it answer None, and the chunk goes to the NumPy path
(:mod:`.svmlight_fast`), then to the line-by-line reference, which names the error's line.

Numbers are decoded exactly as ``float()`` rounds them: ``[sign]digits[.digits][e[sign]digits]``
with at most 18 digits, read as one integer ``m`` below 2**53 and scaled once by a power of
ten up to 10**22 (both exact doubles, so one IEEE multiplication or division rounds
correctly: Clinger's fast path, as strtod takes it). Any other number (more digits, larger
exponents, ``inf``, underscores, junk) is handed to ``float()`` afterwards, one by one.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..versions import PLUGIN_MAX_FEATURES
from .svmlight_fast import Part, python_floats, qid_groups, strings

_POW10 = 10.0 ** np.arange(23)
#: numbers handed to float() per chunk before the chunk goes to the NumPy path instead
_BAD_CAP = 4096

OK, FAIL = 0, 1


@njit(cache=True, nogil=True, error_model="numpy")
def _exponent(a, i, e):
    """The exponent ``[sign]digits`` (1 to 3 digits) that fills a[i:e], and whether it does."""
    neg = False
    if i < e and (a[i] == 43 or a[i] == 45):
        neg = a[i] == 45
        i += 1
    if not 0 < e - i <= 3:
        return 0, False
    k = 0
    for j in range(i, e):
        d = np.int64(a[j]) - 48
        if not 0 <= d <= 9:
            return 0, False
        k = k * 10 + d
    return (-k if neg else k), True


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _number(a, i, pow10):
    """((value, exact, colons), end) of the token from i: ``[sign]digits[.digits]`` read
    in one pass up to its end; an exponent, or anything else, by :func:`_unusual`."""
    neg = a[i] == 45
    i += (a[i] == 45) | (a[i] == 43)
    m, i, digits = _digits(a, i, 0)
    frac = 0
    if a[i] == 46:
        m, i, frac = _digits(a, i + 1, m)
        digits += frac
    if a[i] > 32 and a[i] != 35:
        return _unusual(a, i, m, digits, frac, neg, pow10)
    return _scaled(m, digits, -frac, neg, pow10), i


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _digits(a, i, m):
    """(m with the digits from i appended, the end of the digits, their number)."""
    s = i
    while True:
        d = np.int64(a[i]) - 48
        if not 0 <= d <= 9:
            return m, i, i - s
        m = m * 10 + d
        i += 1


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _scaled(m, digits, k, neg, pow10):
    """(m * 10**k, exact): exact where m < 2**53 (at most 18 digits) and |k| <= 22."""
    if digits == 0 or digits > 18 or m >= 1 << 53 or not -22 <= k <= 22:
        return (0.0, False, 0)
    v = float(m)
    if k < 0:
        v /= pow10[-k]
    elif k > 0:
        v *= pow10[k]
    return ((-v if neg else v), True, 0)


@njit(cache=True, nogil=True, error_model="numpy")
def _unusual(a, i, m, digits, frac, neg, pow10):
    """The rest of a number token from i, after its digits: an exponent, or not exact."""
    end, colons = _token_end(a, i)
    k = -frac
    if colons == 0 and (a[i] == 101 or a[i] == 69):
        x, ok = _exponent(a, i + 1, end)
        if ok:
            v, exact, _ = _scaled(m, digits, k + x, neg, pow10)
            return (v, exact, colons), end
    return (0.0, False, colons), end


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _token_end(a, j):
    """(the end of the token starting at j, its number of colons; one more for a byte
    above 127, which the compiled path leaves to the others)."""
    n_colon = 0
    while a[j] > 32 and a[j] != 35:
        n_colon += (a[j] == 58) | (a[j] > 127)
        j += 1
    return j, n_colon


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _feature_id(a, i, limit):
    """(the id of the feature token from i: 1 to 5 digits then ':', 1..limit, or 0; the
    value's start)."""
    k = 0
    s = i
    while True:
        d = np.int64(a[i]) - 48
        if not 0 <= d <= 9:
            break
        k = k * 10 + d
        i += 1
    if a[i] != 58 or not 0 < i - s <= 5 or not 1 <= k <= limit:
        return 0, i
    return k, i + 1


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _feature(a, i, limit):
    """(id, (value, exact, colons), the value's start, the token's end) of the feature token
    from i. ``colons`` is nonzero where the token is not ``id:value``."""
    k, s = _feature_id(a, i, limit)
    (value, ok, colons), end = _number(a, s, _POW10)
    colons += k == 0 or end == s
    return k, (value, ok, colons), s, end


@njit(cache=True, nogil=True, error_model="numpy")
def _comment(a, j):
    """(start, end) of the first word after the '#' at j-1, and the line's end (its \\n),
    or -1 as the end where the comment has a byte the compiled path leaves to the others."""
    while a[j] != 10 and a[j] <= 32:
        if not _blank(a, j):
            return 0, 0, -1
        j += 1
    s = j
    odd = False
    while a[j] > 32:
        odd |= a[j] > 127
        j += 1
    e = j
    while a[j] != 10:
        odd |= a[j] > 127 or (a[j] < 32 and not _blank(a, j))
        j += 1
    return s, e, -1 if odd else j


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _blank(a, j):
    """Whether the byte at j (below 33, not \\n) is a space, a tab, or \\r before \\n: any
    other control byte breaks lines for str.splitlines()."""
    return a[j] == 32 or a[j] == 9 or (a[j] == 13 and a[j + 1] == 10)


@njit(cache=True, nogil=True, error_model="numpy")
def _scan(a, limit):
    """Every line's tokens, checked and decoded. Returns (status, rows, values, highest id,
    how many numbers are left to float(), lines, arrays) with arrays: (grades, per-row
    counts, per-row spans [qid start, qid end, doc start, doc end], values, their
    columns, the numbers left to float() as [slot, start, end] (slot: a value's index, or
    -1 - row for a grade))."""
    n = len(a)
    most = n // 8 + 1               # a row takes 8 bytes at least: "0 qid:1\n"
    y = np.empty(most)
    nnz = np.empty(most, np.int64)
    spans = np.empty((most, 4), np.int64)
    vals = np.empty(n // 4 + 1)     # a value 4: "1:0 "
    cols = np.empty(n // 4 + 1, np.int32)
    bad = np.empty((_BAD_CAP, 3), np.int64)
    out = (y, nnz, spans, vals, cols, bad)
    row = nv = n_bad = width = i = lines = 0
    while i < n:
        status, i, row, nv, n_bad, width = _line(a, i, limit, row, nv, n_bad, width, out)
        lines += 1
        if status != OK:
            return FAIL, 0, 0, 0, 0, lines, out
    return OK, row, nv, width, n_bad, lines, out


@njit(cache=True, nogil=True, error_model="numpy")
def _line(a, i, limit, row, nv, n_bad, width, out):
    """One line from i: (status, the next line's start, and the counters moved on)."""
    y, nnz, spans, vals, cols, bad = out
    tok, doc_s, doc_e, first = 0, 0, 0, nv
    while a[i] != 10:
        c = a[i]
        if c <= 32:
            if not _blank(a, i):
                return FAIL, i, row, nv, n_bad, width
            i += 1
            continue
        if c == 35:
            doc_s, doc_e, i = _comment(a, i + 1)
            if i < 0:
                return FAIL, 0, row, nv, n_bad, width
            break
        if tok == 0:
            s, slot = i, -1 - row
            (y[row], ok, colons), i = _number(a, i, _POW10)
        elif tok == 1:
            i, good = _qid(a, i, row, spans)
            ok, colons = True, 0 if good else 1
        else:
            k, (vals[nv], ok, colons), s, i = _feature(a, i, limit)
            width = max(width, k)
            cols[nv], slot = k - 1, nv
            nv += 1
        if colons:
            return FAIL, i, row, nv, n_bad, width
        if not ok:
            if n_bad == _BAD_CAP:
                return FAIL, i, row, nv, n_bad, width
            bad[n_bad, 0], bad[n_bad, 1], bad[n_bad, 2] = slot, s, i
            n_bad += 1
        tok += 1
    if tok == 1:
        return FAIL, i, row, nv, n_bad, width
    if tok:
        nnz[row] = nv - first
        spans[row, 2], spans[row, 3] = doc_s, doc_e
        row += 1
    return OK, i + 1, row, nv, n_bad, width


@njit(cache=True, nogil=True, error_model="numpy")
def _qid(a, i, row, spans):
    """(the end of the ``qid:VALUE`` token from i, whether it is one, in ASCII); its
    VALUE's span."""
    end = i
    ascii_ = True
    while a[end] > 32 and a[end] != 35:
        ascii_ &= a[end] < 128
        end += 1
    # its value may hold colons (Elastic's MSRD names its queries qid:5141)
    ok = ascii_ and end - i >= 5 and a[i] == 113 and a[i + 1] == 105 and \
        a[i + 2] == 100 and a[i + 3] == 58
    spans[row, 0], spans[row, 1] = i + 4, end
    return end, ok


@njit(cache=True, nogil=True, error_model="numpy")
def _fill(vals, cols, nnz, rows, width, missing):
    """(the float32 [rows, width] block, or one of no rows if a row names a feature twice)."""
    block = np.empty((rows, width), np.float32)
    seen = np.full(width, -1, np.int64)
    k = 0
    for r in range(rows):
        line = block[r]
        if nnz[r] != width:
            line[:] = missing
        for _ in range(nnz[r]):
            c = cols[k]
            if seen[c] == r:
                return np.empty((0, 0), np.float32)
            seen[c] = r
            line[c] = vals[k]
            k += 1
    return block


def jit_chunk(buf, n_features, missing, keys=True) -> Part | None:
    """The chunk parsed by the compiled scan, or None if it is not the plain case.
    ``keys=False``: without the rows' qids and doc ids (``qnames`` empty)."""
    a = np.frombuffer(buf, dtype=np.uint8)
    if len(a) == 0 or a[-1] != 10:
        return None
    limit = n_features if n_features is not None else PLUGIN_MAX_FEATURES
    status, rows, nv, width, n_bad, n_lines, out = _scan(a, limit)
    if status != OK:
        return None
    y, nnz, spans, vals, cols, bad = out
    if n_bad and not _left_to_float(a, bad[:n_bad], y, vals):
        return None
    block = _fill(vals, cols, nnz, rows, width, float(missing))
    if block.shape[0] != rows:
        return None
    qnames, qinv, doc_ids = [], np.zeros(rows, np.int64), None
    if keys and rows:
        qnames, qinv = qid_groups(a, spans[:rows, 0], spans[:rows, 1])
        doc_ids = _doc_ids(a, spans[:rows])
    return Part(block=block, y=y[:rows].copy(), qnames=qnames, qinv=qinv, doc_ids=doc_ids,
                n_lines=n_lines, n_newlines=n_lines, n_bytes=len(a))


def _left_to_float(a, bad, y, vals) -> bool:
    """The numbers the scan left, by ``svmlight_fast``'s float(); False if one is not a
    finite float32 number."""
    got = np.empty(len(bad))
    if not python_floats(a, bad[:, 1], bad[:, 2], np.arange(len(bad)), got):
        return False
    slot = bad[:, 0]
    grade = slot < 0
    y[-1 - slot[grade]] = got[grade]
    vals[slot[~grade]] = got[~grade]
    return True


def _doc_ids(a, spans):
    """Each row's doc id (its comment's first word), None if no row has one."""
    if not np.any(spans[:, 3] > spans[:, 2]):
        return None
    return strings(a, spans[:, 2], spans[:, 3]).astype(str)
