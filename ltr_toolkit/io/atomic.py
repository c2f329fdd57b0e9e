"""Atomic file writes: a reader sees the old file or the complete new one, never a part."""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import json
import os
import secrets
import shutil
from pathlib import Path
from ..errors import UserError


@contextlib.contextmanager
def atomic_write(path, mode: str = "w", encoding: str | None = "utf-8"):
    """Write to a temporary file beside ``path`` and rename it into place on success,
    then sync the folder so the rename survives a crash. An existing file is replaced
    (the toolkit's one policy for outputs: they are results a rerun recreates); a
    directory or an unwritable place is a one-line user error."""
    path = Path(path)
    fd, tmp = _temp_beside(path, ".tmp")
    try:
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
    fsync_dir(path.parent)


@contextlib.contextmanager
def atomic_gzip(path):
    """:func:`atomic_write` of a gzip-compressed UTF-8 text file: the handle takes text,
    the file gets its compressed bytes (no timestamp in the gzip header: the same text,
    the same file); a reader sees the old file or the whole new one."""
    with atomic_write(path, "wb") as raw, \
            gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as packed, \
            io.TextIOWrapper(packed, encoding="utf-8", newline="") as fh:
        yield fh


def atomic_copy(src, dst) -> None:
    """Copy ``src`` to ``dst`` atomically: a kill mid-copy leaves ``dst`` absent (or as
    it was), never truncated."""
    with open(src, "rb") as fin, atomic_write(dst, "wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)


def fsync_dir(path) -> None:
    """Make the renames inside folder ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_writable(path) -> None:
    """Fail fast, before any work, when ``path`` cannot be written: a probe file is made
    and removed in the nearest folder of ``path`` that exists (same messages as
    :func:`atomic_write`). Nothing is left behind: the folders the output needs are made
    when it is written, so a command that fails before leaves none."""
    path = Path(path)
    fd, tmp = _temp_beside(path, ".probe", _existing_folder(path))
    os.close(fd)
    os.unlink(tmp)


def _existing_folder(path: Path) -> Path:
    """The nearest folder above ``path`` that exists; a one-line error when that is a file."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise UserError(f"cannot write {path}: {folder} is not a folder", "choose another place for the output")
    return folder


def _temp_beside(path: Path, suffix: str, folder: Path | None = None) -> tuple[int, str]:
    """A new temporary file in ``folder`` (default: ``path``'s folder, made if needed), or
    a one-line user error: ``path`` is a directory, or the place is not writable. It is
    created with mode 0666 and the kernel applies the process umask (the umask is never
    changed: other threads may be creating files)."""
    if path.is_dir():
        raise UserError(f"cannot write {path}: it is a directory", "name a file")
    try:
        if folder is None:
            _existing_folder(path)
            folder = path.parent
            folder.mkdir(parents=True, exist_ok=True)
        for _ in range(100):
            tmp = folder / f".{path.name}.{secrets.token_hex(6)}{suffix}"
            try:
                return os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), str(tmp)
            except FileExistsError:
                continue
        raise FileExistsError(errno.EEXIST, "no free temporary name")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}",
                        "choose a writable place for the output") from None


def write_json(path, obj, indent: int = 2) -> None:
    with atomic_write(path) as fh:
        json.dump(obj, fh, indent=indent, sort_keys=False)
        fh.write("\n")
