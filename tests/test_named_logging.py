"""Named-query logging (``--via named-queries``): the feature set's templates rendered in
Python as the plugin renders them, each sent as a named query and read back from
``matched_queries``; live, the rows must equal the plugin's (``sltr`` + ``ltr_log``)
byte for byte, missing features included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ltr_toolkit.data.featuresets import load_featureset
from ltr_toolkit.data.judgments import JudgmentList
from ltr_toolkit.data.mustache import java_text, render_query, render_text
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.errors import ClusterError, UserError
from ltr_toolkit.features.candidates import judged_candidates
from ltr_toolkit.features.featurelog import featureset_source, log_features
from ltr_toolkit.query.firststage import FirstStage
from ltr_toolkit.query.named import named_body, named_values
from ltr_toolkit.stores import store as st
from ltr_toolkit.stores.params import featureset_info, file_featureset_info

ROOT = Path(__file__).resolve().parent.parent
LEXICAL = ROOT / "feature_sets" / "cranfield-lexical.json"


# --------------------------------------------------------------------------- offline

def test_variables_are_json_escaped_text_and_triple_braces_raw():
    tpl = '{"match": {"t": "{{q}}"}, "n": {{{n}}}, "b": {{&b}}}'
    text = render_text(tpl, {"q": 'a "b" \\ c\n\u00e9', "n": 1e-5, "b": True})
    assert json.loads(text) == {"match": {"t": 'a "b" \\ c\n\u00e9'}, "n": 1e-5, "b": True}
    assert '"n": 1.0E-5' in text          # Java's Double.toString, as the plugin writes it
    assert render_text("{{missing}}|{{a.b}}", {"a": {"b": 7}}) == "|7"


@pytest.mark.parametrize("value, text", [(3, "3"), (0.5, "0.5"), (1e7, "1.0E7"), (-2.5e-4, "-2.5E-4"),
                                         (100.0, "100.0"), (False, "false"), ([1, "x"], "[1, x]"),
                                         (None, "")])
def test_values_are_written_as_java_writes_them(value, text):
    assert java_text(value) == text


def test_functions_to_json_and_join():
    tpl = '{"v": {{#toJson}}vec{{/toJson}}, "s": "{{#join}}ids{{/join}}", ' \
          '"d": "{{#join delimiter=\'; \'}}ids{{/join}}", "x": {{#toJson}}one{{/toJson}}}'
    q = json.loads(render_text(tpl, {"vec": [0.25, -1.0], "ids": ["a", "b"], "one": 2}))
    assert q == {"v": [0.25, -1.0], "s": "a,b", "d": "a; b", "x": 2}


@pytest.mark.parametrize("tpl", ["{{#items}}x{{/items}}", "{{^q}}none{{/q}}", "{{> part}}",
                                 "{{=<% %>=}}", "{{#toJson}}v{{/join}}"])
def test_constructs_the_renderer_does_not_follow_are_refused_naming_the_feature(tpl):
    with pytest.raises(UserError, match="feature f1"):
        render_text(tpl, {"items": [1], "q": "a", "v": [1]}, "f1")


def test_object_and_string_templates_render_to_the_same_query():
    obj = {"name": "f", "template": {"match": {"title": "{{keywords}}"}}}
    text = {"name": "f", "template": '{"match": {"title": "{{keywords}}"}}'}
    assert render_query(obj, {"keywords": 'x "y"'}) == render_query(text, {"keywords": 'x "y"'}) \
        == {"match": {"title": 'x "y"'}}
    with pytest.raises(UserError, match="derived_expression"):
        render_query({"name": "d", "template_language": "derived_expression", "template": "a"}, {})
    with pytest.raises(UserError, match="not JSON"):
        render_query({"name": "b", "template": '{"a": {{q}}}'}, {"q": "two words"})


def test_the_named_request_and_its_values():
    feats = load_featureset(LEXICAL)["features"]
    body = named_body(feats, {"keywords": "heat"}, ["1", "2"])
    should = body["query"]["bool"]["should"]
    assert [c["bool"]["_name"] for c in should] == [f["name"] for f in feats]
    assert should[1]["bool"]["must"] == {"match": {"title": "heat"}}
    assert body["query"]["bool"]["filter"] == [{"ids": {"values": ["1", "2"]}}] and body["size"] == 2
    names = [f["name"] for f in feats]
    assert named_values({"matched_queries": {"title_bm25": 1.5}}, names) == [None, 1.5, None, None, None]
    assert named_values({}, names) == [None] * 5
    with pytest.raises(ClusterError, match="without their scores"):
        named_values({"matched_queries": ["title_bm25"]}, names)


def test_a_feature_set_file_is_refused_for_the_plugin_and_hashed_as_stored():
    with pytest.raises(UserError, match="named-queries"):
        featureset_source(None, str(LEXICAL), None, "plugin")
    with pytest.raises(UserError, match="logging via"):
        featureset_source(None, str(LEXICAL), None, "telepathy")
    info = file_featureset_info(LEXICAL)
    assert info["feature_names"][0] == "first_stage_bm25" and info["params"] == ["keywords"]


# --------------------------------------------------------------------------- live

#: queries whose text the renderer must escape as the plugin does
ODD = {"odd-1": 'heat "transfer" in \\ slabs', "odd-2": "flow \u00fcber shock \u2014 waves / tab\there"}


@pytest.fixture(scope="module")
def stored(engine_cluster, engine_cranfield):
    """The shipped lexical and feedback sets on each engine's node."""
    conn = engine_cluster.conn()
    st.init_store(conn, None)
    names = {}
    for path in (LEXICAL, ROOT / "feature_sets" / "cranfield-feedback.json"):
        names[path.name] = st.upload_featureset_versioned(conn, load_featureset(path))[0]
    return conn, engine_cranfield["index"], names


def _fifty_queries() -> JudgmentList:
    jl = cranfield.judgments()
    out = jl.subset(jl.judged_qids()[:50])
    for q, text in ODD.items():         # judged like query 1, with other text
        out.queries[q] = text
        for d, g in jl.docs_of(jl.judged_qids()[0]):
            out.grades[(q, d)] = g
    return out


def _log_both(conn, index, featureset, tmp_path, file_set=None):
    jl, info, budget = judged_candidates(conn, index, _fifty_queries(), featureset,
                                         FirstStage.from_fields(), k=100)
    paths = {}
    for via, fs in (("plugin", featureset), ("named-queries", file_set or featureset)):
        paths[via] = tmp_path / f"{via}.txt"
        side = log_features(conn, jl, fs, index, paths[via], candidates=info, max_terms=budget,
                            via=via, batch=20)
        assert side["logged_via"] == via and not side["failed_queries"]
    return paths, jl


@pytest.mark.cluster
@pytest.mark.ltr
def test_named_queries_log_the_plugin_values_for_every_feature(stored, tmp_path):
    """50 Cranfield queries (and two with quotes, a backslash, non-ASCII, a tab) x the
    first stage's top 100, the shipped lexical set, the feature set from a file for the
    named queries: the same rows, byte for byte, missing features left out alike."""
    conn, index, names = stored
    paths, jl = _log_both(conn, index, names["cranfield-lexical.json"], tmp_path, str(LEXICAL))
    plugin, named = (paths[v].read_text() for v in ("plugin", "named-queries"))
    assert plugin == named
    rows = plugin.splitlines()[1:]          # after the header line (data.logged)
    assert len(rows) >= 5000
    missing = sum(len(r.split("#")[0].split()) - 2 < 5 for r in rows)
    assert missing > 100                    # rows where a feature did not match
    assert sum("qid:odd-" in r for r in rows) == 200
    side = {v: json.loads(paths[v].with_suffix(".txt.json").read_text()) for v in paths}
    assert side["plugin"]["featureset_sha256"] == side["named-queries"]["featureset_sha256"]


@pytest.mark.cluster
@pytest.mark.ltr
def test_named_queries_with_first_stage_ids_equal_the_plugin(stored, tmp_path):
    """The feedback set's more_like_this seeded with the first stage's top ids (derived
    parameters): the same rows too."""
    conn, index, names = stored
    paths, _ = _log_both(conn, index, names["cranfield-feedback.json"], tmp_path)
    assert paths["plugin"].read_text() == paths["named-queries"].read_text()


@pytest.mark.cluster
@pytest.mark.ltr
def test_stored_and_file_feature_sets_hash_alike(stored):
    conn, _, names = stored
    assert featureset_info(conn, names["cranfield-lexical.json"], None)["sha256"] == \
        file_featureset_info(LEXICAL)["sha256"]


def test_a_job_file_chooses_the_logging_path(tmp_path):
    from ltr_toolkit.errors import InputError
    from ltr_toolkit.jobs.jobfile import load_job
    job = tmp_path / "job.toml"
    base = ('[logging]\nfeatureset = "cranfield-lexical"\nindex = "cranfield"\n'
            'judgments = "j.txt"\n{via}\n[output]\ndirectory = "out"\n')
    job.write_text(base.format(via=""))
    assert load_job(job).via == "plugin"
    job.write_text(base.format(via='via = "named-queries"'))
    assert load_job(job).via == "named-queries"
    job.write_text(base.format(via='via = "sltr"'))
    with pytest.raises(InputError, match=r"job.toml:5.*via"):
        load_job(job)
