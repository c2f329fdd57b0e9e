"""Reading UBI data into integer-coded columns.

Inputs, each added to an :class:`EventReader` document by document or, parsed by pyarrow,
as columns (:mod:`.columns`):

* NDJSON files: one JSON object per line, events (they have ``action_name``) and query records
  (``user_query`` / ``query_response_hit_ids`` without ``action_name``) mixed freely;
* files in the bulk format UBI data is shipped in: action lines (``{"index": {"_index":
  "ubi_queries"}}``) each followed by its document, for both indices in one file (the
  action line's index decides what the document is);
* documents a search of the cluster's ``ubi_queries`` / ``ubi_events`` returned
  (:mod:`ltr_toolkit.clicks.events.ubi`).

Strings (query ids, document ids, query texts) are interned once; the columns are compact
``array`` buffers (4 bytes per event and column), so memory grows with the number of
events by ~17 bytes each plus the distinct strings. Nothing here raises on bad data: it is
counted in :class:`.problems.Problems`.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from itertools import compress, repeat

import numpy as np

from .problems import Problems

IMPRESSION, CLICK = 0, 1
#: actions read as an impression / a click unless told otherwise
IMPRESSION_ACTIONS = ("impression",)
CLICK_ACTIONS = ("click",)


class Interner:
    """str -> dense int code, in order of first appearance."""

    def __init__(self):
        self.codes: dict[str, int] = {}
        self.names: list[str] = []

    def code(self, name: str) -> int:
        c = self.codes.get(name)
        if c is None:
            c = self.codes[name] = len(self.names)
            self.names.append(name)
        return c

    def codes_of(self, names: list[str]) -> np.ndarray:
        """The codes of distinct ``names`` (new ones appended in that order): one C-level
        pass of dict lookups, the new names picked by a mask (no Python loop)."""
        codes = self.codes
        got = np.fromiter(map(codes.get, names, repeat(-1)), np.int64, len(names))
        new = got < 0
        if new.any():
            fresh = list(compress(names, new.tolist()))
            start = len(self.names)
            codes.update(zip(fresh, range(start, start + len(fresh))))
            self.names.extend(fresh)
            got[new] = np.arange(start, start + len(fresh))
        return got

    def __len__(self) -> int:
        return len(self.names)


@dataclass
class EventLog:
    """Events as columns (one entry per impression or click event kept) and the query
    records (``ubi_queries``) by query id code."""

    query_ids: Interner = field(default_factory=Interner)
    docs: Interner = field(default_factory=Interner)
    texts: Interner = field(default_factory=Interner)
    search: np.ndarray | None = None      # query id code per event
    action: np.ndarray | None = None      # IMPRESSION / CLICK
    doc: np.ndarray | None = None
    pos: np.ndarray | None = None         # position.ordinal as given; -1 unknown
    text: np.ndarray | None = None        # user_query code; -1 when the event has none
    record_text: dict[int, int] = field(default_factory=dict)        # query id -> text code
    record_hits: dict[int, list[int]] = field(default_factory=dict)  # query id -> doc codes
    #: query id -> (experiment, ranker a, ranker b, teams): an interleaved search's record
    #: (``query_attributes.interleaving``, see :mod:`ltr_toolkit.clicks.interleaving`)
    record_interleaving: dict[int, tuple[str, str, str, str]] = field(default_factory=dict)
    problems: Problems = field(default_factory=Problems)
    lines: int = 0

    def __len__(self) -> int:
        return 0 if self.search is None else len(self.search)


def _ordinal(value):
    """A position as an int >= 0, None when absent, False when unusable."""
    if value is None:
        return None
    if isinstance(value, bool):
        return False
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    return value if isinstance(value, int) and value >= 0 else False


def _get(doc: dict, key: str, inner: str):
    value = doc.get(key)
    return value.get(inner) if isinstance(value, dict) else None


class EventReader:
    """Accumulates events and query records; :meth:`finish` returns the :class:`EventLog`."""

    def __init__(self, impression_actions=IMPRESSION_ACTIONS, click_actions=CLICK_ACTIONS):
        self.log = EventLog()
        self.kind = {a.lower(): IMPRESSION for a in impression_actions}
        self.kind.update({a.lower(): CLICK for a in click_actions})
        self.cols = {c: array("i") for c in ("search", "doc", "pos", "text")}
        self.actions = array("b")

    def add_event(self, doc: dict, where: str | None = None) -> None:
        p = self.log.problems
        name = doc.get("action_name")
        kind = self.kind.get(str(name).lower()) if isinstance(name, str) else None
        if kind is None:
            p.action(str(name), where)
            return
        attrs = doc.get("event_attributes")
        attrs = attrs if isinstance(attrs, dict) else {}
        qid, obj = doc.get("query_id"), _get(attrs, "object", "object_id")
        if not isinstance(qid, (str, int)) or qid == "":
            return p.add("no_query_id", 1, where)
        if not isinstance(obj, (str, int)) or obj == "":
            return p.add("no_object_id", 1, where)
        pos = _ordinal(_get(attrs, "position", "ordinal"))
        if pos is False:
            p.add("bad_position", 1, where)
        text = doc.get("user_query")
        c = self.cols
        c["search"].append(self.log.query_ids.code(str(qid)))
        c["doc"].append(self.log.docs.code(str(obj)))
        c["pos"].append(-1 if pos is None or pos is False else pos)
        c["text"].append(self.log.texts.code(text.strip()) if isinstance(text, str) and text.strip() else -1)
        self.actions.append(kind)

    def add_query(self, doc: dict, where: str | None = None) -> None:
        qid = doc.get("query_id")
        if not isinstance(qid, (str, int)) or qid == "":
            return self.log.problems.add("no_query_id", 1, where)
        code = self.log.query_ids.code(str(qid))
        text = doc.get("user_query")
        if isinstance(text, str) and text.strip():
            self.log.record_text[code] = self.log.texts.code(text.strip())
        hits = doc.get("query_response_hit_ids")
        if isinstance(hits, str):
            hits = [hits]
        if isinstance(hits, list) and hits:
            self.log.record_hits[code] = [self.log.docs.code(str(h)) for h in hits]
        inter = interleaving_attrs(_get(doc, "query_attributes", "interleaving"), hits)
        if inter:
            self.log.record_interleaving[code] = inter

    def add(self, doc, where: str | None = None, index: str | None = None) -> None:
        """A document of either index: ``index`` (a bulk action's ``_index``) decides,
        else an ``action_name`` makes it an event."""
        if not isinstance(doc, dict):
            return self.log.problems.add("not_an_event", 1, where)
        if index is not None and "quer" in index:
            return self.add_query(doc, where)
        if (index is not None and "event" in index) or "action_name" in doc:
            return self.add_event(doc, where)
        if "user_query" in doc or "query_response_hit_ids" in doc:
            return self.add_query(doc, where)
        self.log.problems.add("not_an_event", 1, where)

    def finish(self) -> EventLog:
        log = self.log
        for name, buf in self.cols.items():
            setattr(log, name, np.frombuffer(buf, dtype=np.int32) if len(buf) else np.zeros(0, np.int32))
        log.action = np.frombuffer(self.actions, dtype=np.int8) if len(self.actions) else np.zeros(0, np.int8)
        return log


def interleaving_attrs(value, hits) -> tuple[str, str, str, str] | None:
    """``query_attributes.interleaving`` of a record as (experiment, a, b, teams), when it
    is one the toolkit wrote: names as strings, one team letter per hit id."""
    if not isinstance(value, dict):
        return None
    got = tuple(value.get(k) for k in ("experiment", "a", "b", "teams"))
    if not all(isinstance(v, str) and v for v in got) or set(got[3]) - set("ab"):
        return None
    return got if isinstance(hits, list) and len(hits) == len(got[3]) else None

