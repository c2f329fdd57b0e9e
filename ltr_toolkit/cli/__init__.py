"""The ``ltr`` command line: a thin layer over the library, one module per command group,
named after it, over ``common`` (the apps, the options every command shares, their one
meaning each: docs/cli.md):

* ``steps``: the loop's steps at the top, ``demo``, ``log``, ``train``, ``predict``,
  ``monitor``;
* ``evaluate``: ``evaluate models|cv|interleaving``;
* ``query``: ``query search|explain``;
* ``model``: ``model upload|export|list|show|delete|prune|explain``;
* ``featureset``: ``featureset upload|init|list|show|cost``;
* ``index``: ``index cranfield|jsonl|vectors|neighbours``;
* ``judgment_lists``: ``judgments click-features|cranfield|check|clicks``;
* ``feature_stores``: ``store init|drop|list``;
* ``clusters``: ``cluster start|stop|status``;
* ``job``: ``job run``.

(Where a command's own name is a library module's, ``demo``, ``train``, ``judgments``,
``store``, ``cluster``, the CLI's module is named for what it holds: one name, one module.)

User errors (bad files, no node, no plugin, no store) end with one line on stderr and
exit code 2 (3 for a run that completed for some items and not others); no traceback.
"""

from __future__ import annotations

from typing import List, Optional

import typer

from ..errors import UserError
# the command modules register their commands on import, in the order `ltr --help` lists them
from . import (steps, evaluate, query, model, featureset, index, judgment_lists,  # noqa: F401,I001
               feature_stores, clusters, job)
from .common import alias, app, err, out
import logging
import tempfile
import traceback

alias(app, "evaluate-interleaving", "evaluate interleaving", evaluate.evaluate_interleaving)
#: `ltr --help` lists the loop's steps in the order a user takes them, then the groups
_STEPS = ("demo", "log", "train", "predict", "monitor")
app.registered_commands.sort(key=lambda c: _STEPS.index(c.name) if c.name in _STEPS else len(_STEPS))


#: client libraries that log every non-2xx answer as a WARNING line: the toolkit reports
#: what went wrong itself (in one line), and a 404 it asked for on purpose is no warning
_QUIET_LOGGERS = ("opensearch", "elastic_transport", "elasticsearch", "urllib3")


def _quiet_clients() -> None:
    """The client libraries' loggers silenced: a handler of their own (Python's
    last-resort one stays silent) and nothing passed up to the root logger, which another
    library may have configured (``logging.basicConfig``) on its way."""
    for name in _QUIET_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
            logger.addHandler(logging.NullHandler())
        logger.propagate = False


def main(argv: Optional[List[str]] = None) -> int:
    """Run the CLI: user errors (ours and typer's usage errors) are one line on stderr and
    exit 2; anything unexpected is one line naming where the full trace went, exit 1."""
    _quiet_clients()
    try:
        rv = app(args=argv, standalone_mode=False, prog_name="ltr")
        if isinstance(rv, int):
            return rv
    except UserError as exc:
        err.print(f"error: {exc}", soft_wrap=True)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        err.print("aborted")
        return 130
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
    except Exception as exc:
        # typer's own parsing errors (it vendors click: no import of click here)
        if type(exc).__name__ == "NoArgsIsHelpError":
            out.print(exc.format_message())
            return getattr(exc, "exit_code", 2)
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            ctx = getattr(exc, "ctx", None)
            where = ctx.command_path if ctx is not None else "ltr"
            msg = " ".join(str(exc.format_message()).split()).rstrip(".")
            err.print(f"error: {msg} ({_renamed(exc, ctx)}{_subcommands(ctx)}see `{where} --help`)")
            return int(exc.exit_code)
        return _unexpected(exc)
    return 0


def _subcommands(ctx) -> str:
    """``evaluate takes a subcommand: models, cv, interleaving; ``: what a group's word
    (a file name, a misspelling) could have been; nothing for a command's error."""
    group = getattr(ctx, "command", None)
    if not hasattr(group, "list_commands"):
        return ""
    names = [n for n in group.list_commands(ctx) if not group.get_command(ctx, n).hidden]
    return f"{ctx.info_name} takes {'a subcommand' if ctx.parent else 'a command'}: {', '.join(names)}; "


#: option spellings this release retired (docs/cli.md) that click's own suggestions (the
#: similar spellings: --format, --vectors, ...) do not find, and what each became: the
#: first of them the command has
RENAMED = {"--candidates": ("--window",), "--k": ("--cutoff", "--neighbours")}


def _renamed(exc, ctx) -> str:
    """``--candidates is now --window; `` for an option this release renamed."""
    old = getattr(exc, "option_name", None)
    have = {o for p in getattr(getattr(ctx, "command", None), "params", []) for o in p.opts}
    new = next((n for n in RENAMED.get(old, ()) if n in have), None)
    return f"{old} is now {new}; " if new else ""


def _unexpected(exc: BaseException) -> int:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    fd, path = tempfile.mkstemp(prefix="ltr-error-", suffix=".txt")
    with open(fd, "w") as fh:
        fh.write(text)
    err.print(f"unexpected error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]} "
              f"(full trace in {path}; please report it)")
    return 1
