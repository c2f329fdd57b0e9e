"""Interleaved searches in UBI, and the clicks credited to their teams.

Where the attribution lives: the search's ``ubi_queries`` record, written by the toolkit
when it serves an interleaved list (``ltr query search --interleave A,B --ubi``,
:func:`record`)::

    {"query_id": "...", "user_query": "...", "query_response_hit_ids": [d1, d2, ...],
     "query_attributes": {"interleaving": {"experiment": "A-vs-B", "a": "A", "b": "B",
                                           "teams": "abba..."}}}

``teams`` has one letter per hit id. The application sends its click events as UBI
already has them (``query_id`` and ``event_attributes.object.object_id``); nothing more
is asked of it. A click on a document of the list credits the document's team; a
document clicked twice in a search counts once.
"""

from __future__ import annotations

import datetime as _dt
import uuid

import numpy as np

from ..rank.interleave import Tally, credit_test, outcomes, query_test, tally, tally_by
from .debias import DEFAULT_CLIP, row_propensities
from .events.eventlog import CLICK, EventLog
from .events.problems import Problems
from .events.sessions import Table, lookup


def record(text: str, ids: list[str], teams: str, a: str, b: str, experiment: str | None = None,
           query_id: str | None = None, application: str = "ltr-toolkit") -> dict:
    """The ``ubi_queries`` record of one interleaved search."""
    return {"query_id": query_id or str(uuid.uuid4()), "user_query": text,
            "query_response_hit_ids": list(ids), "application": application,
            "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "query_attributes": {"interleaving": {"experiment": experiment or f"{a}-vs-{b}",
                                                  "a": a, "b": b, "teams": teams}}}


def _records(log: EventLog):
    """Flat arrays over the interleaved records' shown documents: record index, doc
    code, team (0 a, 1 b); and per record its query id code and experiment key."""
    qs = list(log.record_interleaving)
    keys = [log.record_interleaving[q][:3] for q in qs]
    docs = [np.asarray(log.record_hits[q], np.int64) for q in qs]
    teams = [np.frombuffer(log.record_interleaving[q][3].encode(), np.uint8) == ord("b") for q in qs]
    lengths = np.fromiter(map(len, docs), np.int64, len(docs))
    rec = np.repeat(np.arange(len(qs)), lengths)
    cat = (lambda parts, dt: np.concatenate(parts) if parts else np.zeros(0, dt))
    return np.asarray(qs, np.int64), keys, rec, cat(docs, np.int64), cat(teams, bool)


def clicked_rows(log: EventLog, qs: np.ndarray, rec: np.ndarray, doc: np.ndarray) -> tuple[np.ndarray, int]:
    """Per shown document of the records (:func:`_records`' order): clicked in its search?
    And the clicks on interleaved searches that hit no document of their list."""
    n_docs = max(len(log.docs), 1)
    click = log.action == CLICK
    clicked = np.unique(log.search[click].astype(np.int64) * n_docs + log.doc[click])
    shown = qs[rec] * n_docs + doc
    order = np.argsort(shown, kind="stable")
    at = lookup(clicked, shown[order])
    found = at >= 0
    hit = np.zeros(len(rec), bool)
    hit[order[at[found]]] = True
    return hit, int((np.isin(clicked // n_docs, qs) & ~found).sum())


def team_sums(rec: np.ndarray, team_b: np.ndarray, values: np.ndarray, n_records: int) -> np.ndarray:
    """[records, 2]: ``values`` summed per record over team a's and team b's rows."""
    out = np.zeros((n_records, 2))
    np.add.at(out, (rec, team_b.astype(np.int64)), values)
    return out


def _click_table(text, rec, doc, hit) -> Table:
    """The interleaved searches as click-model rows: a search per record, its documents
    at their ranks in the list shown (team-draft's coin puts a document at several)."""
    pos = np.arange(len(rec)) - np.searchsorted(rec, rec)
    return Table(search=rec.astype(np.int64), query=text[rec].astype(np.int32), doc=doc.astype(np.int32),
                 pos=pos.astype(np.int32), click=hit, texts=[], docs=[], base=0, problems=Problems())


def debiased_credit(text, rec, doc, team_b, hit, propensity, clip: float) -> tuple[np.ndarray, list]:
    """[records, 2]: each team's clicks weighted by 1 / examination probability of their
    rank (PBM/UBM fitted on the interleaved searches, or given per rank; clipped at
    ``clip``); and the examination probabilities by rank. ``text``: each record's query."""
    t = _click_table(text, rec, doc, hit)
    p = row_propensities(t, propensity, clip)
    by_rank = np.full(int(t.pos.max(initial=-1)) + 1, np.nan)
    by_rank[t.pos] = p
    return team_sums(rec, team_b, hit / p, len(text)), [round(float(x), 4) for x in by_rank]


def credit(log: EventLog, experiment: str | None = None, alpha: float = 0.05,
           propensity: str | None = "pbm", clip: float = DEFAULT_CLIP) -> list[dict]:
    """One report per experiment found (or only ``experiment``): the impressions (the
    interleaved searches), their wins, ties and losses for a against b, the preference
    and the sign test, overall and per query text; the per-query test over query texts
    (``per_query_test``, :func:`~ltr_toolkit.rank.interleave.query_test`); the winner
    (p < ``alpha``) by the per-query test when a query text was served more than once,
    else by the sign test (``verdict`` names it); and, unless ``propensity`` is None, the
    debiased credit (:func:`~ltr_toolkit.rank.interleave.credit_test`, per query too)
    with those propensities."""
    qs, keys, rec, doc, team_b = _records(log)
    if not len(qs):
        return []
    hit, outside = clicked_rows(log, qs, rec, doc)
    counts = team_sums(rec, team_b, hit, len(qs)).astype(np.int64)
    text = np.array([log.record_text.get(int(q), -1) for q in qs], np.int64)
    query = np.where(text >= 0, text, -1 - np.arange(len(text)))   # no text: a query of its own
    weighted, theta = (None, None) if propensity is None or not hit.any() else \
        debiased_credit(text, rec, doc, team_b, hit, propensity, clip)
    won = outcomes(counts[:, 0], counts[:, 1])
    reports = []
    for key in sorted(set(keys)):
        if experiment is not None and key[0] != experiment:
            continue
        mask = np.fromiter((k == key for k in keys), bool, len(keys))
        rep = _report(log, key, won[mask], text[mask], query[mask], counts[mask], alpha)
        if weighted is not None:
            rep["debiased"] = {"propensity": propensity if isinstance(propensity, str) else "given", "clip": clip, "examination": theta,
                               **credit_test(weighted[mask, 0], weighted[mask, 1], query[mask]).to_dict(alpha)}
        reports.append(rep)
    if reports:
        reports[0]["clicks_outside_lists"] = outside
    return reports


def _report(log: EventLog, key, won: np.ndarray, text: np.ndarray, query: np.ndarray,
            counts: np.ndarray, alpha: float) -> dict:
    names, code = np.unique(text, return_inverse=True)
    per = tally_by(won, code, len(names))
    rows = []
    for i in np.argsort(-per.sum(axis=1), kind="stable"):
        t = Tally(*map(int, per[i]))
        label = log.texts.names[names[i]] if names[i] >= 0 else "(no query text)"
        rows.append({"query": label, **t.to_dict(alpha)})
    overall, by_query = tally(won), query_test(won, query)
    repeats = by_query.queries < overall.impressions
    return {"experiment": key[0], "a": key[1], "b": key[2], **overall.to_dict(alpha),
            "per_query_test": by_query.to_dict(alpha),
            "verdict": "per query" if repeats else "per impression",
            "winner": (by_query if repeats else overall).winner(alpha),
            "clicks_a": int(counts[:, 0].sum()), "clicks_b": int(counts[:, 1].sum()),
            "queries": len(rows), "per_query": rows}
