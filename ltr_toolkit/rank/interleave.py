"""Team-draft interleaving (Radlinski, Kurup and Joachims, CIKM 2008) and its credit.

Two rankers' lists become one: in each round the team with fewer picks so far (a coin
flip when even) adds its best document not yet shown; every shown document carries the
team that placed it. A click credits that team; an impression whose clicks favour one
team is a win for it, equal clicks (none included) a tie. The preference over many
impressions is ``(wins_a + ties / 2) / impressions - 1/2`` (Chapelle et al., TOIS 2012),
and the sign test on the impressions with a winner (the exact two-sided binomial test,
``rank.stats.sign_test``) says how sure that is.

Debiased credit (:func:`credit_test`): under position bias a click near the top is far
likelier than one lower down, so an impression's outcome is mostly settled by its first
two or three results, the two rankers' top documents; counted wins then say which
ranker has the better first result rather than the better list. Weighting each click by
its inverse examination probability (1 / theta of its rank: the inverse propensity
scoring of unbiased learning to rank, Joachims et al., WSDM 2017) and comparing the
teams' mean weighted credit per impression counts a click at a rank seen by one user in
five as five clicks' worth of evidence. The weights change no impression's winner when
one team alone was clicked, so the comparison is of means (a z-test over impressions:
the per-impression differences are independent, their mean normal for the many
impressions a test rests on), not of wins.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .stats import ALPHA, sign_test, z_test

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
    """Mean debiased credit per impression of each team, and the z-test of their difference."""

    impressions: int
    credit_a: float
    credit_b: float
    p_value: float | None

    def winner(self, alpha: float = ALPHA) -> str | None:
        if self.p_value is None or self.p_value >= alpha:
            return None
        return "a" if self.credit_a > self.credit_b else "b"

    def to_dict(self, alpha: float = ALPHA) -> dict:
        return {"impressions": self.impressions, "credit_a": round(self.credit_a, 6),
                "credit_b": round(self.credit_b, 6), "p_value": self.p_value, "winner": self.winner(alpha)}


def credit_test(credit_a: np.ndarray, credit_b: np.ndarray) -> CreditTest:
    """Per impression each team's credit (clicks weighted by inverse propensities): the
    two-sided z-test of the mean difference (p None below :data:`MIN_IMPRESSIONS`)."""
    a, b = np.asarray(credit_a, np.float64), np.asarray(credit_b, np.float64)
    n = len(a)
    if n == 0:
        return CreditTest(0, 0.0, 0.0, None)
    d = a - b
    p = z_test(d) if n >= MIN_IMPRESSIONS else None
    return CreditTest(n, float(a.mean()), float(b.mean()), p)
