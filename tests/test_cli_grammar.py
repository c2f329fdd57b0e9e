"""The CLI's grammar (docs/cli.md), walked over every command of the typer app: help on
every option and argument, one meaning per option name, no option name that the grammar
retired, groups that list their subcommands. Offline: nothing here needs a node."""

from __future__ import annotations

from collections import defaultdict

import pytest
import typer

from ltr_toolkit.cli import main
from ltr_toolkit.cli.common import app

#: spellings the grammar retired: each had two meanings, or one letter in a long option
RETIRED = {"--format", "--k", "--candidates", "--events", "--data", "--field", "--vectors"}


def _commands(group, path=("ltr",)):
    """(path, click command) for every command of the app, hidden ones included."""
    for name, cmd in group.commands.items():
        here = (*path, name)
        if hasattr(cmd, "commands"):
            yield from _commands(cmd, here)
        else:
            yield here, cmd


@pytest.fixture(scope="module")
def root():
    return typer.main.get_command(app)


def _kind(param) -> str:
    """What an option's value is: a flag, or its type (with the choices of a choice)."""
    if getattr(param, "is_flag", False):
        return "flag"
    choices = getattr(param.type, "choices", None)
    return f"choice{sorted(choices)}" if choices else param.type.name


def test_every_option_and_argument_has_help(root):
    missing = [f"{' '.join(path)} {param.opts[0] if param.opts else param.name}"
               for path, cmd in _commands(root) for param in cmd.params
               if not (getattr(param, "help", None) or "").strip()]
    assert missing == []


def test_one_meaning_per_option_name(root):
    kinds = defaultdict(set)
    where = defaultdict(list)
    for path, cmd in _commands(root):
        for param in cmd.params:
            if param.param_type_name != "option":
                continue
            for opt in param.opts:
                kinds[opt].add(_kind(param))
                where[opt].append(" ".join(path))
    mixed = {opt: sorted(k) for opt, k in kinds.items() if len(k) > 1}
    assert mixed == {}, {o: where[o] for o in mixed}
    assert not RETIRED & set(kinds), RETIRED & set(kinds)
    assert kinds["--json"] == {"flag"}           # --json prints JSON on stdout, everywhere
    assert kinds["-o"] == {"path"}               # -o/--output: the file a command writes


def test_output_is_always_dash_o(root):
    for path, cmd in _commands(root):
        for param in cmd.params:
            if "--output" in getattr(param, "opts", []):
                assert "-o" in param.opts, path


def test_root_help_lists_every_command(capsys):
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    for name, cmd in typer.main.get_command(app).commands.items():
        assert (f"  {name} " in text) != cmd.hidden, name


@pytest.mark.parametrize("group", ["model", "evaluate", "query", "index", "judgments",
                                   "featureset", "store", "cluster", "job"])
def test_group_help_lists_its_subcommands(group, capsys, root):
    assert main([group, "--help"]) == 0
    text = capsys.readouterr().out
    for name, cmd in root.commands[group].commands.items():
        assert f"  {name} " in text, (group, name)


def test_target_defaults_to_the_plugin_everywhere(root):
    """--target is where a model is served; its default is the same in every command."""
    defaults = {" ".join(path): param.default for path, cmd in _commands(root) for param in cmd.params
                if "--target" in getattr(param, "opts", [])}
    assert {"ltr model export", "ltr model upload", "ltr query search"} <= set(defaults)
    assert {getattr(d, "value", d) for d in defaults.values()} == {"plugin"}, defaults


def test_help_names_no_retired_option_but_as_a_former_spelling(root):
    """A help text that names an option names it as it is spelt now (`ltr train
    --truncation` said 'same as --k'); a retired spelling only as what an option was."""
    import re
    stale = [(" ".join(path), param.opts[0] if param.opts else param.name, old)
             for path, cmd in _commands(root) for param in cmd.params for old in RETIRED
             if re.search(rf"(?<!formerly ){re.escape(old)}(?![\w-])", getattr(param, "help", None) or "")]
    assert stale == []


def test_log_help_names_what_candidates_became(capsys):
    assert main(["log", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(formerly --candidates)" in text and text.index("--window") < text.index("--candidates")


@pytest.mark.parametrize("group", ["model", "evaluate", "query", "index", "judgments",
                                   "featureset", "store", "cluster", "job"])
def test_a_groups_unknown_word_lists_its_subcommands(group, capsys, root):
    """`ltr evaluate j.txt`: the error names what the group takes, not only that the word
    is no command."""
    assert main([group, "j.txt"]) == 2
    err = capsys.readouterr().err
    names = [n for n, c in root.commands[group].commands.items() if not c.hidden]
    assert err == (f"error: No such command 'j.txt' ({group} takes a subcommand: {', '.join(names)}; "
                   f"see `ltr {group} --help`)\n")


def test_an_unknown_command_lists_the_commands(capsys, root):
    assert main(["evalute"]) == 2
    err = capsys.readouterr().err
    shown = [n for n, c in root.commands.items() if not c.hidden]
    assert "ltr takes a command: " in err and all(f" {n}," in err or f" {n};" in err for n in shown)


def test_a_retired_option_names_its_new_spelling(tmp_path, capsys):
    assert main(["log", str(tmp_path / "j.csv"), "--candidates", "100"]) == 2
    assert "No such option: --candidates (--candidates is now --window; see `ltr log --help`)" \
        in capsys.readouterr().err
    assert main(["index", "neighbours", "--index", "x", "--k", "3"]) == 2
    assert "--k is now --neighbours" in capsys.readouterr().err      # the command's own new name


def test_index_is_required_outside_the_demo(capsys):
    """A forgotten --index is an error naming it, not the demo's index."""
    assert main(["query", "search", "wing flutter"]) == 2
    assert "--index" in capsys.readouterr().err


def test_first_stage_is_named_not_guessed(tmp_path, capsys):
    judg = tmp_path / "j.csv"
    judg.write_text("qid,query,docid,grade\n1,wing flutter,d1,1\n")
    code = main(["--url", "http://127.0.0.1:9", "log", str(judg), "--featureset", "fs", "-o",
                 str(tmp_path / "out.txt"), "--index", "mine"])
    err = capsys.readouterr().err
    assert code == 2 and "--fields" in err and "--first-stage" in err


def test_no_argv_rewriting(capsys):
    """`evaluate interleaving` is a real subcommand: the words elsewhere (an option's
    value) are left alone."""
    code = main(["judgments", "check", "--queries", "evaluate", "interleaving"])
    err = capsys.readouterr().err
    assert code == 2 and "evaluate: cannot read" in err    # the queries file 'evaluate'


def test_old_spelling_names_the_new_one(tmp_path, capsys):
    code = main(["search", "wing", "--index", "x", "--fields", "title", "--show-request"])
    captured = capsys.readouterr()
    assert code == 0
    assert "`ltr search` is now `ltr query search`" in captured.err
    assert '"multi_match"' in captured.out or '"query"' in captured.out


def test_progress_lines_give_the_rate_and_the_time_left(monkeypatch, capsys):
    """Off a terminal (cron, a pipe), a long loop's progress is a line on stderr at most
    every 2 s: done/total, the rate since its first update, and once the loop has run
    10 s the time left at the pace of its last 5 s; a loop that counts again from 1 (a
    new phase) gets its own rate."""
    from ltr_toolkit.cli import common
    clock = iter([100.0, 104.0, 104.5, 112.0, 200.0, 230.0])
    monkeypatch.setattr(common.time, "monotonic", lambda: next(clock))
    with common._progress("fits") as update:
        update(1, 10)
        update(3, 10)      # 2 fits in 4 s: no ETA yet
        update(4, 10)      # under 2 s after the last line: not shown
        update(5, 10)      # 12 s in: 1 fit in the last 7.5 s
        update(1, 4)       # a new phase
        update(4, 4)       # 3 fits in 30 s; the end
    lines = capsys.readouterr().err.splitlines()
    assert lines[:2] == ["fits: 1/10", f"fits: 3/10 ({2 / 4:.3g}/s)"]
    assert lines[2] == f"fits: 5/10 ({4 / 12:.3g}/s, ETA {round(5 / (1 / 7.5))}s)"
    assert lines[3:] == ["fits: 1/4", f"fits: 4/4 ({3 / 30:.3g}/s)"]
    from ltr_toolkit.io.pace import duration
    assert duration(3725) == "1h02m" and duration(125) == "2m05s"


@pytest.mark.cluster
@pytest.mark.ltr
def test_no_library_logger_lines(ltr_cluster, cli):
    """opensearch-py logs every 404 as a WARNING line; the toolkit's own one line is all a
    user sees."""
    r = cli("--url", ltr_cluster.url, "featureset", "show", "no-such-set-anywhere")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and r.stderr.startswith("error: ")
    assert "WARNING" not in r.stderr and "status:404" not in r.stderr


@pytest.mark.cluster
@pytest.mark.ltr
def test_no_client_warnings_when_another_library_configured_logging(ltr_cluster, tmp_path):
    """`ltr demo` printed `WARNING:opensearch:GET .../_featureset/cranfield [status:404 ...]`
    on a machine deriving its encoder: onnxruntime's quantiser had configured the root
    logger (logging.basicConfig), and the client's 404 for the feature set not stored yet
    passed up to it. The same call (the upload's look for a set the store lacks), in a CLI
    process whose root logger is configured: no line of the client's."""
    import json
    import subprocess
    import sys
    import uuid
    from ltr_toolkit.datasets import cranfield
    from ltr_toolkit.transport.client import request
    name = f"never-stored-{uuid.uuid4().hex[:8]}"
    doc = json.loads(cranfield.LEXICAL_FEATURE_SET.read_text())
    doc["featureset"]["name"] = name
    (tmp_path / "fs.json").write_text(json.dumps(doc))
    code = ("import logging, sys; logging.basicConfig(); from ltr_toolkit.cli import main; "
            "sys.exit(main(sys.argv[1:]))")
    r = subprocess.run([sys.executable, "-c", code, "--url", ltr_cluster.url, "featureset", "upload",
                        str(tmp_path / "fs.json")], capture_output=True, text=True, timeout=120)
    try:
        assert r.returncode == 0, r.stderr
        assert f"feature set {name} " in r.stdout and "created" in r.stdout
        assert "WARNING:" not in r.stdout + r.stderr and "status:404" not in r.stdout + r.stderr
    finally:
        request(ltr_cluster.conn(), "DELETE", f"/_ltr/_featureset/{name}")
