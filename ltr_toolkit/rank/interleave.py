"""Team-draft interleaving (Radlinski, Kurup and Joachims, CIKM 2008) and its credit.

Two rankers' lists become one: in each round the team with fewer picks so far (a coin
flip when even) adds its best document not yet shown; every shown document carries the
team that placed it. A click credits that team; an impression whose clicks favour one
team is a win for it, equal clicks (none included) a tie. The preference over many
impressions is ``(wins_a + ties / 2) / impressions - 1/2`` (Chapelle et al., TOIS 2012),
and the sign test on the impressions with a winner (the exact two-sided binomial test,
``rank.stats.sign_test``) says how sure that is, if impressions were independent.

They are not when queries repeat: a head query served a thousand times, often to the
same users, is one query's evidence a thousand times over, and the per-impression tests
give p-values far too small for a claim about queries. :func:`query_test` aggregates per
query first (each query's mean outcome) and tests over queries (the paired sign-flip test
of ``rank.stats.compare``, clustered by query); it is the verdict whenever a query was
served more than once (``clicks.interleaving`` reports both). With one impression per
query it is the per-impression randomisation test.

Debiased credit (:func:`credit_test`): under position bias a click near the top is far
likelier than one lower down, so an impression's outcome is mostly settled by its first
two or three results, the two rankers' top documents; counted wins then say which
ranker has the better first result rather than the better list. Weighting each click by
its inverse examination probability (1 / theta of its rank: the inverse propensity
scoring of unbiased learning to rank, Joachims et al., WSDM 2017) and comparing the
teams' mean weighted credit per impression counts a click at a rank seen by one user in
five as five clicks' worth of evidence. The weights change no impression's winner when
one team alone was clicked, so the comparison is of means (a z-test over impressions,
their mean normal for the many impressions a test rests on; per query, as above, when
queries repeat), not of wins.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .stats import ALPHA, compare, sign_test, z_test

TEAMS = "ab"


def team_draft(a: list[str], b: list[str], size: int, rng: np.random.Generator) -> tuple[list[str], str]:
    """(documents, teams): up to ``size`` documents of ``a`` and ``b`` interleaved, and
    the team (``"a"``/``"b"``) of each, as one string aligned with them."""
    lists, at, picks = (a, b), [0, 0], [0, 0]
    shown: list[str] = []
    teams: list[str] = []
    seen: set[str] = set()
    while len(shown) < size:
        for t in (0, 1):                          # skip what the other team already showed
            while at[t] < len(lists[t]) and lists[t][at[t]] in seen:
                at[t] += 1
        left = [at[t] < len(lists[t]) for t in (0, 1)]
        if not any(left):
            break
        t = 0 if picks[0] < picks[1] or (picks[0] == picks[1] and rng.random() < 0.5) else 1
        t = t if left[t] else 1 - t
        doc = lists[t][at[t]]
        shown.append(doc)
        teams.append(TEAMS[t])
        seen.add(doc)
        picks[t] += 1
    return shown, "".join(teams)


@dataclass(frozen=True)
class Tally:
    """Impressions won by a, tied, won by b."""

    wins_a: int
    ties: int
    wins_b: int

    @property
    def impressions(self) -> int:
        return self.wins_a + self.ties + self.wins_b

    @property
    def preference(self) -> float:
        """In [-1/2, 1/2]: > 0 favours a."""
        n = self.impressions
        return (self.wins_a + self.ties / 2) / n - 0.5 if n else 0.0

    @property
    def p_value(self) -> float:
        """Two-sided sign test over the impressions with a winner (1 when none)."""
        decided = self.wins_a + self.wins_b
        return sign_test(self.wins_a, decided) if decided else 1.0

    def winner(self, alpha: float = ALPHA) -> str | None:
        """``"a"`` / ``"b"`` when the sign test rejects no preference at ``alpha``."""
        if self.p_value >= alpha:
            return None
        return "a" if self.wins_a > self.wins_b else "b"

    def to_dict(self, alpha: float = ALPHA) -> dict:
        return {"impressions": self.impressions, "wins_a": self.wins_a, "ties": self.ties,
                "wins_b": self.wins_b, "preference": round(self.preference, 6),
                "p_value": self.p_value, "winner": self.winner(alpha)}


def outcomes(clicks_a: np.ndarray, clicks_b: np.ndarray) -> np.ndarray:
    """Per impression: +1 a won, 0 a tie, -1 b won (from each team's click counts)."""
    return np.sign(np.asarray(clicks_a, np.int64) - np.asarray(clicks_b, np.int64)).astype(np.int8)


def tally(outcome: np.ndarray) -> Tally:
    o = np.asarray(outcome)
    return Tally(int((o > 0).sum()), int((o == 0).sum()), int((o < 0).sum()))


def tally_by(outcome: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """[n_groups, 3]: wins_a, ties, wins_b per group code."""
    o = np.asarray(outcome)
    g = np.asarray(group, np.int64)
    return np.stack([np.bincount(g[o > 0], minlength=n_groups),
                     np.bincount(g[o == 0], minlength=n_groups),
                     np.bincount(g[o < 0], minlength=n_groups)], axis=1)


#: fewer impressions than this: no p-value for the debiased credit (its normal
#: approximation needs many)
MIN_IMPRESSIONS = 30


@dataclass(frozen=True)
class CreditTest:
    """Mean debiased credit per impression of each team, the z-test of their difference
    over impressions and, when queries repeat, the per-query test (:func:`query_test`'s,
    on the credit): the verdict's."""

    impressions: int
    credit_a: float
    credit_b: float
    p_value: float | None
    queries: int | None = None
    p_per_query: float | None = None

    @property
    def verdict(self) -> str:
        """Which test decides: "per query" when queries repeat, else "per impression"."""
        return "per query" if self.queries is not None and self.queries < self.impressions \
            else "per impression"

    def winner(self, alpha: float = ALPHA) -> str | None:
        p = self.p_per_query if self.verdict == "per query" else self.p_value
        if p is None or p >= alpha:
            return None
        return "a" if self.credit_a > self.credit_b else "b"

    def to_dict(self, alpha: float = ALPHA) -> dict:
        return {"impressions": self.impressions, "credit_a": round(self.credit_a, 6),
                "credit_b": round(self.credit_b, 6), "p_value": self.p_value,
                "queries": self.queries, "p_value_per_query": self.p_per_query,
                "verdict": self.verdict, "winner": self.winner(alpha)}


def credit_test(credit_a: np.ndarray, credit_b: np.ndarray, query: np.ndarray | None = None) -> CreditTest:
    """Per impression each team's credit (clicks weighted by inverse propensities): the
    two-sided z-test of the mean difference (p None below :data:`MIN_IMPRESSIONS`) and,
    given each impression's ``query``, the per-query test of the credit difference."""
    a, b = np.asarray(credit_a, np.float64), np.asarray(credit_b, np.float64)
    n = len(a)
    if n == 0:
        return CreditTest(0, 0.0, 0.0, None)
    p = z_test(a - b) if n >= MIN_IMPRESSIONS else None
    per = None if query is None else compare({"b": b, "a": a}, "b", groups=query, confidence_level=None)
    return CreditTest(n, float(a.mean()), float(b.mean()), p, None if per is None else per.units,
                      None if per is None else per.tests["a"].p_value)


@dataclass(frozen=True)
class QueryTest:
    """The per-query (clustered) test of an interleaving: each query's impressions
    averaged into its preference (mean outcome / 2, in [-1/2, 1/2]), then the paired
    sign-flip test over queries (``rank.stats.compare`` with ``groups``). A head query
    served a thousand times counts once: its impressions are not independent evidence
    (the same query, often the same users), which the per-impression tests assume.
    ``wins_a`` / ``ties`` / ``wins_b``: queries."""

    queries: int
    preference: float
    wins_a: int
    ties: int
    wins_b: int
    p_value: float

    def winner(self, alpha: float = ALPHA) -> str | None:
        if self.p_value >= alpha:
            return None
        return "a" if self.preference > 0 else "b"

    def to_dict(self, alpha: float = ALPHA) -> dict:
        return {"queries": self.queries, "preference": round(self.preference, 6),
                "wins_a": self.wins_a, "ties": self.ties, "wins_b": self.wins_b,
                "p_value": self.p_value, "winner": self.winner(alpha)}


def query_test(outcome: np.ndarray, query: np.ndarray) -> QueryTest:
    """:class:`QueryTest` of per-impression outcomes (+1 a won, 0 tie, -1 b won) and each
    impression's query (any labels; give impressions of unknown query labels of their own)."""
    half = np.asarray(outcome, np.float64) / 2
    found = compare({"b": np.zeros_like(half), "a": half}, "b", groups=query, confidence_level=None)
    t = found.tests["a"]
    return QueryTest(found.units, t.mean_delta, t.wins, t.ties, t.losses, t.p_value)
