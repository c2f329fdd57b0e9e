"""The load's force-merge (indexing.merge): waited for past the connection's timeout,
and not silent while it runs."""

import time
from types import SimpleNamespace

from ltr_toolkit.indexing import merge


class _Indices:
    def __init__(self, seconds: float):
        self.seconds, self.calls = seconds, []

    def forcemerge(self, **kw):
        self.calls.append(("forcemerge", kw))
        time.sleep(self.seconds)

    def refresh(self, **kw):
        self.calls.append(("refresh", kw))


def _conn(seconds):
    indices = _Indices(seconds)
    return SimpleNamespace(client=lambda: SimpleNamespace(indices=indices)), indices


def test_a_long_merge_says_it_still_runs_and_waits_past_the_connection_timeout(monkeypatch):
    monkeypatch.setattr(merge, "HEARTBEAT", 0.05)
    conn, indices = _conn(0.28)
    lines = []
    merge.force_merge(conn, "catalogue", lines.append)
    (name, kw), refreshed = indices.calls
    assert name == "forcemerge" and kw["max_num_segments"] == 1 and kw["request_timeout"] >= 3600
    assert refreshed[0] == "refresh"
    assert 3 <= len(lines) <= 6 and all(ln.startswith("still merging catalogue: ") for ln in lines)


def test_a_quick_merge_prints_nothing():
    conn, indices = _conn(0.0)
    lines = []
    merge.force_merge(conn, "catalogue", lines.append)
    assert lines == [] and len(indices.calls) == 2
