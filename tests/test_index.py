"""Loading Cranfield into the real local node."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.cluster


def test_index_cranfield_loads_every_document(cranfield_index, cluster):
    assert cranfield_index["count"] == 1400 and cranfield_index["errors"] == 0
    assert cranfield_index["analyzer"] == "english"  # the core distribution has it
    c = cluster.conn().client()
    doc = c.get(index="cranfield-test", id="1")["_source"]
    assert doc["title"].startswith("experimental investigation") and doc["abstract_len"] > 10
    # the english analyzer stems: "flows" matches "flow"
    hits = c.search(index="cranfield-test", body={"query": {"match": {"abstract": "flows"}}, "size": 1})
    assert hits["hits"]["total"]["value"] > 100


def test_cli_index_cranfield(cluster, cli):
    r = cli("--url", cluster.url, "index", "cranfield", "--index", "cranfield-cli", "--recreate")
    assert r.returncode == 0, r.stderr
    assert "indexed 1400 documents into cranfield-cli with the english analyzer" in r.stdout
    cluster.conn().client().indices.delete(index="cranfield-cli")
