"""A job's output directory: its lock, its dated snapshots, ``latest``, and retention.

Every step that changes what a reader sees is one rename: a reader (or a kill) never sees
a half snapshot, and ``latest`` always names a complete one. Each step can be repeated:
a run killed between two steps finishes them when it resumes."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from pathlib import Path

from ..errors import UserError
from ..io.atomic import fsync_dir
from ..io.text import file_sha256

SNAPSHOT_PREFIX = "run-"
LATEST = "latest"


@contextlib.contextmanager
def job_lock(directory: Path, name: str = ".lock", wait: bool = False):
    """An exclusive lock on ``directory/.lock`` for the whole run (``name``: another lock
    file, e.g. one part's; ``wait``: wait for a live holder instead of refusing)."""
    directory.mkdir(parents=True, exist_ok=True)
    lock = directory / name
    fh = open(lock, "a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip() or "?"
        fh.close()
        raise UserError(f"another run of this job holds {lock} (pid {holder})",
                        "wait for it to finish; two runs never overlap") from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"{os.getpid()}\n")
    fh.flush()
    try:
        yield
    finally:
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def snapshots(directory: Path) -> list[Path]:
    """Published snapshots, oldest first."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir()
                  if p.is_dir() and p.name.startswith(SNAPSHOT_PREFIX) and (p / "manifest.json").is_file())


sha256 = file_sha256


def snapshot_path(directory: Path, run_id: str) -> Path:
    return directory / f"{SNAPSHOT_PREFIX}{run_id}"


def publish(directory: Path, stage: Path, run_id: str) -> Path:
    """Rename the complete ``stage`` to ``directory/run-ID`` and point ``latest`` at it."""
    final = snapshot_path(directory, run_id)
    fsync_dir(stage)
    os.rename(stage, final)
    point_latest(directory, final)
    return final


def point_latest(directory: Path, snapshot: Path) -> None:
    """``latest`` -> ``snapshot``, switched in one rename (repeatable)."""
    tmp = directory / f".{LATEST}.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    os.symlink(snapshot.name, tmp)
    os.replace(tmp, directory / LATEST)
    fsync_dir(directory)


def latest_target(directory: Path) -> str | None:
    try:
        return os.readlink(directory / LATEST)
    except OSError:
        return None


def remove_leftovers(directory: Path) -> None:
    """Temporary ``latest`` links of runs killed between making and renaming them."""
    for p in directory.glob(f".{LATEST}.*"):
        if p.is_symlink():
            p.unlink()


def prune(directory: Path, keep: int) -> list[str]:
    """Delete all but the newest ``keep`` snapshots; never the one ``latest`` names."""
    old = snapshots(directory)[:-keep] if keep > 0 else []
    pinned = latest_target(directory)
    old = [p for p in old if p.name != pinned]
    for p in old:
        shutil.rmtree(p)
    return [p.name for p in old]
