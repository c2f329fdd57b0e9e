"""``ltr monitor``: a newer logged snapshot held against a reference, for drifting and
broken features (``evaluation.drift``) and for the deployed model's decay
(``evaluation.decay``), with one verdict a scheduler acts on.

Inputs: two logged files (REFERENCE, NEW), or a job's snapshot folder (``ltr job run``'s
output directory): NEW is its newest snapshot, REFERENCE the one the model artifact was
trained on (its ``training_data.path`` inside a kept snapshot) or else the oldest kept.

Verdicts, worst first, and their exit codes (docs/scheduling.md); with nothing changed,
any verdict but ``ok`` comes in at most :data:`ALPHA` of runs (the drift check's and the
decay test's levels, half each):

* ``broken`` (6): a feature missing or constant on every row where it was not;
* ``degraded`` (5): the model's gain over the first stage fell significantly below the
  gains it showed on held-out queries when it was made (``evaluation.decay``; a model
  whose artifact records none is not tested for decay, and the summary says why);
* ``drift`` (4): features shifted beyond the thresholds calibrated on the reference
  (``evaluation.drift``);
* ``ok`` (0).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..data.svmlight import load_logged
from ..errors import UserError
from ..evaluation import decay as D
from ..evaluation.drift import feature_drift
from ..jobs.snapshots import snapshots
from .artifact import check_same_features, load_model
from .evidence import model_scores, per_query

#: an unchanged index and model raise an alarm (any verdict but ok) in at most ALPHA of
#: runs: the drift check and the decay test share it, half each
ALPHA = D.ALPHA
DRIFT_ALPHA = DECAY_ALPHA = ALPHA / 2
VERDICTS = ("ok", "drift", "degraded", "broken")
EXIT_CODES = {"ok": 0, "drift": 4, "degraded": 5, "broken": 6}
DATA = "features.txt"


def resolve(paths: list[Path], art: dict | None) -> tuple[Path, Path, list[Path]]:
    """(reference file, new file, every snapshot's file oldest first, for the picture)."""
    if len(paths) == 2:
        for p in paths:
            if not p.is_file():
                raise UserError(f"{p}: no such logged file", "give two logged files, or one snapshot folder")
        return paths[0], paths[1], list(paths)
    if len(paths) != 1 or not paths[0].is_dir():
        raise UserError("ltr monitor takes two logged files (REFERENCE NEW) or one job's snapshot folder",
                        "e.g. `ltr monitor old.txt new.txt` or `ltr monitor /var/lib/ltr/snapshots`")
    kept = [s / DATA for s in snapshots(paths[0]) if (s / DATA).is_file()]
    if len(kept) < 2:
        raise UserError(f"{paths[0]} holds {len(kept)} published snapshot(s): two are needed",
                        "run the job again (or give two logged files)")
    trained = (art or {}).get("training_data", {}).get("path")
    ref = next((p for p in kept if trained and Path(trained).resolve() == p.resolve()), kept[0])
    if ref == kept[-1]:
        ref = kept[0] if trained is None else ref
    return ref, kept[-1], kept


def decay_of(art: dict, model, ds, k: int) -> dict:
    """The model's decay on logged data ``ds`` (``evaluation.decay.decay``), at the cutoff
    its held-out gains were recorded at (``k`` when it records none)."""
    held = art.get("held_out")
    k = held["k"] if held else k
    now = per_query(art, model, ds, k)
    if now is None:
        return dict(D.untested({"qids": []}, "no first-stage order in the logged data to "
                                              "compare with"), k=k)
    trained = (art.get("training_data") or {}).get("qids") or ()
    return dict(D.decay(now, held, trained, DECAY_ALPHA), k=k)


def monitor(ref_path: Path, new_path: Path, artifact: Path | None = None, k: int = 10,
            series: list[Path] = (), live: dict | None = None) -> dict:
    """The report (see the module docstring): ``drift``, ``decay`` (None without a model
    or a first stage to compare with), ``live`` (:func:`live_check`'s, when the caller
    made it), ``verdict``, ``exit_code``, ``summary`` lines."""
    ref, new = load_logged(ref_path), load_logged(new_path)
    rs, ns = ref.meta.get("sidecar", {}), new.meta.get("sidecar", {})
    check_same_features(ref_path, rs, new_path, ns)
    names = ns.get("feature_names") or rs.get("feature_names") or [f"f{j + 1}" for j in range(new.n_features)]
    if ref.n_features != new.n_features:
        raise UserError(f"{ref_path} has {ref.n_features} features, {new_path} {new.n_features}",
                        "log both with the same feature set")
    report = {"reference": str(ref_path), "new": str(new_path), "k": k,
              "drift": feature_drift(ref.X, new.X, names, ref.offsets, new.offsets,
                                     DRIFT_ALPHA),
              "decay": None, "model": None, "snapshots": [str(p) for p in series]}
    if artifact is not None:
        art, model = load_model(artifact, scorer=True)
        check_same_features(artifact, {"featureset_sha256": art.get("featureset_sha256"),
                                       "feature_names": art.get("feature_names")}, new_path, ns)
        report["model"] = str(artifact)
        report["decay"] = decay_of(art, model, new, k)
    return finish(report, live)


def finish(report: dict, live: dict | None = None) -> dict:
    """The verdict, its exit code and the summary lines of a report (``live``: served
    against local scores, :func:`ltr_toolkit.serving` checks)."""
    feats = report["drift"]["features"]
    broken = [f for f in feats if f["flag"] == "broken"]
    drifted = [f for f in feats if f["flag"] == "drift"]
    decayed = report["decay"] is not None and report["decay"]["verdict"] == "degraded"
    live_bad = live is not None and not live.get("agree", True)
    verdict = "broken" if broken or live_bad else "degraded" if decayed else \
        "drift" if drifted else "ok"
    report.update(live=live, verdict=verdict, exit_code=EXIT_CODES[verdict])
    report["summary"] = summary(report)
    return report


def summary(report: dict) -> list[str]:
    """One screen: the verdict, each flagged feature with its figures, the model's gain."""
    d = report["drift"]
    th = d["thresholds"]
    lines = [f"{report['verdict']}: {report['new']} vs {report['reference']} "
             f"({d['queries'][1]} vs {d['queries'][0]} queries; thresholds calibrated on this "
             f"run: {th['draws']} random splits of both snapshots' queries, a feature drifts "
             f"past z {th['z']:.3g}, the set's false alarms at {th['alpha']:.1%})"]
    for f in d["features"]:
        miss = f"missing {f['missing'][0]:.0%} -> {f['missing'][1]:.0%}"
        figures = (f"PSI {f['psi']:.3g} (limit {f['limit'][0]:.3g}), KS {f['ks']:.3g} "
                   f"(limit {f['limit'][1]:.3g}), {miss}")
        lines.append(f"  {f['flag']:<6} {f['feature']}: {figures}" + (f" ({f['why']})" if f["why"] else ""))
    lines += decay_lines(report["decay"])
    if report.get("live") is not None:
        lv = report["live"]
        lines.append(f"  live: model {lv['model']} served vs local scores on {lv['queries']} queries, "
                     f"max relative diff {lv['max_rel_diff']:.3g}"
                     + ("" if lv["agree"] else f" (broken: {lv['why']})"))
    return lines


def decay_lines(dec: dict | None) -> list[str]:
    """The model's part of the summary: its gain now, the held-out gain, the test."""
    if dec is None:
        return []
    now, held, ch = dec["now"], dec["held_out"], dec["change"]
    lines = []
    if now is not None:
        lines.append(f"  model NDCG@{dec['k']} {now['ndcg']['model']:.4f} vs first stage "
                     f"{now['ndcg']['first-stage']:.4f}: gain {now['gain']:+.4f} "
                     f"(p {now['p_value']:.4f}, 95% CI {D._ci(now['ci'])}, {now['queries']} queries)")
    if ch is not None:
        lines.append(f"  held out ({held['source']}): gain {held['gain']:+.4f} on {held['queries']} "
                     f"queries; change {ch['change']:+.4f} ({ch['test']}, one-sided p "
                     f"{ch['p_value']:.4f}, {ch['level']:.0%} CI {D._ci(ch['ci'])}): {dec['verdict']}")
    if held is not None and held.get("selected_on"):
        lines.append("  (the held-out split also chose when training stopped: its gain is "
                     "slightly optimistic)")
    if dec.get("note"):
        lines.append(f"  model: {dec['note']}")
    return lines + [f"  degraded: {r}" for r in dec["reasons"]]


#: served and local scores agree within this relative difference (the plugin scores in
#: float32; the parity tests hold trees to 1e-5 and networks to 1e-4)
LIVE_RTOL = 1e-4


def live_check(conn, serving, artifact: Path, param_list: list[dict], size: int = 10) -> dict:
    """Served against local scores, live: for each query of ``param_list``, the top
    ``size`` as the stored model ``serving.model`` serves them (its contract), each with
    the feature values the plugin logged in the same request; the artifact's scores of
    those values (``ltr predict``'s, blended as its contract says) must equal the served
    ones. A stored model that is not the artifact (another version deployed, a feature
    set changed under it) or a plugin that scores otherwise (an upgrade) shows here."""
    from ..serving.explain import NothingFound, explain_query
    art, model = load_model(artifact, scorer=True)
    names = list(art.get("feature_names") or [])
    worst, queries, skipped = 0.0, 0, 0
    for params in param_list:
        try:
            docs = explain_query(conn, serving, params, size)["documents"]
        except NothingFound:
            skipped += 1
            continue
        absent = [f for f in names if docs and f not in docs[0]["features"]]
        if absent:
            return {"queries": queries + 1, "skipped": skipped, "agree": False,
                    "max_rel_diff": float("inf"), "model": serving.model,
                    "why": f"the served model has no feature {', '.join(absent)}"}
        X = np.array([[np.nan if d["features"][f] is None else d["features"][f] for f in names]
                      for d in docs], dtype=np.float64).reshape(len(docs), len(names))
        local = model_scores(art, model, X, names)
        served = np.array([d["served_score"] for d in docs], dtype=np.float64)
        rel = np.abs(served - local) / np.maximum(1.0, np.abs(local))
        worst = max(worst, float(rel.max(initial=0.0)))
        queries += 1
    agree = worst <= LIVE_RTOL
    return {"queries": queries, "skipped": skipped, "agree": agree, "max_rel_diff": worst,
            "model": serving.model, "why": None if agree else
            f"served and local scores differ by up to {worst:.3g} (relative; tolerance {LIVE_RTOL:g})"}


def column_series(paths: list[Path], features: list[str]) -> dict:
    """{feature: [(label, values of the snapshot)]} for the picture."""
    out: dict = {f: [] for f in features}
    for p in paths:
        ds = load_logged(p)
        names = ds.meta.get("sidecar", {}).get("feature_names") or []
        label = p.parent.name if p.name == DATA else p.name
        for f in features:
            if f in names:
                out[f].append((label, ds.X[:, names.index(f)].astype(np.float64)))
    return out


def monitor_snapshot(job, snapshot: Path, conn=None) -> dict:
    """A job's check after it published ``snapshot`` (``[monitor]``): what goes into the
    manifest (the verdict, its exit code, the flagged features, the model's gain, and with
    ``model``, served vs local scores on the job's first ``live_queries`` judged queries)."""
    from .artifact import read_artifact
    artifact = job.monitor.get("artifact")
    art = read_artifact(artifact) if artifact is not None else None
    try:
        ref, new, series = resolve([job.directory], art)
    except UserError as exc:
        return {"verdict": None, "note": str(exc)}
    cutoff = job.monitor.get("cutoff", 10)
    live = _job_live(job, conn, artifact, cutoff) if job.monitor.get("model") else None
    report = monitor(ref, new, artifact, cutoff, series, live)
    dec = report["decay"]
    return {"verdict": report["verdict"], "exit_code": report["exit_code"],
            "reference": str(ref), "thresholds": report["drift"]["thresholds"],
            "flagged": {f["feature"]: {"flag": f["flag"], "psi": f["psi"], "ks": f["ks"], "why": f["why"]}
                        for f in report["drift"]["features"] if f["flag"] != "ok"},
            "model": None if dec is None else {k: dec[k] for k in (
                "verdict", "k", "now", "held_out", "change", "reasons", "note")},
            "live": report["live"], "summary": report["summary"]}


def _job_live(job, conn, artifact: Path, size: int) -> dict:
    from ..data.judgments import load_judgments
    jl = load_judgments(job.judgments, job.fmt, job.queries)
    return live_check_judged(conn, job.index, job.store, job.monitor["model"], artifact, jl,
                             job.monitor["live_queries"], size)


def live_check_judged(conn, index: str, store, model: str, artifact: Path, jl, n: int,
                      size: int = 10) -> dict:
    """:func:`live_check` of the stored ``model`` (served as its contract says) on the
    first ``n`` judged queries of ``jl``: ``ltr monitor --model`` and a job's check."""
    from ..serving.serving import Serving
    params = [jl.query_params(q) for q in jl.judged_qids()[:n]]
    return live_check(conn, Serving(index, None, None, store, None, model), artifact, params, size)
