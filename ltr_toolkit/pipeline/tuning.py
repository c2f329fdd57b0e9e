"""Hyper-parameters chosen from the user's own data, never from a collection the toolkit
was tuned on.

Each family has a small grid, sized to the number of training queries (shallower trees
and fewer settings when there are few). A setting is scored by inner cross-validation on
the training queries' logged candidates: each inner fold's queries are scored by a model
trained on the other inner folds, and the setting with the best mean NDCG@k over all
training queries wins. The candidates are the first stage's top window, exactly what the
model will rerank, so this is the offline image of the live reranking. Trees are trained
once per (depth, learning rate, min_child_weight) and scored at every tree count of the
grid (the first 50, 100, 200 trees of the same model).

Of a tree setting's counts, the fewest whose inner NDCG is within one standard error of
the best count's is served (:func:`fewest_trees`): every tree costs serving time.
Blends of a model with the first stage (served as OpenSearch's rescore with
``query_weight`` 1) are candidates too, and the first stage itself is the default: a
model is chosen only when it beats the first stage on the training queries' inner folds
significantly, by a test that knows it is testing the best of all candidates (a
max-statistic sign-flip test, ``rank.stats.compare`` with ``statistic="mean"``: the best
of 72 noise models beats the first stage by chance far more often than one model does)
and, with successive halving, how they were pruned: each sign flip replays the halving
and counts only when it keeps the settings the search kept (:class:`~ltr_toolkit.rank.
stats.Halving`; without the replay the gate let the best through more often than its
level, because the survivors' later rungs are extra chances given to the luckiest); a
fold that keeps the first stage serves no model at all.

With many judged queries the settings are chosen on a seeded sample of
:data:`SELECTION_QUERIES` of the training queries (the model is then trained on all of
them): at that size the inner NDCG of two settings differs by far less than its noise
only when the settings are as good as each other, and choosing costs minutes, not an
hour (16,279 MSRD queries: benchmarks/results/catalogue.md). Below it nothing changes.

Used inside each outer fold of ``crossval`` (nested cross-validation: the outer fold's
queries never influence its choice) and on all judged queries for the model deployed.
The cross-validation's pipeline (:data:`PIPELINE`) makes the choice without the gate
(:func:`ungated`) and across algorithms (:func:`pipeline_choice`): its one test is on the
outer folds, where a gate in every training set only dilutes a real gain.
"""

from __future__ import annotations

import time

import numpy as np

from ..data.dataset import graded
from ..rank.metrics import ndcg
from ..rank.stats import ALPHA, N_RESAMPLES, Halving, compare
from .train import EPOCHS, TREE_ALGOS, make_estimator

#: tree counts read off one model's rounds (at learning rate 0.1: the tree count and the
#: learning rate trade off, so the grid varies the count and keeps one rate)
TREE_COUNTS = (50, 100, 200)
TREE_LR = 0.1


def grid(algo: str, n_queries: int) -> list[dict]:
    """The settings tried for ``algo`` with ``n_queries`` training queries, as
    ``train_model`` keyword arguments (trees: the largest tree count; the others are read
    off the same model)."""
    if algo in TREE_ALGOS:
        depths = (2, 3) if n_queries < 100 else (2, 4, 6)
        return [{"depth": d, "lr": TREE_LR, "trees": max(TREE_COUNTS), "min_child_weight": w}
                for d in depths for w in (1.0, 10.0)]
    if algo == "linear":
        return [{"l2": v} for v in (0.0, 1e-3, 1e-2)]
    sizes = ((16,),) if n_queries < 100 else ((16,), (64, 16))
    return [{"hidden": h, "lr": lr} for h in sizes for lr in (1e-3, 3e-3)]


def inner_folds(n_queries: int, folds: int, seed: int) -> np.ndarray:
    """A seeded, balanced inner fold number per training query."""
    order = np.random.default_rng(seed).permutation(n_queries)
    out = np.empty(n_queries, dtype=np.int64)
    out[order] = np.arange(n_queries) % folds
    return out


#: Blends tried when the first stage's score is a logged feature: served score =
#: first-stage score + beta x model score (OpenSearch's rescore with query_weight 1), with
#: beta = a x std(first-stage scores) / std(model scores) on the training rows.
BLEND_STEPS = (0.25, 1.0, 4.0)
#: Families whose served score is an affine function of ``predict`` (blends are exact)
BLENDABLE = (*TREE_ALGOS, "linear")
FIRST_STAGE = "first stage"


def blend_beta(a: float, first_scores: np.ndarray, model_scores: np.ndarray) -> float:
    """The rescore weight of a blend step ``a`` (see :data:`BLEND_STEPS`)."""
    sm = float(np.std(model_scores))
    return float(a * np.std(np.nan_to_num(first_scores)) / sm) if sm > 0 else 0.0


#: training queries beyond which settings are chosen on a seeded sample of this many
SELECTION_QUERIES = 2000

#: successive halving over the tree counts: after each count but the last, the better
#: 1/HALVING of the tree settings (by their best mean inner NDCG at that count) grow on
HALVING = 2


def work(ds, algo: str, chosen: bool = True, folds: int = 3, halving: bool = True) -> dict:
    """The work of one fit, for progress lines, in units of one query's rows through one
    boosting round (networks and linear models: one fit): ``select``, the inner fits of
    :func:`select` on ``ds`` (0 when the settings are given: ``chosen`` False), and
    ``round``, one round of the final fit on all of ``ds`` (``rounds`` of them at most)."""
    useful = min(SELECTION_QUERIES, len(_graded(ds)))
    inner = useful * (folds - 1) / folds
    trials = len(grid(algo, useful))
    if algo in TREE_ALGOS:
        alive, before, units = trials, 0, 0.0
        for t in TREE_COUNTS:
            units += alive * folds * (t - before) * inner
            before, alive = t, (-(-alive // HALVING) if halving else alive)
        return {"select": units if chosen else 0.0, "round": float(ds.n_queries),
                "rounds": max(TREE_COUNTS)}
    # a network's fit (its epochs, early stopped or not) on m queries: m units
    return {"select": trials * folds * inner if chosen else 0.0,
            "round": ds.n_queries / EPOCHS, "rounds": EPOCHS}


def _graded(ds) -> np.ndarray:
    """The numbers of the queries of ``ds`` with more than one grade."""
    return np.flatnonzero(graded(ds.y, ds.offsets))


class Progress:
    """Units of work done (:func:`work`) passed on as (done, total) to ``report``."""

    def __init__(self, report, total: float):
        self.report, self.total, self.done = report, max(1.0, float(total)), 0.0

    def add(self, units: float) -> None:
        self.done += units
        if self.report is not None:
            self.report(min(self.done, self.total), self.total)

    @classmethod
    def of(cls, ds, algo: str, report, chosen: bool = True, **options) -> tuple["Progress", dict]:
        w = work(ds, algo, chosen, halving=options.get("halving", True))
        return cls(report, w["select"] + w["round"] * w["rounds"]), w


def _blends(algo, t, s, s_train, tr, va, first_col):
    """{(tree count or 0, blend step or None): validation scores} of one model's scores."""
    out = {(t, None): s}
    if first_col is not None and algo in BLENDABLE:
        for a in BLEND_STEPS:
            beta = blend_beta(a, tr.X[:, first_col], s_train)
            out[(t, a)] = np.nan_to_num(va.X[:, first_col]) + beta * s
    return out


def _add(per, i, cands, va, k) -> None:
    for (t, a), s in cands.items():
        per.setdefault((i, t, a), []).append(ndcg(s, va.y, va.offsets, k))


def _network_trials(algo, trials, sets, k, seed, first_col, per, over, tick) -> list[str]:
    """Every setting on every inner fold (networks stop early on the inner fold), in the
    grid's order until ``over()`` (the budget spent; the first setting always runs).
    Returns the settings left out."""
    for i, params in enumerate(trials):
        if i and over():
            return [_name(p) for p in trials[i:]]
        for tr, va in sets:
            model = make_estimator(algo, k=k, seed=seed, **params)
            model.fit(tr, va)
            _add(per, i, _blends(algo, 0, model.predict(va.X), model.predict(tr.X), tr, va,
                                 first_col), va, k)
            tick(tr.n_queries)
    return []


def _tree_trials(algo, trials, sets, k, seed, first_col, per, halving: bool, over,
                 tick) -> list[str]:
    """Every tree setting grown on every inner fold to each count of :data:`TREE_COUNTS`
    in turn (warm start: the trees of the smaller count are kept) and scored there; with
    ``halving``, only the better settings grow on to the next count (successive halving,
    the idea of scikit-learn's HalvingGridSearchCV with the tree count as the resource).
    Once ``over()`` (the budget spent; the first setting always runs), nothing more
    grows: returns what was left out."""
    models: dict = {}
    alive = list(range(len(trials)))
    before = 0
    for rung, t in enumerate(TREE_COUNTS):
        for n, i in enumerate(alive):
            if (rung or n) and over():
                later = TREE_COUNTS[rung + 1:]
                return [f"{_name(trials[j])} at {t} trees" for j in alive[n:]] + (
                    [f"{', '.join(map(str, later))} trees for the settings still in the running"]
                    if later else [])
            for f, (tr, va) in enumerate(sets):
                if (i, f) not in models:
                    models[i, f] = make_estimator(algo, k=k, seed=seed, **trials[i]).set_params(
                        warm_start=True)
                m = models[i, f].set_params(n_estimators=t).fit(tr)
                _add(per, i, _blends(algo, t, m.predict(va.X), m.predict(tr.X), tr, va, first_col),
                     va, k)
                tick((t - before) * tr.n_queries)
        if halving and rung < len(TREE_COUNTS) - 1:
            best = {i: max(float(np.concatenate(v).mean()) for key, v in per.items()
                           if key != FIRST_STAGE and key[:2] == (i, t)) for i in alive}
            alive = sorted(alive, key=lambda i: -best[i])[: -(-len(alive) // HALVING)]
            models = {key: m for key, m in models.items() if key[0] in alive}
        before = t
    return []


def gate(per: dict, seed: int, halving: bool, n_resamples: int = N_RESAMPLES) -> tuple:
    """(the best candidate by mean, its p-value against the first stage): ``per`` maps
    :data:`FIRST_STAGE` and each candidate ``(setting, tree count, blend)`` to its
    per-fold NDCG arrays, in the order they were scored. One-sided max-statistic test
    over all candidates (``statistic="mean"``: the question is the best by mean); with
    ``halving``, conditional on the pruning path (:func:`halving_path`)."""
    per_query = {key: np.concatenate(v) for key, v in per.items()}
    path = halving_path(per) if halving else None
    found = compare(per_query, FIRST_STAGE, alternative="greater", statistic="mean",
                    pruning=path, n_resamples=n_resamples, confidence_level=None, seed=seed)
    best = max(found.tests, key=lambda key: found.tests[key].mean_delta)
    return best, found.tests[best].p_corrected


def halving_path(per: dict) -> Halving | None:
    """The successive-halving path of :func:`_tree_trials`, read off the candidates
    scored (rung r: the settings scored at the r-th tree count, in the order they were
    scored, each with its candidates); None when nothing was pruned away."""
    rungs: dict = {}
    for key in per:
        if key != FIRST_STAGE:
            rungs.setdefault(key[1], {}).setdefault(key[0], []).append(key)
    path = tuple(rungs[t] for t in sorted(rungs))
    return Halving(path) if len(path) > 1 else None


def _name(params: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in params.items() if k != "trees")


def _served(per: dict, means: dict, best_model, p: float, algo: str):
    """The candidate to serve: the first stage, unless the best beat it at :data:`ALPHA`
    (then the best, at :func:`fewest_trees` for trees)."""
    if not (means[best_model] > means[FIRST_STAGE] and p < ALPHA):
        return FIRST_STAGE
    return fewest_trees(per, best_model) if algo in TREE_ALGOS else best_model


def fewest_trees(per: dict, key: tuple) -> tuple:
    """``key`` (setting, tree count, blend) or the same setting and blend at the fewest
    trees of :data:`TREE_COUNTS` whose mean inner NDCG is within one standard error (of
    the per-query differences) of ``key``'s: as good as the inner folds can tell, and
    cheaper to serve (the plugin walks every tree for every rescored hit: on MSRD 200
    trees of depth 6 served at 1.99x the first stage, 100 at 1.81x). The one-standard-
    error rule of Breiman et al. (CART, 1984), on the tree count alone."""
    i, t, a = key
    best = np.concatenate(per[key])
    for n in TREE_COUNTS:
        if n >= t:
            break
        if (i, n, a) not in per:
            continue
        d = best - np.concatenate(per[(i, n, a)])
        if d.mean() <= d.std(ddof=1) / np.sqrt(len(d)):
            return (i, n, a)
    return key


def _choice(trials, key) -> dict:
    if key == FIRST_STAGE:
        return {"first_stage": True, "params": None, "blend": None}
    i, t, a = key
    return {"first_stage": False, "params": dict(trials[i], **({"trees": t} if t else {})),
            "blend": a}


def select(ds, algo: str, k: int = 10, seed: int = 42, folds: int = 3,
           first_col: int | None = None, halving: bool = True,
           budget: float | None = None, progress=None) -> dict:
    """Inner cross-validation on ``ds`` (logged candidates, rows in first-stage order) of
    each setting of :func:`grid` alone and, when ``first_col`` (the column of the first
    stage's score) is given, blended with the first stage (:data:`BLEND_STEPS`). The best
    of them by mean NDCG@k is chosen only if it beats keeping the first stage on the same
    queries at :data:`ALPHA` (the level the report's recommendation uses) by the
    max-statistic test over all candidates (``inner_p_value``: corrected for the choice);
    otherwise the first stage is kept. Trees: ``halving`` (see :func:`_tree_trials`).
    ``budget``: seconds after which no more candidates are trained (the first always is);
    ``left_out`` names those it left out. More than :data:`SELECTION_QUERIES` useful
    queries: the choice is made on a seeded sample of that many. Returns ``{"first_stage",
    "params", "blend", "inner_ndcg", "first_stage_inner_ndcg", "best_model",
    "best_model_inner_ndcg", "inner_p_value", "tried", "left_out", "queries"}``
    (queries: how many the choice was made on). ``progress(units)``: each inner fit's
    units of :func:`work` as it ends."""
    tick = progress or (lambda units: None)
    deadline = None if budget is None else time.monotonic() + float(budget)

    def over() -> bool:
        return deadline is not None and time.monotonic() > deadline

    useful = _graded(ds).tolist()
    if len(useful) > SELECTION_QUERIES:
        pick = np.random.default_rng(seed).choice(len(useful), SELECTION_QUERIES, replace=False)
        useful = [useful[i] for i in np.sort(pick)]
    if len(useful) < 2:           # nothing to learn from, nothing to validate on
        return dict(_choice([], FIRST_STAGE), inner_ndcg=None, first_stage_inner_ndcg=None,
                    best_model=None, best_model_inner_ndcg=None, inner_p_value=None, tried=[],
                    left_out=[], queries=len(useful))
    where = inner_folds(len(useful), min(folds, len(useful)), seed)
    trials = grid(algo, len(useful))
    sets = [(ds.subset([q for q, w in zip(useful, where) if w != f]),
             ds.subset([q for q, w in zip(useful, where) if w == f])) for f in np.unique(where)]
    per: dict = {FIRST_STAGE: [ndcg(-np.arange(va.n_docs, dtype=np.float64), va.y, va.offsets, k)
                               for _, va in sets]}             # the first stage's ranks
    if algo in TREE_ALGOS:
        left_out = _tree_trials(algo, trials, sets, k, seed, first_col, per, halving, over, tick)
    else:
        left_out = _network_trials(algo, trials, sets, k, seed, first_col, per, over, tick)
    best_model, p = gate(per, seed, halving and algo in TREE_ALGOS)
    means = {key: float(np.concatenate(v).mean()) for key, v in per.items()}
    best_key = _served(per, means, best_model, p, algo)
    tried = [dict(_choice(trials, key), inner_ndcg=round(m, 5)) for key, m in means.items()]
    return dict(_choice(trials, best_key), inner_ndcg=means[best_key],
                first_stage_inner_ndcg=means[FIRST_STAGE], best_model=_choice(trials, best_model),
                best_model_inner_ndcg=means[best_model], inner_p_value=p, tried=tried,
                left_out=left_out, queries=len(useful))


#: the system of a cross-validation's report that is the pipeline: in each outer fold,
#: the algorithm, settings and blend (or the first stage) chosen on the training folds
PIPELINE = "chosen per fold"


def ungated(chosen: dict) -> dict:
    """The choice of :func:`select` without its gate: the best candidate by mean inner
    NDCG@k, the first stage included (kept only when no candidate's mean is higher). The
    pipeline's inner choice: its significance is tested once, on the outer folds
    (:func:`ltr_toolkit.evaluation.report.recommend`), not in every training set."""
    best, at = chosen.get("best_model"), chosen.get("best_model_inner_ndcg")
    first = chosen.get("first_stage_inner_ndcg")
    if best is None or at is None or first is None or at <= first:
        return dict(chosen, **_choice([], FIRST_STAGE), inner_ndcg=first)
    return dict(chosen, **best, inner_ndcg=at)


def pipeline_choice(chosen: dict) -> str | None:
    """The algorithm the pipeline serves in a fold, from each algorithm's :func:`select`
    on the same training queries (the same inner folds: their inner NDCGs compare): the
    one whose :func:`ungated` choice has the highest mean inner NDCG@k, if that is a model;
    None: the first stage (no model's mean beats it, or nothing could be chosen)."""
    scored = {algo: ungated(c) for algo, c in chosen.items() if c is not None}
    models = {a: c["inner_ndcg"] for a, c in scored.items() if not c["first_stage"]}
    return max(sorted(models), key=lambda a: models[a]) if models else None
