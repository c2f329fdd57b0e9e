"""Identifiers are kept out of the text a collection is searched, encoded and compared by
(docs/catalogue.md): a list of identifiers (a product's EANs) as well as one; a list of
repeated words (tags) stays text (issue 60, Deliver 6)."""

from __future__ import annotations

import json
import uuid

import pytest

from ltr_toolkit.indexing.documents import expansion_over, read_jsonl_documents
from ltr_toolkit.indexing.neighbours import Expansion

TAGS = ["sale", "new", "cordless", "eco", "bestseller"]


def _products(n: int) -> list[dict]:
    return [{"id": f"p{i}", "title": f"cordless drill model {i % 17}",
             "description": f"a drill with {i % 5 + 2} speeds and a case",
             "ean": [f"{4006381000000 + 3 * i + k}" for k in range(1 + i % 3)],
             "tags": [TAGS[i % 5], TAGS[(i + 2) % 5]]} for i in range(n)]


def test_a_list_of_identifiers_is_a_keyword_not_main_text(tmp_path):
    src = tmp_path / "p.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in _products(60)))
    coll = read_jsonl_documents(src)
    kinds = {p: f.kind for p, f in coll.fields.items()}
    assert kinds == {"title": "text", "description": "text", "ean": "keyword", "tags": "text"}
    assert coll.text_fields == ("title", "description", "tags")
    # neither the neighbours (more_like_this) nor the vectors compare the EANs
    assert "ean" not in expansion_over(Expansion(), coll.text_fields).fields
    assert coll.properties("english")["ean"] == {"type": "keyword"}
    assert "identifier" in {r["field"]: r for r in coll.report()}["ean"]["mapped"]


def test_a_list_with_a_spaced_or_repeated_value_stays_text(tmp_path):
    docs = [{"id": i, "title": f"lamp {i}", "codes": [f"C{i}", "shared code" if i == 7 else f"D{i}"],
             "colours": ["red", "blue"]} for i in range(30)]
    src = tmp_path / "p.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in docs))
    kinds = {p: f.kind for p, f in read_jsonl_documents(src).fields.items()}
    assert kinds["codes"] == "text" and kinds["colours"] == "text"


@pytest.mark.cluster
def test_an_indexed_ean_list_is_matched_exactly_and_not_a_neighbour_field(cluster, cli, tmp_path):
    src, index = tmp_path / "p.jsonl", f"ean-{uuid.uuid4().hex[:6]}"
    src.write_text("".join(json.dumps(d) + "\n" for d in _products(60)))
    r = cli("--url", cluster.url, "index", "jsonl", str(src), "--index", index, "--neighbours", "1",
            "--vector-fields", "none")
    c = cluster.conn().client()
    try:
        assert r.returncode == 0, r.stderr
        assert "more_like_this over title, description, tags" in r.stderr
        props = c.indices.get_mapping(index=index)[index]["mappings"]["properties"]
        assert props["ean"] == {"type": "keyword"}
        hits = c.search(index=index, body={"query": {"term": {"ean": "4006381000031"}}})["hits"]["hits"]
        assert [h["_id"] for h in hits] == ["p10"]           # 3 * 10 + 1: the second of p10's
    finally:
        c.indices.delete(index=index, ignore_unavailable=True)
