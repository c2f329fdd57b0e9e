"""What the click models need, with bounded working memory: weighted groups of rows.

Every model reads only, per row of :mod:`.sessions`: the pair, the 0-based position, the
click, and two facts about the row's search (SDBN: is the row at or above the search's
last click, is it that click; UBM: the distance to the previous click). Rows alike in all
of these are one group with a weight (a count): a few groups per pair and position, however
many events there are.

:func:`aggregate` builds the groups a slice of the searches at a time (searches by their
query id code modulo ``parts``: a search's events are all in one slice), so the sorts and
temporaries of :func:`.sessions.build_table` hold one slice's events, not all of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .eventlog import EventLog
from .sessions import DEFAULT_DEPTH, Table, build_table, detect_base

#: events per slice of :func:`aggregate`
SLICE_EVENTS = 1_000_000


@dataclass
class Groups:
    pair_key: np.ndarray     # int64: text code * n_docs + doc code
    pos: np.ndarray          # int32, 0-based
    dist: np.ndarray         # int32: pos - previous click's pos (no previous click: pos + 1)
    examined: np.ndarray     # bool: at or above the search's last click (SDBN)
    is_last: np.ndarray      # bool: the search's last click
    click: np.ndarray        # bool
    weight: np.ndarray       # float64: rows in the group
    texts: list[str]
    docs: list[str]
    base: int
    searches: int = 0

    def __len__(self) -> int:
        return len(self.pair_key)

    def pairs(self):
        """(pair index per group, text code per pair, doc code per pair)."""
        n = max(len(self.docs), 1)
        uniq, inv = np.unique(self.pair_key, return_inverse=True)
        return inv.reshape(-1).astype(np.int64), (uniq // n).astype(np.int32), (uniq % n).astype(np.int32)


def _search_ids(t: Table):
    start = np.ones(len(t.search), bool)
    start[1:] = t.search[1:] != t.search[:-1]
    return start, np.cumsum(start) - 1


def last_click(t: Table, gid) -> np.ndarray:
    """Per row: its search's last click position (no click: the search's deepest position,
    as SDBN's user, never satisfied, scans the whole list)."""
    n = int(gid[-1]) + 1 if len(gid) else 0
    last = np.full(n, -1, np.int64)
    np.maximum.at(last, gid[t.click], t.pos[t.click])
    deepest = np.full(n, -1, np.int64)
    np.maximum.at(deepest, gid, t.pos)
    return np.where(last >= 0, last, deepest)[gid]


def previous_click(t: Table, start, gid) -> np.ndarray:
    """Per row: the position of the previous click in its search (-1: none)."""
    big = int(t.pos.max(initial=0)) + 2
    v = np.where(t.click, t.pos, -1).astype(np.int64) + gid * big
    upto = np.maximum.accumulate(v) - gid * big     # the last click at or above each row
    prev = np.empty(len(v), np.int64)
    prev[1:] = upto[:-1]
    prev[start] = -1
    return np.maximum(prev, -1)


_FIELDS = ("pos", "dist", "examined", "is_last", "click")


def _grouped(pair_key, cols: dict, weight) -> dict:
    """Rows with equal (pair_key, pos, dist, examined, is_last, click) summed into one."""
    depth = int(max(cols["pos"].max(initial=0), cols["dist"].max(initial=0))) + 2
    key = pair_key * depth                       # in place from here: one int64 array
    key += cols["pos"]
    key *= depth
    key += cols["dist"]
    key *= 8
    key += cols["examined"] * np.int8(4) + cols["is_last"] * np.int8(2) + cols["click"]
    uniq, inv = np.unique(key, return_inverse=True)
    del key
    w = np.bincount(inv.reshape(-1), weight, len(uniq))
    flags, rest = uniq % 8, uniq // 8
    return {"pair_key": rest // depth // depth, "pos": ((rest // depth) % depth).astype(np.int32),
            "dist": (rest % depth).astype(np.int32), "examined": (flags & 4) > 0,
            "is_last": (flags & 2) > 0, "click": (flags & 1) > 0, "weight": w}


def from_table(t: Table) -> Groups:
    start, gid = _search_ids(t)
    last = last_click(t, gid)
    cols = {"pos": t.pos, "dist": t.pos - previous_click(t, start, gid), "examined": t.pos <= last,
            "is_last": t.click & (t.pos == last), "click": t.click}
    pair_key = t.query.astype(np.int64) * max(len(t.docs), 1) + t.doc
    g = _grouped(pair_key, cols, np.ones(len(t)))
    return Groups(texts=t.texts, docs=t.docs, base=t.base, searches=int(start.sum()), **g)


def slice_log(log: EventLog, mask: np.ndarray, records: set) -> EventLog:
    """The events under ``mask`` and the query records of ``records`` (same interners and
    problem counts)."""
    sub = EventLog(query_ids=log.query_ids, docs=log.docs, texts=log.texts, problems=log.problems)
    for name in ("search", "action", "doc", "pos", "text"):
        setattr(sub, name, getattr(log, name)[mask])
    sub.record_text = {q: t for q, t in log.record_text.items() if q in records}
    sub.record_hits = {q: h for q, h in log.record_hits.items() if q in records}
    return sub


def aggregate(log: EventLog, base="auto", depth: int = DEFAULT_DEPTH,
              slice_events: int = SLICE_EVENTS) -> Groups:
    """The groups of all searches of ``log``, built ``slice_events`` events at a time."""
    base = detect_base(log, base)
    parts = max(1, -(-len(log) // slice_events))
    if parts == 1:
        return from_table(build_table(log, base, depth))
    recs = np.fromiter(set(log.record_text) | set(log.record_hits), np.int64)
    acc, searches = None, 0
    for p in range(parts):
        sub = slice_log(log, log.search % parts == p, set(recs[recs % parts == p].tolist()))
        t = build_table(sub, base, depth)
        del sub
        if len(t):
            g = from_table(t)
            searches += g.searches
            acc = g.__dict__ if acc is None else _merge(acc, g.__dict__)
    if acc is None:
        return from_table(build_table(log, base, depth))
    fields = {f: acc[f] for f in ("pair_key", *_FIELDS, "weight")}
    return Groups(texts=log.texts.names, docs=log.docs.names, base=base, searches=searches, **fields)


def _merge(a: dict, b: dict) -> dict:
    """Two sets of groups as one (the running total stays as small as the groups are)."""
    cols = {f: np.concatenate([a[f], b[f]]) for f in _FIELDS}
    return _grouped(np.concatenate([a["pair_key"], b["pair_key"]]), cols,
                    np.concatenate([a["weight"], b["weight"]]))
