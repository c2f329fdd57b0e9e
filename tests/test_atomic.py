"""Atomic writes: the process umask is never changed (other threads create files while a
write is under way), the file gets the mode the umask gives, and the folder is synced
after the rename so the new name survives a crash."""

from __future__ import annotations

import os
import stat

import pytest

from ltr_toolkit.io import atomic


def test_atomic_write_leaves_the_umask_alone_and_honours_it(tmp_path, monkeypatch):
    old = os.umask(0o027)
    try:
        def no(*a):
            raise AssertionError("os.umask called: a race with other threads")
        monkeypatch.setattr(os, "umask", no)
        atomic.write_json(tmp_path / "a.json", {"x": 1})
        atomic.atomic_copy(tmp_path / "a.json", tmp_path / "b.json")
    finally:
        monkeypatch.undo()
        os.umask(old)
    for name in ("a.json", "b.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o640
    assert (tmp_path / "b.json").read_text() == (tmp_path / "a.json").read_text()


def test_the_folder_is_synced_after_the_rename(tmp_path, monkeypatch):
    synced, real = [], os.fsync

    def fsync(fd):
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real(fd)
    monkeypatch.setattr(os, "fsync", fsync)
    with atomic.atomic_write(tmp_path / "x.txt") as fh:
        fh.write("data")
    assert synced == [False, True]          # the file, then its folder


def test_a_failed_write_leaves_nothing_behind(tmp_path):
    (tmp_path / "x.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic.atomic_write(tmp_path / "x.txt") as fh:
            fh.write("new, half")
            raise RuntimeError("killed")
    assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]
    assert (tmp_path / "x.txt").read_text() == "old"
