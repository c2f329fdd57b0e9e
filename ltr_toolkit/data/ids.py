"""Identifiers and query texts in the toolkit's space-separated text formats (RankLib
judgments and logged / SVMlight rows: ``qid:Q`` and ``# docid``; TREC qrels and their
queries file): percent-escaped, so that an id with a space, a tab or a line break stays
one field and a query text stays on its line.

Written: ``%`` as ``%25``, and in an id every whitespace character (``SKU 123`` ->
``SKU%20123``, a tab ``%09``, U+2028 ``%E2%80%A8``: its UTF-8 bytes), in a query text every
line break (``\\n`` ``%0A``, U+2028, ...). Read: every ``%XX`` decoded (an id without ``%``,
as other tools write them, reads as it is). CSV and JSONL carry any id and text as they
are. Every reader and writer of those formats goes through :func:`escape_id` /
:func:`escape_text` and :func:`unescape`.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

_ID_ESCAPED = re.compile(r"[\s%]")
#: what str.splitlines() breaks a line at, and the escape character
_TEXT_ESCAPED = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029%]")


def _quoted(m: re.Match) -> str:
    return quote(m.group(0), safe="")


def escape_id(ident) -> str:
    """``ident`` as one whitespace-free field: whitespace and ``%`` percent-escaped."""
    ident = str(ident)
    return _ID_ESCAPED.sub(_quoted, ident) if _ID_ESCAPED.search(ident) else ident


def escape_text(text) -> str:
    """A query text on one line: line breaks and ``%`` percent-escaped."""
    text = str(text)
    return _TEXT_ESCAPED.sub(_quoted, text) if _TEXT_ESCAPED.search(text) else text


def unescape(field: str) -> str:
    """An id or text as written by :func:`escape_id` / :func:`escape_text`."""
    return unquote(field) if "%" in field else field
