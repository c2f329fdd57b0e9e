"""Logged data: the rows feature logging writes, ``grade qid:N 1:v 2:v ... # docid`` (a
feature the plugin did not match left out of its row), and the JSON sidecar ``OUT.json``
beside them: the feature set (name, feature names, content hash), the judgments, the
first stage, the counts, and the missing-feature rule.

The missing-feature rule: a sidecar that records ``"missing_features": "absent"`` (every
file the toolkit logs) means a feature absent from a row did not match, and it reads as
NaN; any other file follows the LETOR / RankLib convention, 0.0 (:func:`missing_value`).
``data.svmlight.load_logged`` reads a file with it; ``ltr predict`` scores one with it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import InputError

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


def missing_value(side: dict) -> float:
    """What a feature absent from a row reads as, by the sidecar: NaN (it did not match)
    for data logged by the toolkit, 0.0 (the LETOR convention) otherwise."""
    return np.nan if side.get("missing_features") == MISSING_ABSENT else 0.0


def grade_text(g) -> str:
    """A grade as a logged row writes it: an integer without a point."""
    return str(int(g)) if float(g).is_integer() else repr(g)


def row_text(grade, qid: str, values, docid: str) -> str:
    """One logged row: the features that have a value (``None``: did not match, left out),
    numbered from 1."""
    feats = "".join(f" {i + 1}:{v:.9g}" for i, v in enumerate(values) if v is not None)
    return f"{grade_text(grade)} qid:{qid}{feats} # {docid}\n"


def row_key(line: str) -> tuple[str | None, tuple[str, str] | None]:
    """(grade token, (qid, docid)) of a logged row ``grade qid:N ... # docid``; (None, None)
    for any other line."""
    body, _, comment = line.partition("#")
    parts = body.split(maxsplit=2)
    if len(parts) < 2 or not parts[1].startswith("qid:") or not comment.strip():
        return None, None
    return parts[0], (parts[1][4:], comment.split()[0])
