"""SVMlight / RankLib ranking files: ``grade qid:N 1:v 2:v ... # docid``.

The reader does one light split per line in Python and parses every ``index:value`` token
in a single C-level pass (``numpy.fromstring``), so MSLR-size files load in seconds.
Features absent from a row (sparse rows) take ``missing``: 0.0 by default (the LETOR /
RankLib convention), NaN for files logged by this toolkit, whose JSON sidecar says
``"missing_features": "absent"`` (:func:`load_logged` reads that). NaN means "the
feature did not match": each model family then treats it as the plugin does. Queries are kept in the order they first appear;
rows of a query that appear in several runs are gathered together, stably.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..fsutil import atomic_write
from .dataset import RankingDataset

_NUM_TOKEN = re.compile(r"^\d+:[^\s:]+$")

#: Sidecar value of ``missing_features``: a feature absent from a row did not match.
MISSING_ABSENT = "absent"


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


def load_logged(path, n_features: int | None = None) -> RankingDataset:
    """:func:`load_svmlight` with what the sidecar says: feature names, and absent
    features as missing (NaN) when it records ``"missing_features": "absent"``."""
    side = read_sidecar(path)
    missing = np.nan if side.get("missing_features") == MISSING_ABSENT else 0.0
    names = side.get("feature_names")
    if n_features is None and names:
        n_features = len(names)   # trailing features may be absent from every row
    ds = load_svmlight(path, n_features=n_features, missing=missing, feature_names=names)
    ds.meta["sidecar"] = side
    return ds


def load_svmlight(path, n_features: int | None = None, missing: float = 0.0,
                  feature_names: list[str] | None = None) -> RankingDataset:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(path, None, f"cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(path, line, "not UTF-8 text") from None

    labels: list[float] = []
    qid_of_row: list[str] = []
    bodies: list[str] = []
    comments: list[str] = []
    nnz: list[int] = []
    line_no: list[int] = []
    for i, line in enumerate(text.splitlines(), start=1):
        hash_pos = line.find("#")
        if hash_pos >= 0:
            comment = line[hash_pos + 1:].strip()
            line = line[:hash_pos]
        else:
            comment = ""
        parts = line.split(None, 2)
        if not parts:
            continue
        if len(parts) < 2 or not parts[1].startswith("qid:") or len(parts[1]) == 4:
            raise InputError(path, i, "expected `grade qid:N index:value ...`")
        try:
            labels.append(float(parts[0]))
        except ValueError:
            raise InputError(path, i, f"grade {parts[0]!r} is not a number") from None
        qid_of_row.append(parts[1][4:])
        rest = parts[2] if len(parts) == 3 else ""
        bodies.append(rest)
        nnz.append(rest.count(":"))
        comments.append(comment.split(None, 1)[0] if comment else "")
        line_no.append(i)

    n_rows = len(labels)
    if n_rows == 0:
        raise InputError(path, None, "no data rows")
    counts = np.asarray(nnz, dtype=np.int64)
    joined = " ".join(bodies)
    toks = joined.replace(":", " ").split()
    if len(toks) != 2 * counts.sum():
        _raise_bad_token(path, bodies, line_no)
    try:
        vals = np.array(toks[1::2], dtype=np.float64)
        idx_tokens = toks[0::2]
        # indices repeat a lot: parse each distinct token once
        lut = {t: int(t) for t in set(idx_tokens)}
        idx = np.fromiter(map(lut.__getitem__, idx_tokens), dtype=np.int64, count=len(idx_tokens))
    except ValueError:
        _raise_bad_token(path, bodies, line_no)
    if vals.size and not np.all(np.isfinite(vals.astype(np.float32))):
        bad = int(np.argmax(~np.isfinite(vals.astype(np.float32))))
        row = int(np.searchsorted(np.cumsum(counts), bad, side="right"))
        raise InputError(path, line_no[row], f"feature {idx_tokens[bad]} has value {toks[2 * bad + 1]}: "
                         "features must be finite float32 numbers")
    if idx.size and np.any(idx < 1):
        bad = int(np.argmax(idx < 1))
        row = int(np.searchsorted(np.cumsum(counts), bad, side="right"))
        raise InputError(path, line_no[row], "feature indices must be whole numbers >= 1")
    idx = idx.astype(np.int64) - 1
    max_idx = int(idx.max()) + 1 if idx.size else 0
    if n_features is None:
        n_features = max(max_idx, len(feature_names) if feature_names else 0)
    elif max_idx > n_features:
        bad = int(np.argmax(idx >= n_features))
        row = int(np.searchsorted(np.cumsum(counts), bad, side="right"))
        raise InputError(path, line_no[row], f"feature {int(idx[bad]) + 1} beyond the {n_features} expected")

    X = np.full((n_rows, n_features), missing, dtype=np.float32)
    rows = np.repeat(np.arange(n_rows), counts)
    X[rows, idx] = vals.astype(np.float32)
    y = np.asarray(labels, dtype=np.float64)

    # group rows by qid in order of first appearance (stable)
    qid_arr = np.asarray(qid_of_row, dtype=object)
    uniq, first, inverse = np.unique(qid_arr, return_index=True, return_inverse=True)
    order_of_query = np.argsort(np.argsort(first, kind="stable"), kind="stable")
    q_of_row = order_of_query[inverse]
    perm = None
    if np.any(np.diff(q_of_row) < 0):
        perm = np.argsort(q_of_row, kind="stable")
        X, y, q_of_row = X[perm], y[perm], q_of_row[perm]
        qid_arr = qid_arr[perm]
        comments = [comments[p] for p in perm]
    sizes = np.bincount(q_of_row, minlength=len(uniq))
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    qids = uniq[np.argsort(first, kind="stable")]
    doc_ids = np.asarray(comments, dtype=object) if any(comments) else None
    ds = RankingDataset(X=X, y=y, offsets=offsets, qids=qids, doc_ids=doc_ids,
                        feature_names=feature_names, source=str(path))
    if perm is not None:
        ds.meta["input_rows"] = perm   # row r of ds was line perm[r] of the file's data rows
    return ds


def _raise_bad_token(path, bodies, line_no):
    for body, ln in zip(bodies, line_no):
        for tok in body.split():
            if not _NUM_TOKEN.match(tok):
                raise InputError(path, ln, f"bad feature token {tok!r} (expected index:value)")
            try:
                float(tok.split(":")[1])
            except ValueError:
                raise InputError(path, ln, f"bad feature value in {tok!r}") from None
    raise InputError(path, None, "could not parse feature tokens")


def format_rows(ds: RankingDataset, start: int = 0, stop: int | None = None) -> str:
    """Rows as text; float32 values printed with 9 significant digits (exact round trip)."""
    stop = ds.n_docs if stop is None else stop
    qid_of_row = ds.qids[ds.row_query]
    nf = ds.n_features
    idx_prefix = [f"{j + 1}:" for j in range(nf)]
    lines = []
    for r in range(start, stop):
        label = ds.y[r]
        lab = str(int(label)) if float(label).is_integer() else repr(float(label))
        feats = " ".join(p + ("%.9g" % v) for p, v in zip(idx_prefix, ds.X[r].tolist()))
        line = f"{lab} qid:{qid_of_row[r]} {feats}"
        if ds.doc_ids is not None and ds.doc_ids[r]:
            line += f" # {ds.doc_ids[r]}"
        lines.append(line)
    return "\n".join(lines) + ("\n" if lines else "")


def save_svmlight(ds: RankingDataset, path) -> None:
    with atomic_write(path) as fh:
        fh.write(format_rows(ds))
