"""Monitoring (issue 51): drift statistics, model decay, verdicts and ``ltr monitor``,
offline on synthetic logged data."""

from __future__ import annotations

import numpy as np
import pytest

from ltr_toolkit.evaluation import drift


def _matrix(rng, queries=150, per=40, shift=0.0, scale=1.0):
    """Rows of queries with a BM25-like feature (missing when it does not match), a
    numeric one and a binary one."""
    n = queries * per
    q_level = np.repeat(rng.gamma(2.0, 2.0, queries), per)
    bm25 = q_level * rng.gamma(2.0, 1.0, n) * scale + shift
    bm25[rng.random(n) < 0.3] = np.nan
    price = rng.lognormal(3.0, 1.0, n)
    flag = (rng.random(n) < 0.4).astype(float)
    return np.column_stack([bm25, price, flag])


NAMES = ["bm25", "price", "flag"]


def _offsets(X, per):
    return np.arange(0, len(X) + 1, per)


def test_psi_and_ks_are_zero_on_identical_data_and_grow_with_a_shift():
    x = np.random.default_rng(0).normal(size=5000)
    psi, ks = drift.pair(x, x)
    assert psi[0] == pytest.approx(0.0, abs=1e-12) and ks[0] == 0.0
    (small, ks_small), (large, ks_large) = drift.pair(x, x + 0.1), drift.pair(x, x + 1.0)
    assert 0 < small[0] < large[0]
    assert 0 < ks_small[0] < ks_large[0] <= 1.0


def test_ks_on_the_grid_is_scipys_where_the_grid_holds_every_value():
    """KS is read at the pooled values' KS_BINS-quantiles: SciPy's exact statistic when
    there are fewer distinct values than bins, never above it otherwise."""
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 7, 700).astype(float), rng.integers(1, 8, 400).astype(float)
    a[:50] = np.nan
    exact = scipy_stats.ks_2samp(a[~np.isnan(a)], b).statistic
    assert drift.pair(a, b)[1][0] == pytest.approx(exact)
    c, d = rng.normal(size=700), rng.normal(0.2, 1.3, size=400)
    assert drift.pair(c, d)[1][0] <= scipy_stats.ks_2samp(c, d).statistic + 1e-12


def test_missing_is_its_own_bin():
    x = np.random.default_rng(1).normal(size=4000)
    y = x.copy()
    y[:2000] = np.nan                    # same present values' shape, half of them gone
    psi, ks = drift.pair(x, y)
    assert psi[0] > 0.3 and ks[0] < 0.1  # KS reads the present values only


def test_a_null_resample_is_ok_and_a_shift_is_flagged():
    rng = np.random.default_rng(7)
    ref, new = _matrix(rng), _matrix(rng)
    off = _offsets(ref, 40)
    found = drift.feature_drift(ref, new, NAMES, off, off)
    assert [f["flag"] for f in found["features"]] == ["ok"] * 3, found
    shifted = _matrix(rng, scale=1.5)
    shifted[:, 1] *= 100                 # a price re-computed on another scale
    flags = {f["feature"]: f["flag"] for f in drift.feature_drift(ref, shifted, NAMES, off, off)["features"]}
    assert flags == {"bm25": "drift", "price": "drift", "flag": "ok"}


def test_a_feature_missing_or_constant_everywhere_is_broken():
    rng = np.random.default_rng(2)
    ref, new = _matrix(rng), _matrix(rng)
    off = _offsets(ref, 40)
    new[:, 0] = np.nan                   # a renamed field: the feature never matches
    new[:, 2] = 1.0                      # one value everywhere
    rows = drift.feature_drift(ref, new, NAMES, off, off)["features"]
    assert [r["flag"] for r in rows] == ["broken", "ok", "broken"]
    assert rows[0]["missing"][1] == 1.0 and "missing on every row" in rows[0]["why"]
    # dead in the reference too: not a change, so not broken
    assert drift.feature_drift(new, new, NAMES, off, off)["features"][0]["flag"] == "ok"


def test_broken_needs_support_in_the_reference():
    """A sparse feature the reference has on too few rows, or in too few queries, is
    absent now by chance as often as not: drift at most, never broken."""
    rng = np.random.default_rng(4)
    ref, new = _matrix(rng), _matrix(rng)
    off = _offsets(ref, 40)
    ref[:, 0], new[:, 0] = np.nan, np.nan
    ref[5, 0] = 3.0                      # 1 row of 6,000
    one = drift.feature_drift(ref, new, NAMES, off, off)["features"][0]
    assert one["flag"] != "broken" and one["support"] == [1, 1] and not one["enough_support"]
    ref[:120, 0] = 3.0                   # 2% of the rows, but in 3 queries of 150
    few = drift.feature_drift(ref, new, NAMES, off, off)
    assert few["features"][0]["flag"] != "broken" and few["features"][0]["support"] == [120, 3]
    assert few["thresholds"]["min_queries"] > 3
    ref[::40, 0] = 3.0                   # and once in every query
    assert drift.feature_drift(ref, new, NAMES, off, off)["features"][0]["flag"] == "broken"


def test_the_threshold_is_the_max_statistics_order_statistic_and_refuses_unresolvable_levels():
    maxima = np.arange(1.0, 401.0)
    assert drift.max_threshold(maxima, 0.05) == 381.0          # ceil(0.95 x 401)
    with pytest.raises(ValueError, match="cannot resolve"):
        drift.max_threshold(np.arange(10.0), 0.05)


@pytest.mark.parametrize("shape", [dict(features=120, rows=5, rho=0.6, queries=50),
                                   dict(features=6, rows=20, rho=0.3, queries=200)])
def test_the_calibrated_thresholds_keep_an_unchanged_feature_set_ok(shape):
    """Simulated runs with nothing changed (benchmarks.monitor_sim's populations): the
    whole set's false alarms stay within the binomial bound of ALPHA (the count below its
    99.9% quantile at ``runs`` runs)."""
    from math import comb
    from benchmarks.monitor_sim import simulate
    runs, alpha = 60, drift.ALPHA
    alarms = 0
    for r in range(runs):
        rng = np.random.default_rng([r, 59])
        (a, oa), (b, ob) = simulate(rng, **shape), simulate(rng, **shape)
        found = drift.feature_drift(a, b, [str(j) for j in range(a.shape[1])], oa, ob, seed=r)
        alarms += any(f["flag"] != "ok" for f in found["features"])
    tail = np.cumsum([comb(runs, j) * alpha ** j * (1 - alpha) ** (runs - j) for j in range(runs + 1)])
    assert alarms <= int(np.searchsorted(tail, 0.999)), alarms


# --------------------------------------------------------------------------- decay

from ltr_toolkit.evaluation import decay as D   # noqa: E402


def _ranked(rng, queries=120, per=30, skill=1.0):
    """Grades, a first stage that knows them a little, a model that knows them by ``skill``."""
    y = rng.integers(0, 3, queries * per).astype(float)
    offsets = np.arange(0, len(y) + 1, per)
    first = y * 0.5 + rng.normal(size=len(y))
    model = y * skill + rng.normal(size=len(y))
    return y, offsets, first, model


def test_first_stage_order_is_the_rows_order_of_logged_candidates():
    offsets = np.array([0, 3, 5])
    X = np.array([[5.0], [7.0], [1.0], [2.0], [np.nan]])
    s = D.first_stage_scores(X, offsets, {"candidates": {"k": 3}})
    assert list(s) == [0, -1, -2, 0, -1]
    s = D.first_stage_scores(X, offsets, {"feature_names": ["fs"], "first_stage_feature": "fs"})
    assert s[1] > s[0] > s[2] and s[4] == -np.inf
    assert D.first_stage_scores(X, offsets, {"feature_names": ["fs"]}) is None


def _gains(rng, queries, mean, sd=0.15, prefix="q"):
    """A per_query dict whose model beats the first stage by ``mean`` per query on average."""
    first = rng.uniform(0.2, 0.6, queries)
    return {"qids": [f"{prefix}{i}" for i in range(queries)], D.MODEL: first + rng.normal(mean, sd, queries),
            D.FIRST: first}


def _held(pq):
    g = pq[D.MODEL] - pq[D.FIRST]
    return {"source": "test", "k": 10, "queries": len(g), "gain": float(g.mean()),
            "qids": list(pq["qids"]), "gains": g.tolist(), "selected_on": False}


def test_decay_on_new_queries_ok_without_change_and_degraded_when_the_gain_halves():
    rng = np.random.default_rng(5)
    held = _held(_gains(rng, 400, 0.1))
    same = D.decay(_gains(rng, 400, 0.1, prefix="new"), held)
    assert same["verdict"] == "ok" and same["change"]["test"] == "two-sample"
    assert same["change"]["queries"] == [400, 400] and same["reasons"] == []
    halved = D.decay(_gains(rng, 400, 0.05, prefix="new"), held)
    ch = halved["change"]
    assert halved["verdict"] == "degraded" and ch["p_value"] < 0.05
    assert ch["ci"][0] <= ch["change"] <= ch["ci"][1] < 0
    assert "fell from" in halved["reasons"][0]


def test_decay_never_uses_the_training_queries_as_new_evidence():
    """The new snapshot's queries the model was trained on are left out of the two-sample
    test; held-out queries judged again are tested paired; training queries alone: untested."""
    rng = np.random.default_rng(6)
    held = _held(_gains(rng, 200, 0.1, prefix="h"))
    train = _gains(rng, 200, 0.0, prefix="t")        # would look like decay if used
    fresh = _gains(rng, 200, 0.1, prefix="new")
    mixed = {k: (train[k] + fresh[k]) if k == "qids" else np.concatenate([train[k], fresh[k]]) for k in train}
    found = D.decay(mixed, held, trained=train["qids"])
    assert found["change"]["queries"] == [200, 200] and found["verdict"] == "ok"
    again = {"qids": held["qids"], D.FIRST: np.zeros(200), D.MODEL: np.asarray(held["gains"]) / 2}
    paired = D.decay(again, held, trained=held["qids"])
    assert paired["change"]["test"] == "paired" and paired["verdict"] == "degraded"
    assert "optimistic" in paired["note"]
    only = D.decay(train, held, trained=train["qids"])
    assert only["verdict"] == "untested" and "all trained on" in only["note"]
    none = D.decay(fresh, None)
    assert none["verdict"] == "untested" and "no gains on held-out queries" in none["note"]


def test_the_two_sample_test_holds_its_level():
    """Under no change (unequal sizes and spreads), the one-sided test rejects at most at
    alpha: the count stays below the binomial upper bound at 99.9% of ``runs`` at alpha."""
    from math import comb
    from ltr_toolkit.rank import stats
    rng = np.random.default_rng(8)
    runs, alpha = 300, 0.05
    hits = sum(stats.two_sample(rng.normal(0.1, 0.1, 60), rng.normal(0.1, 0.3, 35),
                                alternative="less", n_resamples=499, confidence_level=None,
                                seed=i).p_value < alpha for i in range(runs))
    tail = np.cumsum([comb(runs, j) * alpha ** j * (1 - alpha) ** (runs - j) for j in range(runs + 1)])
    assert hits <= int(np.searchsorted(tail, 0.999)), hits
    shifted = stats.two_sample(rng.normal(0.1, 0.1, 200), rng.normal(0.0, 0.1, 200), alternative="less")
    assert shifted.p_value < 0.001 and shifted.ci[1] < 0


def test_queries_of_one_grade_are_left_out():
    y = np.array([0.0, 0.0, 1.0, 0.0, 2.0, 2.0])
    off = np.array([0, 2, 4, 6])
    pq = D.per_query(-np.arange(6.0), -np.arange(6.0), y, off, ["a", "b", "c"], 10)
    assert pq["qids"] == ["b"]


# --------------------------------------------------------------------------- ltr monitor

import json  # noqa: E402

from ltr_toolkit.cli import main  # noqa: E402
from ltr_toolkit.data.logged import row_text  # noqa: E402

FEATURES = ["first_stage", "signal", "price"]


def _logged(path, rng, queries=100, per=20, signal=None, price_scale=1.0, drop_signal=False,
            prefix="q"):
    """A logged file of first-stage candidates (rows in the first stage's order) and its
    sidecar: ``signal`` knows the grades well, the first stage a little; queries
    ``{prefix}0``... (other prefixes: other judged queries)."""
    lines = []
    for q in range(queries):
        y = rng.integers(0, 3, per).astype(float)
        first = y * 0.4 + rng.normal(size=per)
        sig = y + rng.normal(scale=0.5, size=per) if signal is None else signal(y, rng)
        price = rng.lognormal(3, 1, per) * price_scale
        for i in np.argsort(-first, kind="stable"):
            vals = [first[i], None if drop_signal else sig[i], price[i]]
            lines.append(row_text(y[i], f"{prefix}{q}", vals, f"d{q}-{i}"))
    path.write_text("".join(lines))
    side = {"feature_names": FEATURES, "missing_features": "absent", "featureset": "synthetic",
            "first_stage_feature": "first_stage", "candidates": {"k": per}}
    path.with_suffix(path.suffix + ".json").write_text(json.dumps(side))
    return path


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """A reference snapshot, a held-out split of other queries, and a model trained on
    the one, its gains on the other recorded (``ltr train --valid``)."""
    from ltr_toolkit.pipeline.train import train_from_files
    d = tmp_path_factory.mktemp("mon")
    ref = _logged(d / "ref.txt", np.random.default_rng(1))
    valid = _logged(d / "valid.txt", np.random.default_rng(11), prefix="v")
    art = train_from_files(ref, "lambdamart", valid=valid, output=d / "model.json", trees=30, depth=3)
    assert art["held_out"]["queries"] == 100 and art["held_out"]["gain"] > 0
    assert not art["held_out"]["selected_on"] and len(art["training_data"]["qids"]) == 100
    return d


def _run(capsys, *args):
    code = main(["monitor", *map(str, args), "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_monitor_ok_on_an_unchanged_resample(deployed, capsys):
    new = _logged(deployed / "same.txt", np.random.default_rng(2), prefix="n")
    code, report = _run(capsys, deployed / "ref.txt", new, "--artifact", deployed / "model.json")
    assert (code, report["verdict"]) == (0, "ok"), report["summary"]
    dec = report["decay"]
    assert dec["now"]["gain"] > 0 and dec["now"]["p_value"] < 0.05
    assert dec["change"]["test"] == "two-sample" and dec["change"]["queries"] == [100, 100]


def test_monitor_without_held_out_gains_watches_drift_only(deployed, capsys, tmp_path):
    art = json.loads((deployed / "model.json").read_text())
    art.pop("held_out")
    (tmp_path / "m.json").write_text(json.dumps(art))
    noise = lambda y, rng: rng.permutation(y) + rng.normal(scale=0.5, size=len(y))  # noqa: E731
    new = _logged(tmp_path / "noise.txt", np.random.default_rng(5), signal=noise, prefix="n")
    assert main(["monitor", str(deployed / "ref.txt"), str(new), "--artifact", str(tmp_path / "m.json")]) == 0
    assert "decay not tested: the artifact records no gains on held-out queries" in capsys.readouterr().out


def test_monitor_names_a_broken_feature(deployed, capsys, tmp_path):
    new = _logged(tmp_path / "gone.txt", np.random.default_rng(3), drop_signal=True)
    code, report = _run(capsys, deployed / "ref.txt", new, "--artifact", deployed / "model.json",
                        "-o", tmp_path / "r.json")
    assert (code, report["verdict"]) == (6, "broken")
    assert [f["feature"] for f in report["drift"]["features"] if f["flag"] == "broken"] == ["signal"]
    assert json.loads((tmp_path / "r.json").read_text())["verdict"] == "broken"


def test_monitor_drift_on_a_rescaled_numeric_feature(deployed, capsys, tmp_path):
    new = _logged(tmp_path / "x100.txt", np.random.default_rng(4), price_scale=100.0)
    code, report = _run(capsys, deployed / "ref.txt", new, "--artifact", deployed / "model.json")
    flags = {f["feature"]: f["flag"] for f in report["drift"]["features"]}
    assert flags["price"] == "drift" and flags["signal"] == "ok"
    assert code == {"drift": 4, "degraded": 5}[report["verdict"]]


def test_monitor_degraded_when_the_signal_stops_meaning_the_grades(deployed, capsys, tmp_path):
    """Same distribution, no longer tied to the grades: no drift to see, the decay shows it."""
    noise = lambda y, rng: rng.permutation(y) + rng.normal(scale=0.5, size=len(y))  # noqa: E731
    new = _logged(tmp_path / "noise.txt", np.random.default_rng(5), signal=noise, prefix="n")
    code, report = _run(capsys, deployed / "ref.txt", new, "--artifact", deployed / "model.json")
    assert (code, report["verdict"]) == (5, "degraded"), report["summary"]
    ch = report["decay"]["change"]
    assert ch["change"] < 0 and ch["p_value"] < 0.05 and ch["ci"][1] < 0


def test_monitor_text_summary_and_user_errors(deployed, capsys, tmp_path):
    new = _logged(tmp_path / "gone.txt", np.random.default_rng(3), drop_signal=True)
    assert main(["monitor", str(deployed / "ref.txt"), str(new)]) == 6
    text = capsys.readouterr().out
    assert "broken" in text and "signal" in text and "PSI" in text
    assert main(["monitor", str(deployed / "ref.txt")]) == 2       # one file, no folder
    assert main(["monitor", str(deployed / "ref.txt"), str(tmp_path / "none.txt")]) == 2


# --------------------------------------------------------------------------- snapshots, jobs

def _snapshots(root, deployed):
    """A job's output folder: the reference at deployment, then a run with the signal gone."""
    import shutil
    for name, src in (("run-20260101T000000Z", deployed / "ref.txt"),
                      ("run-20260102T000000Z", _logged(root / "later.txt", np.random.default_rng(9))),
                      ("run-20260103T000000Z", _logged(root / "gone.txt", np.random.default_rng(8),
                                                       drop_signal=True))):
        (root / name).mkdir()
        shutil.copy(src, root / name / "features.txt")
        shutil.copy(src.with_suffix(".txt.json"), root / name / "features.txt.json")
        (root / name / "manifest.json").write_text(json.dumps({"run_id": name}))
    return root


def test_monitor_a_snapshot_folder_against_the_training_snapshot(deployed, capsys, tmp_path):
    root = _snapshots(tmp_path, deployed)
    art = json.loads((deployed / "model.json").read_text())
    art["training_data"]["path"] = str(root / "run-20260102T000000Z" / "features.txt")
    (tmp_path / "m.json").write_text(json.dumps(art))
    code, report = _run(capsys, root, "--artifact", tmp_path / "m.json", "--plot", tmp_path / "d.png")
    assert code == 6 and report["reference"].endswith("run-20260102T000000Z/features.txt")
    assert report["new"].endswith("run-20260103T000000Z/features.txt")
    assert len(report["snapshots"]) == 3
    if report.get("plot"):
        assert (tmp_path / "d.png").read_bytes()[:4] == b"\x89PNG"


def test_a_job_writes_the_verdict_into_the_manifest(deployed, tmp_path):
    from ltr_toolkit.jobs.jobfile import load_job
    from ltr_toolkit.jobs.runner import record_monitor
    from ltr_toolkit.pipeline.monitor import monitor_snapshot
    root = _snapshots(tmp_path / "out", deployed) if (tmp_path / "out").mkdir() is None else None
    job_file = tmp_path / "job.toml"
    job_file.write_text(f'[logging]\nfeatureset = "fs"\nindex = "i"\njudgments = "j.txt"\n'
                        f'[output]\ndirectory = "out"\n[monitor]\nartifact = "{deployed / "model.json"}"\ncutoff = 5\n')
    job = load_job(job_file)
    assert job.monitor == {"artifact": deployed / "model.json", "cutoff": 5, "model": None,
                           "live_queries": 20}
    newest = root / "run-20260103T000000Z"
    result = record_monitor(newest, monitor_snapshot(job, newest))
    written = json.loads((newest / "manifest.json").read_text())
    assert written["run_id"] == newest.name and written["monitor"]["verdict"] == result["verdict"] == "broken"
    assert list(written["monitor"]["flagged"]) == ["signal"]


def test_a_job_file_checks_its_monitor_section(tmp_path):
    from ltr_toolkit.errors import InputError
    from ltr_toolkit.jobs.jobfile import load_job
    job_file = tmp_path / "job.toml"
    job_file.write_text('[logging]\nfeatureset = "fs"\nindex = "i"\njudgments = "j.txt"\n'
                        '[output]\ndirectory = "out"\n[monitor]\ncutoff = 0\n')
    with pytest.raises(InputError, match="cutoff"):
        load_job(job_file)
    job_file.write_text('[logging]\nfeatureset = "fs"\nindex = "i"\njudgments = "j.txt"\n'
                        '[output]\ndirectory = "out"\n[monitor]\nmodel = "m-v1"\n')
    with pytest.raises(InputError, match="model needs artifact"):
        load_job(job_file)


HOSTILE_NAME = '<img src=x onerror="window.__pwned=1">sig</td><script>window.__pwned=2</script>'


def test_the_monitor_page_shows_hostile_names_as_text_in_a_real_browser(deployed, tmp_path):
    """--html: the verdict, the summary, the features' table and the picture; a feature
    name from the user's feature set is shown as text, never run (Debian's Chromium)."""
    from browser import chromium
    files = []
    for name, rng, drop in (("ref", 1, False), ("new", 3, True)):
        path = _logged(tmp_path / f"{name}.txt", np.random.default_rng(rng), drop_signal=drop)
        side = json.loads(path.with_suffix(".txt.json").read_text())
        side["feature_names"] = ["first_stage", HOSTILE_NAME, "price"]
        side["first_stage_feature"] = "first_stage"
        path.with_suffix(".txt.json").write_text(json.dumps(side))
        files.append(path)
    page = tmp_path / "monitor.html"
    assert main(["monitor", *map(str, files), "--html", str(page)]) == 6
    raw = page.read_text()
    assert HOSTILE_NAME not in raw and "<script" not in raw.lower()
    browser = chromium()
    try:
        browser.get(page.as_uri())
        from selenium.webdriver.common.by import By
        body = browser.find_element(By.TAG_NAME, "body").text
        assert body.startswith("broken (exit 6)") and HOSTILE_NAME in body
        assert browser.execute_script("return window.__pwned === undefined"), "a payload ran"
        imgs = browser.execute_script("return [...document.images].map((i) => i.naturalWidth)")
        assert len(imgs) == 1 and imgs[0] > 100             # the picture, drawn inline
    finally:
        browser.quit()


def test_cross_validation_records_each_fold_models_gains_on_its_own_fold(deployed):
    """``ltr evaluate cv``'s evidence (pipeline.evidence.from_folds): fold f's model scores
    fold f's queries only; a fold that kept the first stage has gain 0 there."""
    from ltr_toolkit.data.svmlight import load_logged
    from ltr_toolkit.pipeline.crossval import fold_of
    from ltr_toolkit.pipeline.evidence import from_folds, per_query
    from ltr_toolkit.pipeline.train import load_model, train_model
    ds = load_logged(deployed / "ref.txt")
    where = fold_of([str(q) for q in ds.qids], 2, seed=0)
    arts = [train_model(ds.subset([i for i, q in enumerate(ds.qids) if where[str(q)] != f]),
                        "lambdamart", trees=20, depth=3) for f in range(2)]
    held = from_folds(ds, arts, where, 10)
    assert sorted(held["qids"]) == sorted(where) and held["k"] == 10
    for f in range(2):
        own = ds.subset([i for i, q in enumerate(ds.qids) if where[str(q)] == f])
        pq = per_query(*load_model("m", arts[f], scorer=True), own, 10)
        at = [held["qids"].index(q) for q in pq["qids"]]
        assert np.allclose(np.asarray(held["gains"])[at], pq["model"] - pq["first-stage"])
    kept = from_folds(ds, [arts[0], {"model": None}], where, 10)
    assert all(g == 0.0 for q, g in zip(kept["qids"], kept["gains"]) if where[q] == 1)


def test_monitor_judgment_options_go_with_judgments_and_the_help_says_what_is_computed(deployed, capsys):
    ref = str(deployed / "ref.txt")
    assert main(["monitor", ref, ref, "--input-format", "trec"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--input-format and --queries go with --judgments" in err and len(err.splitlines()) == 1
    from typer.testing import CliRunner
    from ltr_toolkit.cli import app
    text = " ".join(CliRunner().invoke(app, ["monitor", "--help"], terminal_width=200).output.split())
    assert "NDCG@K, the one metric the monitor computes" in text and "ERR" not in text
    assert "--input-format" in text and "--queries" in text


def test_train_says_what_held_out_evidence_it_recorded(deployed, capsys, tmp_path):
    """``ltr train`` ends with the gain the artifact records for ``ltr monitor`` to test
    decay against, or why there is none."""
    args = ["train", str(deployed / "ref.txt"), "--algo", "lambdamart", "--trees", "20", "--depth", "3"]
    assert main([*args, "--valid", str(deployed / "valid.txt"), "-o", str(tmp_path / "a.json")]) == 0
    art = json.loads((tmp_path / "a.json").read_text())
    said = capsys.readouterr().out
    assert (f"held-out evidence for `ltr monitor`: {art['held_out']['gain']:+.4f} NDCG@10 over the "
            "first stage on 100 validation queries") in " ".join(said.split())
    assert main([*args, "-o", str(tmp_path / "b.json")]) == 0
    assert "no held-out evidence recorded (no --valid)" in capsys.readouterr().out
