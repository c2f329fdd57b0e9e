"""Live cross-validation: every judged query scored by a model that never saw it, with
settings chosen without it, and a recommendation of what to deploy.

1. Candidates: per query, the first stage's top ``window`` documents, labelled from the
   judgments (unjudged: grade 0), logged once with the feature set. Long queries are
   fitted to the cluster's clause budget (:mod:`ltr_toolkit.data.querytext`); a query the
   cluster still rejects is named in ``failed_queries`` and left out (the CLI exits 3).
2. Queries are split into ``folds`` (seeded shuffle). For each fold and algorithm, the
   settings are chosen by inner cross-validation on the other folds' candidates
   (:mod:`.tuning`; nested: the fold's own queries play no part), the model is trained
   there (networks hold a seeded 20% of those queries out for early stopping), uploaded
   under a versioned name, and reranks its fold's queries live. Fold models are deleted
   from the store when the run ends, unless kept on request.
3. The report pools all queries: the first stage vs each algorithm (paired randomisation
   test, wins/ties/losses, per-query values), the settings each fold chose, and the
   recommendation (``evaluation.report.recommend``).
   With a serving budget (``features``: ``max_ms`` or ``max_cost``), each fold's
   feature set is chosen on its training queries first (:mod:`.featurechoice`), and
   its models are trained and served on that set alone.
4. The pipeline (``tuning.PIPELINE``, "chosen per fold"), when settings are chosen:
   in each fold, among the first stage and every candidate of every algorithm, the best
   mean inner NDCG (``tuning.pipeline_choice``; no inner gate: an algorithm's model the
   gate kept out is trained and served for it). The recommendation comes from its one
   test against the first stage (one-sided, alpha 0.05, no correction for the algorithms:
   their choice is part of what is tested); the algorithms' rows are for information.
   Deployed, it is the same choice made on all judged queries (:func:`.deploy.pipeline_artifact`).
   Why (#52): at 100-225 queries the inner gate kept the first stage in many folds, which
   diluted the pooled gain before a second, corrected, two-sided test; see
   benchmarks/results/power.md.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..features.featurelog import query_budget
from ..query.firststage import FirstStage
from ..stores.contract import of_artifact
from ..stores.model_store import delete_models, upload
from ..serving.explain import explain_systems, merge_explanations
from ..evaluation.live import top_lists
from ..stores.params import derived_depth, featureset_params
from ..serving.serving import Serving
from ..stores.store import delete_featureset, get_featureset
from ..data.judgments import JudgmentList
from ..data.svmlight import load_logged
from ..errors import UserError
from ..io.pace import Pace, duration
from ..evaluation.report import compare, per_query_json, pipeline_test, recommend, run_metrics
from ..models import warmup
from ..models.export import plugin_scores
from . import featurechoice
from .evidence import from_folds
from . import parallel
from .parallel import default_jobs, run_all
from .tuning import PIPELINE, Progress, blend_beta, pipeline_choice, select, ungated
from .train import TREE_ALGOS, check_algorithm, model_from_artifact, train_model


def fold_of(qids: list[str], folds: int, seed: int) -> dict[str, int]:
    """A seeded, balanced assignment of queries to folds."""
    order = np.random.default_rng(seed).permutation(len(qids))
    return {qids[i]: int(pos % folds) for pos, i in enumerate(order)}


def _subset(ds, keep: set[str]):
    idx = [q for q in range(ds.n_queries) if ds.qids[q] in keep]
    return ds.subset(idx)


def fit_chosen(ds, algo: str, k: int, seed: int, params: dict | None, source: str,
               first_col: int | None = None, selection: dict | None = None,
               progress=None) -> dict:
    """The model artifact of ``algo`` on ``ds``: with ``params`` as given (served alone),
    else with the choice :func:`.tuning.select` makes on ``ds`` (recorded in the
    artifact's ``selection``); None when that choice is to keep the first stage. The
    artifact's serving contract (``serving``, ``stores.contract``) holds the rescore
    weights it is served with: the model alone, or the blend chosen (:func:`blended`).
    Networks hold a seeded 20% of the queries out for early stopping. ``selection``:
    more options of :func:`.tuning.select` (e.g. ``{"halving": False}``). ``progress(done,
    total)``: the units of work (:func:`.tuning.work`) as they end."""
    return _chosen_and_fitted(ds, algo, k, seed, params, source, first_col, selection, progress)[0]


def _chosen_and_fitted(ds, algo, k, seed, params, source, first_col, selection,
                       progress) -> tuple[dict, dict | None]:
    """(:func:`fit_chosen`'s artifact, the :func:`.tuning.select` result it was fitted
    by, None with ``params``)."""
    done, w = Progress.of(ds, algo, progress, params is None, **(selection or {}))
    chosen = select(ds, algo, k, seed, first_col=first_col, progress=done.add,
                    **(selection or {})) if params is None else None
    return fit_choice(ds, algo, k, seed, chosen, source, first_col, params,
                      on_round=lambda: done.add(w["round"])), chosen


def fit_choice(ds, algo: str, k: int, seed: int, chosen: dict | None, source: str,
               first_col: int | None = None, params: dict | None = None, on_round=None) -> dict:
    """The artifact of :func:`fit_chosen` for a choice already made (``chosen``: a
    :func:`.tuning.select` result, or :func:`.tuning.ungated` of one; None: the
    fixed ``params``). ``on_round()``: after each boosting round or epoch."""
    if chosen is not None and chosen["first_stage"]:
        return {"algorithm": algo, "selection": chosen, "model": None}
    params = chosen["params"] if chosen else params
    train, valid = ds, None
    if algo not in TREE_ALGOS:
        rng = np.random.default_rng(seed)
        held = set(rng.choice(ds.n_queries, size=max(1, ds.n_queries // 5), replace=False).tolist())
        train = ds.subset([q for q in range(ds.n_queries) if q not in held])
        valid = ds.subset(sorted(held))
    art = train_model(train, algo, valid, source=source, k=k, seed=seed,
                      on_epoch=(lambda *_: on_round()) if on_round else None, **params)
    if chosen and chosen["blend"] is not None:
        art = blended(art, ds.X, first_col, chosen["blend"])
    if chosen:
        art["selection"] = chosen
    return art


def blended(art: dict, X: np.ndarray, first_col: int, step: float) -> dict:
    """The artifact served as a blend with the first stage (the column ``first_col`` of
    ``X``, the logged rows it was chosen on): its contract's weights become
    (1, beta) with beta from ``step`` (``tuning.blend_beta``)."""
    served = plugin_scores(art, model_from_artifact(art), X)
    beta = blend_beta(step, X[:, first_col], served)
    return dict(art, serving=of_artifact(art).with_weights(1.0, beta).to_dict())


def first_stage_column(side: dict) -> int | None:
    """The column of the logged rows that holds the first stage's score (what a blend
    adds to the model's), as the logged data's sidecar records it; None: no feature is
    the first stage."""
    feature, names = side.get("first_stage_feature"), side.get("feature_names") or []
    return names.index(feature) if feature in names else None


def every(seconds: float, log, what: str, unit: str = "rounds"):
    """A progress callback (done, total) that logs its first call (the step has begun),
    then at most every ``seconds``, with an ETA by :class:`ltr_toolkit.io.pace.Pace` (the
    CLI's progress lines' rule; what ran before the first call, such as the first
    stage's candidates, is not counted): a long logging run is never silent."""
    pace, last = Pace(), [None]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        pace.update(now, done)
        if last[0] is not None and (now - last[0] < seconds or done >= total):
            return
        began, last[0] = last[0] is None, now
        if began and done >= total:
            return
        left = None if began else pace.left(total)
        log(f"{what}: {done}/{total} {unit} ({100 * done / total:.0f}%)"
            + ("" if left is None else f", ETA {duration(left)}"))
    return progress


def log_candidates(conn, serving: Serving, jl: JudgmentList, featureset: str, workdir: Path,
                   log, candidates: dict | None = None) -> tuple:
    """(dataset, sidecar, serving with the measured long-query budget, failed queries,
    each query's first-stage ids as fetched for its candidates) of the first stage's top
    ``window`` per judged query, logged into ``workdir/candidates.txt``."""
    budget = query_budget(conn, serving.index, jl, featureset, serving.first_stage, serving.store,
                          serving.via)
    serving = serving.with_budget(budget)
    log(f"logging the first stage's top {serving.depth} for {len(jl.judged_qids())} queries, "
        "then their features")
    data = workdir / "candidates.txt"
    first: dict[str, list[str]] = {}
    side, info = serving.log_candidates(conn, jl, featureset, data, **(candidates or {}),
                                        first_ids=first,
                                        first_progress=every(15.0, log, "the first stage's candidates",
                                                             "queries"),
                                        progress=every(15.0, log, "logging candidates"))
    unjudged = (f"{info['unjudged']} unjudged as 0" if info["unjudged_as"] == "zero"
                else "the unjudged left out")
    log(f"logged {side['rows']} candidate rows for {info['queries']} queries "
        f"({info['judged']} judged, {unjudged})"
        + (f"; {side['fitted_queries']} long queries sent as their first {budget} distinct words"
           if side.get("fitted_queries") else ""))
    return load_logged(data), side, serving, dict(side["failed_queries"]), first


def _clean_up(conn, models: dict[str, list[str]], store, log, sets=()) -> list[str]:
    """Delete the fold models, then the feature sets made for them (``sets``: a fold's
    chosen features); returns (and logs) the models that could not be deleted."""
    left = delete_models(conn, [n for group in models.values() for n in group], store)
    if left:
        log(f"{len(left)} fold models could not be deleted: "
            + ", ".join(f"{n} ({why})" for n, why in left.items())
            + " (delete them with ltr model delete)")
    for name in dict.fromkeys(sets):
        try:
            delete_featureset(conn, name, store)
        except Exception as exc:    # noqa: BLE001 - a clean-up goes on; said in one line
            log(f"feature set {name}, made for a fold model, could not be deleted: {exc}")
    return list(left)


def cross_validate(conn, index: str, jl: JudgmentList, featureset: str, algos: dict[str, dict | None],
                   workdir, folds: int = 5, k: int = 10, window: int = 100,
                   store: str | None = None, first_stage: FirstStage | None = None,
                   seed: int = 42, name_prefix: str = "cv", baseline_name: str = "first-stage",
                   log=lambda msg: None, keep_models: bool = False,
                   evaluate_on: JudgmentList | None = None, jobs: int | None = None,
                   selection: dict | None = None, budget: float | None = None,
                   explain: bool = False, via: str = "plugin", candidates: dict | None = None,
                   features: dict | None = None) -> dict:
    """Returns the pooled report (see the module docstring). ``algos``: algorithm ->
    fixed ``train_model`` settings, or None to choose them by inner cross-validation.
    Fold models are named ``{name_prefix}-{algo}-f{fold}-vN``. ``evaluate_on``: train on
    ``jl``'s labels (e.g. click-derived) but score every ranking against these judgments
    (same qids), over the queries judged in both. ``jobs``: worker processes for the
    fold fits (None: :func:`.parallel.default_jobs`, the cores as memory allows);
    ``selection``: options of :func:`.tuning.select`; ``budget``: seconds for choosing
    settings in all folds (each fit gets its share of the workers' time; what a fit left
    out is named in its fold's settings and logged). ``explain``: the report's
    ``explanations`` hold each fold model's per-feature contributions to its queries' top
    10 (computed while the model is in the store). ``via``: how the candidates' features
    are logged (``featurelog``: the plugin, or named queries); fold models are served by
    the plugin either way. ``candidates``: which candidates are trained on
    (``features.candidates``: ``unjudged`` "zero" | "drop", ``judged_outside`` "exclude" |
    "include"); every query is evaluated over its whole window whatever they say.
    ``features``: ``{"max_ms": X}`` or ``{"max_cost": R}`` (:mod:`.featurechoice`)."""
    _check_settings(folds, algos)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    serving = Serving(index, first_stage or FirstStage.from_fields(), window, store, via=via)
    with warmup.start(algos, k) as warm:     # compiled while the candidates are logged
        ds, side, serving, failed, first = log_candidates(conn, serving, jl, featureset,
                                                          workdir, log, candidates)
        truth = jl if evaluate_on is None else evaluate_on
        qids = _usable_queries(jl, truth, failed, folds)
        run = _Run(conn, serving, jl, qids, ds, featureset, k, seed, fold_of(qids, folds, seed),
                   folds, name_prefix, str(workdir), selection, budget, explain,
                   first_col=first_stage_column(side), first_ids=first)
        _check_first_stage_again(run, qids, failed)
        if features:
            run.choose_features(jl, side, features, log)
        per_query = {baseline_name: run_metrics(run.first, qids, truth, k)}
        try:
            ranked = run.rankings(algos, jobs, log, warm)
            for algo in ranked:                     # the algorithms, then the pipeline
                per_query[algo] = run_metrics(ranked[algo], qids, truth, k)
                log(choices_line(algo, run.chosen[algo]))
        finally:
            left = [] if keep_models else _clean_up(conn, run.models, store, log, run.fold_sets)
    return _report(run, per_query, ranked, baseline_name, jl, truth, algos, side, failed, left,
                   window=window, keep_models=keep_models, explain=explain)


def _kernels_ready(warm: warmup.Warmup, algo: str, log) -> None:
    """Wait until the compiled kernels of ``algo``'s fits are in numba's cache
    (:func:`.warmup.start` compiles them, or loads them, once for all the fits) before
    its first fit starts: each worker would otherwise compile them itself where the cache
    is empty (the first run after an install); say so when it took a while."""
    if algo in warm.seconds:
        return
    t = time.monotonic()
    cached = warm.wait([algo])
    waited = time.monotonic() - t
    if cached and waited >= 1.0:
        log(f"compiled kernels ready for {algo}: waited {waited:.1f}s (compiled in "
            f"{warm.seconds[algo]:.1f}s, once for all the fits)")


def _check_settings(folds: int, algos) -> None:
    """At least 2 folds, and known algorithms: before anything is logged."""
    if folds < 2:
        raise UserError(f"--folds {folds}: cross-validation needs at least 2 folds")
    for algo in algos:
        check_algorithm(algo)


def _usable_queries(jl: JudgmentList, truth: JudgmentList, failed: dict, folds: int) -> list[str]:
    """``jl``'s judged queries whose candidates were logged and that ``truth`` judges too,
    in ``jl``'s order; refused when fewer than ``folds``."""
    judged = set(truth.judged_qids())
    qids = [q for q in jl.judged_qids() if q not in failed and q in judged]
    if len(qids) < folds:
        raise UserError(f"{len(qids)} usable queries for {folds} folds", "judge more queries")
    return qids


def _check_first_stage_again(run: "_Run", qids: list[str], failed: dict) -> None:
    """Refuse a run whose first stage failed now for queries logged before (added to
    ``failed``)."""
    if run.failed:
        failed.update({qids[i]: why for i, why in run.failed.items()})
        raise UserError(f"the first stage failed for {len(run.failed)} logged queries "
                        f"(e.g. {next(iter(failed.items()))})", "check the cluster, then run again")


def _report(run: "_Run", per_query: dict, ranked: dict, baseline_name: str, jl: JudgmentList,
            truth: JudgmentList, algos: dict, side: dict, failed: dict, left: list, *,
            window: int, keep_models: bool, explain: bool) -> dict:
    """The pooled report of a run (see the module docstring), its recommendation last."""
    qids, folds, serving = run.qids, run.folds, run.serving
    report = compare(per_query, baseline_name, run.k)
    report.update({
        "evaluation": f"{folds}-fold cross-validation over {len(qids)} judged queries "
                      f"(each query reranked by a model trained, and its settings chosen, "
                      f"without it)",
        "folds": folds, "window": window, "first_stage": serving.first_stage.to_dict(),
        "trained_on": jl.source, "evaluated_on": truth.source,
        "serving": serving.to_dict(), "models": run.models if keep_models else {},
        "models_left": left,
        "settings": run.chosen, "fit_seconds": run.fit_seconds,
        "fixed_settings": {a: v for a, v in algos.items() if v is not None},
        "selection_options": run.options,
        "candidates": side.get("candidates"), "seed": run.seed,
        "max_query_terms": serving.max_terms, "fitted_queries": side.get("fitted_queries", 0),
        "failed_queries": sorted(failed.items()), "rescore_fallbacks": run.fallbacks,
        "per_query": per_query_json(per_query, qids),
        # each system's gains on its held-out folds, as ltr monitor measures them
        "held_out": {a: from_folds(run.ds, arts, run.where, run.k) for a, arts in run.arts.items()},
        "top": top_lists({baseline_name: run.first, **ranked}, qids),
    })
    if explain:
        report["explanations"] = run.explanations
    if run.feature_plan:
        report["feature_selection"] = dict(run.feature_plan, folds=run.feature_sets)
    if PIPELINE in per_query:
        key = f"ndcg@{run.k}"
        report["pipeline"] = {"name": PIPELINE, "algorithms": run.pipeline_algos, "test": {
            "metric": key, **pipeline_test(per_query[baseline_name][key], per_query[PIPELINE][key],
                                           seed=run.seed)}}
    report["recommendation"] = recommend(report)
    return report


class _Run:
    """One cross-validation's folds: per algorithm, each fold's choice trained on the
    other folds, uploaded, and reranking its fold's queries through ``serving``."""

    def __init__(self, conn, serving, jl, qids, ds, featureset, k, seed, where, folds,
                 name_prefix, source, selection=None, budget=None, explain=False, first_col=None,
                 first_ids: dict | None = None):
        self.conn, self.serving, self.qids, self.ds = conn, serving, qids, ds
        self.featureset, self.k, self.seed, self.where = featureset, k, seed, where
        self.folds, self.name_prefix, self.source = folds, name_prefix, source
        self.selection, self.budget = selection, budget
        self.fit_seconds: dict[str, float] = {}
        self.params = [jl.query_params(q) for q in qids]
        fs = get_featureset(conn, featureset, serving.store) or {}
        self.first_col = first_col                 # from the logged data's sidecar
        self.options: dict = dict(selection or {})
        depth = max(k, 10, derived_depth(featureset_params(fs)))
        self.failed: dict[int, str] = {}
        self.first = _first_ranking(conn, serving, self.params, qids, depth, first_ids,
                                    self.failed)
        self.models: dict[str, list[str]] = {}
        self.fold_sets: list[str] = []             # feature sets made for fold models
        self.chosen: dict[str, list[dict]] = {}
        self.pipeline_algos: list[str] = []     # the algorithms the pipeline chooses among
        self.fallbacks: dict[str, list[str]] = {}
        self.explain, self.explanations = explain, {"systems": {}}
        self.feature_plan, self.feature_sets = None, None

    def choose_features(self, jl, side: dict, features: dict, log) -> None:
        """Measure each feature's served cost live, then choose each fold's feature set
        on its training queries under the budget (:mod:`.featurechoice`)."""
        first = side.get("first_stage_feature")
        keep = [first] if first in (self.ds.feature_names or []) else []
        self.feature_plan = featurechoice.measure(self.conn, self.serving, jl, self.featureset,
                                                  features.get("max_ms"), features.get("max_cost"),
                                                  keep, log, self.seed)
        self.feature_sets = featurechoice.choose_in_folds(self.ds, self.qids, self.where,
                                                          self.folds, self.feature_plan, self.k,
                                                          self.seed, log, every)

    def rankings(self, algos: dict[str, dict | None], jobs: int | None, log,
                 warm: warmup.Warmup | None = None) -> dict:
        """Per algorithm, every query's ranked ids from the fold model that never saw it
        (the first stage's where the fold keeps it). The fits (choice and training, the
        costly part) run in ``jobs`` processes, the slowest families first, each family's
        first once ``warm`` has its compiled kernels in the cache; each fold is uploaded
        and reranks its queries here as soon as its fit is done."""
        n_tasks = len(algos) * self.folds
        if jobs is None:
            jobs = default_jobs(n_tasks, self.ds.X.nbytes)
        options = dict(self.selection or {})
        if self.budget is not None:             # each fit's share of the workers' time
            options["budget"] = self.budget * min(jobs, n_tasks) / n_tasks
        self.options = options                  # recorded: the deployment chooses alike
        tasks = [(algo, f, frozenset(q for q in self.qids if self.where[q] != f), self.k,
                  self.seed + f, algos[algo], self.source, self.first_col, options,
                  self.feature_sets[f]["features"] if self.feature_sets else None)
                 for algo in sorted(algos, key=_cost_rank) for f in range(self.folds)]
        ranked = {algo: [list(ids) for ids in self.first] for algo in algos}
        self.models = {algo: [] for algo in algos}
        self.chosen = {algo: [None] * self.folds for algo in algos}
        self.selected = {algo: [None] * self.folds for algo in algos}
        self.runners = {algo: [None] * self.folds for algo in algos}
        self.arts = {algo: [None] * self.folds for algo in algos}    # each fold's model

        def done(i, result, progress):
            algo, f = tasks[i][:2]
            art, seconds, runner = result
            self.selected[algo][f], self.runners[algo][f] = art.get("selection"), runner
            self.arts[algo][f] = art
            self.chosen[algo][f] = fold_summary(art, algos[algo])
            self.fit_seconds[algo] = round(self.fit_seconds.get(algo, 0.0) + seconds, 2)
            if art["model"] is not None:
                self._serve(algo, f, art, ranked[algo])
            left = self.chosen[algo][f].get("left_out")
            log(f"{algo} fold {f + 1}/{self.folds} fitted in {seconds:.1f}s "
                f"({progress['done']}/{progress['total']} fits, {jobs} at a time; "
                f"ETA {progress['eta']:.0f}s)"
                + (f"; the budget left out {len(left)}: {'; '.join(left)}" if left else ""))

        run_all(_fit_fold, tasks, jobs, shared=self.ds, on_done=done, on_tick=_ticks(jobs, log),
                ready=lambda i: _kernels_ready(warm, tasks[i][0], log) if warm else None)
        self.pipeline_algos = sorted(a for a in algos if algos[a] is None)
        if self.pipeline_algos:
            ranked[PIPELINE] = self._pipeline(ranked)
        return ranked

    def _pipeline(self, ranked: dict) -> list[list[str]]:
        """The pipeline's rankings: in each fold, what :func:`.tuning.pipeline_choice`
        picks among the algorithms whose settings were chosen (the first stage, or an
        algorithm's best candidate: its fold model when the gate let it through, else
        its ungated model, uploaded and reranking the fold's queries here)."""
        out = [list(ids) for ids in self.first]
        self.chosen[PIPELINE], self.arts[PIPELINE] = [], []
        for f in range(self.folds):
            pick = pipeline_choice({a: self.selected[a][f] for a in self.pipeline_algos})
            idx = [i for i, q in enumerate(self.qids) if self.where[q] == f]
            runner = None if pick is None else self.runners[pick][f]
            self.arts[PIPELINE].append(None if pick is None else runner or self.arts[pick][f])
            if pick is None:
                self.chosen[PIPELINE].append({"algorithm": None, "first_stage": True})
                continue
            if runner is None:                  # the gated fold model is the ungated choice
                for i in idx:
                    out[i] = list(ranked[pick][i])
            else:
                self._serve(pick, f, runner, out, system=PIPELINE)
            summary = self.chosen[pick][f] if runner is None else fold_summary(runner, None)
            self.chosen[PIPELINE].append({"algorithm": pick, **summary})
        return out

    def _serve(self, algo: str, f: int, art: dict, ranked: list[list[str]],
               system: str | None = None) -> None:
        """Upload fold ``f``'s model of ``algo`` and rerank the fold's queries with it,
        live, as ``system`` (default: ``algo``; the pipeline's own models are named
        ``{prefix}-{algo}-f{f}-pipeline``)."""
        system = system or algo
        base = f"{self.name_prefix}-{algo}-f{f}" + ("-pipeline" if system != algo else "")
        art, fs = featurechoice.featureset_for(self.conn, art, self.featureset, self.serving.store,
                                               self.fold_sets)
        name = upload(self.conn, art, model_from_artifact(art), base, fs, self.serving.store)["name"]
        self.models.setdefault(system, []).append(name)
        idx = [i for i, q in enumerate(self.qids) if self.where[q] == f]
        fell: dict[int, str] = {}
        serving = self.serving.for_model(name)     # as its contract says (a blend, or alone)
        got = serving.rerank(self.conn, [self.params[i] for i in idx], max(self.k, 10),
                             first_ids=[self.first[i] for i in idx], fallbacks=fell)
        self.fallbacks.setdefault(system, []).extend(self.qids[idx[j]] for j in fell)
        for i, r in zip(idx, got):
            ranked[i] = r
        if self.explain:
            merge_explanations(self.explanations, explain_systems(
                self.conn, {system: [(serving, idx)]}, self.params, {system: ranked}, self.qids,
                self.first))


def _first_ranking(conn, serving, params: list[dict], qids: list[str], depth: int,
                   fetched: dict | None, failed: dict) -> list[list[str]]:
    """Each query's first-stage top ``max(window, depth)`` ids: those fetched for its
    candidates moments before (the same first stage, budget and window), else fetched
    now (a query the cluster rejects now: in ``failed``)."""
    if fetched and depth <= serving.depth and all(q in fetched for q in qids):
        return [fetched[q] for q in qids]
    return [ids or [] for ids in serving.first_ids(conn, params, depth=depth, failures=failed)]


def _ticks(jobs: int, log):
    """The line logged while no fold fit has ended for a while (``parallel.run_all``)."""
    def tick(p):
        eta = "ETA unknown yet" if p["eta"] is None else f"ETA {p['eta']:.0f}s"
        log(f"fitting: {p['done']}/{p['total']} fold fits done, {100 * p['share']:.0f}% of "
            f"the work after {p['elapsed']:.0f}s ({jobs} at a time); {eta}")
    return tick


def _cost_rank(algo: str) -> int:
    """Trees first, then networks, linear last: the longest fits start first."""
    return 0 if algo in TREE_ALGOS else 2 if algo == "linear" else 1


def _fit_fold(ds, algo, fold, keep, k, seed, fixed, source, first_col, selection=None,
              features=None):
    """One outer fold's fit (in a worker process): the artifact (as :func:`fit_chosen`),
    its seconds, and the artifact of the :func:`.tuning.ungated` choice when that is a
    model the inner gate kept out (for the pipeline; else None). ``features``: the
    fold's chosen feature set (None: all)."""
    t = time.monotonic()
    if features is not None and not features:     # the budget affords none: the first stage
        return {"algorithm": algo, "selection": None, "model": None}, time.monotonic() - t, None
    train = _subset(ds, keep)
    if features:
        train = featurechoice.columns(train, features)
        first_col = first_stage_column(train.meta["sidecar"])
    art, chosen = _chosen_and_fitted(train, algo, k, seed, fixed, source, first_col, selection,
                                     parallel.report)
    free = None if chosen is None else ungated(chosen)
    runner = fit_choice(train, algo, k, seed, free, source, first_col) \
        if free is not None and chosen["first_stage"] and not free["first_stage"] else None
    return art, time.monotonic() - t, runner


def fold_summary(art: dict, fixed) -> dict:
    """What a fold serves: the first stage kept, or a model's settings and blend."""
    sel = art.get("selection")
    if sel is None:
        return {"settings": dict(fixed or {}), "blend": None}
    left = {"left_out": sel["left_out"]} if sel.get("left_out") else {}
    if sel["first_stage"]:
        return {"first_stage": True, **left}
    return {"settings": sel["params"], "blend": sel["blend"],
            "rescore_query_weight": of_artifact(art).weights[1], **left}


def choices_line(algo: str, chosen: list) -> str:
    """What each fold chose, as the log says it: ``linear: chosen per fold: 1) l2 0.01,
    blend 1; 2) ...``; the pipeline's row is named so already (``chosen per fold: 1)
    lambdamart: ...``)."""
    label = algo if algo == PIPELINE else f"{algo}: chosen per fold"
    return f"{label}: " + "; ".join(f"{f + 1}) {describe_choice(c)}" for f, c in enumerate(chosen))


def describe_choice(chosen: dict | None) -> str:
    """A fold's choice (:func:`_summary`) as short text: ``depth 4, lr 0.1, 100 trees,
    blend 4``, or ``first stage kept``."""
    if chosen is None:
        return "not fitted"
    if "algorithm" in chosen:                   # the pipeline's: the algorithm, then its choice
        rest = {k: v for k, v in chosen.items() if k != "algorithm"}
        return describe_choice(rest) if chosen["algorithm"] is None else \
            f"{chosen['algorithm']}: {describe_choice(rest)}"
    left = chosen.get("left_out")
    tail = f" ({len(left)} left out by the budget)" if left else ""
    if chosen.get("first_stage"):
        return "first stage kept" + tail
    parts = [_setting(k, v) for k, v in sorted((chosen.get("settings") or {}).items())]
    blend = chosen.get("blend")
    parts.append("alone" if blend is None else f"blend {blend:.3g}")
    return ", ".join(parts) + tail


def _setting(name: str, value) -> str:
    if isinstance(value, (list, tuple)):
        value = "-".join(str(v) for v in value)
    elif isinstance(value, float):
        value = f"{value:.3g}"
    return f"{value} trees" if name == "trees" else f"{name} {value}"
