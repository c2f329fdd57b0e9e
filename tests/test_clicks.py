"""Judgments from UBI clicks (issue 23): COEC against a hand computation of the Search
Relevance Workbench's formula, bad event data counted, simulated Cranfield traffic written
to the real node and read back by ``ltr judgments clicks``, and the debiased models'
Kendall tau vs raw CTR on simulated traffic with a stated position bias."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest
from scipy.stats import kendalltau

from ltr_toolkit.clicks.judging import clickmodels, grades
from ltr_toolkit.clicks.events import groups, sessions
from ltr_toolkit.clicks import simulate as S
from ltr_toolkit.clicks.events.files import read_file
from ltr_toolkit.clicks.judging.output import qid_for
from ltr_toolkit.data.judgments import load_judgments
from ltr_toolkit.datasets import cranfield


def _event(action, qid, doc, pos, text="a", **extra):
    ev = {"action_name": action, "query_id": qid, "event_attributes": {"object": {"object_id": doc}}}
    if pos is not None:
        ev["event_attributes"]["position"] = {"ordinal": pos}
    if text is not None:
        ev["user_query"] = text
    ev.update(extra)
    return ev


def _write(path, docs, bulk=False):
    with open(path, "w") as fh:
        for d in docs:
            if bulk:
                index = "ubi_events" if "action_name" in d else "ubi_queries"
                fh.write(json.dumps({"index": {"_index": index}}) + "\n")
            fh.write((d if isinstance(d, str) else json.dumps(d)) + "\n")
    return path


#: (search, user_query, shown docs, clicked docs): positions are the list's, from 0
FIXTURE = [("s1", "a", ["d1", "d2", "d3"], {"d2"}),
           ("s2", "a", ["d2", "d1", "d3"], {"d2", "d3"}),
           ("s3", "b", ["d4", "d1"], {"d4"})]


def _fixture_events(base=0):
    for qid, text, shown, clicked in FIXTURE:
        for r, d in enumerate(shown):
            yield _event("impression", qid, d, r + base, text)
        for r, d in enumerate(shown):
            if d in clicked:
                yield _event("click", qid, d, r + base, text)


def workbench_coec(events, max_rank):
    """The Workbench's CoecClickModel, written out with dicts from its description:
    rank CTR = clicks / impressions per ordinal < max_rank over all events with ordinal <=
    max_rank; per (user_query, object_id): clicks / (ctr[lowest ordinal] * impressions)."""
    ev = [e for e in events if e["event_attributes"]["position"]["ordinal"] <= max_rank]
    shown, clicked = defaultdict(int), defaultdict(int)
    pair = defaultdict(lambda: {"c": 0, "i": 0, "rank": 10**9})
    for e in ev:
        r = e["event_attributes"]["position"]["ordinal"]
        p = pair[(e["user_query"], e["event_attributes"]["object"]["object_id"])]
        p["rank"] = min(p["rank"], r)
        if e["action_name"] == "click":
            clicked[r] += 1
            p["c"] += 1
        else:
            shown[r] += 1
            p["i"] += 1
    ctr = {r: (clicked[r] / shown[r] if shown[r] else 0.0) for r in range(max_rank)}
    out = {}
    for key, p in pair.items():
        expected = ctr.get(p["rank"], 0.0) * p["i"]
        out[key] = round(p["c"] / expected, 3) if expected > 0 else 0.0
    return out


def _counts(path):
    rows = (path.parent / (path.name + ".counts.csv")).read_text().splitlines()[1:]
    import csv
    return {(r[1], r[2]): r for r in csv.reader(rows)}


def test_coec_equals_the_workbench_formula_by_hand(tmp_path, cli):
    # by hand: rank CTR 0: 2/3 (d1 s1, d2 s2, d4 s3 shown; d2, d4 clicked), 1: 1/3, 2: 1/2
    hand = {("a", "d1"): 0.0, ("a", "d2"): 1.5, ("a", "d3"): 1.0, ("b", "d4"): 1.5, ("b", "d1"): 0.0}
    events = list(_fixture_events(0))
    assert workbench_coec(events, 20) == hand
    for base in (0, 1):
        f = _write(tmp_path / f"ev{base}.ndjson", _fixture_events(base))
        out = tmp_path / f"coec{base}.csv"
        r = cli("judgments", "clicks", str(f), "-o", str(out), "--click-model", "coec", "--grades", "estimate",
                "--min-impressions", "1")
        assert r.returncode == 0, r.stderr
        assert f"counted from {base}" in r.stdout
        jl = load_judgments(out)
        assert {(jl.queries[q], d): g for (q, d), g in jl.grades.items()} == hand
        counts = _counts(out)
        assert counts[("a", "d2")][4:6] == ["2", "2"] and counts[("a", "d1")][4:6] == ["2", "0"]


def test_coec_equals_the_workbench_formula_on_simulated_traffic(tmp_path):
    """The same comparison over many searches, and a max_rank that cuts the lists."""
    jl = cranfield.judgments()
    rankings = {q: [d for d, _ in jl.docs_of(q)][:8] for q in jl.judged_qids()[:30]}
    sim = S.simulate(rankings, jl.queries, jl.grades, 800, seed=7)
    docs = [d for kind, d in S.ubi_documents(sim, base=0) if kind == "ubi_events"]
    for max_rank in (20, 4):
        want = workbench_coec(docs, max_rank)
        table = sessions.build_table(read_file(_write(tmp_path / "sim.ndjson", docs)))
        est = clickmodels.estimate(table, "coec", max_rank=max_rank)
        got = {(table.texts[q], table.docs[d]): e for q, d, e in zip(est.query, est.doc, est.estimate)}
        assert len(want) > 100
        assert {k: got[k] for k in want} == want
        # pairs seen only below max_rank: no Workbench rating; here 0 (never a grade above 0)
        assert all(got[k] == 0.0 for k in set(got) - set(want))


def test_sdbn_by_hand(tmp_path):
    """SDBN (prior 0): results down to the last click were examined, all of them in a search
    without a click; attractiveness = clicks / examined, satisfaction = last clicks / clicks."""
    no_click = [_event("impression", "s4", d, r, "b") for r, d in enumerate(["d1", "d4"])]
    table = sessions.build_table(read_file(_write(tmp_path / "e.ndjson", [*_fixture_events(0), *no_click])))
    est = clickmodels.estimate(table, "sdbn", prior=0)
    got = {(table.texts[q], table.docs[d]): e for q, d, e in zip(est.query, est.doc, est.estimate)}
    assert got == {("a", "d1"): 0.0, ("a", "d2"): 1.0 * 0.5, ("a", "d3"): 1.0,
                   ("b", "d4"): 0.5 * 1.0, ("b", "d1"): 0.0}


def test_bad_event_data_is_counted_not_fatal(tmp_path, cli):
    good = list(_fixture_events(1))
    bad = [
        "{not json",
        _event("add_to_cart", "s1", "d1", 1),
        _event("hover", "s1", "d1", 1),
        {"action_name": "click", "event_attributes": {"object": {"object_id": "d1"}}},   # no query_id
        _event("click", "s1", None, 1) | {"event_attributes": {"position": {"ordinal": 1}}},  # no object
        _event("impression", "s1", "d1", 1),          # duplicate impression
        _event("click", "s1", "d2", 2),               # repeated click
        _event("click", "s3", "d9", 5),               # never shown
        _event("impression", "s4", "d1", "x", text="c"),            # bad position, no hit list
        _event("impression", "s5", "d7", None, text=None),          # user_query + position from record
        _event("click", "s5", "d7", None, text=None),
        {"query_id": "s5", "user_query": "e", "query_response_hit_ids": ["d6", "d7"]},
        _event("impression", "s6", "d1", 1, text=None),             # no user_query anywhere
        [1, 2],
    ]
    f = _write(tmp_path / "bad.ndjson", good + bad)
    out = tmp_path / "j.txt"
    r = cli("judgments", "clicks", str(f), "-o", str(out), "--click-model", "pbm", "--min-impressions", "1")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "bad data:" in r.stderr
    rep = json.loads((tmp_path / "j.txt.json").read_text())["bad_data"]
    assert rep["counts"] == {
        "invalid_json": 1, "unknown_action": 2, "no_query_id": 1, "no_object_id": 1,
        "duplicate_impressions": 1, "repeated_clicks": 1, "clicks_without_impression": 1,
        "bad_position": 1, "no_position": 1, "user_query_from_record": 2, "no_user_query": 1,
        "not_an_event": 1}
    assert rep["unknown_actions"] == {"add_to_cart": 1, "hover": 1}
    # built a slice of searches at a time (bounded memory): the same counts and estimates
    whole, sliced = read_file(f), read_file(f)
    g1, g2 = groups.aggregate(whole), groups.aggregate(sliced, slice_events=2)
    assert whole.problems.counts == sliced.problems.counts == rep["counts"]
    for m in clickmodels.MODELS:
        e1, e2 = clickmodels.estimate(g1, m), clickmodels.estimate(g2, m)
        assert g1.searches == g2.searches == 4 and np.array_equal(e1.estimate, e2.estimate), m
    assert rep["first_seen"]["invalid_json"] == f"{f}:{len(good) + 1}"
    jl = load_judgments(out)
    assert ("e", "d7") in {(jl.queries[q], d) for q, d in jl.grades}   # repaired from its record
    # a file with no usable event at all: one line, exit 2, naming the file
    empty = _write(tmp_path / "none.ndjson", ["{bad", _event("hover", "s1", "d1", 1)])
    r = cli("judgments", "clicks", str(empty), "-o", str(tmp_path / "x.txt"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert str(empty) in r.stderr and "Traceback" not in r.stderr


@pytest.fixture(scope="module")
def first_stage_top10(ltr_cluster, cranfield_index):
    """The first stage's real top 10 on the node for every judged Cranfield query."""
    from ltr_toolkit.query.firststage import FirstStage
    from ltr_toolkit.query.requests import msearch_ids
    jl = cranfield.judgments()
    qids = jl.judged_qids()
    ids = msearch_ids(ltr_cluster.conn(), "cranfield-test", [jl.query_params(q) for q in qids],
                      FirstStage.from_fields(), 10)
    return {q: r for q, r in zip(qids, ids) if r}


def _tau_by_model(rankings, sessions_n, seed):
    jl = cranfield.judgments()
    sim = S.simulate(rankings, jl.queries, jl.grades, sessions_n, seed=seed)
    table = sessions.build_table(S.event_log(sim))
    truth = S.true_grades(sim, jl.grades)
    taus = {}
    for m in clickmodels.MODELS:
        est = clickmodels.estimate(table, m)
        keep = grades.keep_mask(est)
        g = grades.to_grades(est)[keep]
        true = np.array([truth[(table.texts[q], table.docs[d])] for q, d in zip(est.query[keep], est.doc[keep])])
        taus[m] = kendalltau(g, true).statistic
    return taus


def test_debiased_models_beat_raw_ctr_on_simulated_cranfield_traffic(first_stage_top10):
    """20,000 searches over the first stage's real top 10, position bias 1/(rank+1): the
    debiased models' grades (SDBN's, PBM's and UBM's) agree with the true grades better than
    CTR's, for two seeds."""
    for seed in (1, 2):
        taus = _tau_by_model(first_stage_top10, 20_000, seed)
        for m in ("sdbn", "pbm", "ubm"):
            assert taus[m] > taus["ctr"] + 0.02, (m, taus)


@pytest.fixture(scope="module")
def ubi_on_node(ltr_cluster, first_stage_top10):
    """Simulated searches written to the node's UBI indices: 300 from 20 days ago, 1,500
    over the last 2 days (positions counted from 1, as in the UBI spec's examples)."""
    from ltr_toolkit.clicks.events import ubi
    import datetime as dt
    conn = ltr_cluster.conn()
    jl = cranfield.judgments()
    qi, ev = "test_ubi_queries", "test_ubi_events"
    ubi.create_indices(conn, qi, ev, recreate=True)
    now = dt.datetime.now(dt.timezone.utc)
    old = S.simulate(first_stage_top10, jl.queries, jl.grades, 300, seed=5,
                     start=now - dt.timedelta(days=20), seconds=3600)
    new = S.simulate(first_stage_top10, jl.queries, jl.grades, 1500, seed=6,
                     start=now - dt.timedelta(days=2), seconds=86400)
    ubi.write_documents(conn, S.ubi_documents(old), qi, ev)
    ubi.write_documents(conn, S.ubi_documents(new), qi, ev)
    yield qi, ev
    conn.client().indices.delete(index=f"{qi},{ev}", ignore_unavailable=True)


def test_simulated_traffic_on_the_node_to_judgments(ltr_cluster, ubi_on_node, tmp_path, cli):
    qi, ev = ubi_on_node
    conn = ltr_cluster.conn()
    mapping = conn.client().indices.get_mapping(index=ev)[ev]["mappings"]["properties"]
    assert mapping["event_attributes"]["properties"]["position"]["properties"]["ordinal"]["type"] == "integer"
    out = tmp_path / "clicks.jsonl"
    r = cli("--url", ltr_cluster.url, "judgments", "clicks", "-o", str(out), "--click-model", "pbm",
            "--days", "7", "--queries-index", qi, "--events-index", ev, "--min-impressions", "3")
    assert r.returncode == 0, r.stderr
    report = json.loads((tmp_path / "clicks.jsonl.json").read_text())
    assert report["counts"]["searches"] == 1500          # the 20-day-old ones are outside
    assert report["positions_counted_from"] == 1
    assert report["bad_data"]["counts"] == {}
    got = load_judgments(out)
    texts = set(cranfield.judgments().queries.values())
    assert set(got.queries.values()) <= texts
    assert len(got) > 1000 and all(qid_for(t) == q for q, t in got.queries.items())


def test_click_job_logs_features_of_the_last_days(ltr_cluster, cranfield_index, ubi_on_node, tmp_path, cli):
    from ltr_toolkit.stores import store as st
    from ltr_toolkit.data.featuresets import load_featureset
    qi, ev = ubi_on_node
    conn = ltr_cluster.conn()
    st.init_store(conn, None)
    fs, _ = st.upload_featureset_versioned(conn, load_featureset(cranfield.FEATURE_SET))
    job = tmp_path / "job.toml"
    job.write_text(f'[cluster]\nurl = "{ltr_cluster.url}"\n\n[logging]\nfeatureset = "{fs}"\n'
                   f'index = "{cranfield_index["index"]}"\n\n[clicks]\ndays = 3\nmodel = "ubm"\n'
                   f'min_impressions = 3\nqueries_index = "{qi}"\nevents_index = "{ev}"\n\n'
                   '[output]\ndirectory = "out"\nkeep = 2\n')
    r = cli("job", "run", str(job), "--json")
    assert r.returncode == 0, r.stderr
    manifest = json.loads(r.stdout)
    snap = tmp_path / "out" / "latest"
    assert manifest["clicks"]["searches"] == 1500 and manifest["status"] == "complete"
    assert set(manifest["files"]) == {"features.txt", "features.txt.json", "judgments.txt",
                                      "judgments.txt.counts.csv", "judgments.txt.json"}
    jl = load_judgments(snap / "judgments.txt")
    assert manifest["counts"]["rows"] == len(jl) > 1000
    rows = [ln for ln in (snap / "features.txt").read_text().splitlines() if not ln.startswith("#")]
    assert {ln.split("# ")[1].split()[0] for ln in rows} <= {d for _, d in jl.grades}
    # the same events, read from the node, joined with the snapshot's features; debiased training
    out = tmp_path / "clicks.txt"
    r = cli("--url", ltr_cluster.url, "judgments", "click-features", "--days", "3", "--queries-index", qi,
            "--events-index", ev, str(snap / "features.txt"), "-o", str(out))
    assert r.returncode == 0, r.stderr
    counts = json.loads((tmp_path / "clicks.txt.json").read_text())["clicks"]
    recent = {"range": {"timestamp": {"gte": "now-3d"}}}
    shown, clicked = ({"bool": {"filter": [recent, {"term": {"action_name": a}}]}} for a in ("impression", "click"))
    c = conn.client()
    assert counts["searches"] == 1500 and counts["impressions"] == c.count(index=ev, body={"query": shown})["count"]
    assert counts["clicks"] == c.count(index=ev, body={"query": clicked})["count"] > 0
    r = cli("train", str(out), "-o", str(tmp_path / "m.json"), "--algo", "linear", "--propensity", "pbm")
    assert r.returncode == 0, r.stderr
    # a bad [clicks] section: file:line, exit 2
    job.write_text(job.read_text().replace("days = 3", 'days = "3"'))
    r = cli("job", "run", str(job))
    assert r.returncode == 2 and f"{job}:" in r.stderr and "days" in r.stderr, r.stderr


def test_click_job_files_are_checked(tmp_path):
    from pathlib import Path
    from ltr_toolkit.jobs.jobfile import load_job
    from ltr_toolkit.errors import InputError
    docs = (Path(__file__).resolve().parent.parent / "docs" / "scheduling.md").read_text()
    example = next(b for b in (p.split("```", 1)[0] for p in docs.split("```toml\n")[1:]) if "[clicks]" in b)
    p = tmp_path / "job.toml"
    p.write_text(example)
    job = load_job(p)
    assert job.judgments is None and job.clicks == {"days": 7.0, "model": "pbm", "grades": "levels",
                                                    "positions": "auto", "min_impressions": 5}
    for bad, line, fragment in (
            (example.replace('model = "pbm"', 'model = "dbn"'), 7, "'ubm'"),
            (example.replace("days = 7", "days = 0"), 6, "days = 0"),
            (example.replace('index = "cranfield"\n', 'index = "cranfield"\njudgments = "j.txt"\n'), 4, "drop judgments"),
            (example.replace("days = 7 ", "# days"), 5, "needs days")):
        p.write_text(bad)
        with pytest.raises(InputError) as info:
            load_job(p)
        assert fragment in str(info.value) and info.value.line == line, str(info.value)


def test_simulated_event_log_keeps_shared_query_texts_and_pbm_recovers_examination():
    """Four random orderings of each query's results (four qids, one text): the event log
    codes them as one query, so PBM sees each pair at several ranks and recovers
    theta = 1/(r+1) (coded as four queries, each pair is seen at one rank only and theta
    is not identifiable)."""
    import numpy as np
    from ltr_toolkit.clicks import simulate as SI
    from ltr_toolkit.clicks.judging import clickmodels as M
    from ltr_toolkit.clicks.events import sessions as SE
    rng = np.random.default_rng(0)
    rankings, texts, truth = {}, {}, {}
    for i in range(150):
        docs = [f"d{i}_{j}" for j in range(10)]
        grades = rng.integers(0, 5, 10)
        for k in range(4):
            order = list(rng.permutation(docs))
            rankings[f"q{i}#{k}"], texts[f"q{i}#{k}"] = order, f"query {i}"
            truth.update({(f"q{i}#{k}", d): float(g) for d, g in zip(docs, grades)})
    sim = SI.simulate(rankings, texts, truth, 100_000, SI.UserModel(stop_min=0.0, stop_max=0.0), seed=1)
    log = SI.event_log(sim)
    assert len(log.texts) == 150 and int(log.text.max()) == 149
    theta = np.array(M.estimate(SE.build_table(log), "pbm", iters=500, tol=1e-9).info["theta"])
    assert np.abs(theta - 1 / np.arange(1, 11)).max() < 0.05, theta
