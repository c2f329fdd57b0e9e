"""Reading the toolkit's small text inputs (judgments, feature sets, templates, job files,
model artifacts): one place for the "cannot read" and "not UTF-8" errors."""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from pathlib import Path

from ..errors import InputError


def read_text(path) -> str:
    """The UTF-8 text of ``path`` (without the byte-order mark that Excel's "CSV UTF-8"
    and some editors put first; gzip-compressed files, as catalogues and judgment lists
    are often shipped, read as their content), or an InputError naming the file (and,
    for bytes that are not UTF-8, the line)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(path, None, f"cannot read: {exc.strerror or exc}") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(path, None, f"a damaged gzip file ({exc}): compress it again or give the plain file") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(path, data[: exc.start].count(b"\n") + 1, "not UTF-8 text") from None


def read_json(path):
    """(parsed JSON, text) of ``path``, or an InputError with the line and column of the
    first syntax error."""
    text = read_text(path)
    try:
        return json.loads(text), text
    except json.JSONDecodeError as exc:
        raise InputError(Path(path), exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})") from None


def file_sha256(path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
