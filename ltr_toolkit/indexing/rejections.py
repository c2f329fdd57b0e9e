"""What the engine said when it refused a document of a bulk request: its id, the field
and the value it could not take (when the answer names them) and why, read from the
item of the bulk response (``helpers.bulk(..., raise_on_error=False)``'s errors).

The engine's answer to a mapping error reads ``failed to parse field [released] of type
[date] in document with id '7'. Preview of field's value: '2023-13-45'``, the why in its
``caused_by``; other refusals (a version conflict, a full queue) give a reason alone."""

from __future__ import annotations

import re

_FIELD = re.compile(r"failed to parse field \[(?P<field>.*?)\] of type \[(?P<type>[^\]]*)\]", re.S)
_PREVIEW = re.compile(r"Preview of field's value: '(?P<value>.*)'\s*$", re.S)


def rejection(item: dict) -> dict:
    """{"id", "field", "type", "value", "reason"} of one refused bulk item (``field``,
    ``type`` and ``value`` None where the engine's answer does not name them; ``reason``:
    the most specific message it gives, as it gives it)."""
    body = next(iter(item.values()), {}) if isinstance(item, dict) and item else {}
    body = body if isinstance(body, dict) else {}
    error = body.get("error")
    if not isinstance(error, dict):
        return {"id": body.get("_id"), "field": None, "type": None, "value": None,
                "reason": str(error or body.get("status") or item)}
    top = str(error.get("reason") or error.get("type") or error)
    cause = error.get("caused_by")
    reason = str(cause.get("reason") or top) if isinstance(cause, dict) else top
    named, preview = _FIELD.search(top), _PREVIEW.search(top)
    return {"id": body.get("_id"), "field": named and named["field"], "type": named and named["type"],
            "value": preview and preview["value"], "reason": reason}


#: characters of a value, and of a reason, shown: a document's text can be long
VALUE_SHOWN, REASON_SHOWN = 60, 200


def describe(r: dict) -> str:
    """One line for a :func:`rejection`: ``field released (date) value '2023-13-45':
    failed to parse date field ...``. The value, the field's name and the reason come from
    the user's documents (untrusted): the value as a Python literal, control characters
    escaped everywhere, each cut short."""
    reason = _printable(" ".join(r["reason"].split()), REASON_SHOWN)
    if r["field"] is None:
        return reason
    value = "" if r["value"] is None else f" value {_cut(r['value'], VALUE_SHOWN)!r}"
    return f"field {_printable(r['field'], VALUE_SHOWN)} ({r['type']}){value}: {reason}"


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 3] + "..."


def _printable(text: str, n: int) -> str:
    """``text`` cut to ``n`` characters, its control characters (a terminal's escape
    sequences) written as escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in _cut(text, n))
