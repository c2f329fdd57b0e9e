"""How fast a long loop goes and when it will end: the one rule behind every progress
line, the CLI's (``cli.common._progress``) and the library's log lines
(``pipeline.crossval.every``).

The rate counts from the first update (the work before it is not the loop's), again when
``done`` starts over (a new phase). The ETA, once the loop has run :data:`ETA_AFTER`
seconds, reads the pace of the last :data:`RECENT` seconds: a loop whose pace grows as
caches warm (the neighbours' searches: 74/s at first, 750/s after 10 s) would otherwise
predict an end far too late for most of its course; at the whole rate (since the first
update), the neighbours' first ETA said 4m28s for a 29 s step."""

from __future__ import annotations

import collections

#: seconds of progress the ETA's pace is read over, and the loop's seconds before an ETA
RECENT, ETA_AFTER = 5.0, 10.0


class Pace:
    """Updates ``(now, done)``; :meth:`rate` since the first, :meth:`left` to ``total``."""

    def __init__(self) -> None:
        self._seen: collections.deque = collections.deque()
        self._first: tuple[float, int] | None = None

    def update(self, now: float, done: int) -> None:
        seen = self._seen
        if not seen or done < seen[-1][1]:
            seen.clear()
            self._first = (now, done)
        seen.append((now, done))
        while len(seen) > 2 and now - seen[1][0] >= RECENT:
            seen.popleft()

    def rate(self) -> float | None:
        """Items a second since the first update (None before there is one)."""
        (t0, d0), (t, d) = self._first, self._seen[-1]
        return (d - d0) / (t - t0) if t > t0 and d > d0 else None

    def left(self, total: int | None, floor: float | None = None) -> float | None:
        """Seconds to ``total`` at the recent pace, at least ``floor``; None without a
        total, when done, or before :data:`ETA_AFTER` seconds of progress."""
        (t0, _), (t, d), (r0, rd) = self._first, self._seen[-1], self._seen[0]
        if total is None or d >= total or t - t0 < ETA_AFTER or t <= r0 or d <= rd:
            return None
        return max((total - d) / ((d - rd) / (t - r0)), floor or 0.0)


def duration(seconds: float) -> str:
    """``45s``, ``12m05s``, ``2h03m``."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"
