"""Events -> judgments in one call: the path ``ltr judgments clicks`` and the click job take."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...errors import UserError
from ..events.eventlog import EventLog
from ..events.groups import aggregate
from .heldout import choose_model
from .grades import DEFAULT_LEVELS, DEFAULT_MIN_IMPRESSIONS
from .clickmodels import COEC_MAX_RANK, estimate
from .output import click_judgments
from ..events.sessions import DEFAULT_DEPTH


@dataclass
class ClickSettings:
    model: str = "pbm"                  # or "auto": chosen by held-out perplexity
    prior: float | None = None          # None: the model's default (models.DEFAULT_PRIOR)
    min_impressions: int = DEFAULT_MIN_IMPRESSIONS
    mapping: str = "levels"
    levels: int = DEFAULT_LEVELS
    positions: str = "auto"             # auto | 0 | 1
    depth: int = DEFAULT_DEPTH
    max_rank: int = COEC_MAX_RANK       # COEC only

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def judge(log: EventLog, settings: ClickSettings, source: str):
    """(judgment list, per-pair rows, report) of the events in ``log``. Every model is
    scored on held-out later searches first (:mod:`.heldout`); ``model="auto"`` takes the
    one of least held-out perplexity (PBM when too few searches to hold some out)."""
    choice = choose_model(log, settings.positions, settings.depth, settings.prior, settings.max_rank)
    if settings.model == "auto":
        settings = replace(settings, model=choice["chosen"] or "pbm")
        choice["auto"] = settings.model
    groups = aggregate(log, settings.positions, settings.depth)
    opts = {"max_rank": settings.max_rank} if settings.model == "coec" else {}
    est = estimate(groups, settings.model, settings.prior, **opts)
    jl, rows = click_judgments(est, groups.texts, groups.docs, settings.mapping, settings.levels,
                               settings.min_impressions, source)
    report = {
        "source": source, "settings": settings.to_dict(), "model_info": est.info,
        "positions_counted_from": groups.base,
        "counts": {"events": len(log), "searches": groups.searches, "rows": int(est.impressions.sum()),
                   "clicks": int(est.clicks.sum()), "pairs": len(est.estimate), "judged_pairs": len(jl),
                   "queries": len(jl.queries), "pairs_below_min_impressions": len(est.estimate) - len(jl)},
        "bad_data": log.problems.to_dict(),
        "model_choice": choice,
    }
    if not len(jl):
        raise UserError(f"no pair has {settings.min_impressions} impressions or more "
                        f"({len(est.estimate)} pairs seen)", "lower --min-impressions or read more events")
    return jl, rows, report
