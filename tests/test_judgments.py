"""Judgment lists in three formats, malformed inputs, Cranfield, feature set files."""

from __future__ import annotations

import json

import pytest

from ltr_toolkit.data.judgments import format_ranklib, load_judgments, read_ranklib
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.errors import InputError
from ltr_toolkit.data.featuresets import load_featureset

RANKLIB = "# qid:1: wing flutter\n# qid:2: heat transfer\n4 qid:1 # 184\n0 qid:1 # 29\n3 qid:2 # 12\n"


def _same(a, b):
    assert a.queries == b.queries and a.grades == b.grades


def test_three_formats_one_model(tmp_path):
    (tmp_path / "j.txt").write_text(RANKLIB)
    (tmp_path / "q.tsv").write_text("1\twing flutter\n2\theat transfer\n")
    (tmp_path / "qrels").write_text("1 0 184 4\n1 0 29 0\n2 0 12 3\n")
    (tmp_path / "j.csv").write_text("qid,query,docid,grade\n1,wing flutter,184,4\n1,wing flutter,29,0\n2,heat transfer,12,3\n")
    rows = [{"qid": "1", "query": "wing flutter", "docid": "184", "grade": 4},
            {"qid": 1, "query": "wing flutter", "docid": 29, "grade": 0},
            {"qid": "2", "query": "heat transfer", "docid": "12", "grade": 3}]
    (tmp_path / "j.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    a = load_judgments(tmp_path / "j.txt")
    _same(a, load_judgments(tmp_path / "qrels", queries=tmp_path / "q.tsv"))
    _same(a, load_judgments(tmp_path / "j.csv"))
    _same(a, load_judgments(tmp_path / "j.jsonl"))
    (tmp_path / "again.txt").write_text(format_ranklib(a))
    _same(a, read_ranklib(tmp_path / "again.txt"))


def test_other_tools_files_read_as_shipped(tmp_path):
    """Elastic's learning-to-rank notebook ships its judgments as gzip'd TSV with
    query_id/doc_id columns; a semicolon CSV with "relevance" is read the same way."""
    import gzip
    tsv = ("query_id\tquery\tdoc_id\tgrade\nqid:1\twing flutter\t184\t4\n"
           "qid:1\twing flutter\t29\t0\nqid:2\theat transfer\t12\t3\n")
    (tmp_path / "j.tsv.gz").write_bytes(gzip.compress(tsv.encode()))
    (tmp_path / "j.csv").write_text("Query_ID;keywords;Doc_ID;relevance\nqid:1;wing flutter;184;4\n"
                                    "qid:1;wing flutter;29;0\nqid:2;heat transfer;12;3\n")
    a = load_judgments(tmp_path / "j.tsv.gz")
    assert a.queries == {"qid:1": "wing flutter", "qid:2": "heat transfer"}
    assert a.docs_of("qid:1") == [("184", 4.0), ("29", 0.0)]
    _same(a, load_judgments(tmp_path / "j.csv"))
    (tmp_path / "bad.tsv.gz").write_bytes(gzip.compress(tsv.encode())[:-9])
    with pytest.raises(InputError, match="damaged gzip"):
        load_judgments(tmp_path / "bad.tsv.gz")


def test_duplicates_reported_conflicts_refused(tmp_path):
    p = tmp_path / "d.txt"
    p.write_text(RANKLIB + "4 qid:1 # 184\n")
    jl = load_judgments(p)
    assert len(jl) == 3 and len(jl.duplicates) == 1 and "d.txt:6" in jl.duplicates[0]
    p.write_text(RANKLIB + "2 qid:1 # 184\n")
    with pytest.raises(InputError, match=r"d.txt:6: conflicting grades"):
        load_judgments(p)


MALFORMED = [
    ("a.txt", RANKLIB + "x qid:1 # 5\n", None, 6, "not a number"),
    ("b.txt", RANKLIB + "1 q1 # 5\n", None, 6, "qid:N"),
    ("c.txt", RANKLIB + "1 qid:1\n", None, 6, "docid"),
    ("d.txt", "3 qid:9 # 5\n", None, None, "no text"),
    ("e.csv", "qid,docid,grade\n1,5\n", None, 2, "columns"),
    ("f.csv", "query,doc\n1,2\n", None, 1, "header"),
    ("g.jsonl", '{"qid": 1, "docid": 2, "grade": 1, "query": "x"}\n{"qid": 1,\n', None, 2, "invalid JSON"),
    ("h.jsonl", '{"qid": 1, "docid": 2}\n', None, 1, "qid, docid, grade"),
    ("qrels", "1 0 5\n", "q.tsv", 1, "got 3 fields"),
    ("qrels2", "7 0 5 1\n", "q.tsv", 1, "not in q.tsv"),
    ("i.txt", "", None, None, "no judgments"),
]


@pytest.mark.parametrize("name,text,queries,line,fragment", MALFORMED)
def test_malformed_judgments_name_file_and_line(tmp_path, name, text, queries, line, fragment):
    p = tmp_path / name
    p.write_text(text)
    q = None
    if queries:
        q = tmp_path / queries
        q.write_text("1\twing flutter\n")
    with pytest.raises(InputError) as ei:
        load_judgments(p, queries=q)
    msg = str(ei.value)
    assert fragment in msg
    if line is not None:
        assert f"{name}:{line}:" in msg


@pytest.mark.parametrize("name,text,queries,line,fragment", MALFORMED[:4])
def test_malformed_judgments_cli_exit_2(tmp_path, cli, name, text, queries, line, fragment):
    p = tmp_path / name
    p.write_text(text)
    r = cli("judgments", "check", str(p))
    assert r.returncode == 2 and fragment in r.stderr and "Traceback" not in r.stderr


def test_cranfield_collection_and_split():
    docs = cranfield.documents()
    assert len(docs) == 1400 and docs[0]["id"] == "1" and docs[-1]["id"] == "1400"
    assert docs[0]["title"].startswith("experimental investigation")
    qs = cranfield.queries()
    assert len(qs) == 225 and qs["3"].startswith("what problems of heat conduction")
    jl = cranfield.judgments()
    assert len(jl) == 1837 and len({d for _, d in jl.grades}) == 924
    split = cranfield.split_qids()
    sizes = {k: len(v) for k, v in split.items()}
    assert sizes == {"train": 135, "valid": 45, "test": 45}
    assert set().union(*map(set, split.values())) == set(qs)
    assert cranfield.split_qids() == split  # fixed


def test_cli_writes_split(tmp_path, cli):
    out = tmp_path / "test.txt"
    r = cli("judgments", "cranfield", "--split", "test", "-o", str(out))
    assert r.returncode == 0, r.stderr
    jl = read_ranklib(out)
    assert sorted(jl.queries, key=int) == cranfield.split_qids()["test"]
    r = cli("judgments", "cranfield", "--split", "bogus", "-o", str(tmp_path / "x.txt"))
    assert r.returncode == 2 and not (tmp_path / "x.txt").exists()


def test_bundled_feature_set_is_valid():
    fs = load_featureset(cranfield.FEATURE_SET)
    names = [f["name"] for f in fs["features"]]
    assert fs["name"] == "cranfield" and len(set(names)) == len(names)
    assert {"first_stage_bm25", "neighbours_bm25"} <= set(names)


FS_BAD = [
    ('{"name": "x", "features": [\n  {"name": "a", "params": ["keywords"], "template": {"match": {"t": "{{keywords}}"}}},\n  {"name": "a", "params": ["keywords"], "template": {"match": {"t": "{{keywords}}"}}}\n]}', 3, "duplicate feature name"),
    ('{"name": "x", "features": [\n  {"name": "a", "params": ["keywords", "other"], "template": {"match": {"t": "{{keywords}}"}}}\n]}', 2, "not used"),
    ('{"name": "x", "features": [\n  {"name": "a", "params": [], "template": {"match": {"t": "{{keywords}}"}}}\n]}', 2, "undeclared"),
    ('{"name": "x", "features": [\n  {"name": "a", "params": ["k"]\n  "template": 1}\n]}', 3, "invalid JSON"),
    ('{"name": "x", "features": []}', 1, "non-empty"),
    ('{"features": [{"name": "a", "template": {}}]}', 1, "name"),
]


@pytest.mark.parametrize("text,line,fragment", FS_BAD)
def test_malformed_feature_sets(tmp_path, cli, text, line, fragment):
    p = tmp_path / "fs.json"
    p.write_text(text)
    with pytest.raises(InputError) as ei:
        load_featureset(p)
    assert f"fs.json:{line}:" in str(ei.value) and fragment in str(ei.value)
    r = cli("--url", "http://127.0.0.1:9", "featureset", "upload", str(p))
    assert r.returncode == 2 and f"fs.json:{line}:" in r.stderr  # checked before any request
