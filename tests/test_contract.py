"""The serving contract travels with the model (issue 43, items 3-6): a model chosen as a
blend with the first stage is served, evaluated, interleaved and explained as that blend
with no weight flag; explanations prepare the query as serving does (its vector from the
full text); report explanations explain what ranked each fold; the deployment chooses as
the run's folds did. Live, against the real plugin."""

from __future__ import annotations

import json
import re
import uuid
import warnings

import numpy as np
import pytest
from conftest import run_cli

from ltr_toolkit.data.svmlight import load_logged
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.errors import UserError
from ltr_toolkit.query.firststage import FirstStage
from ltr_toolkit.serving.explain import explain_query, explain_systems
from ltr_toolkit.serving.serving import Serving
from ltr_toolkit.stores import contract as C
from ltr_toolkit.stores import contract_record as R
from ltr_toolkit.stores import store as st
from ltr_toolkit.transport.client import request

pytestmark = [pytest.mark.cluster, pytest.mark.ltr]
INDEX = "cranfield-test"


# --------------------------------------------------------------------------- offline

def test_the_contract_round_trips_and_old_artifacts_still_have_one():
    c = C.Contract(weights=(1.0, 0.25), window=50, max_terms=12, first_stage={"template": {}},
                   first_stage_feature="first_stage_bm25", encoder={"name": "e", "sha256": "x"},
                   featureset="fs", featureset_sha256="abc")
    assert C.Contract.from_dict(json.loads(json.dumps(c.to_dict()))) == c and c.blended
    old = {"rescore": {"query_weight": 1.0, "rescore_query_weight": 0.5}, "max_query_terms": 9,
           "candidates": {"k": 30}, "first_stage": {"template": {}}, "featureset": "fs"}
    got = C.of_artifact(old)
    assert (got.weights, got.window, got.max_terms, got.featureset) == ((1.0, 0.5), 30, 9, "fs")
    with pytest.raises(UserError, match="rule"):
        C.Contract(max_terms=3, shortening="another-rule").check("m")


# --------------------------------------------------------------------------- live

def _rows(stdout: str) -> list[list[str]]:
    """The cells of a rich table's body rows."""
    return [[c.strip() for c in line.strip("│").split("│")] for line in stdout.splitlines()
            if re.match(r"^│ *\d+ ", line)]


@pytest.fixture(scope="module")
def blend(ltr_cluster, cranfield_index, shipped_featureset, tmp_path_factory):
    """A linear model trained on 60 Cranfield training queries' top 50 (logged live),
    chosen as a blend with the first stage (beta from step 1, as selection would set it),
    uploaded with `ltr upload`; the same model served alone, and another one (fewer
    epochs), uploaded beside it."""
    from ltr_toolkit.pipeline.crossval import blended, first_stage_column
    conn, d = ltr_cluster.conn(), tmp_path_factory.mktemp("contract")
    jl = cranfield.split_judgments("train")
    jl = jl.subset(jl.judged_qids()[:60])
    Serving(INDEX, FirstStage.from_fields(), 50).log_candidates(conn, jl, shipped_featureset,
                                                                 d / "train.txt")
    for kind, epochs in (("alone", "15"), ("other", "3")):
        r = run_cli("train", str(d / "train.txt"), "--algo", "linear", "--epochs", epochs,
                    "-o", str(d / f"{kind}.json"))
        assert r.returncode == 0, r.stderr
    ds = load_logged(d / "train.txt")
    col = first_stage_column(ds.meta["sidecar"])
    assert col is not None, ds.meta["sidecar"]
    art = blended(json.loads((d / "alone.json").read_text()), ds.X, col, 1.0)
    (d / "blend.json").write_text(json.dumps(art))
    names, said = {}, {}
    for kind in ("blend", "alone", "other"):
        r = run_cli("--url", conn.url, "model", "upload", str(d / f"{kind}.json"), "--name", f"contract-{kind}")
        assert r.returncode == 0, r.stderr
        names[kind], said[kind] = r.stdout.split("uploaded ")[1].split()[0], r.stdout
    assert "blended: first stage +" in said["blend"] and "the model alone" in said["alone"]
    return {"conn": conn, "dir": d, "names": names, "contract": C.of_artifact(art), "url": conn.url}


def test_upload_records_the_contract_on_the_cluster(blend):
    conn, name = blend["conn"], blend["names"]["blend"]
    got = R.recorded(conn, name)
    assert got is not None and got.blended and got.weights == blend["contract"].weights
    assert got.window == 50 and got.first_stage_feature == "first_stage_bm25"
    assert got.max_terms == blend["contract"].max_terms is not None
    doc = conn.client().get(index=R.INDEX, id=f"_default_/{name}")["_source"]
    assert doc["contract"]["rescore"]["query_weight"] == 1.0
    assert R.recorded(conn, blend["names"]["alone"]).weights == C.MODEL_ONLY


def test_a_blend_scores_the_same_through_every_path(blend, tmp_path):
    """Acceptance: without any weight flag, `ltr search`, `ltr explain`, `ltr search
    --interleave` and `ltr evaluate --model` serve the blend exactly as the flags of its
    contract do (same ids, same scores); the CLI's old defaults (the model alone) give
    other scores and, given explicitly, say they override the contract."""
    url, name = blend["url"], blend["names"]["blend"]
    q, beta = blend["contract"].weights
    jl = cranfield.split_judgments("test")
    jfile = tmp_path / "test.txt"
    assert run_cli("judgments", "cranfield", "--split", "test", "-o", str(jfile)).returncode == 0
    ev = run_cli("--url", url, "evaluate", "models", str(jfile), "--index", INDEX, "--model", name,
                 "-o", str(tmp_path / "rep.json"))
    assert ev.returncode == 0 and "warning" not in ev.stderr, ev.stderr
    top = json.loads((tmp_path / "rep.json").read_text())["top"][name]
    for qid in jl.judged_qids()[:3]:
        text, base = jl.queries[qid], ("--url", url)
        ref = run_cli(*base, "query", "search", text, "--index", INDEX, "--model", name,
                      "--query-weight", f"{q!r}", "--rescore-weight", f"{beta!r}")
        assert ref.returncode == 0 and "warning" not in ref.stderr, ref.stderr
        want = [(r[1], r[2]) for r in _rows(ref.stdout)]
        got = run_cli(*base, "query", "search", text, "--index", INDEX, "--model", name)
        assert got.returncode == 0 and "warning" not in got.stderr, got.stderr
        assert [(r[1], r[2]) for r in _rows(got.stdout)] == want
        alone = run_cli(*base, "query", "search", text, "--index", INDEX, "--model", name,
                        "--query-weight", "0", "--rescore-weight", "1")
        assert [(r[1], r[2]) for r in _rows(alone.stdout)] != want
        assert len(alone.stderr.strip().splitlines()) == 1 and "overriding its serving contract" \
            in alone.stderr, alone.stderr
        ex = run_cli(*base, "query", "explain", text, "--index", INDEX, "--model", name, "--json")
        assert ex.returncode == 0 and "warning" not in ex.stderr, ex.stderr
        docs = json.loads(ex.stdout)["documents"]
        assert [(d["id"], f"{d['served_score']:.4f}") for d in docs] == want
        for d in docs:
            assert abs(d["contributions_sum"] - d["served_score"]) <= 1e-4 * abs(d["served_score"])
        inter = run_cli(*base, "query", "search", text, "--fields", "title,abstract", "--index", INDEX, "--interleave", f"first-stage,{name}")
        assert inter.returncode == 0 and "warning" not in inter.stderr, inter.stderr
        scored = dict(want)
        mine = [r for r in _rows(inter.stdout) if r[1] == name]
        assert mine and all(scored[r[2]] == r[3] for r in mine), (mine, want)
        assert top[qid] == [i for i, _ in want]


def _long_query() -> str:
    texts = cranfield.queries()
    words = " ".join(texts[q] for q in ("1", "2", "3", "4"))
    return " ".join(words.split()[:40])


def test_a_long_querys_explanation_uses_the_vector_that_ranked(blend):
    """Item 3: a query longer than the term budget is explained with its vector from the
    full text, as it is served: the explained scores are the served ones."""
    conn, name = blend["conn"], blend["names"]["alone"]
    text = _long_query()
    serving = Serving(INDEX, FirstStage.from_fields(), 50, None, 8, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # --max-terms 8 overrides the contract
        hits = serving.search(conn, {"keywords": text}, 10)
        rep = explain_query(conn, serving, {"keywords": text}, 10)
    served = {h["id"]: h["score"] for h in hits}
    assert [d["id"] for d in rep["documents"]] == list(served)
    for d in rep["documents"]:
        assert d["served_score"] == pytest.approx(served[d["id"]], rel=1e-6), d["id"]
        assert d["contributions_sum"] == pytest.approx(served[d["id"]], rel=1e-4)


def test_report_explanations_explain_what_ranked_each_fold(blend):
    """Item 4: two folds' models (the blend, and another model served alone): each
    query's contributions plus its own model's baseline add up to the score that ranked
    it (the blend's: first stage + beta x model)."""
    conn, names = blend["conn"], blend["names"]
    jl = cranfield.split_judgments("test")
    qids = jl.judged_qids()[:8]
    params = [jl.query_params(q) for q in qids]
    parts = {"blend": [0, 1, 2, 3], "other": [4, 5, 6, 7]}
    weights = {"blend": blend["contract"].weights, "other": (0.0, 1.0)}
    stage = FirstStage.from_fields()
    first = Serving(INDEX, stage, 50).first_ids(conn, params)
    ranked: list = [None] * len(qids)
    scores: dict = {}
    for kind, idx in parts.items():         # what ranked: the contract's settings, given
        serving = Serving(INDEX, stage, 50, None, None, names[kind], weights[kind])
        for i in idx:
            hits = serving.search(conn, params[i], 10)
            ranked[i] = [h["id"] for h in hits]
            scores[qids[i]] = {h["id"]: h["score"] for h in hits}
    folds = [(Serving(INDEX, stage, 50).for_model(names[k]), idx) for k, idx in parts.items()]
    ex = explain_systems(conn, {"linear": folds}, params, {"linear": ranked}, qids, first)
    _adds_up(ex, "linear", qids, scores)


def _adds_up(ex: dict, system: str, qids, scores) -> None:
    """Each document's contributions plus its query's baseline, as the HTML report reads
    it, equal the score that ranked it."""
    base = ex["baselines"][system]
    for q in qids:
        b = base.get("by_query", {}).get(q, base["score"])
        for doc, contrib in ex["systems"][system][q].items():
            assert b + sum(contrib) == pytest.approx(scores[q][doc], rel=1e-4), (q, doc)


def test_deleting_a_model_deletes_its_contract_and_a_stale_one_is_not_applied(blend, tmp_path):
    from ltr_toolkit.stores.model_store import delete_model
    from ltr_toolkit.transport.lookups import forget, forget_model
    conn, d = blend["conn"], blend["dir"]
    r = run_cli("--url", conn.url, "model", "upload", str(d / "blend.json"), "--name", "contract-gone")
    name = r.stdout.split("uploaded ")[1].split()[0]
    assert R.recorded(conn, name).blended
    delete_model(conn, name)
    assert R.recorded(conn, name) is None
    r = run_cli("--url", conn.url, "model", "upload", str(d / "blend.json"), "--name", name, "--exact")
    assert r.returncode == 0, r.stderr
    request(conn, "DELETE", f"/_ltr/_model/{name}")     # by other means: the record stays
    forget_model(conn, name, None)                 # what this process read is forgotten,
    forget(conn, "contract", None, name)           # as another process would not know it
    other = {"type": "model/linear", "definition": {"first_stage_bm25": 1.0}}
    request(conn, "POST", f"/_ltr/_featureset/{R.recorded(conn, blend['names']['alone']).featureset}"
            "/_createmodel", body={"model": {"name": name, "model": other}})
    with pytest.warns(C.ContractOverrideWarning, match="another model of that name"):
        assert R.recorded(conn, name) is None
    delete_model(conn, name)


def test_the_deployment_chooses_as_the_runs_folds_did(ltr_cluster, cranfield_index,
                                                      shipped_featureset, tmp_path, monkeypatch):
    """Item 6: the deployed model's settings are chosen with the run's selection options
    and seed, and the first stage's column the logged candidates' sidecar names (not the
    cluster's feature set at deploy time: here it is gone). Item 4 in the run itself:
    each query's explanation adds up, with its own fold model's baseline, to the score
    that ranked it."""
    from ltr_toolkit.pipeline import crossval, deploy
    from ltr_toolkit.data.featuresets import load_featureset
    conn, store = ltr_cluster.conn(), f"deploy{uuid.uuid4().hex[:6]}"
    st.init_store(conn, store)
    try:
        fs, _ = st.upload_featureset_versioned(conn, load_featureset(cranfield.FEATURE_SET), store)
        jl = cranfield.split_judgments("train")
        jl = jl.subset(jl.judged_qids()[:40])
        report = crossval.cross_validate(conn, INDEX, jl, fs, {"linear": None}, tmp_path, folds=2,
                                         window=30, store=store, seed=7, jobs=1,
                                         selection={"halving": False}, explain=True,
                                         keep_models=True)
        _fold_explanations_add_up(conn, report, store)
        request(conn, "DELETE", f"{st.store_path(store)}/_featureset/{fs}", store=store)
        seen = []
        real = crossval.select
        monkeypatch.setattr(crossval, "select", lambda *a, **kw: seen.append((a, kw)) or real(*a, **kw))
        with pytest.raises(UserError, match="not found"):
            deploy.deploy_recommended(conn, report, tmp_path, fs, "deployed", store,
                                        algo="linear")
        (args, kw), = seen
        side = load_logged(tmp_path / "candidates.txt").meta["sidecar"]
        assert args[3] == 7 and kw.get("halving") is False, (args, kw)
        assert kw["first_col"] == side["feature_names"].index("first_stage_bm25"), kw
    finally:
        st.drop_store(conn, store)


def test_cv_trains_on_the_judged_documents_alone_and_evaluates_every_window(
        ltr_cluster, cranfield_index, shipped_featureset, tmp_path, monkeypatch):
    """``ltr evaluate cv --unjudged drop``: the fold models see only the judged candidates
    (the logged rows are the judged ones in the window), and every query is still
    reranked live over its whole window and evaluated. The first stage is asked once:
    its ranking for the candidates is the one evaluated and reranked, whole, the
    unjudged documents included."""
    from ltr_toolkit.pipeline import crossval
    conn = ltr_cluster.conn()
    jl = cranfield.split_judgments("train")
    jl = jl.subset(jl.judged_qids()[:30])
    asked, real = [], Serving.first_ids
    monkeypatch.setattr(Serving, "first_ids", lambda *a, **kw: asked.append(1) or real(*a, **kw))
    report = crossval.cross_validate(conn, INDEX, jl, shipped_featureset, {"linear": {}}, tmp_path,
                                     folds=2, window=30, seed=3, jobs=1,
                                     candidates={"unjudged": "drop"})
    side = load_logged(tmp_path / "candidates.txt").meta["sidecar"]
    assert side["candidates"]["unjudged"] == 0 and side["candidates"]["judged"] == side["rows"]
    assert side["candidates"]["unjudged_as"] == "drop"          # the file says how it was made
    assert side["rows"] < 30 * 30 / 2          # the unjudged candidates are gone
    assert len(report["per_query"]["linear"]) == 30 == report["queries"]
    assert not asked
    qids = list(report["top"]["first-stage"])
    live = real(Serving(INDEX, FirstStage.from_fields(), 30), conn,
                [jl.query_params(q) for q in qids])
    assert [report["top"]["first-stage"][q] for q in qids] == [ids[:10] for ids in live]


def _fold_explanations_add_up(conn, report: dict, store: str) -> None:
    """The run's explanations, per query, against the scores its fold model served (each
    fold model served with the weights its fold chose)."""
    from ltr_toolkit.pipeline.crossval import fold_of
    jl = cranfield.split_judgments("train")
    where = fold_of(list(report["top"]["first-stage"]), report["folds"], report["seed"])
    names = {int(re.search(r"-f(\d+)-v\d+$", n).group(1)): n for n in report["models"]["linear"]}
    assert len(names) == 2, report["settings"]                  # both folds chose a model
    scores = {}
    for q, f in where.items():
        chosen = report["settings"]["linear"][f]
        weights = (1.0, chosen["rescore_query_weight"]) if chosen["blend"] is not None else (0.0, 1.0)
        serving = Serving(INDEX, FirstStage.from_fields(), 30, store, report["max_query_terms"],
                          names[f], weights)
        scores[q] = {h["id"]: h["score"] for h in serving.search(conn, jl.query_params(q), 10)}
    _adds_up(report["explanations"], "linear", list(where), scores)
