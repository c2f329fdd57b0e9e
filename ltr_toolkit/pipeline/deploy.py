"""The reranker a cross-validation recommends, trained on every judged query and uploaded
(``ltr evaluate cv --deploy``): its features, settings and blend chosen on all of them the
way each fold chose its own (:mod:`.crossval`), and its serving contract stored with it.
Training on all queries is the longest single fit of the run: ``progress(done, total)``
receives its units of work (:func:`.tuning.work`) as they end."""

from __future__ import annotations

from pathlib import Path

from ..data.svmlight import load_logged
from ..errors import UserError
from ..io.atomic import write_json
from ..stores.contract import of_artifact
from ..stores.model_store import upload
from . import featurechoice
from .crossval import first_stage_column, fit_choice, fit_chosen, fold_summary
from .train import model_from_artifact
from .tuning import PIPELINE, Progress, pipeline_choice, select, ungated


def deploy_recommended(conn, report: dict, workdir, featureset: str, name: str,
                       store: str | None = None, k: int | None = None, seed: int | None = None,
                       algo: str | None = None, progress=None) -> dict:
    """Train ``algo`` (default: the report's recommendation) on every judged query's
    candidates, with settings chosen on all of them as the run's folds chose theirs (its
    ``selection_options``, its seed and k unless given, the first stage's column as the
    candidates' sidecar records it), and upload it as ``name-vN`` with its serving
    contract. Returns the upload's answer plus the artifact's settings and contract.
    ``progress(done, total)``: the training's units of work as they end."""
    algo = algo or report["recommendation"]["deploy"]
    if not algo:
        raise UserError("the cross-validation recommends keeping the first stage: no reranker "
                        "was better with p < 0.05", "pass --deploy-anyway ALGO to upload one anyway")
    art, fixed = deploy_artifact(report, workdir, algo, k, seed, progress)
    if art["model"] is None:
        return {"name": None, "algorithm": algo, "settings": None, "contract": None,
                "feature_selection": art.get("feature_selection")}
    art, featureset = featurechoice.featureset_for(conn, art, featureset, store)
    done = upload(conn, art, model_from_artifact(art), name, featureset, store)
    path = Path(workdir) / f"{done['name']}.json"      # what ltr monitor --artifact reads
    write_json(path, art)
    return dict(done, algorithm=art.get("algorithm", algo), settings=fold_summary(art, fixed),
                contract=of_artifact(art).to_dict(), artifact=str(path), featureset=featureset,
                feature_selection=art.get("feature_selection"))


def deploy_artifact(report: dict, workdir, algo: str, k: int | None = None,
                    seed: int | None = None, progress=None) -> tuple[dict, dict | None]:
    """(the artifact :func:`deploy_recommended` uploads, the fixed settings it used).
    ``algo`` :data:`.tuning.PIPELINE`: the pipeline's choice on all the queries
    (:func:`pipeline_artifact`)."""
    data = Path(workdir) / "candidates.txt"
    ds = load_logged(data)
    seed = report.get("seed", 42) if seed is None else seed
    k = report.get("k", 10) if k is None else k
    chosen = None
    if report.get("feature_selection"):         # chosen on all judged queries, as per fold
        chosen = featurechoice.choose(ds, report["feature_selection"], k, seed)
        if not chosen["features"]:              # the budget affords none: the first stage
            return {"algorithm": algo, "selection": None, "model": None,
                    "feature_selection": chosen}, None
        ds = featurechoice.columns(ds, chosen["features"])
    first_col = first_stage_column(ds.meta["sidecar"])
    fixed = report.get("fixed_settings", {}).get(algo)     # None: chosen, as in the folds
    options = report.get("selection_options") or {}
    art = pipeline_artifact(ds, report, k, seed, str(data), first_col, progress) \
        if algo == PIPELINE else fit_chosen(ds, algo, k, seed, fixed, str(data), first_col,
                                            options, progress)
    if art.get("model") is not None:        # the outer folds' gains: ltr monitor's evidence
        art["held_out"] = (report.get("held_out") or {}).get(algo)
        art["feature_selection"] = chosen
        art["training_data"]["qids"] = [str(q) for q in ds.qids]
    return art, None if algo == PIPELINE else fixed


def pipeline_artifact(ds, report: dict, k: int, seed: int, source: str,
                      first_col: int | None, progress=None) -> dict:
    """The pipeline applied to every judged query, as in each fold: each of its
    algorithms' settings chosen on ``ds`` (the run's selection options), the best by mean
    inner NDCG (:func:`.tuning.pipeline_choice`) trained; ``model`` None (algorithm
    :data:`.tuning.PIPELINE`) when no model's mean beats the first stage's."""
    algos = report["pipeline"]["algorithms"]
    options = report.get("selection_options") or {}
    plans = {a: Progress.of(ds, a, None, **options)[1] for a in algos}
    # the final fit's share: the largest the pick can need
    done = Progress(progress, sum(w["select"] for w in plans.values())
                    + max(w["round"] * w["rounds"] for w in plans.values()))
    chosen = {a: select(ds, a, k, seed, first_col=first_col, progress=done.add, **options)
              for a in algos}
    pick = pipeline_choice(chosen)
    if pick is None:
        return {"algorithm": PIPELINE, "selection": None, "model": None}
    return fit_choice(ds, pick, k, seed, ungated(chosen[pick]), source, first_col,
                      on_round=lambda: done.add(plans[pick]["round"]))
