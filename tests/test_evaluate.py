"""Live evaluation against the real node (BM25 baseline; rerankers need the plugin)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ltr_toolkit.query.firststage import FirstStage
from ltr_toolkit.query.requests import msearch_ids
from ltr_toolkit.serving.rerank import search
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.evaluation.live import evaluate_live
from ltr_toolkit.rank.stats import compare

pytestmark = pytest.mark.cluster
pytrec_eval = pytest.importorskip("pytrec_eval")


@pytest.fixture
def index(cranfield_index):
    return cranfield_index["index"]


def _ndcg_exp(ranked, judged, k):
    dcg = sum((2 ** judged.get(d, 0) - 1) / np.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(judged.values(), reverse=True)[:k]
    idcg = sum((2 ** g - 1) / np.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def test_baseline_ndcg_equals_offline_ndcg_of_same_hits(cluster, index):
    conn = cluster.conn()
    jl = cranfield.split_judgments("test")
    report, per_query, qids = evaluate_live(conn, index, jl, k=10)
    # the same hits, fetched one search at a time, scored offline
    by_q = jl.by_query()
    offline, qrel, run = [], {}, {}
    for q in qids:
        hits = [h["id"] for h in search(conn, index, {"keywords": jl.queries[q]}, size=10)]
        judged = dict(by_q[q])
        offline.append(_ndcg_exp(hits, judged, 10))
        qrel[q] = {d: int(g) for d, g in judged.items()}
        run[q] = {d: float(10 - i) for i, d in enumerate(hits)}
    np.testing.assert_allclose(per_query["bm25"]["ndcg@10"], offline, atol=1e-12)
    assert report["systems"]["bm25"]["ndcg@10"] == pytest.approx(np.mean(offline))
    ref = pytrec_eval.RelevanceEvaluator(qrel, {"map_cut.10", "recip_rank"}).evaluate(run)
    np.testing.assert_allclose(per_query["bm25"]["ap@10"], [ref[q]["map_cut_10"] for q in qids], atol=1e-4)
    np.testing.assert_allclose(per_query["bm25"]["rr@10"], [ref[q]["recip_rank"] for q in qids], atol=1e-4)
    assert report["queries"] == 45 and 0.2 < report["systems"]["bm25"]["ndcg@10"] < 0.8


def test_msearch_matches_single_searches(cluster, index):
    conn = cluster.conn()
    params = [{"keywords": t} for t in list(cranfield.queries().values())[:7]]
    batched = msearch_ids(conn, index, params, FirstStage.from_fields(), size=10, batch=3)
    single = [[h["id"] for h in search(conn, index, p, size=10)] for p in params]
    assert batched == single


def test_cli_evaluate_json_and_plot(cluster, cli, tmp_path, index):
    j = tmp_path / "test.txt"
    assert cli("judgments", "cranfield", "--split", "test", "-o", str(j)).returncode == 0
    out, png = tmp_path / "r.json", tmp_path / "d.png"
    r = cli("--url", cluster.url, "evaluate", "models", str(j), "--fields", "title,abstract", "--index", index, "-o", str(out),
            "--plot", str(png))
    assert r.returncode == 0, r.stderr
    rep = json.loads(out.read_text())
    assert rep["k"] == 10 and rep["queries"] == 45 and set(rep["systems"]) == {"bm25"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_evaluate_with_model_needs_plugin(cluster, cli, tmp_path, index):
    if cluster.ltr_version is not None:
        pytest.skip("the node has the plugin; this checks the error without it")
    j = tmp_path / "test.txt"
    cli("judgments", "cranfield", "--split", "test", "-o", str(j))
    r = cli("--url", cluster.url, "evaluate", "models", str(j), "--index", index, "--model", "m1")
    assert r.returncode == 2 and "LTR plugin" in r.stderr and "Traceback" not in r.stderr


def test_randomisation_test():
    rng = np.random.default_rng(0)
    a = rng.random(60)

    def p(b):
        return compare({"a": a, "b": b}, "a", confidence_level=None).tests["b"].p_value
    assert p(a) == 1.0
    assert p(a + 0.2) < 0.001
    assert p(a + rng.normal(scale=0.01, size=60)) > 0.01


def test_cli_search_baseline_table(cluster, cli, index):
    r = cli("--url", cluster.url, "query", "search", "boundary layer heat transfer", "--fields", "title,abstract", "--index", index, "--size", "5")
    assert r.returncode == 0, r.stderr
    assert "rank" in r.stdout and "title" in r.stdout
    hits = search(cluster.conn(), index, {"keywords": "boundary layer heat transfer"}, size=5)
    assert len(hits) == 5 and all(h["id"] in r.stdout for h in hits)
    assert hits == sorted(hits, key=lambda h: -h["score"])


def test_unknown_first_stage_field_is_refused_before_searching(cluster, cli, index):
    r = cli("--url", cluster.url, "query", "search", "flutter", "--index", index, "--fields", "title,nonesuch")
    assert r.returncode == 2 and "'nonesuch'" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_cli_evaluate_reads_trec_qrels_like_ranklib(cluster, cli, tmp_path, index):
    """The same judgments as TREC qrels + queries file (--format trec --queries) give the
    same report as the RankLib file."""
    jl = cranfield.split_judgments("test")
    j = tmp_path / "test.txt"
    assert cli("judgments", "cranfield", "--split", "test", "-o", str(j)).returncode == 0
    qrels, queries = tmp_path / "qrels", tmp_path / "queries.tsv"
    qrels.write_text("".join(f"{q} 0 {d} {int(g)}\n" for q, docs in jl.by_query().items() for d, g in docs))
    queries.write_text("".join(f"{q}\t{jl.queries[q]}\n" for q in jl.judged_qids()))
    reports = []
    for args in ([str(j)], [str(qrels), "--input-format", "trec", "--queries", str(queries)]):
        out = tmp_path / f"r{len(reports)}.json"
        r = cli("--url", cluster.url, "evaluate", "models", *args, "--fields", "title,abstract", "--index", index, "-o", str(out))
        assert r.returncode == 0, r.stderr
        reports.append(json.loads(out.read_text()))
    assert reports[0]["systems"] == reports[1]["systems"] and reports[0]["queries"] == 45


@pytest.mark.parametrize("cmd", [
    ["log", "j.txt", "--featureset", "fs", "--index", "x", "--fields", "t", "-o", "{dir}"],
    ["evaluate", "models", "j.txt", "--index", "x", "--fields", "t", "-o", "{dir}"],
    ["evaluate", "models", "j.txt", "--index", "x", "--fields", "t", "--plot", "{dir}"],
    ["demo", "-o", "{dir}"],
])
def test_unwritable_outputs_are_refused_before_any_work(cli, tmp_path, cmd):
    """An output that is a directory is refused at once (exit 2, one line), before any
    connection: the URL here answers nothing, and no partial file appears."""
    d = tmp_path / "out"
    d.mkdir()
    r = cli("--url", "http://127.0.0.1:9", *[a.format(dir=d) for a in cmd])
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "it is a directory" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and not any(d.iterdir())
