"""An index the toolkit is still loading says so: a marker in its mapping's ``_meta``,
written when the index is created and removed once the load (and the merge) finished.
A load killed part-way (SIGKILL, a lost node, Ctrl-C) leaves the marker: the index never
looks complete when it is not, and the commands that read or extend it can tell."""

from __future__ import annotations

import datetime as _dt

from ..errors import UserError
from ..transport.client import Connection, request

#: the ``_meta`` key of an index whose load has not finished
MARKER = "ltr_toolkit_unfinished"


def marked(body: dict, documents: int) -> dict:
    """``body`` (an index's settings and mappings) with the marker: a load of
    ``documents`` starting now."""
    mappings = dict(body.get("mappings", {}))
    since = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    mappings["_meta"] = dict(mappings.get("_meta", {}),
                             **{MARKER: {"started": since, "documents": int(documents)}})
    return dict(body, mappings=mappings)


def unfinished(mappings: dict) -> str | None:
    """Why an index of these ``mappings`` is not complete (None: it is, or the toolkit
    did not make it)."""
    mark = (mappings.get("_meta") or {}).get(MARKER)
    if not mark:
        return None
    return (f"its load of {mark.get('documents', '?')} documents, started "
            f"{mark.get('started', '?')}, did not finish")


def _mappings(conn: Connection, index: str) -> dict:
    return next(iter(request(conn, "GET", f"/{index}/_mapping").values()), {}).get("mappings", {})


def finished(conn: Connection, index: str) -> None:
    """Remove the marker of ``index`` (its load and merge are done)."""
    meta = dict(_mappings(conn, index).get("_meta") or {})
    if meta.pop(MARKER, None) is not None:
        request(conn, "PUT", f"/{index}/_mapping", {"_meta": meta})


def check_finished(conn: Connection, index: str, mappings: dict | None = None) -> None:
    """One line when ``index`` (``mappings``: its mappings, when read already) is still
    marked as being loaded."""
    why = unfinished(_mappings(conn, index) if mappings is None else mappings)
    if why:
        raise UserError(f"index {index} is incomplete: {why} (stopped or killed part-way)",
                        f"load it again with `ltr index ... --index {index} --recreate` (the "
                        "vectors already encoded are kept, not encoded again)")
