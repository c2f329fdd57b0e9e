"""Output that survives being killed: append-only work file + atomic checkpoint.

A job produces its output in units (e.g. rounds of queries) in a fixed order. After each
unit, :meth:`CheckpointedOutput.commit` appends the unit's text to ``OUT.partial``, fsyncs
it, then atomically replaces ``OUT.ckpt.json`` with the number of units done, the byte
length of the partial file and the job's state. A run killed at any moment (SIGKILL
included) and started again with the same arguments truncates the partial file to the
last committed length and continues from the next unit, so the final output is
byte-identical to an uninterrupted run. :meth:`finish` renames the partial file into place
(atomic) and removes the checkpoint; ``OUT`` never exists half-written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import UserError
from .atomic import fsync_dir, write_json


class CheckpointedOutput:
    def __init__(self, out, run_key: str):
        self.out = Path(out)
        self.partial = self.out.with_name(self.out.name + ".partial")
        self.ckpt = self.out.with_name(self.out.name + ".ckpt.json")
        self.run_key = run_key
        self.units_done = 0
        self.state: dict = {}

    def resume(self) -> int:
        """Units already done (0 for a fresh run); restores ``state``."""
        self.out.parent.mkdir(parents=True, exist_ok=True)
        if self.ckpt.is_file():
            ck = json.loads(self.ckpt.read_text())
            if ck.get("run_key") != self.run_key:
                raise UserError(f"{self.ckpt} belongs to a run with other arguments or inputs",
                                "rerun with the same arguments, or delete the checkpoint to start over")
            size = self.partial.stat().st_size if self.partial.is_file() else -1
            if size >= int(ck["bytes"]):
                with open(self.partial, "r+b") as fh:
                    fh.truncate(ck["bytes"])         # drop what was written after the checkpoint
                self.units_done = int(ck["units"])
                self.state = ck.get("state", {})
                return self.units_done
            # the partial file is gone or short (killed between finish's rename and the
            # checkpoint's removal, or removed by hand): start over; OUT stays as it is
            # until this run finishes
            self.ckpt.unlink()
        with open(self.partial, "wb"):
            pass
        self.units_done, self.state = 0, {}
        return self.units_done

    def commit(self, text: str, state: dict) -> None:
        with open(self.partial, "ab") as fh:
            fh.write(text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
            size = fh.tell()
        self.units_done += 1
        self.state = state
        write_json(self.ckpt, {"run_key": self.run_key, "units": self.units_done, "bytes": size,
                               "state": state}, indent=None)

    def finish(self) -> None:
        os.replace(self.partial, self.out)
        fsync_dir(self.out.parent)
        self.ckpt.unlink(missing_ok=True)
