"""From a model's estimates to grades, and the minimum number of impressions.

A pair shown fewer than ``min_impressions`` times is left out of the judgment list (its
counts stay in the report). The grade of a kept pair (``mapping``):

* ``"levels"`` (default): a whole grade 0..``levels`` (default 4, the scale of the
  toolkit's gains): ``round(levels * p)`` for the probability models (``ctr``, ``sdbn``,
  ``pbm``, ``ubm``: p in [0, 1]); for ``coec``, an unbounded ratio, p = coec / (1 + coec)
  first, so COEC 1 (clicked as often as the average result at its rank) is the middle
  grade, 0 is 0 and large ratios approach the top;
* ``"estimate"``: the estimate itself as a (fractional) grade — the Workbench's COEC
  ratings as they are.
"""

from __future__ import annotations

import numpy as np

from ...errors import UserError
from .clickmodels import Estimates

MAPPINGS = ("levels", "estimate")
DEFAULT_MIN_IMPRESSIONS = 5
DEFAULT_LEVELS = 4


def to_grades(est: Estimates, mapping: str = "levels", levels: int = DEFAULT_LEVELS) -> np.ndarray:
    if mapping not in MAPPINGS:
        raise UserError(f"grade mapping {mapping!r}", f"use one of {', '.join(MAPPINGS)}")
    if levels < 1:
        raise UserError(f"levels {levels}: expected a whole number >= 1")
    x = np.maximum(est.estimate, 0.0)
    if mapping == "estimate":
        return np.round(x, 3 if est.model == "coec" else 4)
    p = x / (1.0 + x) if est.model == "coec" else np.minimum(x, 1.0)
    # half up, as people round (0.125 at 4 levels is grade 1, 0.375 grade 2), not NumPy's
    # half to even, which sends equal halves to different grades
    return np.floor(levels * p + 0.5)


def keep_mask(est: Estimates, min_impressions: int = DEFAULT_MIN_IMPRESSIONS) -> np.ndarray:
    if min_impressions < 1:
        raise UserError(f"min impressions {min_impressions}: expected a whole number >= 1")
    return est.impressions >= min_impressions
