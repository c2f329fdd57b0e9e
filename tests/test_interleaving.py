"""Team-draft interleaving: the lists, the credit of clicks from UBI files and the cluster,
the CLI, and live end to end (served interleaved lists, their UBI records, simulated
clicks in ubi_events, credited by `ltr evaluate interleaving`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ltr_toolkit.clicks import interleaving
from ltr_toolkit.clicks.events import files
from ltr_toolkit.clicks.simulate import UserModel, sample_clicks
from ltr_toolkit.errors import UserError
from ltr_toolkit.rank.interleave import Tally, credit_test, outcomes, query_test, tally, team_draft

from conftest import run_cli


def test_team_draft_is_fair_and_keeps_each_rankers_order():
    rng = np.random.default_rng(0)
    for _ in range(300):
        pool = [f"d{i}" for i in range(15)]
        a = list(rng.permutation(pool)[:10])
        b = list(rng.permutation(pool)[:10])
        ids, teams = team_draft(a, b, 10, rng)
        assert len(ids) == len(set(ids)) == len(teams) == 10
        picks = np.cumsum([1 if t == "a" else -1 for t in teams])
        # each round the team behind picks: the counts never differ by more than one
        # while both teams still have documents to give
        assert np.abs(picks).max() <= 2
        for team, source in (("a", a), ("b", b)):
            mine = [d for d, t in zip(ids, teams) if t == team]
            assert mine == [d for d in source if d in mine]          # its own order
            assert all(d in source for d in mine)
        # a team's pick is its best document not shown yet
        shown = set()
        for d, t in zip(ids, teams):
            src = a if t == "a" else b
            assert d == next(x for x in src if x not in shown)
            shown.add(d)


def test_team_draft_of_identical_lists_is_that_list():
    a = [f"d{i}" for i in range(10)]
    for seed in range(20):
        ids, teams = team_draft(a, list(a), 10, np.random.default_rng(seed))
        assert ids == a
        assert set(teams) == {"a", "b"}


def test_team_draft_when_one_list_runs_out():
    ids, teams = team_draft(["x"], ["y", "z", "w"], 10, np.random.default_rng(1))
    assert sorted(ids) == ["w", "x", "y", "z"] and teams.count("a") == 1


def test_tally_sign_test_and_preference():
    t = Tally(60, 100, 40)
    assert t.impressions == 200
    assert t.preference == pytest.approx((60 + 50) / 200 - 0.5)
    from scipy.stats import binomtest
    assert t.p_value == pytest.approx(binomtest(60, 100).pvalue)
    assert Tally(30, 0, 10).winner() == "a" and Tally(10, 0, 30).winner() == "b"
    assert Tally(12, 0, 10).winner() is None and Tally(0, 5, 0).p_value == 1.0


@pytest.mark.parametrize("n", [1, 2, 7, 10, 51, 400, 5001, 200_000])
def test_sign_test_is_scipys_binomial_test(n):
    from scipy.stats import binomtest
    from ltr_toolkit.rank.stats import sign_test
    for k in {0, 1, n // 3, n // 2, (n + 1) // 2, n - 1, n, int(n * 0.49)}:
        if 0 <= k <= n:
            assert sign_test(k, n) == pytest.approx(binomtest(k, n).pvalue, rel=1e-6, abs=1e-300), (k, n)


def _write(path, records, clicks):
    """NDJSON: the interleaved records and (query_id, doc) clicks (and impressions)."""
    with open(path, "w") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
            for i, d in enumerate(r["query_response_hit_ids"]):
                fh.write(json.dumps({"action_name": "impression", "query_id": r["query_id"],
                                     "user_query": r["user_query"],
                                     "event_attributes": {"object": {"object_id": d},
                                                          "position": {"ordinal": i + 1}}}) + "\n")
        for q, d in clicks:
            fh.write(json.dumps({"action_name": "click", "query_id": q,
                                 "event_attributes": {"object": {"object_id": d}}}) + "\n")


def _records():
    recs = [interleaving.record("apples", ["d1", "d2", "d3", "d4"], "abba", "m1", "m2", query_id="q1"),
            interleaving.record("apples", ["d2", "d1", "d4", "d3"], "baab", "m1", "m2", query_id="q2"),
            interleaving.record("pears", ["d5", "d6"], "ab", "m1", "m2", query_id="q3"),
            interleaving.record("pears", ["d6", "d5"], "ab", "m1", "m2", query_id="q4"),
            interleaving.record("pears", ["d7"], "a", "x", "y", experiment="other", query_id="q5")]
    clicks = [("q1", "d1"), ("q1", "d1"),            # a, clicked twice: once
              ("q2", "d2"), ("q2", "d1"),            # b then a: a tie
              ("q3", "d6"), ("q3", "zz"),            # b; zz is not in the list
              ("q5", "d7")]                          # q4: no click, a tie
    return recs, clicks


@pytest.mark.parametrize("blocks", [True, False], ids=["blocks", "lines"])
def test_credit_from_a_file(tmp_path, monkeypatch, blocks):
    recs, clicks = _records()
    _write(tmp_path / "ev.ndjson", recs, clicks)
    if not blocks:                       # every block read again line by line
        monkeypatch.setattr(files, "_Parser", lambda: (lambda buf: None))
    reps = {r["experiment"]: r for r in interleaving.credit(files.read_file(tmp_path / "ev.ndjson"))}
    assert set(reps) == {"m1-vs-m2", "other"}
    r = reps["m1-vs-m2"]
    assert (r["wins_a"], r["ties"], r["wins_b"]) == (1, 2, 1)
    assert (r["clicks_a"], r["clicks_b"]) == (2, 2)
    per = {row["query"]: row for row in r["per_query"]}
    assert (per["apples"]["wins_a"], per["apples"]["ties"], per["apples"]["wins_b"]) == (1, 1, 0)
    assert (per["pears"]["wins_a"], per["pears"]["ties"], per["pears"]["wins_b"]) == (0, 1, 1)
    assert (reps["other"]["wins_a"], reps["other"]["impressions"]) == (1, 1)
    assert sum(x.get("clicks_outside_lists", 0) for x in reps.values()) == 1
    only = interleaving.credit(files.read_file(tmp_path / "ev.ndjson"), "other")
    assert [x["experiment"] for x in only] == ["other"]


def test_debiased_credit_weights_each_click_by_its_rank(tmp_path):
    recs, clicks = _records()
    _write(tmp_path / "ev.ndjson", recs, clicks)
    log = files.read_file(tmp_path / "ev.ndjson")
    reps = {r["experiment"]: r for r in interleaving.credit(log, propensity="1,0.5,0.2,0.2", clip=0.25)}
    d = reps["m1-vs-m2"]["debiased"]
    assert d["examination"] == [1.0, 0.5, 0.25, 0.25]            # 0.2 clipped at 0.25
    # q1: d1 at rank 0 (a) 1; q2: d2 at rank 0 (b) 1, d1 at rank 1 (a) 2; q3: d6 at rank 1 (b) 2
    assert (d["credit_a"], d["credit_b"], d["impressions"]) == (0.75, 0.75, 4)
    assert d["p_value"] is None and d["winner"] is None          # too few impressions to test
    assert reps["other"]["debiased"]["credit_a"] == 1.0
    assert "debiased" not in interleaving.credit(log, propensity=None)[0]
    with pytest.raises(UserError, match="positions"):
        interleaving.credit(log, propensity="1,0.5")


def test_credit_test_is_the_z_test_of_the_mean_difference():
    from scipy.stats import norm
    rng = np.random.default_rng(4)
    a, b = rng.exponential(1.0, 500) * (rng.random(500) < 0.3), rng.exponential(1.2, 500) * (rng.random(500) < 0.3)
    t = credit_test(a, b)
    d = a - b
    assert t.p_value == pytest.approx(2 * norm.sf(abs(d.mean()) / (d.std(ddof=1) / np.sqrt(500))), rel=1e-9)
    assert (t.credit_a, t.credit_b) == (pytest.approx(a.mean()), pytest.approx(b.mean()))
    assert credit_test(np.ones(40), np.ones(40)).p_value == 1.0
    assert credit_test(np.ones(40), np.zeros(40)).winner() == "a"
    assert credit_test(np.ones(29), np.zeros(29)).p_value is None


def _top_heavy(n, seed):
    """Interleavings of 'first' (a grade-3 document first, then nothing relevant) and
    'deep' (nothing at rank 1, then four grade-3 documents), and simulated clicks of users
    with position bias; and each list's NDCG@10."""
    rng = np.random.default_rng(seed)
    first = ["top"] + [f"n{i}" for i in range(9)]
    deep = ["m0"] + [f"r{i}" for i in range(4)] + [f"n{i}" for i in range(5)]
    grade = {"top": 3.0, **{f"r{i}": 3.0 for i in range(4)}}
    user, recs, clicks = UserModel(), [], []
    for i in range(n):
        ids, teams = team_draft(first, deep, 10, rng)
        recs.append(interleaving.record(f"q{i % 20}", ids, teams, "first", "deep", query_id=f"s{i}"))
        g = np.array([[grade.get(d, 0.0) for d in ids]])
        c = sample_clicks(g, np.ones_like(g, bool), user, rng)[0]
        clicks += [(f"s{i}", d) for d, x in zip(ids, c) if x]
    discount = 1 / np.log2(np.arange(2, 12))
    ideal = ((2 ** np.sort(list(grade.values()))[::-1] - 1) * discount[:len(grade)]).sum()
    quality = [((2 ** np.array([grade.get(d, 0.0) for d in ranked]) - 1) * discount).sum() / ideal
               for ranked in (first, deep)]                                  # NDCG@10
    return recs, clicks, quality


def test_debiased_credit_names_the_better_list_that_counted_wins_miss(tmp_path):
    """The deep list is far better by NDCG@10; users with position bias click the top of
    the list so much more that counted wins name the other one, significantly. The
    debiased credit (PBM fitted on the same searches) names the deep list, seed after seed."""
    for seed in range(3):
        recs, clicks, (first, deep) = _top_heavy(3000, seed)
        assert deep > first + 0.2
        _write(tmp_path / "ev.ndjson", recs, clicks)
        r, = interleaving.credit(files.read_file(tmp_path / "ev.ndjson"))
        assert r["winner"] == "a", (seed, r["wins_a"], r["wins_b"])
        assert r["debiased"]["winner"] == "b", (seed, r["debiased"])
    cli = run_cli("evaluate", "interleaving", str(tmp_path / "ev.ndjson"), "--top", "0")
    assert cli.returncode == 0 and "deep wins" in cli.stdout and "the two disagree" in cli.stdout, cli.stdout


def test_debiased_credit_is_calibrated_between_equal_rankers():
    """A/A: two rankers with the same list, users with position bias; the z-test on the
    debiased credit (PBM fitted on each experiment's searches) rejects at 0.05 in about 5%
    of 300 experiments (binomial 99% range for 300 draws at 5%: 2%-9%)."""
    rng = np.random.default_rng(11)
    docs = [f"d{i}" for i in range(10)]
    grade = np.array([2.0, 0, 3, 0, 1, 0, 0, 2, 0, 0])
    n, rejected = 400, 0
    for _ in range(300):
        lists = [team_draft(docs, docs, 10, rng) for _ in range(n)]
        code = np.array([[int(d[1:]) for d in ids] for ids, _ in lists])
        team_b = np.array([[t == "b" for t in teams] for _, teams in lists]).ravel()
        hit = sample_clicks(grade[code], np.ones(code.shape, bool), UserModel(), rng).ravel()
        rec = np.repeat(np.arange(n), 10)
        w, _ = interleaving.debiased_credit(np.zeros(n, np.int64), rec, code.ravel(), team_b, hit, "pbm", 0.1)
        rejected += credit_test(w[:, 0], w[:, 1]).winner() is not None
    assert 0.02 <= rejected / 300 <= 0.09, rejected


def test_credit_many_impressions_names_the_better_team(tmp_path):
    """Simulated users over interleavings of a good and a bad list, 400 searches of 20
    queries: the good one wins, by the per-query test (queries repeat)."""
    rng = np.random.default_rng(3)
    good, bad = [f"r{i}" for i in range(5)] + [f"n{i}" for i in range(5)], [f"n{i}" for i in range(10)]
    recs, clicks = [], []
    user = UserModel()
    for i in range(400):
        ids, teams = team_draft(good, bad, 10, rng)
        q = f"s{i}"
        recs.append(interleaving.record(f"q{i % 20}", ids, teams, "good", "bad", query_id=q))
        grade = np.array([3.0 if d.startswith("r") else 0.0 for d in ids])
        seen = rng.random(10) < user.examination(10)
        clicked = seen & (rng.random(10) < user.attractiveness(grade))
        clicks += [(q, d) for d, c in zip(ids, clicked) if c]
    _write(tmp_path / "ev.ndjson", recs, clicks)
    r, = interleaving.credit(files.read_file(tmp_path / "ev.ndjson"))
    assert r["impressions"] == 400 and r["winner"] == "a" and r["preference"] > 0.1
    assert r["verdict"] == "per query" and r["per_query_test"]["queries"] == 20


def test_a_head_query_served_again_and_again_is_one_query(tmp_path):
    """One head query served 60 times, every time won by a (the same users clicking a's
    document), and 11 queries served once, split 5 to a, 6 to b: the sign test over
    impressions calls a the winner (65 to 6); over queries it is 6 to 6, no winner. The
    verdict is the per-query test, as queries repeat."""
    recs, clicks = [], []
    for i in range(60):
        recs.append(interleaving.record("head", ["x", "y"], "ab", "A", "B", query_id=f"h{i}"))
        clicks.append((f"h{i}", "x"))
    for i in range(11):
        recs.append(interleaving.record(f"tail {i}", ["x", "y"], "ab", "A", "B", query_id=f"t{i}"))
        clicks.append((f"t{i}", "x" if i < 5 else "y"))
    _write(tmp_path / "ev.ndjson", recs, clicks)
    r, = interleaving.credit(files.read_file(tmp_path / "ev.ndjson"), propensity=None)
    assert (r["wins_a"], r["wins_b"]) == (65, 6) and r["p_value"] < 1e-10     # per impression
    q = r["per_query_test"]
    assert (q["queries"], q["wins_a"], q["wins_b"]) == (12, 6, 6) and q["p_value"] > 0.5
    assert r["verdict"] == "per query" and r["winner"] is None
    cli = run_cli("evaluate", "interleaving", str(tmp_path / "ev.ndjson"), "--top", "0",
                  "--propensity", "none")
    assert cli.returncode == 0 and "no winner yet (by the per query test" in cli.stdout, cli.stdout


def _head_heavy(rng, queries=30, impressions=600, spread=0.15):
    """One A/A-like interleaving experiment: queries served with Zipf traffic (the head
    query about a quarter of the impressions), each query with its own preference drawn
    around 0 (over queries, neither ranker is better), wins and losses per impression
    drawn from it. Returns (outcome per impression, query per impression)."""
    traffic = 1 / np.arange(1, queries + 1)
    query = rng.choice(queries, size=impressions, p=traffic / traffic.sum())
    lean = rng.normal(0, spread, queries).clip(-0.35, 0.35)
    u = rng.random(impressions)
    win_a, win_b = u < 0.35 + lean[query], u > 0.65 + lean[query]
    return win_a.astype(int) - win_b.astype(int), query


def test_repeated_head_queries_no_longer_give_too_small_p_values():
    """300 experiments whose rankers are equally good over queries but not on each one: the
    per-impression sign test (the verdict before) names a winner in far more than 5% of
    them, as its impressions are not independent; the per-query test, at most about 5%
    (P(Bin(300, 0.05) > 24) < 1%)."""
    rng = np.random.default_rng(17)
    runs, by_query, by_impression = 300, 0, 0
    for _ in range(runs):
        won, query = _head_heavy(rng)
        by_impression += tally(won).winner() is not None
        by_query += query_test(won, query).winner() is not None
    assert by_query <= 24, by_query
    assert by_impression > 3 * 0.05 * runs, by_impression


def test_the_per_query_test_is_the_randomisation_test_of_query_means():
    rng = np.random.default_rng(2)
    won, query = _head_heavy(rng, impressions=200)
    t = query_test(won, query)
    labels = np.unique(query)
    means = np.array([won[query == q].mean() / 2 for q in labels])
    from ltr_toolkit.rank.stats import compare
    ref = compare({"b": np.zeros(len(labels)), "a": means}, "b", confidence_level=None).tests["a"]
    assert (t.queries, t.p_value, t.wins_a, t.ties, t.wins_b) == (len(labels), ref.p_value, ref.wins, ref.ties, ref.losses)
    assert t.preference == pytest.approx(means.mean())
    one_each = query_test(outcomes(np.array([1, 0, 1, 1]), np.array([0, 1, 0, 0])), np.arange(4))
    assert one_each.queries == 4 and one_each.preference == pytest.approx(0.25)


def test_the_debiased_credit_is_tested_per_query_when_queries_repeat():
    rng = np.random.default_rng(5)
    won, query = _head_heavy(rng)
    a, b = (won > 0) * rng.exponential(1.0, len(won)), (won < 0) * rng.exponential(1.0, len(won))
    t = credit_test(a, b, query)
    assert t.verdict == "per query" and t.queries == len(np.unique(query))
    assert t.p_per_query > t.p_value                       # the head query no longer decides
    assert credit_test(a, b).verdict == "per impression"
    assert credit_test(a, b, np.arange(len(a))).verdict == "per impression"


def test_cli_evaluate_interleaving(tmp_path):
    recs, clicks = _records()
    _write(tmp_path / "ev.ndjson", recs, clicks)
    r = run_cli("evaluate", "interleaving", str(tmp_path / "ev.ndjson"),
                "-o", str(tmp_path / "out.json"))
    assert r.returncode == 0, r.stderr
    assert "experiment m1-vs-m2" in r.stdout and "no winner yet" in r.stdout
    assert "debiased (pbm examination by rank 1," in r.stdout and "too few impressions" in r.stdout
    assert json.loads((tmp_path / "out.json").read_text())["experiments"][0]["impressions"] == 4


def test_cli_errors_are_one_line(tmp_path):
    (tmp_path / "plain.ndjson").write_text(json.dumps({"action_name": "click", "query_id": "q",
                                                       "event_attributes": {"object": {"object_id": "d"}}}) + "\n")
    for args in (["evaluate", "interleaving", str(tmp_path / "plain.ndjson")],
                 ["evaluate", "interleaving", str(tmp_path / "missing.ndjson")],
                 ["evaluate", "interleaving", str(tmp_path / "plain.ndjson"), "--propensity", "2,1"],
                 ["evaluate", "interleaving", str(tmp_path / "plain.ndjson"), "--propensity-clip", "0"],
                 ["query", "search", "x", "--index", "x", "--fields", "t", "--interleave", "onlyone", "--url", "http://127.0.0.1:9"],
                 ["query", "search", "x", "--index", "x", "--fields", "t", "--ubi", "--url", "http://127.0.0.1:9"]):
        r = run_cli(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr


# --------------------------------------------------------------------------- live

LIVE_INDEX, UBI_Q, UBI_E = "cranfield-test", "ubi-queries-interleaving-test", "ubi-events-interleaving-test"


@pytest.fixture(scope="module")
def live_model(ltr_cluster, cranfield_index, shipped_featureset, tmp_path_factory):
    """A LambdaMART trained on Cranfield's train split (logged live) and uploaded."""
    from ltr_toolkit.datasets import cranfield
    from ltr_toolkit.pipeline.train import load_model, train_from_files
    from ltr_toolkit.query.firststage import FirstStage
    from ltr_toolkit.serving.serving import Serving
    from ltr_toolkit.stores.model_store import upload
    conn, d = ltr_cluster.conn(), tmp_path_factory.mktemp("interleave")
    serving = Serving(LIVE_INDEX, FirstStage.from_fields(), 100)
    serving.log_candidates(conn, cranfield.split_judgments("train"), shipped_featureset, d / "train.txt")
    train_from_files(d / "train.txt", algo="lambdamart", output=d / "m.json")
    art, m = load_model(d / "m.json")
    return conn, serving, upload(conn, art, m, "interleave-lambdamart", shipped_featureset)["name"]


def test_live_interleaving_end_to_end(live_model, tmp_path):
    """Interleaved lists served by the node, their records and simulated clicks written to
    UBI indices on the node, credited by `ltr evaluate interleaving` exactly as simulated."""
    from ltr_toolkit.clicks.events import ubi
    from ltr_toolkit.clicks.simulate import sample_clicks
    from ltr_toolkit.datasets import cranfield
    conn, serving, name = live_model
    ubi.create_indices(conn, UBI_Q, UBI_E, recreate=True)
    jl = cranfield.split_judgments("test")
    qids = jl.judged_qids()
    rng = np.random.default_rng(7)
    docs, expect = [], {"a": 0, "b": 0, "won": [0, 0, 0], "at": np.zeros((2, 10))}
    for i in range(120):
        q = qids[i % len(qids)]
        hits = serving.interleave(conn, jl.query_params(q), "first-stage", name, 10, rng)
        assert {h["ranker"] for h in hits} <= {"first-stage", name} and len(hits) == 10
        ids, teams = [h["id"] for h in hits], "".join(h["team"] for h in hits)
        rec = interleaving.record(jl.queries[q], ids, teams, "first-stage", name, query_id=f"live-{i}")
        grade = np.array([[jl.grades.get((q, d), 0.0) for d in ids]])
        clicked = sample_clicks(grade, np.ones_like(grade, bool), UserModel(), rng)[0]
        docs.append((ubi.QUERIES, rec))
        docs += [(ubi.EVENTS, {"action_name": "click", "query_id": rec["query_id"], "timestamp": rec["timestamp"],
                               "event_attributes": {"object": {"object_id": d}, "position": {"ordinal": r + 1}}})
                 for r, d in enumerate(ids) if clicked[r]]
        ca, cb = sum(clicked[r] for r in range(10) if teams[r] == "a"), sum(clicked[r] for r in range(10) if teams[r] == "b")
        expect["a"] += ca
        expect["b"] += cb
        expect["won"][0 if ca > cb else 1 if ca == cb else 2] += 1
        expect["at"][[int(t == "b") for t in teams], np.arange(10)] += clicked      # clicks per team and rank
    ubi.write_documents(conn, docs, UBI_Q, UBI_E)
    r = run_cli("--url", conn.url, "query", "search", "wing flutter", "--fields", "title,abstract", "--index", LIVE_INDEX,
                "--interleave", f"first-stage,{name}", "--ubi", "--queries-index", UBI_Q)
    assert r.returncode == 0, r.stderr
    assert "first-stage" in r.stdout and name in r.stdout and "query_id" in r.stdout
    r = run_cli("--url", conn.url, "evaluate", "interleaving", "--queries-index", UBI_Q,
                "--events-index", UBI_E, "-o", str(tmp_path / "rep.json"))
    assert r.returncode == 0, r.stderr
    rep, = json.loads((tmp_path / "rep.json").read_text())["experiments"]
    assert rep["impressions"] == 121                       # the CLI's search: one more, no click
    assert (rep["clicks_a"], rep["clicks_b"]) == (expect["a"], expect["b"])
    assert [rep["wins_a"], rep["ties"] - 1, rep["wins_b"]] == expect["won"]
    assert (rep["a"], rep["b"]) == ("first-stage", name)
    d = rep["debiased"]                                     # PBM fitted on these 121 searches
    exam = np.array(d["examination"])
    assert d["impressions"] == 121 and exam[0] == 1.0 and np.all(exam >= 0.1)
    weighted = (expect["at"] / exam).sum(axis=1) / 121
    assert [d["credit_a"], d["credit_b"]] == pytest.approx(weighted, rel=1e-3)
    conn.client().indices.delete(index=f"{UBI_Q},{UBI_E}", ignore_unavailable=True)
