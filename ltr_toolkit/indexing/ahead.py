"""Vectors streamed into the load: a background thread runs
:func:`.vectors.vector_batches` (in this process or on Dask workers) and the bulk load
takes each document's vector as it comes, in document order, instead of waiting for all
of them. The encoding may run while the calling thread has the search node find the
neighbours: on workers of their own, the node's searches then cost no time of their
own (:meth:`VectorsAhead.wait` first, where they share the node's cores). Memory stays
bounded whatever the catalogue's size: batches that arrive more than :data:`IN_MEMORY`
ahead of the load wait in a temporary directory (removed at the end), and a batch the
load has passed is dropped. An error in
the encoding (a Dask worker lost, a worker of another CPU) is raised in the loading
thread, at its next vector; an error in the calling thread stops the encoding after the
batch in hand (its vectors are kept: a run again resumes there)."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

import numpy as np

#: batches kept in memory ahead of the load (128 texts of 384 float32 each: 192 KiB)
IN_MEMORY = 64


class VectorsAhead:
    """Iterates ``batches`` (``(start, vectors)`` in any order, as
    :func:`.vectors.vector_batches` yields them) in a background thread; :meth:`row`
    gives the vector of text row ``i``, waiting for its batch. Rows are asked in
    increasing order (the load's document order). A context manager: the encoding
    starts on entry; the thread is stopped and the spilled batches removed on exit."""

    def __init__(self, batches):
        self._batches = batches
        self._ready: dict[int, np.ndarray | Path] = {}
        self._in_memory = 0
        self._cond = threading.Condition()
        self._error: BaseException | None = None
        self._finished = self._stop = False
        self._spill = tempfile.TemporaryDirectory(prefix="ltr-vectors-")
        self._current: tuple[int, np.ndarray] = (0, np.zeros((0, 0), dtype=np.float32))
        self._thread = threading.Thread(target=self._run, name="vectors", daemon=True)

    def __enter__(self) -> "VectorsAhead":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join()
        self._spill.cleanup()

    def wait(self) -> None:
        """Until every batch is encoded (an error in the encoding raised here)."""
        with self._cond:
            while not self._finished:
                self._cond.wait()
            if self._error is not None:
                raise self._error

    def _run(self) -> None:
        try:
            for start, vecs in self._batches:
                kept = self._kept(start, vecs)
                with self._cond:
                    if self._stop:
                        break
                    self._ready[start] = kept
                    self._in_memory += isinstance(kept, np.ndarray)
                    self._cond.notify_all()
        except BaseException as exc:        # noqa: BLE001 (raised in the loading thread)
            self._error = exc
        finally:
            close = getattr(self._batches, "close", None)
            if close:
                close()                     # a Dask run cancels the tasks not done
            with self._cond:
                self._finished = True
                self._cond.notify_all()

    def _kept(self, start: int, vecs: np.ndarray):
        """``vecs`` in memory, or in the spill directory when :data:`IN_MEMORY` batches
        are already waiting there."""
        if self._in_memory < IN_MEMORY:          # read without the lock: about right
            return vecs
        path = Path(self._spill.name) / f"{start}.npy"
        np.save(path, vecs)
        return path

    def row(self, i: int) -> np.ndarray:
        """The vector of text row ``i`` (rows asked in increasing order)."""
        start, vecs = self._current
        if i < start:
            raise ValueError(f"row {i} was asked after row {start}: rows come in increasing order")
        while i >= start + len(vecs):
            start, vecs = self._current = self._next(start + len(vecs))
        return vecs[i - start]

    def _next(self, start: int) -> tuple[int, np.ndarray]:
        with self._cond:
            while start not in self._ready:
                if self._error is not None:
                    raise self._error
                if self._finished:
                    raise RuntimeError(f"the encoding ended without the batch at row {start}")
                self._cond.wait()
            got = self._ready.pop(start)
            self._in_memory -= isinstance(got, np.ndarray)
        if isinstance(got, Path):
            vecs = np.load(got)
            got.unlink()
            return start, vecs
        return start, got
