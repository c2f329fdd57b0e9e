"""Queries of any length on a cluster whose clause limit the user cannot change (the node's
default, 1,024): a 1,000-word query is logged, trained on, reranked and evaluated with no
error, the same way at logging and serving; when a rescore still fails, serving returns
the first stage's hits with a one-line warning. Live, against the real plugin."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest

from ltr_toolkit.data.querytext import distinct_words, fit_keywords

pytestmark = [pytest.mark.cluster, pytest.mark.ltr]


def _long_query(words: int, seed: int = 0) -> str:
    """``words`` words drawn from Cranfield's own vocabulary (so they match documents)."""
    from ltr_toolkit.datasets import cranfield
    vocab = sorted({w.lower() for d in cranfield.documents() for w in d["abstract"].split()
                    if w.isalpha() and len(w) > 3})
    rng = np.random.default_rng(seed)
    return " ".join(rng.choice(vocab, size=words).tolist())


def test_fit_keywords_keeps_short_queries_and_cuts_long_ones():
    assert fit_keywords("The flow of the flow", 3) == "The flow of the flow"   # 3 distinct words
    long = "a b c the d e f g " * 10
    assert fit_keywords(long, 4) == "b c d e"          # first distinct words, no stop words
    assert fit_keywords(long, None) == long
    assert len(distinct_words(fit_keywords(_long_query(1000), 50))) == 50


@pytest.fixture(scope="module")
def long_run(ltr_cluster, cranfield_index, tmp_path_factory):
    """Judgments whose query 1 has 1,000 words, through `ltr log --candidates`,
    `ltr train` and `ltr upload` (the CLI results are checked by the tests)."""
    from ltr_toolkit.stores import store as st
    from ltr_toolkit.data.featuresets import load_featureset
    from ltr_toolkit.data.judgments import save_ranklib
    from ltr_toolkit.datasets import cranfield
    from conftest import run_cli
    conn = ltr_cluster.conn()
    st.init_store(conn, None)
    fs, _ = st.upload_featureset_versioned(conn, load_featureset(cranfield.FEATURE_SET))
    d = tmp_path_factory.mktemp("long")
    jl = cranfield.judgments().subset(["1", "2", "3", "4", "5", "8", "9", "10"])
    long_text = _long_query(1000)
    jl.queries["1"] = long_text                       # query 1: 1,000 words
    judg = d / "judgments.txt"
    save_ranklib(jl, judg)
    url, index = ltr_cluster.url, cranfield_index["index"]
    run = {"url": url, "fs": fs, "index": index, "judg": judg, "text": long_text, "dir": d}
    run["log"] = run_cli("--url", url, "log", str(judg), "--featureset", fs, "--fields", "title,abstract", "--index", index,
                         "--window", "30", "-o", str(d / "logged.txt"))
    run["train"] = run_cli("train", str(d / "logged.txt"), "--algo", "linear", "--epochs", "3",
                           "-o", str(d / "m.json"))
    run["upload"] = run_cli("--url", url, "model", "upload", str(d / "m.json"), "--name", "long-q",
                            "--featureset", fs)
    run["model"] = run["upload"].stdout.split("uploaded ")[-1].split()[0]
    return run


def test_a_1000_word_query_is_logged_trained_reranked_and_evaluated(long_run, cli):
    r, d = long_run, long_run["dir"]
    for step in ("log", "train", "upload"):
        assert r[step].returncode == 0, r[step].stderr
    side = json.loads((d / "logged.txt.json").read_text())
    assert side["failed_queries"] == [] and side["fitted_queries"] == 1, side
    assert 1 <= side["max_query_terms"] < len(distinct_words(r["text"]))
    assert "long queries sent as their first" in r["log"].stderr
    assert json.loads((d / "m.json").read_text())["max_query_terms"] == side["max_query_terms"]
    s = cli("--url", r["url"], "query", "search", r["text"], "--index", r["index"], "--model", r["model"],
            "--size", "5")
    assert s.returncode == 0 and "warning" not in s.stderr, s.stderr
    assert len(re.findall(r"^│ \d+ ", s.stdout, flags=re.M)) == 5, s.stdout
    e = cli("--url", r["url"], "evaluate", "models", str(r["judg"]), "--index", r["index"], "--model",
            r["model"], "-o", str(d / "report.json"))
    assert e.returncode == 0, e.stderr
    report = json.loads((d / "report.json").read_text())
    assert report["queries"] == 8 and "1" in report["per_query"][r["model"]]
    assert report["failed_queries"] == [] and report["rescore_fallbacks"][r["model"]] == []


def test_a_failed_rescore_serves_the_first_stage_with_a_warning(long_run, ltr_cluster):
    """Told a budget larger than the feature set allows, the rescore of a long query is
    rejected (too many clauses) while the first stage (two fields) is not: the helper
    returns the first stage's hits and warns, instead of failing the search."""
    from ltr_toolkit.query.firststage import FirstStage
    from ltr_toolkit.serving.rerank import Rescore, RescoreFallbackWarning, search
    conn, stage = ltr_cluster.conn(), FirstStage.from_fields()
    params = {"keywords": long_run["text"]}
    first = search(conn, long_run["index"], params, stage, None, 10, max_terms=400)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = search(conn, long_run["index"], params, stage, Rescore(long_run["model"]), 10,
                     max_terms=400)
    assert [h["id"] for h in got] == [h["id"] for h in first]
    assert any(issubclass(w.category, RescoreFallbackWarning) for w in caught), caught


def test_an_increment_retrieves_its_candidates_under_the_files_budget(long_run, cli, tmp_path):
    """`ltr log --incremental --window K` fits the long query to the budget its file
    recorded for the candidates as for the features (a fresh measure gave the candidates of
    one query and the features of another, after a node resize)."""
    import shutil
    from ltr_toolkit.data.svmlight import load_logged
    from ltr_toolkit.query.firststage import FirstStage
    from ltr_toolkit.serving.serving import Serving
    r, d = long_run, long_run["dir"]
    out = tmp_path / "logged.txt"
    shutil.copy(d / "logged.txt", out)
    side = json.loads((d / "logged.txt.json").read_text())
    side["max_query_terms"] = 3                     # as a smaller node measured it
    (tmp_path / "logged.txt.json").write_text(json.dumps(side))
    got = cli("--url", r["url"], "log", str(r["judg"]), "--featureset", r["fs"], "--fields",
              "title,abstract", "--index", r["index"], "--window", "30", "--incremental",
              "-o", str(out))
    assert got.returncode == 0, got.stderr
    ds = load_logged(out)
    i = list(ds.qids).index("1")
    docs = set(ds.doc_ids[ds.offsets[i]:ds.offsets[i + 1]])
    from ltr_toolkit.transport.client import Connection
    stage = FirstStage.from_fields(["title", "abstract"])
    top = Serving(r["index"], stage, 30).first_ids(Connection(url=r["url"]),
                                                   [{"keywords": fit_keywords(r["text"], 3)}])[0]
    assert docs == set(top)
