"""Fields by their dotted paths, as an index maps them and as a document holds them: one
walk of nested objects for both, the mapped types that are numbers, and the one rule
for which values are dates (a collection's strings typed as dates when indexed, a date
field's values read back when its recency feature is written)."""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any, Callable, Iterator

#: the mapped types that hold a number
NUMBERS = frozenset({"long", "integer", "short", "byte", "double", "float", "half_float",
                     "scaled_float", "unsigned_long"})
#: a day (``2024-05-01``), or a day and a time to the minute at least, with an optional
#: zone (``2024-05-01T10:30:00.5Z``, ``2024-05-01 10:30+02:00``)
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$")
#: the ``format`` of a date field the toolkit maps: every value :data:`ISO_DATE` takes,
#: the ``T`` form (the engines' default) and the space form an SQL export writes
#: (``2025-06-01 10:00:00``, which the default format refuses), and epoch milliseconds
DATE_FORMAT = ("strict_date_optional_time"
               "||yyyy-MM-dd HH:mm[:ss][.SSSSSSSSS][.SSSSSS][.SSS][.SS][.S][XXX][XX]"
               "||epoch_millis")
#: a number written as text (``"12.50"``, ``"-3"``): the engines coerce it into a
#: numeric field
NUMERIC_TEXT = re.compile(r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$")


def walk(tree: dict, inner: Callable[[Any], dict | None], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, node) of every entry of ``tree`` and, where ``inner(node)`` gives a
    dict (None: none), of the entries inside it, each entry before those inside it."""
    for key, node in tree.items():
        path = f"{prefix}{key}"
        yield path, node
        below = inner(node)
        if below is not None:
            yield from walk(below, inner, path + ".")


def sub_properties(spec: dict) -> dict | None:
    """For :func:`walk` over a mapping's ``properties``: the fields inside any field
    (objects and nested ones)."""
    return spec.get("properties")


def object_properties(spec: dict) -> dict | None:
    """For :func:`walk` over a mapping's ``properties``: the fields inside a plain object
    (a nested field is one field, not walked)."""
    return spec["properties"] if "properties" in spec and spec.get("type", "object") == "object" else None


def object_value(value) -> dict | None:
    """For :func:`walk` over a document: the fields inside an object value."""
    return value if isinstance(value, dict) else None


def subfields(path: str, spec: dict) -> Iterator[tuple[str, dict]]:
    """(dotted path, spec) of a field's multi-fields (``title.keyword``)."""
    for sub, sub_spec in (spec.get("fields") or {}).items():
        yield f"{path}.{sub}", sub_spec


def is_date(value) -> bool:
    """Whether a JSON value is a date: a string :data:`ISO_DATE` matches."""
    return isinstance(value, str) and ISO_DATE.match(value) is not None


def number_of(value) -> float | None:
    """A numeric field's value as a float: a number, or text :data:`NUMERIC_TEXT` takes
    (as the engines coerce it); None for anything else (a boolean, other text)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and NUMERIC_TEXT.match(value):
        return float(value)
    return None


def date_of(value) -> _dt.datetime | None:
    """A date field's value as an aware datetime (UTC where it names no zone): epoch
    milliseconds, or a string :func:`is_date` takes; None for anything else."""
    try:
        if isinstance(value, (int, float)):
            t = _dt.datetime.fromtimestamp(value / 1000, _dt.timezone.utc)
        elif is_date(value):
            t = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        else:
            return None
    except (ValueError, OverflowError, OSError):
        return None
    return t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)
