"""The ``ltr`` command line: a thin layer over the library, one module per group of
commands (``admin``, ``documents``, ``logs``, ``models``, ``export``, ``learning``) over
``common``.

User errors (bad files, no node, no plugin, no store) end with one line on stderr and
exit code 2; no traceback.
"""

from __future__ import annotations

from typing import List, Optional

import typer

from ..errors import UserError
# the command modules register their commands on import, in the order `ltr --help` lists them
from . import admin, documents, logs, models, export, learning, online  # noqa: F401,I001
from .common import app, err, out
import sys
import tempfile
import traceback

def _two_word_commands(argv: Optional[List[str]]) -> List[str]:
    """``evaluate interleaving`` is the command :data:`.online.COMMAND` (``ltr evaluate``
    takes a judgments file as its first argument, so it cannot be a group)."""
    args = list(sys.argv[1:] if argv is None else argv)
    for i in range(len(args) - 1):
        if args[i] == "evaluate" and args[i + 1] == "interleaving":
            return args[:i] + [online.COMMAND] + args[i + 2:]
    return args


def main(argv: Optional[List[str]] = None) -> int:
    """Run the CLI: user errors (ours and typer's usage errors) are one line on stderr and
    exit 2; anything unexpected is one line naming where the full trace went, exit 1."""
    try:
        rv = app(args=_two_word_commands(argv), standalone_mode=False, prog_name="ltr")
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
            msg = " ".join(str(exc.format_message()).split())
            err.print(f"error: {msg} (see `{where} --help`)")
            return int(exc.exit_code)
        return _unexpected(exc)
    return 0


def _unexpected(exc: BaseException) -> int:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    fd, path = tempfile.mkstemp(prefix="ltr-error-", suffix=".txt")
    with open(fd, "w") as fh:
        fh.write(text)
    err.print(f"unexpected error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]} "
              f"(full trace in {path}; please report it)")
    return 1
