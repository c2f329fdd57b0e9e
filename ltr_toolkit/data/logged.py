"""Logged data's schema: the rows feature logging writes, ``grade qid:N 1:v 2:v ... #
docid`` (a feature the plugin did not match left out of its row), the header line that
starts them, and the JSON sidecar ``OUT.json`` beside them (the feature set: name, feature
names, content hash; the judgments, the first stage, the counts). Every reader of logged
data takes the missing-feature rule from here.

The missing-feature rule travels with the data, not with the file beside it: the file's
first line declares it, ``# ltr-toolkit logged: missing=absent features=N`` (a comment
line: SVMlight readers, xgboost's and scikit-learn's included, skip it), so a copy, a
rename or a ``head`` of the file still says what an absent feature means.
``missing=absent``: a feature absent from a row did not match, and it reads as NaN;
``missing=zero``: the LETOR / RankLib convention, 0.0. A file's own rule is its header's,
else its sidecar's ``missing_features`` (files logged before the header); a file that
declares none (plain LETOR data, a ``tail`` of a logged file) takes the rule of what it is
used with (:func:`resolve_rule`): the training data's for ``--valid`` / ``--test``, the
model artifact's (``"missing_features"``) for ``ltr predict``, else 0.0. A file whose
rule disagrees with that is refused in one line.

The header is also the file's mark (:mod:`.ids`): the rows of a file that starts with it
have their qids and doc ids percent-escaped; a file without it (LETOR, RankLib, other
tools' data) is read with its ids as they are.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from ..errors import InputError, UserError
from .ids import MARK, escape_id, is_marked, unescape

#: The rule of a file whose absent features did not match (NaN).
MISSING_ABSENT = "absent"
#: The LETOR / RankLib rule: an absent feature is 0.0.
MISSING_ZERO = "zero"
_VALUES = {MISSING_ABSENT: np.nan, MISSING_ZERO: 0.0}
_MEANS = {MISSING_ABSENT: "missing (NaN)", MISSING_ZERO: "0.0"}
#: How a logged file's first line starts.
HEADER = MARK + "logged:"


def sidecar_path(path) -> Path:
    path = Path(path)
    return path.with_suffix(path.suffix + ".json")


# --------------------------------------------------------------------- the header line

def header_line(n_features: int, missing: str | None = MISSING_ABSENT) -> str:
    """The first line of a logged file: what an absent feature means (left out when
    ``missing`` is None: the file then takes the rule of what it is used with), and how
    many features a row can have."""
    words = ([f"missing={missing}"] if missing else []) + \
        ([f"features={int(n_features)}"] if n_features else [])
    return " ".join([HEADER, *words]) + "\n"


def is_header(line: str) -> bool:
    return line.startswith(HEADER)


def _first_line(path) -> bytes:
    """The file's first line (its first 4 KiB at most); b"" when it cannot be read (the
    reader reports that)."""
    try:
        with open(path, "rb") as fh:
            return fh.readline(4096)
    except OSError:
        return b""


def is_own(path) -> bool:
    """Whether ``path`` starts with the toolkit's mark (:mod:`.ids`): its ids escaped."""
    return is_marked(_first_line(path))


def read_header(path) -> dict:
    """What the file's first line declares, ``{"missing_features", "n_features"}`` (the
    keys it names), or {} for a file without the header. A header with a value it cannot
    mean: InputError at line 1."""
    path = Path(path)
    text = _first_line(path).decode("utf-8", "replace")
    if not is_header(text):
        return {}
    out = {}
    for word in text[len(HEADER):].split():
        key, _, value = word.partition("=")
        if key == "missing":
            if value not in _VALUES:
                raise InputError(path, 1, f"header: missing={value!r}: expected "
                                          f"{' or '.join(_VALUES)}")
            out["missing_features"] = value
        elif key == "features":
            if not value.isascii() or not value.isdigit() or int(value) < 1:
                raise InputError(path, 1, f"header: features={value!r}: expected a whole "
                                          "number >= 1")
            out["n_features"] = int(value)
    return out


# --------------------------------------------------------------------------- the sidecar

def _names(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _text(v) -> bool:
    return isinstance(v, str)


#: The sidecar's fields the readers use, with what each must be (None is allowed too).
SIDECAR_FIELDS = {
    "feature_names": (_names, "a list of strings"),
    "featureset": (_text, "a string"),
    "featureset_sha256": (_text, "a string"),
    "missing_features": (lambda v: v in _VALUES, f"{' or '.join(map(repr, _VALUES))}"),
    "rows": (_count, "a whole number >= 0"),
    "max_query_terms": (_count, "a whole number >= 0"),
    "first_stage": (lambda v: isinstance(v, dict), "an object"),
    "candidates": (lambda v: isinstance(v, dict), "an object"),
    "clicks": (lambda v: isinstance(v, dict), "an object"),
}


def read_sidecar(path) -> dict:
    """The JSON sidecar ``PATH.json`` written beside logged data, checked (an object,
    the fields :data:`SIDECAR_FIELDS` names of their type), or {} without one."""
    side = sidecar_path(path)
    if not side.is_file():
        return {}
    try:
        data = json.loads(side.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise InputError(side, None, "sidecar is not UTF-8 text") from None
    except ValueError as exc:
        raise InputError(side, getattr(exc, "lineno", None), "sidecar is not valid JSON") from None
    if not isinstance(data, dict):
        raise InputError(side, None, f"sidecar is a JSON {type(data).__name__}, "
                                     "expected an object")
    for key, (ok, what) in SIDECAR_FIELDS.items():
        if data.get(key) is not None and not ok(data[key]):
            raise InputError(side, None, f"sidecar's {key} is {json.dumps(data[key])[:60]}: "
                                         f"expected {what}")
    return data


# ------------------------------------------------------------------ the missing rule

def own_rule(path, side: dict | None = None, header: dict | None = None) -> str | None:
    """The missing-feature rule the file declares itself (its header's, else its
    sidecar's), None if it declares none; header and sidecar disagreeing: refused."""
    header = read_header(path) if header is None else header
    side = read_sidecar(path) if side is None else side
    a, b = header.get("missing_features"), side.get("missing_features")
    if a and b and a != b:
        raise InputError(path, 1, f"its header says an absent feature is {_MEANS[a]}, its "
                                  f"sidecar {sidecar_path(path).name} says {_MEANS[b]}")
    return a or b


def resolve_rule(path, own: str | None, given: str | None, given_by) -> str:
    """The rule to read ``path`` with: its own (:func:`own_rule`), else the one
    ``given_by`` (the training data, a model artifact) ``given``, else the LETOR rule
    (0.0). Both declared and different: refused in one line."""
    if own and given and own != given:
        raise UserError(f"{path} says an absent feature is {_MEANS[own]}, {given_by} "
                        f"says {_MEANS[given]}",
                        "use data logged the same way (its header's missing=)")
    return own or given or MISSING_ZERO


def missing_value(rule: str | None) -> float:
    """What a feature absent from a row reads as under ``rule``: NaN (it did not match)
    for ``absent``, 0.0 (the LETOR convention) otherwise."""
    return _VALUES.get(rule or MISSING_ZERO, 0.0)


# --------------------------------------------------------------------------- the rows

def grade_text(g) -> str:
    """A grade as a logged row writes it: an integer without a point."""
    return str(int(g)) if float(g).is_integer() else repr(g)


def row_text(grade, qid: str, values, docid: str) -> str:
    """One logged row: the features that have a value (``None``: did not match, left out),
    numbered from 1; qid and doc id percent-escaped (:mod:`.ids`)."""
    feats = "".join(f" {i + 1}:{v:.9g}" for i, v in enumerate(values) if v is not None)
    return f"{grade_text(grade)} qid:{escape_id(qid)}{feats} # {escape_id(docid)}\n"


def row_key(line: str, escaped: bool) -> tuple[str | None, tuple[str, str] | None]:
    """(grade token, (qid, docid)) of a logged row ``grade qid:N ... # docid`` of a file
    with the header (``escaped``: :func:`is_own`) or without; (None, None) for any other
    line."""
    body, _, comment = line.partition("#")
    parts = body.split(maxsplit=2)
    if len(parts) < 2 or not parts[1].startswith("qid:") or not comment.strip():
        return None, None
    return parts[0], (unescape(parts[1][4:], escaped), unescape(comment.split()[0], escaped))


#: a row's qid and doc id, and what lies around them
_ROW_IDS = re.compile(r"(\s*\S+\s+qid:)([^\s#]+)([^#]*#\s*)(\S+)(.*)", re.S)


def own_row(line: str) -> str:
    """A row of a file without the header as a file with it holds it: its qid and doc id
    escaped (their ``%``: neither has whitespace), the rest as it is."""
    m = _ROW_IDS.match(line)
    if m is None or "%" not in line:
        return line
    lead, qid, middle, doc, rest = m.groups()
    return f"{lead}{escape_id(qid)}{middle}{escape_id(doc)}{rest}"
