"""A click simulator: searches over fixed ranked lists, under a stated user model.

For each simulated search a query is drawn uniformly from those with a ranked list; the
user scans its results top-down:

* examination: the result at 0-based rank r is examined with probability
  ``theta_r = (1 / (r + 1)) ** eta`` (position bias; ``eta`` = 1 by default);
* attractiveness from the true grade g (0..``max_grade``): an examined result is clicked
  with probability ``noise + (1 - noise) * (2**g - 1) / (2**max_grade - 1)`` (``noise``:
  clicks on non-relevant results);
* cascade stop: after a click the user stops scanning with probability
  ``stop_min + (stop_max - stop_min) * g / max_grade`` (satisfied by a good result).

Everything is drawn with NumPy from one seeded generator; :func:`ubi_documents` turns a
simulation into UBI ``ubi_queries`` records and ``ubi_events`` (an impression per shown
result, a click per click), :func:`event_log` into an :class:`.events.eventlog.EventLog` directly
(benchmarks with many sessions).
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field

import numpy as np

from .events.eventlog import CLICK, IMPRESSION, EventLog, Interner


@dataclass
class UserModel:
    eta: float = 1.0
    noise: float = 0.05
    stop_min: float = 0.2
    stop_max: float = 0.8
    max_grade: float = 4.0

    def examination(self, depth: int) -> np.ndarray:
        return (1.0 / np.arange(1, depth + 1)) ** self.eta

    def attractiveness(self, g: np.ndarray) -> np.ndarray:
        g = np.clip(g, 0, self.max_grade)
        return self.noise + (1 - self.noise) * (2.0 ** g - 1) / (2.0 ** self.max_grade - 1)

    def stop(self, g: np.ndarray) -> np.ndarray:
        return self.stop_min + (self.stop_max - self.stop_min) * np.clip(g, 0, self.max_grade) / self.max_grade


@dataclass
class Simulation:
    qids: list[str]               # the rankings' qid per query index
    texts: list[str]              # query text per query index
    lists: list[list[str]]        # ranked doc ids per query index
    query: np.ndarray             # query index per search
    shown: np.ndarray             # bool [searches, depth]: the list has a result there
    clicks: np.ndarray            # bool [searches, depth]
    start: _dt.datetime = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc))
    seconds: float = 86400.0      # searches spread evenly over this many seconds

    def timestamp(self, i: int) -> str:
        t = self.start + _dt.timedelta(seconds=self.seconds * i / max(len(self.query), 1))
        return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def simulate(rankings: dict[str, list[str]], texts: dict[str, str], truth: dict[tuple[str, str], float],
             sessions: int, model: UserModel | None = None, depth: int = 10, seed: int = 0,
             start: _dt.datetime | None = None, seconds: float = 86400.0) -> Simulation:
    """``sessions`` searches over ``rankings`` (qid -> ranked doc ids; their top ``depth``
    shown), true grades from ``truth`` ((qid, doc) -> grade; absent: 0)."""
    model = model or UserModel()
    qids = [q for q in rankings if rankings[q]]
    lists = [list(rankings[q][:depth]) for q in qids]
    grade = np.zeros((len(qids), depth))
    for i, (q, docs) in enumerate(zip(qids, lists)):     # once per query, not per search
        grade[i, :len(docs)] = [truth.get((q, d), 0.0) for d in docs]
    has = np.zeros((len(qids), depth), bool)
    for i, docs in enumerate(lists):
        has[i, :len(docs)] = True
    rng = np.random.default_rng(seed)
    query = rng.integers(0, len(qids), sessions)
    shown = has[query]
    clicked = sample_clicks(grade[query], shown, model, rng)
    return Simulation(qids=qids, texts=[texts[q] for q in qids], lists=lists, query=query, shown=shown,
                      clicks=clicked, start=start or _dt.datetime.now(_dt.timezone.utc), seconds=seconds)


def sample_clicks(grade: np.ndarray, shown: np.ndarray, model: UserModel,
                  rng: np.random.Generator) -> np.ndarray:
    """bool [searches, depth]: the clicks of users scanning lists whose results at each
    rank have true grades ``grade`` (``shown``: a result is there), under ``model``."""
    n, depth = grade.shape
    examined = rng.random((n, depth)) < model.examination(depth)
    clicked = shown & examined & (rng.random((n, depth)) < model.attractiveness(grade))
    stops = clicked & (rng.random((n, depth)) < model.stop(grade))
    first_stop = np.where(stops.any(axis=1), stops.argmax(axis=1), depth)
    return clicked & (np.arange(depth) <= first_stop[:, None])


def ubi_documents(sim: Simulation, base: int = 1, application: str = "ltr-simulator"):
    """Yields (index, document): a ``ubi_queries`` record per search, then its impressions
    and clicks as ``ubi_events`` (positions counted from ``base``)."""
    for i, (q, shown, clicks) in enumerate(zip(sim.query, sim.shown, sim.clicks)):
        qid, session, ts = f"sim-{i:08d}", f"session-{i:08d}", sim.timestamp(i)
        text, docs = sim.texts[q], sim.lists[q]
        client = f"client-{i % 997:04d}"
        yield "ubi_queries", {"query_id": qid, "user_query": text, "query_response_hit_ids": docs,
                              "client_id": client, "timestamp": ts, "application": application}
        for action, mask in (("impression", shown), ("click", clicks)):
            for r in np.flatnonzero(mask):
                yield "ubi_events", {
                    "application": application, "action_name": action, "query_id": qid,
                    "session_id": session, "client_id": client, "user_query": text, "timestamp": ts,
                    "event_attributes": {"object": {"object_id": docs[r], "object_id_field": "id"},
                                         "position": {"ordinal": int(r) + base}}}


def event_log(sim: Simulation) -> EventLog:
    """The simulation as an :class:`EventLog` (0-based positions), without JSON."""
    log = EventLog()
    docs = Interner()
    doc_code = np.full((len(sim.lists), sim.shown.shape[1]), -1, np.int32)
    for i, ids in enumerate(sim.lists):
        doc_code[i, :len(ids)] = [docs.code(d) for d in ids]
    log.docs, log.texts = docs, Interner()
    text_code = np.array([log.texts.code(t) for t in sim.texts], np.int32)   # qids may share a text
    log.query_ids.names = [str(i) for i in range(len(sim.query))]
    cols = []
    for action, mask in ((IMPRESSION, sim.shown), (CLICK, sim.clicks)):
        s, r = np.nonzero(mask)
        cols.append((s, r, np.full(len(s), action, np.int8)))
    s, r, a = (np.concatenate(c) for c in zip(*cols))
    log.search, log.pos, log.action = s.astype(np.int32), r.astype(np.int32), a
    log.doc = doc_code[sim.query[s], r]
    log.text = text_code[sim.query[s]]
    return log


def true_grades(sim: Simulation, truth: dict[tuple[str, str], float]):
    """{(query text, doc): grade} of every shown pair (for comparing with a model's)."""
    return {(sim.texts[i], d): truth.get((q, d), 0.0)
            for i, q in enumerate(sim.qids) for d in sim.lists[i]}
