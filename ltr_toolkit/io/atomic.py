"""Atomic file writes: a reader sees the old file or the complete new one, never a part."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path


@contextlib.contextmanager
def atomic_write(path, mode: str = "w", encoding: str | None = "utf-8"):
    """Write to a temporary file beside ``path`` and rename it into place on success.
    An existing file is replaced (the toolkit's one policy for outputs: they are results
    a rerun recreates); a directory or an unwritable place is a one-line user error."""
    path = Path(path)
    fd, tmp = _temp_beside(path, ".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())   # mkstemp makes 0600: honour the umask instead
        kwargs = {} if "b" in mode else {"encoding": encoding, "newline": ""}
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def check_writable(path) -> None:
    """Fail fast, before any work, when ``path`` cannot be written: a probe file is made
    and removed where the output will go (same messages as :func:`atomic_write`)."""
    fd, tmp = _temp_beside(Path(path), ".probe")
    os.close(fd)
    os.unlink(tmp)


def _temp_beside(path: Path, suffix: str) -> tuple[int, str]:
    """A new temporary file in ``path``'s folder (made if needed), or a one-line user
    error: ``path`` is a directory, or the place is not writable."""
    from ..errors import UserError
    if path.is_dir():
        raise UserError(f"cannot write {path}: it is a directory", "name a file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}",
                        "choose a writable place for the output") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json(path, obj, indent: int = 2) -> None:
    with atomic_write(path) as fh:
        json.dump(obj, fh, indent=indent, sort_keys=False)
        fh.write("\n")
