"""Explanations that add up to the served score (live), the global picture of a model,
and the evaluation report in a real headless browser (Debian's Chromium)."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from browser import chromium
from conftest import run_cli

from ltr_toolkit.datasets import cranfield
from ltr_toolkit.evaluation.html import render, report_data
from ltr_toolkit.pipeline.train import load_model, train_from_files
from ltr_toolkit.query.firststage import FirstStage
from ltr_toolkit.serving.explain import explain_query
from ltr_toolkit.serving.serving import Serving
from ltr_toolkit.stores.model_store import upload

pytestmark = [pytest.mark.cluster, pytest.mark.ltr]
INDEX = "cranfield-test"
ALGOS = {"lambdamart": dict(trees=40, depth=3), "ranknet-tree": dict(trees=40, depth=3),
         "linear": dict(epochs=15), "lambdarank-nn": dict(epochs=15, hidden=(8,))}


@pytest.fixture(scope="module")
def models(ltr_cluster, cranfield_index, shipped_featureset, tmp_path_factory):
    """The four families trained on Cranfield's training split (logged live) and uploaded."""
    conn, d = ltr_cluster.conn(), tmp_path_factory.mktemp("explain")
    serving = Serving(INDEX, FirstStage.from_fields(), 100)
    side, _ = serving.log_candidates(conn, cranfield.split_judgments("train"), shipped_featureset,
                                     d / "train.txt")
    names = {}
    for algo, kw in ALGOS.items():
        train_from_files(d / "train.txt", algo=algo, output=d / f"{algo}.json", **kw)
        art, m = load_model(d / f"{algo}.json")
        names[algo] = upload(conn, art, m, f"explain-{algo}", shipped_featureset)["name"]
    return {"conn": conn, "dir": d, "names": names, "budget": side.get("max_query_terms")}


@pytest.mark.parametrize("algo", list(ALGOS))
def test_contributions_add_up_to_the_served_score(models, algo):
    """For every document of 20 test queries' reranked top 10: the baseline's score plus
    the contributions equal the score the plugin served, within 1e-4 relative."""
    conn, name = models["conn"], models["names"][algo]
    jl = cranfield.split_judgments("test")
    serving = Serving(INDEX, FirstStage.from_fields(), 100, None, models["budget"], name)
    checked = 0
    for q in jl.judged_qids()[:20]:
        rep = explain_query(conn, serving, jl.query_params(q), 10, dict(jl.by_query()[q]))
        assert len(rep["documents"]) == 10
        for d in rep["documents"]:
            served, total = d["served_score"], d["contributions_sum"]
            assert abs(total - served) <= 1e-4 * max(abs(served), 1e-12), (q, d["id"], served, total)
            assert set(d["contributions"]) == set(d["features"])
            checked += 1
        ranks = [d["first_stage_rank"] for d in rep["documents"]]
        assert all(1 <= r <= 100 for r in ranks)
    assert checked == 200


def test_explain_cli_and_its_errors(models, cli, tmp_path):
    conn, name = models["conn"], models["names"]["linear"]
    text = cranfield.queries()["1"]
    jfile = tmp_path / "j.txt"
    r = cli("judgments", "cranfield", "-o", str(jfile))
    assert r.returncode == 0, r.stderr
    r = cli("--url", conn.url, "query", "explain", text, "--index", INDEX, "--model", name,
            "--judgments", str(jfile), "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["baseline"]["document"] and len(rep["documents"]) == 10
    assert any(d["grade"] is not None for d in rep["documents"])      # query 1 is judged
    for args, why in ((("--model", "no-such-model"), "not found"),
                      (("--model", name, "--index", "no-such-index"), "no-such-index")):
        r = cli("--url", conn.url, "query", "explain", text, "--index", INDEX, *args)
        assert r.returncode == 2 and why in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = cli("--url", conn.url, "query", "explain", "qqqzzz xxyyzz", "--index", INDEX, "--model", name)
    assert r.returncode == 2 and "finds nothing" in r.stderr, r.stderr


def test_model_explain_gives_the_global_picture(models, cli):
    """Stored model and artifact give the same summary; the cosine feature counts."""
    d = models["dir"]
    out = {}
    for m in (models["names"]["lambdamart"], str(d / "lambdamart.json")):
        r = cli("--url", models["conn"].url, "model", "explain", m, str(d / "train.txt"),
                "--rows", "800", "-o", str(d / "summary.json"))
        assert r.returncode == 0, r.stderr
        out[m] = json.loads((d / "summary.json").read_text())
    a, b = out.values()
    assert a["features"] == b["features"] and a["rows"] == 800
    assert {f["feature"] for f in a["features"]} >= {"query_doc_cosine", "first_stage_bm25"}
    assert all(f["mean_abs"] >= 0 and f["sd"] >= 0 for f in a["features"])


# --------------------------------------------------------------------------- the report

@pytest.fixture(scope="module")
def report_file(models, tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    jfile = d / "test.txt"
    run_cli("judgments", "cranfield", "-o", str(jfile), "--split", "test")
    r = run_cli("--url", models["conn"].url, "evaluate", "models", str(jfile), "--index", INDEX,
            "--model", models["names"]["lambdamart"], "--model", models["names"]["linear"],
            "--html", str(d / "report.html"), "-o", str(d / "report.json"))
    assert r.returncode == 0, r.stderr
    return d / "report.html", json.loads((d / "report.json").read_text())


def test_the_report_renders_and_finds_a_query_in_a_real_browser(report_file, tmp_path):
    from selenium.webdriver.common.by import By
    path, report = report_file
    jl = cranfield.split_judgments("test")
    qid = max(report["per_query"]["bm25"], key=lambda q: len(jl.queries[q].split()))
    browser = chromium()
    try:
        browser.get(path.as_uri())
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
        assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
        rows = browser.find_elements(By.CSS_SELECTOR, "#queries tbody tr")
        assert len(rows) == report["queries"]
        browser.find_element(By.ID, "search").send_keys(jl.queries[qid])
        title = browser.find_element(By.ID, "detail-title").text
        assert title.startswith(f"Query {qid}:")
        first = browser.find_elements(By.CSS_SELECTOR, "#list-first tr")[1:]
        reranked = browser.find_elements(By.CSS_SELECTOR, "#list-reranked tr")
        assert len(first) == 10 and [r.text.split()[1] for r in first] == report["top"]["bm25"][qid]
        assert browser.find_elements(By.CSS_SELECTOR, "#list-reranked .contrib")
        chosen = browser.find_element(By.ID, "system").get_attribute("value")
        assert f"by {chosen})" in browser.find_element(By.ID, "detail").text   # its own baseline
        assert len(reranked) > 10
        browser.save_screenshot(str(tmp_path / "report.png"))
        assert (tmp_path / "report.png").stat().st_size > 10_000
        assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    finally:
        browser.quit()


def test_a_thousand_query_report_opens_quickly(report_file, tmp_path):
    """Measured, not asserted: the time to load and draw a 1,000-query report is printed
    (the closing note cites it); the test checks that it renders all rows."""
    from selenium.webdriver.common.by import By
    _, report = report_file
    data = report_data(report, cranfield.split_judgments("test"))
    copies = [(f"{q['qid']}-{i}", q) for i in range(40) for q in data["queries"]][:1000]
    big = dict(data, queries=[dict(q, qid=new) for new, q in copies],
               grades={new: data["grades"][q["qid"]] for new, q in copies},
               top={s: {new: lists[q["qid"]] for new, q in copies} for s, lists in data["top"].items()},
               contributions={s: {new: per_q.get(q["qid"], {}) for new, q in copies}
                              for s, per_q in data["contributions"].items()})
    page = tmp_path / "big.html"
    page.write_text(render(big))
    browser = chromium()
    try:
        t0 = time.perf_counter()
        browser.get(page.as_uri())
        n = len(browser.find_elements(By.CSS_SELECTOR, "#queries tbody tr"))
        seconds = time.perf_counter() - t0
        timing = browser.execute_script(
            "const t = performance.getEntriesByType('navigation')[0]; return t.loadEventEnd;")
        print(f"\n1,000-query report: {page.stat().st_size / 1e6:.2f} MB, loaded and drawn in "
              f"{seconds:.2f} s (navigation to load event {timing:.0f} ms)")
        assert n == 1000
        assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    finally:
        browser.quit()


def test_report_intervals_hold_the_mean():
    """The page shows the evaluation report's statistics (its means, intervals and tests:
    ``evaluation.report.compare``), and they hold the means."""
    from ltr_toolkit.evaluation.html import report_data
    from ltr_toolkit.evaluation.report import compare, per_query_json
    from ltr_toolkit.data.judgments import JudgmentList
    rng = np.random.default_rng(1)
    v = {"bm25": rng.normal(0.3, 0.1, 500)}
    v["model"] = v["bm25"] + rng.normal(0.02, 0.05, 500)
    qids = [str(i) for i in range(500)]
    per_query = {s: {"ndcg@10": vals} for s, vals in v.items()}
    report = dict(compare(per_query, "bm25", 10), per_query=per_query_json(per_query, qids))
    rows = {r["name"]: r for r in report_data(report, JudgmentList())["systems"]}
    t = report["tests"]["model"]
    assert rows["bm25"]["ci"] == report["mean_ci"]["bm25"] and rows["model"]["delta_ci"] == t["ci"]
    assert (rows["model"]["p"], rows["model"]["p_corrected"]) == (t["p_value"], t["p_corrected"])
    lo, hi = rows["bm25"]["ci"]
    assert lo < v["bm25"].mean() < hi and hi - lo < 0.05
    lo, hi = rows["model"]["delta_ci"]
    assert lo < (v["model"] - v["bm25"]).mean() < hi and 0 < lo
