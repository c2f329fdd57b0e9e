"""``ltr evaluate cv --max-ms X`` / ``--max-cost R``: the feature set chosen inside the
training folds, under a serving budget measured live on the user's cluster.

1. Once per run, each feature's served cost is measured live (``featurecost.
   measure_costs``: the first stage alone and a rescore computing one feature, over a
   sample of the judged queries, interleaved, p50) and read as a cost model: served p50 =
   first stage + the rescore's fixed part + the chosen features' own ms
   (:class:`..evaluation.feature_timing.CostModel`), plus the requests a set's ties
   cost (``feature_selection.tie_cost``). The budget: X ms, or R x the first stage's
   measured p50.
2. In each outer fold, the set is chosen on the fold's training queries alone
   (:func:`..evaluation.feature_selection.forward_select`; the first stage's feature is
   always kept: a blend needs it), before the fold's settings are chosen on the same
   queries: the outer evaluation stays honest (nested), as for the settings.
3. A fold model is trained on its set's columns and uploaded with a feature set of those
   features only (:func:`featureset_for`: a new versioned set, so the plugin computes
   nothing else: that is where the saving comes from). Deployed (``--deploy``), the set
   is chosen the same way on all judged queries, and the model's served p50 is then
   measured live beside the first stage's (``feature_timing.served_p50``).
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import UserError
from ..evaluation.feature_selection import forward_select, subset_featureset
from ..evaluation.feature_timing import CostModel, cost_model, served_p50
from ..stores.params import featureset_info
from ..stores.store import upload_featureset_versioned
from ..data.dataset import RankingDataset
from .featurecost import measure_costs

#: judged queries timed for the cost model, and passes over them (after a warm-up pass)
TIMING_QUERIES = 40
TIMING_PASSES = 2


def budget_ms(cost: CostModel, max_ms: float | None, max_cost: float | None,
              keep: list[str]) -> float:
    """The served p50 limit in ms (``max_ms``, or ``max_cost`` x the first stage's);
    refused when even ``keep`` (the first stage's feature) does not fit."""
    limit = float(max_ms) if max_ms is not None else float(max_cost) * cost.first_ms
    least = cost.of(keep) if keep else cost.first_ms + cost.fixed_ms
    if limit < least:
        given = f"--max-ms {max_ms:g}" if max_ms is not None else f"--max-cost {max_cost:g}"
        raise UserError(f"{given}: a served model costs at least {least:.2f} ms here "
                        f"({least / cost.first_ms:.2f}x the first stage's {cost.first_ms:.2f} ms: "
                        "the rescore itself, and the first stage's feature)",
                        f"allow at least --max-ms {least:.1f} (--max-cost "
                        f"{least / cost.first_ms:.2f}), or drop the budget")
    return limit


def measure(conn, serving, jl, featureset: str, max_ms, max_cost, keep: list[str], log,
            seed: int = 42) -> dict:
    """{"cost_model", "limit_ms", "keep"}: the cost model measured live, the budget."""
    info = featureset_info(conn, featureset, serving.store)
    n = min(TIMING_QUERIES, len(jl.judged_qids()))
    log(f"timing each feature of {featureset} live: {n} judged queries x {TIMING_PASSES} "
        "passes, interleaved with the first stage alone")
    uses = {f["name"]: list(f.get("params") or []) for f in info["features"]}
    rows = measure_costs(conn, serving, jl, featureset, info, n, TIMING_PASSES, seed)
    cost = cost_model(rows, info["feature_names"], uses)
    limit = budget_ms(cost, max_ms, max_cost, keep)
    log(f"cost model: served p50 = the first stage's {cost.first_ms:.2f} ms + the rescore's "
        f"{cost.fixed_ms:.2f} ms + each feature's own (median {_median(cost):.2f} ms); budget "
        f"{limit:.2f} ms ({limit / cost.first_ms:.2f}x the first stage)")
    return {"cost_model": cost.to_dict(), "limit_ms": limit, "keep": keep}


def _median(cost: CostModel) -> float:
    values = sorted(cost.features.values())
    return values[len(values) // 2] if values else 0.0


def choose(ds, plan: dict, k: int, seed: int, progress=None) -> dict:
    """:func:`..evaluation.feature_selection.forward_select` on ``ds`` under ``plan``
    (:func:`measure`'s)."""
    return forward_select(ds, CostModel.from_dict(plan["cost_model"]), plan["limit_ms"], k, seed,
                          keep=tuple(plan["keep"]), progress=progress)


def choose_in_folds(ds, qids: list[str], where: dict, folds: int, plan: dict, k: int,
                    seed: int, log, every) -> list[dict]:
    """Each outer fold's choice on its training queries (``where``: qid -> fold)."""
    out = []
    for f in range(folds):
        keep = [i for i in range(ds.n_queries) if ds.qids[i] in set(qids) and where[ds.qids[i]] != f]
        chosen = choose(ds.subset(keep), plan, k, seed + f,
                        every(15.0, log, f"choosing features, fold {f + 1}/{folds}"))
        log(f"fold {f + 1}/{folds}: {describe(chosen, plan)} ({chosen['seconds']:.1f}s)")
        out.append(chosen)
    return out


def describe(chosen: dict, plan: dict) -> str:
    """``4 features, est. 7.1 ms (1.42x): a, b, c, d``."""
    first = plan["cost_model"]["first_ms"]
    return (f"{len(chosen['features'])} features, est. {chosen['estimated_ms']:.2f} ms "
            f"({chosen['estimated_ms'] / first:.2f}x): {', '.join(chosen['features'])}")


def columns(ds, names: list[str]) -> RankingDataset:
    """``ds`` with the columns ``names`` only, its sidecar saying so."""
    idx = [ds.feature_names.index(n) for n in names]
    side = dict(ds.meta.get("sidecar", {}), feature_names=list(names))
    return RankingDataset(X=ds.X[:, idx], y=ds.y, offsets=ds.offsets, qids=ds.qids,
                          doc_ids=ds.doc_ids, feature_names=list(names), source=ds.source,
                          meta=dict(ds.meta, sidecar=side), weights=ds.weights)


def featureset_for(conn, art: dict, featureset: str, store,
                   created: list | None = None) -> tuple[dict, str]:
    """(the artifact, the feature set to upload it with): ``featureset`` when the model
    uses all its features; else a set of the model's features only, uploaded versioned
    (``{featureset}-{n}f``, ``-vN`` when a different one has the name), the artifact
    naming it. ``created``: gets the name of a set this call created (the fold models'
    sets are deleted with them)."""
    info = featureset_info(conn, featureset, store)
    if list(art["feature_names"]) == info["feature_names"]:
        return art, featureset
    fs = subset_featureset(info["features"], art["feature_names"],
                           f"{featureset}-{len(art['feature_names'])}f")
    name, how = upload_featureset_versioned(conn, fs, store)
    if created is not None and how != "unchanged":
        created.append(name)
    return dict(art, featureset=name,
                featureset_sha256=featureset_info(conn, name, store)["sha256"]), name


def served_cost(conn, serving, model: str, jl, seed: int = 42) -> dict:
    """:func:`..evaluation.feature_timing.served_p50` of ``model`` served by ``serving``
    (its contract) against the first stage alone, on the first judged queries."""
    params = [jl.query_params(q) for q in jl.judged_qids()[:TIMING_QUERIES]]
    return served_p50(conn, replace(serving, model=None), serving.for_model(model), params,
                      TIMING_PASSES, seed)
