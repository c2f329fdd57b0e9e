"""Where users' data enters (issue #49): a byte-order mark, half grades, an output's
folders on failure, the suite's markers. Offline."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from ltr_toolkit.clicks.judging.grades import to_grades
from ltr_toolkit.clicks.judging.clickmodels import Estimates
from ltr_toolkit.data.judgments import load_judgments
from ltr_toolkit.cli import main

from conftest import ROOT


def test_a_csv_with_a_byte_order_mark_is_read(tmp_path):
    """Excel's "CSV UTF-8" starts with a BOM: the header is still qid, query, docid, grade."""
    path = tmp_path / "judges.csv"
    path.write_bytes(b"\xef\xbb\xbfqid,query,docid,grade\n1,wing flutter,d1,2\n1,wing flutter,d2,0\n")
    jl = load_judgments(path)
    assert jl.grades == {("1", "d1"): 2.0, ("1", "d2"): 0.0} and jl.queries == {"1": "wing flutter"}


def test_half_grades_round_up():
    """0.125 and 0.375 of 4 levels are grades 1 and 2 (half to even made them 0 and 2)."""
    x = np.array([0.125, 0.375, 0.625, 0.0, 1.0])
    n = np.zeros(len(x), dtype=int)
    est = Estimates(model="pbm", query=n, doc=n, impressions=n + 10, clicks=n, estimate=x)
    assert to_grades(est, "levels", 4).tolist() == [1.0, 2.0, 3.0, 0.0, 4.0]


def test_a_failed_command_leaves_no_folder(tmp_path, capsys):
    """The output's folders are made when it is written: a command refused before leaves
    none behind."""
    out = tmp_path / "a" / "b" / "scores.txt"
    code = main(["predict", str(tmp_path / "missing-model.json"), str(tmp_path / "missing.txt"),
                 "-o", str(out)])
    assert code == 2 and "cannot read" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()


def test_an_output_under_a_file_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    code = main(["judgments", "cranfield", "-o", str(tmp_path / "f" / "j.txt")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "not a folder" in err


def test_not_cluster_selects_no_node_test():
    """The markers come from the fixtures a test uses (one hook): every test that reaches a
    node fixture is deselected by -m "not cluster"."""
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "not cluster",
                        "--setup-plan", "tests/test_clicks.py", "tests/test_evaluate.py"],
                       capture_output=True, text=True, cwd=str(ROOT), timeout=300)
    assert r.returncode in (0, 5), r.stdout + r.stderr
    setups = [ln for ln in r.stdout.splitlines() if "SETUP" in ln]
    assert setups and not [ln for ln in setups if any(
        f" {name}" in ln for name in ("cluster", "ltr_cluster", "es_cluster", "engine_cluster",
                                      "cranfield_index"))], setups


# ------------------------------------------------ item 1: what an absent feature means

def _logged_rows(path, seed, sidecar=True, header=True):
    """Logged data as the toolkit writes it: its header, rows with feature 2 absent (did
    not match) on part of them, where absence tells the grade apart; its sidecar beside."""
    from ltr_toolkit.data.logged import MISSING_ABSENT, row_text
    rng = np.random.default_rng(seed)
    rows = ["# ltr-toolkit logged: missing=absent features=3\n"] if header else []
    for q in range(30):
        for d in range(8):
            g = int(rng.integers(0, 3))
            absent = g == 0 and rng.random() < 0.8 or rng.random() < 0.15
            values = [rng.random() + g * 0.2, None if absent else 1.0 + rng.random() + 0.3 * g,
                      rng.random()]
            rows.append(row_text(g, str(q), values, f"d{q}-{d}"))
    path.write_text("".join(rows))
    if sidecar:
        path.with_name(path.name + ".json").write_text(json.dumps(
            {"featureset": "fs", "feature_names": ["title", "year", "body"],
             "missing_features": MISSING_ABSENT}))
    return path


_SETTINGS = {"lambdamart": ("--trees", "20", "--depth", "3"),
             "linear": ("--epochs", "3"),
             "lambdarank-nn": ("--epochs", "3", "--hidden", "8")}


@pytest.mark.parametrize("algo", sorted(_SETTINGS))
def test_absent_features_mean_the_same_without_the_sidecar(tmp_path, cli, algo):
    """The same logged bytes with and without their sidecar (and a copy of the rows
    without the header line, which takes the training data's or the model's rule) train
    to the same metrics and predict the same scores."""
    withs, without = tmp_path / "with", tmp_path / "without"
    withs.mkdir(), without.mkdir()
    for name, seed in (("train.txt", 0), ("valid.txt", 1)):
        _logged_rows(withs / name, seed)
        (without / name).write_bytes((withs / name).read_bytes())
    headless = tmp_path / "tail.txt"          # `tail -n +2 valid.txt`, no sidecar
    headless.write_text("".join((withs / "valid.txt").read_text().splitlines(True)[1:]))
    result = {}
    for d in (withs, without):
        model = d / "m.json"
        r = cli("train", str(d / "train.txt"), "--algo", algo, *_SETTINGS[algo], "--valid",
                str(d / "valid.txt"), "--test", str(headless), "-o", str(model))
        assert r.returncode == 0, r.stderr
        art = json.loads(model.read_text())
        assert art["missing_features"] == "absent"
        scores = []
        for data in (d / "valid.txt", headless):
            r = cli("predict", str(model), str(data), "-o", str(d / "s.txt"))
            assert r.returncode == 0, r.stderr
            scores.append(np.loadtxt(d / "s.txt"))
        np.testing.assert_array_equal(scores[0], scores[1])
        result[d] = art["metrics"], scores[0]
    (m1, s1), (m2, s2) = result[withs], result[without]
    assert m1 == m2 and m1["valid"] == m1["test"]
    np.testing.assert_array_equal(s1, s2)


def test_a_file_whose_rule_disagrees_is_refused_in_one_line(tmp_path, cli):
    """A file saying absent features are 0.0 with a model trained on them as missing, or a
    header and a sidecar that disagree: one line, exit 2, nothing written."""
    train = _logged_rows(tmp_path / "train.txt", 0)
    model = tmp_path / "m.json"
    assert cli("train", str(train), "--algo", "linear", "--epochs", "2",
               "-o", str(model)).returncode == 0
    zero = tmp_path / "zero.txt"
    zero.write_text(train.read_text().replace("missing=absent", "missing=zero"))
    torn = tmp_path / "torn.txt"
    torn.write_text(zero.read_text())
    torn.with_name("torn.txt.json").write_text(json.dumps({"missing_features": "absent"}))
    out = tmp_path / "s.txt"
    for data, why in ((zero, "zero.txt says an absent feature is 0.0, "),
                      (torn, "its header says an absent feature is 0.0, its sidecar")):
        for args in (("predict", str(model), str(data), "-o", str(out)),
                     ("train", str(train), "--algo", "linear", "--epochs", "2", "--valid",
                      str(data), "-o", str(out))):
            r = cli(*args)
            assert r.returncode == 2 and why in r.stderr, r.stderr
            assert len(r.stderr.strip().splitlines()) == 1 and not out.exists()


def test_the_header_is_read_by_every_parse_path(tmp_path):
    """The header is a comment line: the reference, NumPy and numba paths, and a logged
    file's `head`, read it; features=N sizes a file whose last feature is absent."""
    from ltr_toolkit.data import svmlight as S
    from ltr_toolkit.data.svmlight_fast import fast_chunk
    from ltr_toolkit.data.svmlight_jit import jit_chunk
    path = _logged_rows(tmp_path / "f.txt", 0, sidecar=False)
    path.write_text(path.read_text().replace(" 3:", " 4:").replace("features=3", "features=5"))
    ds = S.load_logged(path)
    assert ds.n_features == 5 and np.isnan(ds.X[:, 4]).all() and np.isnan(ds.X[:, 1]).any()
    buf = path.read_bytes()
    for parse in (lambda b: fast_chunk(memoryview(bytearray(b)), 5, np.nan),
                  lambda b: jit_chunk(memoryview(bytearray(b)), 5, np.nan, True),
                  lambda b: S._slow_chunk(b, 5, np.nan)):
        part = parse(buf)
        np.testing.assert_array_equal(part.block, ds.X[:, :part.block.shape[1]])


# ----------------------------------------------------------- item 5: sidecars checked

@pytest.mark.parametrize("side, why", [
    ("[]", "sidecar is a JSON list, expected an object"),
    ("[1, 2]", "sidecar is a JSON list, expected an object"),
    ('{"feature_names": "ab"}', "sidecar's feature_names is \"ab\": expected a list of strings"),
    ('{"feature_names": ["a", 2]}', "sidecar's feature_names is [\"a\", 2]: expected a list of strings"),
    ('{"missing_features": "nan"}', "sidecar's missing_features is \"nan\": expected 'absent' or 'zero'"),
    ('{"rows": "12"}', "sidecar's rows is \"12\": expected a whole number"),
])
def test_a_sidecar_that_is_not_one_is_refused_in_one_line(tmp_path, cli, side, why):
    data = tmp_path / "d.txt"
    data.write_text("1 qid:1 1:0.5 # a\n0 qid:1 1:0.1 # b\n")
    (tmp_path / "d.txt.json").write_text(side)
    out = tmp_path / "m.json"
    r = cli("train", str(data), "--algo", "linear", "--epochs", "1", "-o", str(out))
    assert r.returncode == 2 and f"d.txt.json: {why}" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not out.exists()


# ------------------------------------------------- item 8: numbers as the format writes

@pytest.mark.parametrize("bad, why", [
    ("1_0 qid:1 1:0.5", "grade '1_0' is not a number"),
    ("1 qid:1 1:1_0", "bad feature value in '1:1_0'"),
    ("1 qid:1 1:\u0661", "bad feature value in '1:\u0661'"),
    ("\u0661 qid:1 1:0.5", "grade '\u0661' is not a number"),
    ("1 qid:1 \u0661:0.5", "bad feature token '\u0661:0.5'"),
])
def test_numbers_other_readers_refuse_are_refused_at_their_line(tmp_path, cli, bad, why):
    """`1_0` and other scripts' digits are numbers to float(), not to xgboost or
    scikit-learn: every parse path refuses them, at their file:line."""
    from ltr_toolkit.data import svmlight as S
    from ltr_toolkit.data.svmlight_fast import fast_chunk
    from ltr_toolkit.data.svmlight_jit import jit_chunk
    data = tmp_path / "d.txt"
    data.write_text(f"2 qid:1 1:0.25 # a\n{bad} # b\n")
    buf = data.read_bytes()
    assert fast_chunk(memoryview(bytearray(buf)), None, 0.0) is None
    assert jit_chunk(memoryview(bytearray(buf)), None, 0.0, True) is None
    out = tmp_path / "m.json"
    r = cli("train", str(data), "--algo", "linear", "--epochs", "1", "-o", str(out))
    assert r.returncode == 2 and f"d.txt:2: {why}" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not out.exists()
    assert S.load_svmlight(tmp_path.joinpath("ok.txt").write_text("1 qid:1 1:1e3 2:-.5 3:+2.\n")
                           and tmp_path / "ok.txt").X.tolist() == [[1000.0, -0.5, 2.0]]


# ------------------------------------- item 2: identifiers through every format

#: product ids a catalogue has, and a query text with a line separator in it
IDS = ("SKU 123", "SKU 456", "a\tb", "50%25 off")
TEXTS = ("wing\u2028flutter", "plain query")


def _id_events(path):
    """UBI events: every query shows every id, ten times; clicks that give each id of a
    query its own grade."""
    events = []
    for t, text in enumerate(TEXTS):
        for s in range(10):
            for pos, doc in enumerate(IDS):
                ev = {"query_id": f"s{t}-{s}", "user_query": text,
                      "event_attributes": {"object": {"object_id": doc},
                                           "position": {"ordinal": pos}}}
                events.append({"action_name": "impression", **ev})
                if s < 10 - 3 * pos:
                    events.append({"action_name": "click", **ev})
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def test_ids_with_spaces_round_trip_every_judgment_format(tmp_path, cli):
    """`ltr judgments clicks` in every output format, read back: every id distinct, the
    query text whole; the text formats percent-escape them (data/ids.py)."""
    from ltr_toolkit.clicks.judging.output import OUTPUT_FORMATS
    events = _id_events(tmp_path / "ev.ndjson")
    got = {}
    for fmt in OUTPUT_FORMATS:
        out = tmp_path / f"j.{fmt}"
        r = cli("judgments", "clicks", str(events), "-o", str(out), "--output-format", fmt,
                "--min-impressions", "1")
        assert r.returncode == 0, r.stderr
        jl = load_judgments(out, fmt, queries=tmp_path / f"j.{fmt}.queries" if fmt == "trec" else None)
        got[fmt] = {(jl.queries[q], d): g for (q, d), g in jl.grades.items()}
        assert not jl.duplicates
    assert len(got["csv"]) == len(IDS) * len(TEXTS)
    assert {d for _, d in got["csv"]} == set(IDS) and {t for t, _ in got["csv"]} == set(TEXTS)
    for fmt in OUTPUT_FORMATS:
        assert got[fmt] == got["csv"], fmt
    assert "SKU%20123" in (tmp_path / "j.ranklib").read_text()


def test_csv_and_jsonl_read_whole_with_unusual_line_breaks(tmp_path):
    """A query text with U+2028, NEL or a form feed (csv.writer does not quote them):
    the toolkit's CSV and JSONL read back whole."""
    import csv
    texts = ["a\u2028b", "c\x85d", "e\x0cf", "g\u2029h"]
    with open(tmp_path / "j.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["qid", "query", "docid", "grade"])
        w.writerows([f"q{i}", t, f"SKU {i}", 1] for i, t in enumerate(texts))
    (tmp_path / "j.jsonl").write_text("".join(json.dumps(
        {"qid": f"q{i}", "query": t, "docid": f"SKU {i}", "grade": 1}, ensure_ascii=False) + "\n"
        for i, t in enumerate(texts)), encoding="utf-8")
    for name in ("j.csv", "j.jsonl"):
        jl = load_judgments(tmp_path / name)
        assert list(jl.queries.values()) == texts and {d for _, d in jl.grades} == {
            f"SKU {i}" for i in range(4)}


def test_logged_rows_keep_ids_through_click_features(tmp_path, cli):
    """Logged rows of ids with spaces (as `ltr log` writes them), read by every parse path
    and joined with the clicks by `ltr judgments click-features`: one row per id."""
    from ltr_toolkit.clicks.judging.output import qid_for
    from ltr_toolkit.data import svmlight as S
    from ltr_toolkit.data.logged import header_line, row_key, row_text
    rows = [header_line(2)] + [row_text(0, qid_for(t), [float(i), 1.0], d)
                               for t in TEXTS for i, d in enumerate(IDS)]
    logged = tmp_path / "logged.txt"
    logged.write_text("".join(rows))
    keys = [row_key(line, True)[1] for line in rows[1:]]        # after the header: escaped
    assert [d for _, d in keys] == list(IDS) * len(TEXTS)
    ds = S.load_logged(logged)
    assert list(ds.doc_ids) == list(IDS) * len(TEXTS)
    from ltr_toolkit.data.svmlight_jit import jit_chunk
    buf = logged.read_bytes()
    for jit in (None, jit_chunk):                   # NumPy, numba
        part = S._chunk_work(memoryview(bytearray(buf)), 2, np.nan, jit, None, True)[0]
        assert list(part.doc_ids) == list(IDS) * 2
    assert list(S._slow_chunk(buf, 2, np.nan).doc_ids) == [S.escape_id(d) for d in IDS] * 2
    out = tmp_path / "clicks.txt"
    r = cli("judgments", "click-features", str(logged), str(_id_events(tmp_path / "e.ndjson")),
            "-o", str(out))
    assert r.returncode == 0, r.stderr
    joined = S.load_logged(out)
    assert sorted(set(joined.doc_ids)) == sorted(IDS) and joined.n_docs == len(IDS) * 20


def test_ids_with_spaces_end_to_end_on_the_node(ltr_cluster, cli, tmp_path):
    """UBI events over "SKU 123", "SKU 456", "a<TAB>b" and a query text with U+2028:
    `ltr judgments clicks`, `ltr log`, `ltr judgments click-features` and `ltr evaluate
    models` keep every id distinct, live on the OpenSearch node."""
    from ltr_toolkit.data.svmlight import load_logged
    conn = ltr_cluster.conn()
    client, index = conn.client(), "integrity-ids"
    client.indices.delete(index=index, ignore_unavailable=True)
    client.indices.create(index=index, body={"settings": {"number_of_shards": 1},
                                             "mappings": {"properties": {"title": {"type": "text"}}}})
    for i, doc in enumerate(IDS):
        client.index(index=index, id=doc, body={"title": "wing flutter plain query " + "x " * i})
    client.indices.refresh(index=index)
    base = ("--url", ltr_cluster.url)
    events, judged = _id_events(tmp_path / "ev.ndjson"), tmp_path / "j.txt"
    try:
        r = cli("judgments", "clicks", str(events), "-o", str(judged), "--min-impressions", "1")
        assert r.returncode == 0, r.stderr
        assert cli(*base, "featureset", "init", "--index", index, "-o", str(tmp_path / "fs.json"),
                   "--name", index).returncode == 0
        cli(*base, "store", "init")
        r = cli(*base, "featureset", "upload", str(tmp_path / "fs.json"), "--index", index)
        assert r.returncode == 0, r.stderr
        fs = r.stdout.split("feature set ")[1].split()[0]
        logged = tmp_path / "c.txt"
        r = cli(*base, "log", str(judged), "--featureset", fs, "--index", index,
                "--fields", "title", "-o", str(logged))
        assert r.returncode == 0, r.stderr
        ds = load_logged(logged)
        assert sorted(ds.doc_ids) == sorted(IDS * len(TEXTS))
        assert json.loads((tmp_path / "c.txt.json").read_text())["missing_docs"] == []
        out = tmp_path / "clicks.txt"
        r = cli("judgments", "click-features", str(logged), str(events), "-o", str(out))
        assert r.returncode == 0, r.stderr
        assert sorted(set(load_logged(out).doc_ids)) == sorted(IDS)
        report = tmp_path / "r.json"
        r = cli(*base, "evaluate", "models", str(judged), "--fields", "title", "--index", index,
                "-o", str(report))
        assert r.returncode == 0, r.stderr
        rep = json.loads(report.read_text())
        assert rep["queries"] == len(TEXTS) and rep["systems"]["bm25"]["ap@10"] == 1.0, rep
        assert all(sorted(top) == sorted(IDS) for top in rep["top"]["bm25"].values())
    finally:
        client.indices.delete(index=index, ignore_unavailable=True)
