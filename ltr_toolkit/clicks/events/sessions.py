"""From events to one row per (search, shown document): the input of every click model.

All of it is NumPy on the event columns (sorts, ``np.unique``, joins by ``searchsorted``):
no Python loop over events or pairs. Steps, each counting what it leaves out
(:mod:`.problems`):

1. a search's ``user_query``: its events' (any of them), else its ``ubi_queries`` record's;
   a search with neither is left out;
2. positions: counted from 0 or from 1 (``base``: ``"auto"`` reads the smallest impression
   ordinal: 1 means the producer counts from 1), made 0-based; an event without a
   position takes its document's place in the search's ``query_response_hit_ids``;
3. impressions: one per (search, document), duplicates counted once; a search with no
   impression events but a hit list is taken as having shown that list;
4. clicks: one per clicked (search, document); a click on a document the search did not
   show is left out;
5. rows at positions >= ``depth`` are left out (position parameters need data).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import UserError
from .eventlog import CLICK, IMPRESSION, EventLog
from .problems import Problems

DEFAULT_DEPTH = 50


@dataclass
class Table:
    """One row per (search, shown document), sorted by search then position."""

    search: np.ndarray       # int64 search code (ubi query_id)
    query: np.ndarray        # int32 text code (user_query)
    doc: np.ndarray          # int32 doc code
    pos: np.ndarray          # int32, 0-based
    click: np.ndarray        # bool
    texts: list[str]
    docs: list[str]
    base: int                # what position 0 was called in the data (0 or 1)
    problems: Problems

    def __len__(self) -> int:
        return len(self.search)


def lookup(keys: np.ndarray, table_keys: np.ndarray) -> np.ndarray:
    """Index into sorted ``table_keys`` of each key (the first of equal ones), -1 where
    absent."""
    if not len(table_keys):
        return np.full(len(keys), -1, np.int64)
    at = np.searchsorted(table_keys, keys).clip(0, len(table_keys) - 1)
    return np.where(table_keys[at] == keys, at, -1)


def _hit_table(log: EventLog, n_docs: int):
    """(key, position) of every (search, doc) in the query records' hit lists, sorted by key."""
    if not log.record_hits:
        return np.zeros(0, np.int64), np.zeros(0, np.int32)
    lens = np.fromiter((len(h) for h in log.record_hits.values()), np.int64, len(log.record_hits))
    search = np.repeat(np.fromiter(log.record_hits, np.int64, len(log.record_hits)), lens)
    doc = np.fromiter((d for h in log.record_hits.values() for d in h), np.int64, int(lens.sum()))
    pos = (np.arange(len(doc)) - np.repeat(np.cumsum(lens) - lens, lens)).astype(np.int32)
    key = search * n_docs + doc
    key, first = np.unique(key, return_index=True)     # a doc listed twice: its first place
    return key, pos[first]


def search_texts(log: EventLog) -> np.ndarray:
    """The user_query code of every search (-1: none known)."""
    n = len(log.query_ids)
    text = np.full(n, -1, np.int32)
    if log.record_text:
        text[np.fromiter(log.record_text, np.int64)] = np.fromiter(log.record_text.values(), np.int32)
    has = log.text >= 0
    text[log.search[has]] = log.text[has]           # the events' own text wins
    missing = (log.text < 0) & (text[log.search] >= 0)
    log.problems.add("user_query_from_record", int(missing.sum()))
    return text


def detect_base(log: EventLog, base) -> int:
    if base in (0, 1, "0", "1"):
        return int(base)
    if base != "auto":
        raise UserError(f"positions {base!r}: expected auto, 0 or 1")
    known = log.pos[(log.pos >= 0) & (log.action == IMPRESSION)]
    if not len(known):
        known = log.pos[log.pos >= 0]
    return int(len(known) > 0 and known.min() >= 1)


def _positions(log: EventLog, base: int, hit_key, hit_pos) -> np.ndarray:
    """0-based positions of the events; unknown ones from the hit lists; -1 if none."""
    p = log.problems
    pos = np.where(log.pos >= 0, log.pos - base, -1).astype(np.int32)
    p.add("bad_position", int(((log.pos >= 0) & (pos < 0)).sum()))
    unknown = np.flatnonzero(pos < 0)
    if len(unknown):
        key = log.search[unknown].astype(np.int64) * max(len(log.docs), 1) + log.doc[unknown]
        at = lookup(key, hit_key)
        pos[unknown[at >= 0]] = hit_pos[at[at >= 0]]
        p.add("no_position", int((at < 0).sum()))
    return pos


def build_table(log: EventLog, base="auto", depth: int = DEFAULT_DEPTH) -> Table:
    """The rows of every search (see the module docstring)."""
    p = log.problems
    n_docs = max(len(log.docs), 1)
    base = detect_base(log, base)
    hit_key, hit_pos = _hit_table(log, n_docs)
    pos = _positions(log, base, hit_key, hit_pos)
    key = log.search.astype(np.int64) * n_docs + log.doc
    ok = pos >= 0
    imp = ok & (log.action == IMPRESSION)
    imp_key, first = np.unique(key[imp], return_index=True)
    p.add("duplicate_impressions", int(imp.sum()) - len(imp_key))
    imp_pos = pos[imp][first]
    imp_key, imp_pos = _add_hit_lists(log, imp_key, imp_pos, hit_key, hit_pos, n_docs)
    clk = ok & (log.action == CLICK)
    clk_key = np.unique(key[clk])
    p.add("repeated_clicks", int(clk.sum()) - len(clk_key))
    at = lookup(clk_key, imp_key)
    p.add("clicks_without_impression", int((at < 0).sum()))
    clicked = np.zeros(len(imp_key), bool)
    clicked[at[at >= 0]] = True
    return _rows(log, imp_key, imp_pos, clicked, n_docs, base, depth)


def _add_hit_lists(log, imp_key, imp_pos, hit_key, hit_pos, n_docs):
    """Impressions of the searches that have no impression event but a hit list."""
    if not len(hit_key):
        return imp_key, imp_pos
    shown = np.zeros(len(log.query_ids), bool)
    shown[imp_key // n_docs] = True
    take = ~shown[hit_key // n_docs]
    log.problems.add("impressions_from_hit_ids", len(np.unique(hit_key[take] // n_docs)))
    key = np.concatenate([imp_key, hit_key[take]])
    pos = np.concatenate([imp_pos, hit_pos[take]])
    order = np.argsort(key, kind="stable")
    return key[order], pos[order]


def _rows(log, imp_key, imp_pos, clicked, n_docs, base, depth) -> Table:
    p = log.problems
    search = imp_key // n_docs
    doc = (imp_key % n_docs).astype(np.int32)
    text = search_texts(log)[search]
    p.add("no_user_query", len(np.unique(search[text < 0])))
    p.add("beyond_max_rank", int(((imp_pos >= depth) & (text >= 0)).sum()))
    keep = (text >= 0) & (imp_pos < depth)
    search, doc, text, pos, clicked = search[keep], doc[keep], text[keep], imp_pos[keep], clicked[keep]
    order = np.lexsort((pos, search))
    return Table(search=search[order], query=text[order], doc=doc[order], pos=pos[order].astype(np.int32),
                 click=clicked[order], texts=log.texts.names, docs=log.docs.names, base=base, problems=p)
