"""Identifiers and query texts in the toolkit's space-separated text formats (RankLib
judgments, TREC qrels and their queries file, logged / SVMlight rows: ``qid:Q`` and
``# docid``): percent-escaped in the files the toolkit writes, so that an id with a space,
a tab or a line break stays one field and a query text stays on its line; kept byte for
byte in everyone else's files.

Which files are the toolkit's: those whose first line starts with :data:`MARK`, the line
the toolkit writes first (``# ltr-toolkit judgments: ...`` in RankLib judgments and in the
queries file beside TREC qrels, which marks the qrels too: trec_eval and the other qrels
readers take exactly four fields a line, so the qrels themselves carry no comment;
``# ltr-toolkit logged: ...`` in logged and saved SVMlight rows, :mod:`.logged`). Every
reader reads that line first: :func:`is_marked`.

Written: ``%`` as ``%25``, and in an id every whitespace character (``SKU 123`` ->
``SKU%20123``, a tab ``%09``, U+2028 ``%E2%80%A8``: its UTF-8 bytes), in a query text every
line break (``\\n`` ``%0A``, U+2028, ...). Read from a marked file: every ``%XX`` decoded.
Read from any other file (other tools' RankLib, LETOR, qrels): ids and texts as they are,
``red%20shoe`` and ``promo%ab`` included, so an id matches the document's ``_id`` and two
ids never merge. CSV and JSONL carry any id and text as they are, whoever wrote them.
Every reader and writer of those formats goes through :func:`escape_id` /
:func:`escape_text` and :func:`unescape` (with the file's mark).
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

#: How the first line of every space-separated file the toolkit writes starts: the mark
#: that its ids and texts are percent-escaped.
MARK = "# ltr-toolkit "

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


def unescape(field: str, escaped: bool) -> str:
    """An id or text as written by :func:`escape_id` / :func:`escape_text`; as it is
    when ``escaped`` is false (a file without the mark)."""
    return unquote(field) if escaped and "%" in field else field


def is_marked(first_line) -> bool:
    """Whether a file whose first line is ``first_line`` (str or bytes) is the toolkit's
    own, its ids and texts escaped."""
    if isinstance(first_line, (bytes, bytearray)):
        return first_line.startswith(MARK.encode())
    return first_line.startswith(MARK)
