"""Vectors encoded ahead of the load (indexing.ahead): rows in document order whatever
order the batches come in, memory bounded by spilling, errors raised where the load
reads, the encoding stopped when the load stops."""

import threading
import time

import numpy as np
import pytest

from ltr_toolkit.indexing import ahead
from ltr_toolkit.indexing.ahead import VectorsAhead


def _batches(order, size=4, dim=3):
    for start in order:
        yield start, np.arange(start * dim, (start + size) * dim, dtype=np.float32).reshape(size, dim)


def test_rows_come_in_document_order_from_batches_in_any_order():
    with VectorsAhead(_batches([8, 0, 12, 4])) as vecs:
        got = np.stack([vecs.row(i) for i in range(16)])
    assert np.array_equal(got, np.arange(48, dtype=np.float32).reshape(16, 3))


def test_batches_far_ahead_of_the_load_wait_on_disk(monkeypatch):
    monkeypatch.setattr(ahead, "IN_MEMORY", 2)
    with VectorsAhead(_batches(range(0, 40, 4))) as vecs:
        deadline = time.monotonic() + 10
        while len(vecs._ready) < 10 and time.monotonic() < deadline:
            time.sleep(0.01)
        in_memory = sum(isinstance(v, np.ndarray) for v in vecs._ready.values())
        assert in_memory == 2 and len(vecs._ready) == 10
        got = np.stack([vecs.row(i) for i in range(40)])
        spill = vecs._spill.name
    assert np.array_equal(got, np.arange(120, dtype=np.float32).reshape(40, 3))
    import os
    assert not os.path.exists(spill)


def test_an_encoding_error_is_raised_where_the_load_reads():
    def failing():
        yield from _batches([0])
        raise RuntimeError("worker lost")
    with VectorsAhead(failing()) as vecs:
        assert vecs.row(3)[0] == 9
        with pytest.raises(RuntimeError, match="worker lost"):
            vecs.row(4)


def test_a_batch_never_encoded_is_an_error_not_a_wait():
    with VectorsAhead(_batches([0])) as vecs:
        with pytest.raises(RuntimeError, match="without the batch at row 4"):
            vecs.row(4)


def test_rows_asked_out_of_order_are_refused():
    with VectorsAhead(_batches([0, 4])) as vecs:
        vecs.row(5)
        with pytest.raises(ValueError, match="increasing order"):
            vecs.row(2)


def test_leaving_stops_the_encoding_after_the_batch_in_hand():
    encoded, closed = [], threading.Event()

    def slow():
        try:
            for start in range(0, 400, 4):
                time.sleep(0.01)
                encoded.append(start)
                yield from _batches([start])
        finally:
            closed.set()
    with VectorsAhead(slow()) as vecs:
        vecs.row(0)
    assert closed.is_set() and len(encoded) < 100


def test_waiting_for_the_whole_encoding_keeps_every_row_and_raises_its_error(monkeypatch):
    monkeypatch.setattr(ahead, "IN_MEMORY", 1)
    with VectorsAhead(_batches([4, 0, 8])) as vecs:
        vecs.wait()
        assert len(vecs._ready) == 3
        assert np.array_equal(np.stack([vecs.row(i) for i in range(12)]),
                              np.arange(36, dtype=np.float32).reshape(12, 3))

    def failing():
        yield from _batches([0])
        raise RuntimeError("worker lost")
    with VectorsAhead(failing()) as vecs:
        with pytest.raises(RuntimeError, match="worker lost"):
            vecs.wait()
