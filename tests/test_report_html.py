"""The HTML report treats every text from the user's files, index and logs as text: a
report whose query ids, query texts, document ids and titles, model and feature names
carry hostile strings opens in Debian's Chromium with all its rows, shows those strings
literally, and runs none of them (built offline from an evaluation report: no cluster)."""

from __future__ import annotations

import json
import re

import pytest
from browser import chromium

from ltr_toolkit.data.judgments import JudgmentList
from ltr_toolkit.evaluation.html import render, report_data, write_html

#: each sets the marker ``window.__pwned`` if the page ever runs it
HOSTILE = [
    "a' onmouseover='window.__pwned=1",
    "7'/tabindex='0'/autofocus/onfocus='window.__pwned=1'",
    "<!--<script>",
    "</script><script>window.__pwned=1</script>",
    "<img src=x onerror=window.__pwned=1>",
    '"><svg onload=window.__pwned=1>',
    "x\u2028y\u2029</SCRIPT >&amp;",
]
SYSTEM = "lm<img src=x onerror=window.__pwned=1>"


def _hostile_report(hostile=HOSTILE):
    """An evaluation report (as ``ltr evaluate --json`` writes it) and its judgments, with
    the ``hostile`` strings in every place text from the user's data lands, and two plain
    queries."""
    qids = hostile + ["plain-1", "plain-2"]
    texts = {q: f"text {i} " + hostile[i % len(hostile)] for i, q in enumerate(qids)}
    docs = [f"d{i}" + (hostile[i] if i < len(hostile) else "") for i in range(10)]
    jl = JudgmentList()
    for i, q in enumerate(qids):
        jl.add_query(q, texts[q])
        jl.add(q, docs[i % 10], 2.0)
    per_q = {s: {q: {"ndcg@10": round(0.1 * (i % 7) + (0.05 + 0.01 * (i % 3) if s == SYSTEM else 0), 3)}
                 for i, q in enumerate(qids)} for s in ("bm25", SYSTEM)}
    means = {s: sum(v["ndcg@10"] for v in per_q[s].values()) / len(qids) for s in per_q}
    report = {
        "baseline": "bm25", "k": 10, "per_query": per_q,
        "systems": {s: {"ndcg@10": m} for s, m in means.items()},
        "mean_ci": {s: [m - 0.02, m + 0.02] for s, m in means.items()},
        "tests": {SYSTEM: {"metric": "ndcg@10", "p_value": 0.01, "p_corrected": 0.01,
                           "mean_delta": 0.05, "ci": [0.04, 0.06],
                           "wins": len(qids), "ties": 0, "losses": 0}},
        "recommendation": {"deploy": SYSTEM, "reason": SYSTEM + ": " + hostile[-1]},
        "top": {s: {q: docs for q in qids} for s in ("bm25", SYSTEM)},
        "explanations": {"features": [hostile[0], "f2", "f3"],
                         "baselines": {SYSTEM: {"document": hostile[-1], "score": 0.5,
                                                "by_query": {hostile[0]: 0.25}}},   # its fold's
                         "systems": {SYSTEM: {q: {d: [0.3, -0.2, 0.1] for d in docs} for q in qids}}},
    }
    titles = {d: "title " + hostile[(i + 2) % len(hostile)] for i, d in enumerate(docs)}
    return report, jl, titles


def test_the_embedded_data_cannot_end_or_alter_its_script_element():
    """No ``<``, ``>``, ``&`` or line separator inside the data: nothing in it can close
    the element or open a comment; and it parses back to the same data."""
    report, jl, titles = _hostile_report()
    data = report_data(report, jl, titles)
    page = render(data)
    payload = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S).group(1)
    assert not set(payload) & set("<>&\u2028\u2029"), sorted(set(payload) & set("<>&\u2028\u2029"))
    assert json.loads(payload) == json.loads(json.dumps(data))
    assert page.count("<script") == 2


def _check(browser, path, report, jl, titles):
    """The page opened at ``path`` ran nothing, drew every query, and shows each text as
    it is (rows, details, titles: each element's text content) while each row is hovered
    and opened."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    def text(e):
        return e.get_property("textContent")
    browser.get(path.as_uri())
    assert browser.execute_script("return window.__pwned === undefined"), "a payload ran as the page opened"
    rows = browser.find_elements(By.CSS_SELECTOR, "#queries tbody tr")
    assert len(rows) == len(jl.queries)                         # the page rendered every query
    shown = {text(r.find_elements(By.TAG_NAME, "td")[0]): r for r in rows}
    assert set(shown) == set(jl.queries)                        # ids shown literally
    qids = list(jl.queries)
    for qid, row in shown.items():
        assert text(row.find_elements(By.TAG_NAME, "td")[1]) == jl.queries[qid]
        ActionChains(browser).move_to_element(row).perform()
        row.click()
        assert text(browser.find_element(By.ID, "detail-title")) == f"Query {qid}: {jl.queries[qid]}"
        cells = browser.find_elements(By.CSS_SELECTOR, "#list-reranked > table > tbody > tr > td")
        assert [text(c) for c in cells[3::5]] == [titles[d] for d in report["top"][SYSTEM][qid]]
    explained = report["explanations"]
    for qid, score in ((qids[0], "0.2500"), (qids[-1], "0.5000")):      # the fold's, else the last
        shown[qid].click()
        detail = text(browser.find_element(By.ID, "detail"))
        assert f"(scored {score} by {SYSTEM})" in detail
        assert explained["baselines"][SYSTEM]["document"] in detail and explained["features"][0] in detail
    reason = report["recommendation"]["reason"]
    assert text(browser.find_element(By.ID, "recommendation")) == "Recommendation: " + reason
    heads = [text(c) for c in browser.find_elements(By.CSS_SELECTOR, "#metrics tr th")]
    cells = {text(r.find_elements(By.TAG_NAME, "td")[0]): [text(c) for c in r.find_elements(By.TAG_NAME, "td")]
             for r in browser.find_elements(By.CSS_SELECTOR, "#metrics tr") if r.find_elements(By.TAG_NAME, "td")}
    shown_p = dict(zip(heads, cells[SYSTEM]))["p, corrected"]            # what --deploy trusts
    want = next(x for x in report_data(report, jl, titles)["systems"] if x["name"] == SYSTEM)["p_corrected"]
    assert shown_p and float(shown_p) == pytest.approx(want, abs=5e-5)
    assert browser.find_element(By.ID, "system").get_attribute("value") == SYSTEM
    assert browser.execute_script("return window.__pwned === undefined"), "a payload ran"
    handlers = browser.execute_script(
        "return [...document.querySelectorAll('*')].flatMap((e) => [...e.attributes])"
        ".map((a) => a.name).filter((n) => n.startsWith('on'))")
    assert handlers == []
    assert browser.execute_script("return document.querySelectorAll('script, img, svg, iframe').length") == 2
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


@pytest.mark.parametrize("alone", [False, True], ids=["together", "each-alone"])
def test_hostile_text_is_shown_not_run_in_a_real_browser(tmp_path, alone):
    """All the hostile strings in one report, and each alone in its own (one can hide
    another: a later ``-->`` closes the comment an earlier ``<!--`` opened)."""
    browser = chromium()
    try:
        for i, hostile in enumerate([[h] for h in HOSTILE] if alone else [HOSTILE]):
            report, jl, titles = _hostile_report(hostile)
            path = write_html(tmp_path / f"report-{i}.html", report, jl, titles)
            _check(browser, path, report, jl, titles)
    finally:
        browser.quit()
