"""A recommended, pruned feature set: what a catalogue's generated set needs, and no more.

One backward pass of recursive feature elimination under cross-validation, as
scikit-learn's ``RFECV`` selects on the cross-validated score, with the drop-one ablation
of :mod:`.feature_timing` as its ranking:

1. A feature missing or constant on every logged row can help no model: pruned first.
2. The others are tried in order of the ablation (the feature whose removal lowered
   NDCG@k least first; among equals, the costlier to serve first). A feature is pruned
   when the model without it (and without every feature pruned before it) scores at
   least as well, under the same folds, as the set it was removed from. Correlated
   features are handled by the order: once one of two near-copies is gone, removing the
   other lowers the score and it stays.
3. The pruned set is held against the whole set with the paired randomisation test of
   :mod:`..rank.stats` (wins/ties/losses, interval). The selection saw these folds, so
   the pruned set's figure is optimistic; ``ltr evaluate cv`` with the pruned set gives
   the honest, nested figure against the first stage.

One fit per fold per feature tried: the same budget as the ablation itself.
"""

from __future__ import annotations

import numpy as np

from ..features.check import dead_columns
from ..rank.stats import compare
from .feature_timing import cv_ndcg, fit_counter

DEAD = "missing or constant on every logged row"
NO_LOSS = "removing it did not lower NDCG@{k} under cross-validation"


def _order(rows: dict, names: list[str], costs: dict) -> list[str]:
    """Least harmful removal first; among equal deltas, the costliest to serve first."""
    def key(n):
        return (-rows[n]["delta"], -costs.get(n, {}).get("p50_ms", 0.0))
    return sorted((n for n in names if n in rows), key=key)


def prune(ds, make, contribution: dict, costs: dict, where: np.ndarray, full: np.ndarray,
          k: int = 10, log=lambda msg: None, progress=None) -> dict:
    """{"kept", "pruned": [{"feature", "why"}], "ndcg_all", "ndcg_pruned", "test",
    "ms_saved"}. ``contribution``: :func:`.feature_timing.feature_contributions`' result;
    ``costs``: :func:`.feature_timing.feature_costs`' (may be empty); ``where``/``full``:
    the ablation's folds and per-query scores on all features. ``progress(done, total)``:
    after each fit (the total: at most, when every feature is tried)."""
    names = list(ds.feature_names)
    missing, constant = dead_columns(ds.X)
    dead = {n for n, d in zip(names, missing | constant) if d}
    pruned = [{"feature": n, "why": DEAD} for n in names if n in dead]
    kept = [n for n in names if n not in dead]
    order = _order(contribution["rows"], kept, costs)
    fitted = fit_counter(progress, len(np.unique(where)) * (len(order) + bool(dead)))
    current = full if not dead else _scores(ds, names, kept, make, where, k, fitted)
    for n in order:
        if len(kept) == 1:
            break
        trial = [m for m in kept if m != n]
        s = _scores(ds, names, trial, make, where, k, fitted)
        if s.mean() >= current.mean():
            kept, current = trial, s
            pruned.append({"feature": n, "why": NO_LOSS.format(k=k)})
            log(f"pruned {n}: NDCG@{k} {s.mean():.4f} without it")
    test = compare({"all": full, "pruned": current}, "all").tests["pruned"]
    saved = sum(costs.get(p["feature"], {}).get("p50_ms", 0.0) for p in pruned)
    return {"kept": kept, "pruned": pruned, "ndcg_all": float(full.mean()),
            "ndcg_pruned": float(current.mean()), "test": test.to_dict(), "ms_saved": saved}


def _scores(ds, names, kept, make, where, k, fitted=None) -> np.ndarray:
    return cv_ndcg(ds, [names.index(n) for n in kept], make, where, k, fitted)


def pruned_featureset(features: list[dict], kept: list[str], name: str) -> dict:
    """The feature set file of the kept features, in the stored set's order, as
    ``ltr featureset upload`` reads it."""
    keep = set(kept)
    return {"name": name, "features": [f for f in features if f["name"] in keep]}
