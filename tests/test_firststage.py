"""The first stage as recorded with logged data and models (offline)."""

from __future__ import annotations

import pytest


def test_first_stage_statistics_travel_with_it():
    """The term statistics are part of the recorded first stage: dfs by default, and a
    first stage recorded before the choice existed was logged with each shard's own."""
    from ltr_toolkit.query.firststage import FirstStage
    from ltr_toolkit.errors import UserError
    dfs = FirstStage.from_fields(("title",))
    assert (dfs.statistics, dfs.search_type) == ("dfs", "dfs_query_then_fetch")
    shard = FirstStage.from_dict(FirstStage.from_fields(("title",), "shard").to_dict())
    assert (shard.statistics, shard.search_type) == ("shard", "query_then_fetch")
    old = {k: v for k, v in dfs.to_dict().items() if k != "statistics"}
    assert FirstStage.from_dict(old).statistics == "shard"
    with pytest.raises(UserError, match="statistics"):
        FirstStage.from_fields(("title",), "global")
