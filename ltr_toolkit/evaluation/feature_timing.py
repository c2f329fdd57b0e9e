"""What each feature of a set costs at serving time and what it brings to NDCG@k.

* **Cost**, live: for each judged query, the serving request (the first stage over its
  global top ``window``, as :class:`~ltr_toolkit.serving.serving.Serving` sends it) is
  timed without a rescore and with a rescore that computes one feature only (the
  plugin's ``active_features``), all variants of a query back to back in a random order,
  so that a slow moment of the machine falls on every variant alike. A feature's cost is
  the median over queries of its paired difference with the plain request. Features
  that use the first stage's top ids (feedback) also need a first request before the
  rescore: its cost is reported once, as its own row.
* **Contribution**, offline under cross-validation on the logged candidates (exactly
  what is reranked live): per-query NDCG@k of a model trained on all features vs the
  same model trained without one feature (and without the feedback group), paired
  randomisation test. A negative delta means the feature helps.

Both run through opensearch-py as the toolkit serves: the plain request's time includes
the client's own overhead (about 2 ms per request here), which a feature's added time
does not.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

import numpy as np

from ..transport.client import call
from ..stores.params import derived_depth
from ..indexing.vectors import uses_vector, vector_source
from ..query.requests import feature_body
from ..rank.metrics import ndcg
from ..rank.stats import compare

FEEDBACK = "feedback group (features using first-stage ids)"
_ALL = object()           # the model on all features, in the tests (no row's name)


def feature_costs(conn, plan, featureset: str, names: list[str], param_names: dict,
                  queries: list[tuple[dict, dict, list[str]]], passes: int = 2,
                  seed: int = 0) -> dict:
    """{row: {"p50_ms", "mean_ms"}} added per request: one row per feature, ``all
    features``, and ``first request (top N ids)`` when feedback features need one.
    ``plan``: the timed queries' ``query.prepare.QueryPlan`` (the feature set's
    parameters, the serving's index, first stage, window, store, budget and encoder),
    made once by the caller; ``queries``: (raw parameters, parameters as served, the first
    stage's top ids) per query; ``param_names``: feature -> the parameters its template
    uses."""
    used = [p for ps in param_names.values() for p in ps]
    depth = derived_depth(used)
    client = conn.client()
    variants: dict[str, object] = {"plain": None, "all features": list(names)}
    variants.update({n: [n] for n in names})
    if depth:
        variants[f"first request (top {depth} ids)"] = "ids"
    times = {v: [] for v in variants}
    rng = random.Random(seed)
    for rep in range(passes + 1):            # the first pass warms the caches up
        for _, full, top in queries:
            order = list(variants)
            rng.shuffle(order)
            for v in order:
                ids = variants[v] == "ids"
                body = feature_body(plan.first_stage, full, plan.window, plan.store, featureset,
                                    None if ids else variants[v],
                                    top[:plan.window] if plan.restrict else None,
                                    depth if ids else 0)
                t0 = time.perf_counter()
                call(conn, client.search, index=plan.index, body=body, store=plan.store,
                     search_type=plan.first_stage.search_type)
                if rep:
                    times[v].append((time.perf_counter() - t0) * 1e3)
    plain = np.asarray(times.pop("plain"))
    out = {"plain request": {"p50_ms": float(np.median(plain)), "mean_ms": float(plain.mean())}}
    for v, t in times.items():     # the first request is a request of its own: all of it
        d = np.asarray(t) - (0.0 if variants[v] == "ids" else plain)
        out[v] = {"p50_ms": float(np.median(d)), "mean_ms": float(d.mean())}
    if uses_vector(used):
        ms = _encoder_ms(conn, plan, [raw for raw, _, _ in queries])
        out[ENCODER] = {"p50_ms": float(np.median(ms)), "mean_ms": float(ms.mean())}
    return out


ENCODER = "query vector (the encoder, in the client)"


def _encoder_ms(conn, plan, param_list: list[dict]) -> np.ndarray:
    """Milliseconds the encoder takes per query (each encoded alone, as at serving)."""
    _, vectors = vector_source(conn, plan.index, plan.encoder)
    out = []
    for p in param_list:
        t0 = time.perf_counter()
        vectors.encoder.encode([str(p.get("keywords", ""))], kind="query")
        out.append((time.perf_counter() - t0) * 1e3)
    return np.asarray(out)


def cv_ndcg(ds, cols: list[int], make, folds: np.ndarray, k: int, fitted=None) -> np.ndarray:
    """Per-query NDCG@k of models on the columns ``cols``, each query scored by the
    model of the folds that left it out. ``fitted()``: called after each model's fit."""
    out = np.zeros(ds.n_queries)
    for f in np.unique(folds):
        train = ds.subset(np.flatnonzero(folds != f).tolist())
        test_q = np.flatnonzero(folds == f).tolist()
        test = ds.subset(test_q)
        model = make()
        model.fit(type(ds)(train.X[:, cols], train.y, train.offsets, train.qids))
        if fitted is not None:
            fitted()
        out[test_q] = ndcg(model.predict(np.nan_to_num(test.X[:, cols])), test.y, test.offsets, k)
    return out


def fit_counter(progress, total: int):
    """A ``fitted`` callback for :func:`cv_ndcg` that reports ``progress(done, total)``
    in fits after each one (None without ``progress``)."""
    if progress is None:
        return None
    done = 0

    def fitted() -> None:
        nonlocal done
        done += 1
        progress(done, total)
    return fitted


def ablation_scores(ds, make, groups: dict[str, list[str]] | None = None, folds: int = 5,
                    k: int = 10, seed: int = 42, progress=None) -> tuple[np.ndarray, np.ndarray, dict]:
    """(the queries' folds, per-query NDCG@k on all features, {row: per-query NDCG@k
    without the row's features}): the drop-one ablation's raw scores, every model under
    the same folds. ``progress(done, total)``: after each fit."""
    names = list(ds.feature_names)
    where = np.random.default_rng(seed).permutation(ds.n_queries) % folds
    every = list(range(len(names)))
    drops = {n: [n] for n in names}
    drops.update({g: m for g, m in (groups or {}).items() if m and len(m) < len(names)})
    cols = {row: [i for i in every if names[i] not in dropped] for row, dropped in drops.items()}
    cols = {row: c for row, c in cols.items() if c}
    fitted = fit_counter(progress, len(np.unique(where)) * (1 + len(cols)))
    full = cv_ndcg(ds, every, make, where, k, fitted)
    scores = {row: cv_ndcg(ds, c, make, where, k, fitted) for row, c in cols.items()}
    return where, full, scores


def feature_contributions(ds, make, groups: dict[str, list[str]] | None = None, folds: int = 5,
                          k: int = 10, seed: int = 42, scores=None) -> dict:
    """Drop-one ablation under ``folds``-fold cross-validation over ds's queries.
    ``make()``: a fresh estimator. ``groups``: more rows, each dropping several features.
    Returns {"all": mean NDCG@k, "first_stage": the logged order's, "rows": {row:
    {"ndcg", "delta", "p_value", "p_corrected"}}}: the paired randomisation test of each
    row against all features, corrected for the number of rows (``rank.stats.compare``).
    ``scores``: :func:`ablation_scores`' result when the caller has it already."""
    _, full, scores = scores or ablation_scores(ds, make, groups, folds, k, seed)
    tests = compare({_ALL: full, **scores}, _ALL, confidence_level=None).tests
    rows = {row: {"ndcg": float(s.mean()), "delta": float(s.mean() - full.mean()),
                  "p_value": tests[row].p_value, "p_corrected": tests[row].p_corrected}
            for row, s in scores.items()}
    first = ndcg(-np.arange(ds.n_docs, dtype=np.float64), ds.y, ds.offsets, k)
    return {"all": float(full.mean()), "first_stage": float(first.mean()), "rows": rows}


@dataclass(frozen=True)
class CostModel:
    """A served request's p50 as the sum of its parts, from one :func:`feature_costs`
    measurement (:func:`cost_model`): the first stage alone (``first_ms``), the rescore's
    fixed part (``fixed_ms``: the plugin's query, the window's scoring), each feature's
    own ms (``features``), and the work some features share, paid once if any of them is
    served (``groups``: [(row, ms, features)]: feedback's first request, the encoder)."""

    first_ms: float
    fixed_ms: float
    features: dict
    groups: tuple = ()

    def of(self, names) -> float:
        """The estimated served p50 (ms) of a model on the features ``names`` (none: the
        first stage alone, no rescore)."""
        names = set(names)
        if not names:
            return self.first_ms
        shared = sum(ms for _, ms, members in self.groups if names & set(members))
        return self.first_ms + self.fixed_ms + sum(self.features.get(n, 0.0) for n in names) + shared

    def to_dict(self) -> dict:
        return {"first_ms": self.first_ms, "fixed_ms": self.fixed_ms, "features": dict(self.features),
                "groups": [[row, ms, list(members)] for row, ms, members in self.groups]}

    @classmethod
    def from_dict(cls, d: dict) -> "CostModel":
        return cls(d["first_ms"], d["fixed_ms"], dict(d["features"]),
                   tuple((row, ms, tuple(m)) for row, ms, m in d.get("groups", ())))


def cost_model(cost: dict, names: list[str], param_names: dict) -> CostModel:
    """The :class:`CostModel` of a :func:`feature_costs` result. A one-feature row is
    the rescore's fixed part plus the feature's own; the ``all features`` row is the fixed
    part plus all of them: with n features, fixed = (sum of the rows - all) / (n - 1),
    each feature's own ms = its row - fixed (at least 0), so the model of the whole set is
    its measured row (up to what the clipping at 0 adds)."""
    rows = [max(cost[n]["p50_ms"], 0.0) for n in names]
    whole = max(cost["all features"]["p50_ms"], 0.0)
    fixed = (sum(rows) - whole) / (len(rows) - 1) if len(rows) > 1 else 0.0
    fixed = min(max(fixed, 0.0), min(rows)) if rows else 0.0
    feedback = [n for n in names if derived_depth(param_names.get(n) or [])]
    vector = [n for n in names if uses_vector(param_names.get(n) or [])]
    groups = tuple((row, max(cost[row]["p50_ms"], 0.0), tuple(members))
                   for row, members in ((next((r for r in cost if r.startswith("first request")),
                                               None), feedback), (ENCODER, vector))
                   if row in cost and members)
    return CostModel(cost["plain request"]["p50_ms"], fixed,
                     {n: r - fixed for n, r in zip(names, rows)}, groups)


def served_p50(conn, first, served, param_list: list[dict], passes: int = 2,
               seed: int = 0) -> dict:
    """{"first_p50_ms", "p50_ms", "ratio", "queries"}: the first stage alone (``first``,
    a Serving without a model) and the model served (``served``) timed as users call
    them (``Serving.search``, top 10), both for each query back to back in a random
    order, after a warm-up pass; p50 over queries and passes."""
    times: dict = {"first": [], "served": []}
    rng = random.Random(seed)
    for rep in range(passes + 1):
        for params in param_list:
            order = [("first", first), ("served", served)]
            rng.shuffle(order)
            for key, serving in order:
                t0 = time.perf_counter()
                serving.search(conn, params, 10)
                if rep:
                    times[key].append((time.perf_counter() - t0) * 1e3)
    a, b = float(np.median(times["first"])), float(np.median(times["served"]))
    return {"first_p50_ms": a, "p50_ms": b, "ratio": b / a if a > 0 else float("inf"),
            "queries": len(param_list), "passes": passes}
