"""Bad event data, counted by kind with the first place each kind was seen.

Nothing in UBI data stops a run: a malformed line, an unknown action, a click on a
document that was never shown, a duplicated event is counted here, reported, and left
out (or repaired, where the record says how: a missing ``user_query`` is taken from the
query's ``ubi_queries`` record)."""

from __future__ import annotations

from dataclasses import dataclass, field

#: What each kind of problem means and what was done about it (the report's wording).
KINDS = {
    "invalid_json": "lines that are not JSON (skipped)",
    "not_an_event": "JSON values that are neither an event nor a query record (skipped)",
    "unknown_action": "events whose action_name is neither an impression nor a click action (ignored)",
    "no_query_id": "events without query_id (skipped)",
    "no_object_id": "events without event_attributes.object.object_id (skipped)",
    "bad_position": "events whose position.ordinal is not a whole number >= 0 (position unknown)",
    "no_position": "impressions or clicks with no position, none found in the query's hit list (skipped)",
    "user_query_from_record": "events without user_query, taken from their ubi_queries record",
    "no_user_query": "searches with no user_query in their events nor in ubi_queries (skipped)",
    "duplicate_impressions": "impressions of a document already shown in that search (counted once)",
    "repeated_clicks": "clicks on a document already clicked in that search (counted once)",
    "clicks_without_impression": "clicks on a document never shown in that search (skipped)",
    "impressions_from_hit_ids": "searches without impression events whose shown list came from query_response_hit_ids",
    "beyond_max_rank": "impressions below the deepest position modelled (skipped)",
}


@dataclass
class Problems:
    counts: dict[str, int] = field(default_factory=dict)
    first_seen: dict[str, str] = field(default_factory=dict)
    unknown_actions: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, n: int = 1, where: str | None = None) -> None:
        if n <= 0:
            return
        self.counts[kind] = self.counts.get(kind, 0) + int(n)
        if where is not None and kind not in self.first_seen:
            self.first_seen[kind] = where

    def action(self, name: str, where: str | None = None) -> None:
        self.unknown_actions[name] = self.unknown_actions.get(name, 0) + 1
        self.add("unknown_action", 1, where)

    def merge(self, other: "Problems") -> None:
        for k, n in other.counts.items():
            self.add(k, n, other.first_seen.get(k))
        for a, n in other.unknown_actions.items():
            self.unknown_actions[a] = self.unknown_actions.get(a, 0) + n

    def to_dict(self) -> dict:
        return {"counts": dict(sorted(self.counts.items())), "first_seen": self.first_seen,
                "unknown_actions": dict(sorted(self.unknown_actions.items()))}

    def lines(self) -> list[str]:
        """One line per kind seen: ``N <meaning> (first at FILE:LINE)``."""
        out = []
        for k, n in sorted(self.counts.items()):
            where = f" (first at {self.first_seen[k]})" if k in self.first_seen else ""
            extra = ""
            if k == "unknown_action":
                extra = ": " + ", ".join(f"{a} x{c}" for a, c in sorted(self.unknown_actions.items()))
            out.append(f"{n} {KINDS.get(k, k)}{extra}{where}")
        return out
