"""``ltr export --target elasticsearch``: the trained-model body of Elasticsearch's native
learning to rank, checked offline against ``ltr predict`` by an evaluator written from
Elasticsearch's inference code, not from the exporter (``benchmarks/_es_trees.py``).

The log (``tests/data/cranfield-lexical-top100.txt``): the first 25 judged Cranfield
queries x the first stage's top 100 (BM25 over title and abstract), the shipped lexical
set, logged on OpenSearch 3.6.0 with ``ltr log --candidates 100 --via named-queries``
(the same bytes as the plugin's logging, ``test_named_logging``); 843 of its 2,500 rows
lack a feature (the document does not match the feature's query).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks._es_trees import es_score as _es_score, feature_maps as _feature_maps
from ltr_toolkit.data.featuresets import load_featureset
from ltr_toolkit.data.svmlight import load_logged
from ltr_toolkit.errors import UserError
from ltr_toolkit.io.atomic import write_json
from ltr_toolkit.models import native
from ltr_toolkit.pipeline.train import predict_file, train_model

ROOT = Path(__file__).resolve().parent.parent
LOG = Path(__file__).resolve().parent / "data" / "cranfield-lexical-top100.txt"
LEXICAL = ROOT / "feature_sets" / "cranfield-lexical.json"


def es_score(body: dict, features: dict) -> float:
    return _es_score(body["definition"]["trained_model"], features)


# --------------------------------------------------------------------------- the models

@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    """The log as it is (missing features) and with every missing value logged as 0.0."""
    tmp = tmp_path_factory.mktemp("native")
    side = json.loads(LOG.with_suffix(".txt.json").read_text())
    names = side["feature_names"]
    filled = tmp / "filled.txt"
    rows = []
    for line in LOG.read_text().splitlines():
        if line.startswith("#"):            # the header line (data.logged)
            continue
        head, _, doc = line.partition("#")
        grade, qid, *tokens = head.split()
        values = dict(t.split(":") for t in tokens)
        rows.append(" ".join([grade, qid] + [f"{j}:{values.get(str(j), '0')}"
                                             for j in range(1, len(names) + 1)]) + f" #{doc}\n")
    filled.write_text("".join(rows))
    write_json(filled.with_suffix(".txt.json"), dict(side, rows=len(rows)))
    return {"missing": LOG, "filled": filled, "names": names, "tmp": tmp}


@pytest.fixture(scope="module")
def trained(logged):
    out = {}
    for algo in ("lambdamart", "ranknet-tree"):
        for data in ("missing", "filled"):
            art = train_model(load_logged(logged[data]), algo, trees=60, depth=5, source=str(logged[data]))
            path = logged["tmp"] / f"{algo}-{data}.json"
            write_json(path, art)
            out[algo, data] = (art, path)
    return out


def _predicted(model: Path, data: Path, tmp: Path) -> np.ndarray:
    out = tmp / (model.stem + "-" + data.stem + ".scores")
    predict_file(model, data, out)
    return np.array([float(v) for v in out.read_text().split()])


@pytest.mark.parametrize("algo", ["lambdamart", "ranknet-tree"])
@pytest.mark.parametrize("trained_on", ["missing", "filled"])
def test_elasticsearch_scores_every_logged_row_as_ltr_predict(logged, trained, algo, trained_on):
    """Trained with and without missing values; scored on every row of the log (missing
    features absent from the map) and of the filled log."""
    art, path = trained[algo, trained_on]
    body = native.native_body(art, load_featureset(LEXICAL)["features"])
    diffs = []
    for data in (logged["missing"], logged["filled"]):
        ours = np.array([es_score(body, f) for f in _feature_maps(data, logged["names"])])
        diffs.append(np.abs(ours - _predicted(path, data, logged["tmp"])))
    assert len(diffs[0]) == 2500 and max(d.max() for d in diffs) <= 1e-5
    print(f"{algo} trained on the {trained_on} log: max |elasticsearch - ltr predict| "
          f"{max(d.max() for d in diffs):.3g}")


def test_a_missing_feature_takes_the_branch_the_model_was_trained_to_take(logged, trained):
    """Rows whose missing title feature lands them elsewhere than a 0.0 would: the body's
    right branch (default_left false) is the trained one, so the scores differ from the
    filled rows' and equal predict's."""
    art, path = trained["lambdamart", "missing"]
    body = native.native_body(art, load_featureset(LEXICAL)["features"])
    maps = _feature_maps(logged["missing"], logged["names"])
    zeros = [{n: f.get(n, 0.0) for n in logged["names"]} for f in maps]
    a = np.array([es_score(body, f) for f in maps])
    b = np.array([es_score(body, f) for f in zeros])
    assert np.sum(a != b) > 50
    assert np.abs(a - _predicted(path, logged["missing"], logged["tmp"])).max() <= 1e-5


# --------------------------------------------------------------------------- the body

def test_the_body_has_elasticsearchs_schema(trained):
    art, _ = trained["lambdamart", "missing"]
    feats = load_featureset(LEXICAL)["features"]
    body = native.native_body(art, feats, "8.17.0", {"keywords": ""})
    ltr = body["inference_config"]["learning_to_rank"]
    assert [e["query_extractor"]["feature_name"] for e in ltr["feature_extractors"]] == \
        [f["name"] for f in feats]
    assert ltr["feature_extractors"][1]["query_extractor"] == {
        "feature_name": "title_bm25", "query": {"match": {"title": "{{keywords}}"}}, "default_score": 0.0}
    assert ltr["default_params"] == {"keywords": ""} and "input" not in body
    ens = body["definition"]["trained_model"]["ensemble"]
    assert ens["feature_names"] == art["feature_names"] and len(ens["trained_models"]) == 60
    node = ens["trained_models"][0]["tree"]["tree_structure"][0]
    assert node["decision_type"] == "lt" and node["default_left"] is False
    assert node["threshold"] == float(np.float32(node["threshold"]))
    assert native.native_body(art, feats, "8.14.2")["input"] == {"field_names": art["feature_names"]}


def test_the_intercept_is_the_saved_base_score(trained, logged):
    """xgboost >= 2 saves the intercept as ``"[x]"``; a booster whose base_score is not 0
    gets it as a one-leaf tree, so the body adds up to xgboost's margin."""
    import xgboost as xgb
    art, _ = trained["lambdamart", "filled"]
    assert art["model"]["booster"]["learner"]["learner_model_param"]["base_score"] == "[0E0]"
    ds = load_logged(logged["filled"])
    booster = xgb.train({"max_depth": 3, "nthread": 1}, xgb.DMatrix(ds.X, label=ds.y), 5)
    saved = json.loads(bytes(booster.save_raw("json")).decode())
    assert native.intercept(saved) == pytest.approx(float(np.mean(ds.y)), rel=1e-5) != 0.0
    body = {"definition": {"trained_model": native.ensemble(saved, logged["names"])}}
    assert len(body["definition"]["trained_model"]["ensemble"]["trained_models"]) == 6
    maps = _feature_maps(logged["filled"], logged["names"])[:200]
    margin = booster.predict(xgb.DMatrix(ds.X[:200]), output_margin=True)
    assert np.abs(np.array([es_score(body, f) for f in maps]) - margin).max() <= 1e-5


@pytest.mark.parametrize("algo", ["linear", "lambdarank-nn", "ranknet-nn"])
def test_linear_and_network_models_are_refused_saying_why(algo):
    with pytest.raises(UserError, match="takes tree ensembles only.*lambdamart or ranknet-tree"):
        native.native_body({"algorithm": algo, "feature_names": []}, [])


def test_a_template_elasticsearch_cannot_store_is_refused():
    vector = {"name": "cos", "template": '{"knn": {"v": {"vector": {{#toJson}}query_vector{{/toJson}}}}}'}
    with pytest.raises(UserError, match="feature cos.*object"):
        native.feature_extractors([vector])
    assert native.feature_extractors([{"name": "t", "template": '{"match": {"t": "{{q}}"}}'}])[0][
        "query_extractor"]["query"] == {"match": {"t": "{{q}}"}}


@pytest.mark.parametrize("version, ok", [("8.17.0", True), ("9.0", True), ("8.11.4", False), ("x", False)])
def test_versions(version, ok):
    if ok:
        assert native.es_version(version) >= (8, 12, 0)
    else:
        with pytest.raises(UserError):
            native.es_version(version)


def test_requests_for_upload_and_search():
    assert native.alias_request("m-v2", "ranker") == (
        "PUT", "/_ml/trained_models/m-v2/model_aliases/ranker", {"reassign": "true"})
    assert native.rescorer("ranker", {"keywords": "q"}, 50) == {
        "window_size": 50, "learning_to_rank": {"model_id": "ranker", "params": {"keywords": "q"}}}


def test_ltr_export_writes_the_body_and_refuses_in_one_line(trained, logged, cli, tmp_path):
    _, path = trained["ranknet-tree", "missing"]
    out = tmp_path / "body.json"
    r = cli("model", "export", str(path), "--target", "elasticsearch", "-o", str(out),
            "--featureset", str(LEXICAL), "--es-version", "8.14.0")
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["input"]["field_names"] == logged["names"]
    assert "the rescorer's params must give: keywords" in r.stdout
    r = cli("model", "export", str(path), "--target", "elasticsearch", "-o", str(out),
            "--featureset", str(ROOT / "feature_sets" / "cranfield-feedback.json"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "another version of the feature set" in r.stderr
