"""The CLI's contract under bad input, through the CLI's entry point (in this process; a
sample of the cases also as subprocesses, which must answer the same): every case exits 2
with ONE line on stderr naming the cause, no traceback, and leaves no output file behind. Over a hundred cases: usage, data files, judgments, feature sets, model files,
options, URLs/TLS settings, output paths, job files."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from conftest import run_cli, run_cli_here

GOOD_DATA = "".join(f"{g} qid:{q} 1:{0.1 * d + q} 2:{d % 3} 3:{g * 0.5 + d * 0.01} # d{q}-{d}\n"
                    for q in range(1, 5) for d, g in enumerate([2, 1, 0, 0, 1]))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    f = {}

    def put(name, text, mode="w"):
        p = d / name
        if mode == "wb":
            p.write_bytes(text)
        else:
            p.write_text(text)
        f[name] = p
        return p
    put("good.txt", GOOD_DATA)
    # data files
    put("nan.txt", GOOD_DATA + "1 qid:9 1:nan 2:1 # x\n")
    put("inf.txt", GOOD_DATA + "1 qid:9 1:inf # x\n")
    put("huge.txt", GOOD_DATA + "1 qid:9 1:1e400 # x\n")
    put("bigid.txt", GOOD_DATA + "1 qid:9 2000000000:1 # x\n")
    put("floatid.txt", GOOD_DATA + "1 qid:9 1e23:1 # x\n")
    put("zeroid.txt", GOOD_DATA + "1 qid:9 0:1 # x\n")
    put("negid.txt", GOOD_DATA + "1 qid:9 -3:1 # x\n")
    put("dupid.txt", GOOD_DATA + "1 qid:9 1:1 1:2 # x\n")
    put("noqid.txt", GOOD_DATA + "1 1:1 2:1\n")
    put("emptyqid.txt", GOOD_DATA + "1 qid: 1:1\n")
    put("badtok.txt", GOOD_DATA + "1 qid:9 1:zz\n")
    put("badgrade.txt", GOOD_DATA + "high qid:9 1:1\n")
    put("colon.txt", GOOD_DATA + "1 qid:9 1::2\n")
    put("neggrade.txt", GOOD_DATA + "-3 qid:9 1:1 # x\n")
    put("negmixed.txt", GOOD_DATA + "-1 qid:1 1:1 # y\n")     # query 1 again: rows regrouped
    put("empty.txt", "")
    put("comments.txt", "# nothing but a comment\n")
    put("latin1.txt", "1 qid:1 1:0.5 # caf\xe9\n".encode("latin-1"), "wb")
    put("binary.txt", b"\x00\x01\x02\xff\xfe", "wb")
    # judgments
    put("j.txt", "# qid:1: wing flutter\n2 qid:1 # 12\n")
    put("j_badgrade.txt", "# qid:1: wing flutter\nx qid:1 # 12\n")
    put("j_neg.txt", "# qid:1: wing flutter\n-1 qid:1 # 12\n")
    put("j_conflict.txt", "# qid:1: wing flutter\n2 qid:1 # 12\n1 qid:1 # 12\n")
    put("j_notext.txt", "2 qid:1 # 12\n")
    put("j_nodoc.txt", "# qid:1: wing\n2 qid:1\n")
    put("j_twotext.txt", "# qid:1: wing\n# qid:1: flutter\n2 qid:1 # 12\n")
    put("j_empty.txt", "")
    put("j.csv", "qid,query,docid,grade\n1,wing,12,2\n")
    put("j_cols.csv", "qid,query,docid\n1,wing,12\n")
    put("j_short.csv", "qid,query,docid,grade\n1,wing,12\n")
    put("j_badparam.csv", "qid,query,docid,grade,my param\n1,wing,12,2,x\n")
    put("j_params.csv", "qid,query,docid,grade,cat\n1,wing,12,2,a\n1,wing,13,1,b\n")
    put("j_inf.csv", "qid,query,docid,grade\n1,wing,12,inf\n")
    put("j.jsonl", '{"qid": 1, "query": "wing", "docid": "12", "grade": 2}\n{bad json}\n')
    put("j_keys.jsonl", '{"qid": 1, "query": "wing", "grade": 2}\n')
    put("j_list.jsonl", '[1, 2, 3]\n')
    put("qrels.trec", "1 0 12 2\n")
    put("qrels_bad.trec", "1 0 12\n")
    put("queries.tsv", "2\tother query\n")
    put("j_bin.txt", b"\xff\xfe\x00", "wb")
    # feature sets
    put("fs_json.json", '{"name": "x", "features": [\n  {"name": "a",\n}')
    put("fs_dup.json", '{"name": "x", "features": [\n {"name": "a", "params": ["keywords"], "template": {"match": {"t": "{{keywords}}"}}},\n {"name": "a", "params": ["keywords"], "template": {"match": {"t": "{{keywords}}"}}}\n]}')
    put("fs_undeclared.json", '{"name": "x", "features": [\n {"name": "a", "params": [], "template": {"match": {"t": "{{keywords}}"}}}\n]}')
    put("fs_unused.json", '{"name": "x", "features": [\n {"name": "a", "params": ["keywords", "zzz"], "template": {"match": {"t": "{{keywords}}"}}}\n]}')
    put("fs_empty.json", '{"name": "x", "features": []}')
    put("fs_noname.json", '{"features": [{"name": "a", "template": {}}]}')
    put("fs_list.json", '[1, 2]')
    # first-stage templates
    put("t_json.json", '{"query": {"match": {"title": "{{keywords}}"}')
    put("t_shape.json", '{"match": {"title": "{{keywords}}"}}')
    put("t_novar.json", '{"query": {"match_all": {}}}')
    put("t_section.json", '{"query": {"match": {"title": "{{#keywords}}x{{/keywords}}"}}}')
    # model files
    put("m_list.json", "[1, 2]")
    put("m_text.json", "not json at all")
    put("m_format.json", json.dumps({"format": "something-else"}))
    put("m_broken.json", json.dumps({"format": "ltr-toolkit/model@1", "algorithm": "linear"}))
    put("m_algo.json", json.dumps({"format": "ltr-toolkit/model@1", "algorithm": "svm", "model": {}}))
    # job files
    put("job_toml.toml", "[logging\n")
    put("job_key.toml", '[logging]\nfeatureset = "x"\nindex = "i"\njudgments = "j"\nnope = 1\n[output]\ndirectory = "o"\n')
    put("job_secret.toml", '[cluster]\nurl = "http://u:pw@h:9200"\n[logging]\nfeatureset = "x"\nindex = "i"\njudgments = "j"\n[output]\ndirectory = "o"\n')
    put("job_missing.toml", '[logging]\nfeatureset = "x"\n')
    put("job_batch.toml", '[logging]\nfeatureset = "x"\nindex = "i"\njudgments = "j"\nbatch = -1\n[output]\ndirectory = "o"\n')
    put("job_section.toml", '[surprise]\n')
    put("job_fields.toml", '[logging]\nfeatureset = "x"\nindex = "i"\njudgments = "j"\nfields = "title"\n[output]\ndirectory = "o"\n')
    put("job_both.toml", '[logging]\nfeatureset = "x"\nindex = "i"\njudgments = "j"\nfields = ["t"]\nfirst_stage = "t.json"\n[output]\ndirectory = "o"\n')
    f["dir"] = d / "a-directory"
    f["dir"].mkdir()
    f["missing"] = d / "does-not-exist.txt"
    f["out"] = d / "out"
    f["out"].mkdir()
    # a real model to exercise option checks of predict/upload
    r = run_cli("train", str(f["good.txt"]), "--algo", "linear", "--epochs", "2", "-o", str(d / "model.json"))
    assert r.returncode == 0, r.stderr
    f["model.json"] = d / "model.json"
    return f


def _cases(f):
    closed = f"http://127.0.0.1:{_closed_port()}"
    o = f["out"]
    good, model, j = str(f["good.txt"]), str(f["model.json"]), str(f["j.txt"])
    C = []

    def case(args, fragment, output=None, env=None):
        C.append((args, fragment, output, env))

    # ---------------------------------------------------------------- usage
    case(["frobnicate"], "No such command")
    case(["train", good], "Missing option '-o'")
    case(["train"], "Missing argument")
    case(["predict", model], "Missing argument")
    case(["cluster", "frob"], "No such command")
    case(["store", "drop"], "pass --yes")
    case(["--nope", "store", "list"], "No such option")
    case(["train", good, "-o", str(o / "m1.json"), "--bogus"], "No such option", o / "m1.json")
    for opt, val, frag in [("--epochs", "abc", "--epochs"), ("--epochs", "-5", "--epochs"),
                           ("--epochs", "0", "--epochs"), ("--trees", "-1", "--trees"),
                           ("--trees", "0", "--trees"), ("--depth", "-1", "--depth"),
                           ("--depth", "0", "--depth"), ("--depth", "99", "--depth"),
                           ("--cutoff", "0", "--cutoff"), ("--cutoff", "-3", "--cutoff"), ("--patience", "0", "--patience"),
                           ("--algo", "svm", "--algo"), ("--optimizer", "rmsprop", "--optimizer"),
                           ("--hidden", "64,x", "--hidden"), ("--hidden", "0", "--hidden"),
                           ("--truncation", "0", "--truncation"), ("--truncation", "top", "--truncation"),
                           ("--lr", "-0.1", "learning rate"), ("--lr", "0", "learning rate"),
                           ("--lr", "nan", "learning rate"), ("--sigma", "0", "sigma"),
                           ("--sigma", "-1", "sigma"), ("--seed", "x", "--seed")]:
        out = o / f"m-{opt.strip('-')}-{val}.json"
        case(["train", good, "-o", str(out), opt, val], frag, out)
    # ---------------------------------------------------------------- data files
    for name, frag in [("nan.txt", "must be finite"), ("inf.txt", "must be finite"),
                       ("huge.txt", "must be finite"), ("bigid.txt", ""), ("floatid.txt", ""),
                       ("zeroid.txt", ""), ("negid.txt", ""), ("dupid.txt", ""),
                       ("noqid.txt", "qid"), ("emptyqid.txt", "qid"), ("badtok.txt", "1:zz"),
                       ("badgrade.txt", "'high'"), ("colon.txt", ""), ("latin1.txt", "UTF-8"),
                       ("binary.txt", "")]:
        path = str(f[name])
        out = o / f"t-{name}.json"
        case(["train", path, "-o", str(out)], f"{name}:" + ("" if not frag else ""), out)
        if frag:
            C[-1] = (C[-1][0], frag, out, None)
        out2 = o / f"p-{name}.txt"
        case(["predict", model, path, "-o", str(out2)], name, out2)
    case(["train", str(f["neggrade.txt"]), "-o", str(o / "ng.json")], "neggrade.txt:21: grade -3 is negative", o / "ng.json")
    case(["train", str(f["negmixed.txt"]), "-o", str(o / "nm.json")], "negmixed.txt:21: grade -1", o / "nm.json")
    case(["train", good, "--valid", str(f["neggrade.txt"]), "-o", str(o / "nv.json")], "neggrade.txt:21", o / "nv.json")
    for algo in ("lambdamart", "linear"):
        case(["train", good, "--algo", algo, "--patience", "5", "-o", str(o / f"pa-{algo}.json")],
             "--patience needs --valid", o / f"pa-{algo}.json")
    case(["train", str(f["empty.txt"]), "-o", str(o / "e.json")], "no data rows", o / "e.json")
    case(["train", str(f["comments.txt"]), "-o", str(o / "c.json")], "no data rows", o / "c.json")
    case(["train", str(f["missing"]), "-o", str(o / "x.json")], "cannot read", o / "x.json")
    case(["train", str(f["dir"]), "-o", str(o / "y.json")], "cannot read", o / "y.json")
    case(["train", good, "--valid", str(f["missing"]), "-o", str(o / "v.json")], "cannot read", o / "v.json")
    case(["train", good, "--valid", str(f["bigid.txt"]), "-o", str(o / "v2.json")], "bigid.txt", o / "v2.json")
    case(["predict", model, str(f["missing"]), "-o", str(o / "p.txt")], "cannot read", o / "p.txt")
    # ---------------------------------------------------------------- judgments
    for name, frag in [("j_badgrade.txt", "j_badgrade.txt:2"), ("j_neg.txt", "negative"),
                       ("j_conflict.txt", "conflicting"), ("j_notext.txt", "no text"),
                       ("j_nodoc.txt", "j_nodoc.txt:2"), ("j_twotext.txt", "two texts"),
                       ("j_empty.txt", "no judgments"), ("j_cols.csv", "header"),
                       ("j_short.csv", "j_short.csv:2"), ("j_badparam.csv", "my param"),
                       ("j_params.csv", "two sets of parameters"), ("j_inf.csv", "not finite"),
                       ("j.jsonl", "j.jsonl:2"), ("j_keys.jsonl", "j_keys.jsonl:1"),
                       ("j_list.jsonl", "j_list.jsonl:1"), ("j_bin.txt", "UTF-8")]:
        case(["judgments", "check", str(f[name])], frag)
        out = o / f"log-{name}.txt"
        case(["--url", closed, "log", str(f[name]), "--featureset", "x", "-o", str(out), "--index", "x",
              "--fields", "title"], frag, out)
    case(["judgments", "check", str(f["qrels.trec"])], "")   # qrels read as ranklib: no query text
    case(["judgments", "check", str(f["qrels.trec"]), "--input-format", "trec"], "queries file")
    case(["judgments", "check", str(f["qrels.trec"]), "--queries", str(f["queries.tsv"])], "not in")
    case(["judgments", "check", str(f["qrels_bad.trec"]), "--queries", str(f["queries.tsv"])], "qrels_bad.trec:1")
    case(["judgments", "check", j, "--input-format", "xml"], "--input-format")
    case(["judgments", "check", str(f["missing"])], "cannot read")
    case(["judgments", "cranfield", "--split", "bogus", "-o", str(o / "jc.txt")], "--split", o / "jc.txt")
    # ---------------------------------------------------------------- feature sets
    for name, frag in [("fs_json.json", "fs_json.json:"), ("fs_dup.json", "duplicate"),
                       ("fs_undeclared.json", "undeclared"), ("fs_unused.json", "not used"),
                       ("fs_empty.json", "non-empty"), ("fs_noname.json", "name"),
                       ("fs_list.json", "fs_list.json")]:
        case(["--url", closed, "featureset", "upload", str(f[name])], frag)
    case(["--url", closed, "featureset", "upload", str(f["missing"])], "cannot read")
    # ---------------------------------------------------------------- first-stage templates
    for name, frag in [("t_json.json", "invalid JSON"), ("t_shape.json", '{"query"'),
                       ("t_novar.json", "no {{variable}}"), ("t_section.json", "sections")]:
        case(["--url", closed, "query", "search", "x", "--index", "x", "--first-stage", str(f[name])], frag)
    case(["--url", closed, "query", "search", "x", "--index", "x", "--first-stage", str(f["missing"])], "cannot read")
    case(["--url", closed, "query", "search", "x", "--index", "x", "--fields", ","], "at least one field")
    case(["--url", closed, "query", "search", "x", "--index", "x", "--fields", "a", "--first-stage", str(f["t_novar.json"])], "")
    case(["--url", closed, "query", "search", "x", "--index", "x", "--fields", "t", "--param", "novalue"], "NAME=VALUE")
    case(["--url", closed, "query", "search", "x", "--index", "x", "--statistics", "global"], "--statistics")
    case(["--url", closed, "query", "search", "x", "--index", "x"], "--fields")
    case(["--url", closed, "query", "search", "x"], "--index")
    # ---------------------------------------------------------------- model files
    for name, frag in [("m_list.json", "not an ltr-toolkit model"), ("m_text.json", "invalid JSON"),
                       ("m_format.json", "not an ltr-toolkit model"), ("m_broken.json", "broken model"),
                       ("m_algo.json", "svm")]:
        out = o / f"pm-{name}.txt"
        case(["predict", str(f[name]), good, "-o", str(out)], frag, out)
        case(["--url", closed, "model", "upload", str(f[name]), "--name", "m"], frag)
    case(["predict", str(f["missing"]), good, "-o", str(o / "pm.txt")], "cannot read", o / "pm.txt")
    # ---------------------------------------------------------------- options, URLs, TLS
    for url, frag in [("ftp://x:21", "not an http(s) URL"), ("http://127.0.0.1:99999", "out of range"),
                      ("not a url", "not an http(s) URL"), ("http://", "not an http(s) URL"),
                      ("http://127.0.0.1:abc", "not a usable URL"), (closed, "no cluster answers")]:
        case(["--url", url, "store", "list"], frag)
        case(["store", "list"], frag, None, {"LTR_URL": url})
    case(["--timeout", "0", "store", "list"], "--timeout")
    case(["--timeout", "-1", "store", "list"], "--timeout")
    case(["--timeout", "x", "store", "list"], "--timeout")
    case(["--url", "https://127.0.0.1:1", "--ca-certs", str(f["missing"]), "store", "list"], "")
    case(["--url", closed, "evaluate", "models", j, "--index", "x", "--cutoff", "0"], "--cutoff")
    case(["--url", closed, "evaluate", "models", j, "--index", "x", "--cutoff", "-5"], "--cutoff")
    case(["--url", closed, "evaluate", "models", j, "--index", "x", "--window", "0"], "--window")
    case(["--url", closed, "evaluate", "cv", j, "--index", "x", "--featureset", "x", "--algo", "linear", "--folds", "1"], "--folds")
    case(["--url", closed, "evaluate", "cv", j, "--index", "x", "--algo", "linear"], "--featureset")
    case(["--url", closed, "query", "search", "x", "--index", "x", "--size", "0"], "--size")
    case(["--url", closed, "log", j, "--featureset", "x", "--index", "x", "-o", str(o / "l1.txt"), "--batch", "0"], "--batch", o / "l1.txt")
    case(["--url", closed, "log", j, "--featureset", "x", "--index", "x", "-o", str(o / "l2.txt"), "--window", "0"], "--window", o / "l2.txt")
    # ---------------------------------------------------------------- output paths
    case(["train", good, "-o", str(f["dir"])], "is a directory")
    case(["train", good, "-o", "/proc/no-such/m.json"], "cannot write")
    case(["predict", model, good, "-o", str(f["dir"])], "is a directory")
    case(["predict", model, good, "-o", "/proc/no-such/s.txt"], "cannot write")
    case(["judgments", "cranfield", "-o", str(f["dir"])], "is a directory")
    case(["judgments", "cranfield", "-o", "/proc/no-such/j.txt"], "cannot write")
    # ---------------------------------------------------------------- job files
    for name, frag in [("job_toml.toml", "job_toml.toml:1"), ("job_key.toml", "job_key.toml:5"),
                       ("job_secret.toml", "credentials"), ("job_missing.toml", "needs index"),
                       ("job_batch.toml", "batch = -1"), ("job_section.toml", "unknown section"),
                       ("job_fields.toml", "fields"), ("job_both.toml", "not both")]:
        case(["job", "run", str(f[name])], frag)
    case(["job", "run", str(f["missing"])], "cannot read")
    return C


def _problem(r, fragment, output) -> str | None:
    lines = r.stderr.strip().splitlines()
    if r.returncode != 2:
        return f"exit {r.returncode}"
    if "Traceback" in r.stderr or "unexpected error" in r.stderr:
        return "traceback"
    if len(lines) != 1:
        return f"{len(lines)} lines"
    if fragment and fragment not in lines[0]:
        return f"cause {fragment!r} not named"
    if output is not None and Path(output).exists():
        return "output left behind"
    return None


def test_bad_input_corpus(files):
    cases = _cases(files)
    assert len(cases) >= 100
    problems = []
    for args, fragment, output, env in cases:
        r = run_cli_here(*args, env=env)
        why = _problem(r, fragment, output)
        if why:
            problems.append(f"{' '.join(args)} {env or ''}: {why}: {r.stderr.strip()[:300]}")
    print(f"{len(cases)} bad-input cases, {len(problems)} problems")
    assert not problems, "\n".join(problems)


def test_bad_input_sample_answers_the_same_as_a_process(files):
    """Every 20th case through a real ``ltr`` process: the same exit code and line as in
    this process (the in-process runner hides nothing a user would see)."""
    sample = _cases(files)[::20]
    assert len(sample) >= 5
    for args, fragment, output, env in sample:
        here, there = run_cli_here(*args, env=env), run_cli(*args, env=env, timeout=120)
        assert (there.returncode, there.stderr.strip()) == (here.returncode, here.stderr.strip()), args
        assert _problem(there, fragment, output) is None, (args, there.stderr)


def test_no_arguments_prints_help():
    r = run_cli()
    assert r.returncode == 2 and "Usage" in r.stdout and "Traceback" not in r.stderr


def test_help_shows_flags_without_fake_values():
    r = run_cli("--help")
    line = next(ln for ln in r.stdout.splitlines() if "--insecure" in ln)
    assert r.returncode == 0 and "<bool>" not in line


def test_markup_in_paths_is_kept(tmp_path):
    for name in ("[bold]x.txt", "[/b]y.txt"):
        r = run_cli("train", str(tmp_path / name), "-o", str(tmp_path / "m.json"))
        assert r.returncode == 2 and name in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_markup_in_names_of_finished_commands_is_text(tmp_path):
    """A finished command echoes the user's path as it is: Rich markup in it once turned
    a written file into exit 1 (MarkupError on `[/x]`)."""
    for name in ("j[/x].txt", "[bold]k.txt"):
        out = tmp_path / name
        r = run_cli("judgments", "cranfield", "--split", "test", "-o", str(out))
        assert r.returncode == 0 and out.is_file(), r.stderr
        assert f"written to {out}" in " ".join(r.stdout.split()), r.stdout


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
